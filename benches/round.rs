//! Criterion benchmarks of one full round (register, accept `input_required`, consent,
//! audit append and read-back, build the retry, accept `complete`) through the component in
//! wasmtime and through the same core compiled natively, for each workload of
//! `mrtr-gate-testkit bench`. `cargo bench --bench round`; `./scripts/bench` prints the side-by-side
//! table with the seed's JavaScript gate.

// A bench is not test code to clippy (criterion's harness, not `cfg(test)`), but a failed
// round here must stop the run, not be timed.
#![allow(clippy::unwrap_used)]

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use mrtr_gate_host::{GateApi, NativeGate};
use mrtr_gate_testkit::bench::{RoundKind, round, round_input, server};
use mrtr_gate_testkit::fixture::ScenarioHosts;
use mrtr_gate_wasmtime::{ComponentGate, GateRuntime, SandboxLimits};

fn rounds(c: &mut Criterion) {
    let cache = std::env::temp_dir().join("mrtr-gate-bench-cache");
    let runtime = GateRuntime::load_embedded(Some(&cache), SandboxLimits::default()).unwrap();
    let server = server().unwrap();
    let workloads = [
        (
            "form_schema_seen",
            RoundKind::Form {
                distinct_schema: false,
            },
        ),
        (
            "form_schema_new",
            RoundKind::Form {
                distinct_schema: true,
            },
        ),
        ("url", RoundKind::Url),
        ("state_only", RoundKind::StateOnly),
    ];
    for (name, kind) in workloads {
        let mut group = c.benchmark_group(name);
        let component_hosts = ScenarioHosts::for_bench();
        let native_hosts = ScenarioHosts::for_bench();
        let engines: [(&str, Box<dyn GateApi>); 2] = [
            (
                "component",
                Box::new(ComponentGate::new(&runtime, component_hosts.services())),
            ),
            ("native", Box::new(NativeGate::new(native_hosts.services()))),
        ];
        for (engine, mut gate) in engines {
            let mut n = 0i64;
            group.bench_function(engine, |b| {
                b.iter_batched(
                    || {
                        n += 1;
                        round_input(&server, n, kind)
                    },
                    |input| round(gate.as_mut(), &server, input).unwrap(),
                    BatchSize::SmallInput,
                );
            });
        }
        group.finish();
    }
}

criterion_group!(benches, rounds);
criterion_main!(benches);
