//! `mrtr-gate`: run the demo, or inspect the component.
//!
//! ```text
//! mrtr-gate demo [--audit FILE]   realistic rounds end to end through the component
//! mrtr-gate bench [--rounds N] [--external RESULT.json]... [--scaling]
//!                                 rounds in the component vs the native core (and results
//!                                 measured elsewhere: the seed's JS gate, the jco host)
//! mrtr-gate rounds ENGINE KIND N  N rounds and nothing else, for profilers and
//!                                 instruction counters (scripts/instructions); ENGINE is
//!                                 `component` or `native`, KIND `form`, `form-new`, `url`
//!                                 or `state-only`
//! mrtr-gate info                  the component's imports, exports and size
//! mrtr-gate export-component FILE write the component (for jco, wasmtime-py, wasm-tools)
//! mrtr-gate verify-audit FILE     verify a JSON-lines audit log's hash chain
//! ```

use mrtr_gate_cli::error_chain;
use mrtr_gate_host::{GateRuntime, runtime::EMBEDDED_COMPONENT};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("demo") => demo(args.get(1..).unwrap_or_default()),
        Some("bench") => bench(args.get(1..).unwrap_or_default()),
        Some("rounds") => rounds(args.get(1..).unwrap_or_default()),
        Some("info") => info(),
        Some("export-component") => export(args.get(1)),
        Some("verify-audit") => verify(args.get(1)),
        _ => Err(
            "usage: mrtr-gate demo [--audit FILE] | bench [--rounds N] | rounds ENGINE KIND N | info | export-component FILE | verify-audit FILE"
                .into(),
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mrtr-gate: {e}");
            ExitCode::FAILURE
        }
    }
}

fn demo(args: &[String]) -> Result<(), String> {
    let audit = match args {
        [flag, path] if flag == "--audit" => std::path::PathBuf::from(path),
        [] => std::env::temp_dir().join(format!("mrtr-gate-demo-{}.jsonl", std::process::id())),
        _ => return Err("usage: mrtr-gate demo [--audit FILE]".into()),
    };
    let started = std::time::Instant::now();
    let runtime = GateRuntime::embedded().map_err(|e| error_chain(&e))?;
    let loaded = started.elapsed();
    let out = mrtr_gate_cli::demo::run(&runtime, &audit)?;
    println!("{out}");
    println!(
        "(component {} bytes, loaded in {:.1} ms from the precompiled cache or compiled afresh)",
        EMBEDDED_COMPONENT.len(),
        loaded.as_secs_f64() * 1e3
    );
    Ok(())
}

fn bench(args: &[String]) -> Result<(), String> {
    let mut rounds = 2000;
    let mut externals = Vec::new();
    let mut scaling = false;
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--scaling" {
            scaling = true;
            continue;
        }
        let value = it
            .next()
            .ok_or("usage: mrtr-gate bench [--rounds N] [--external RESULT.json]... [--scaling]")?;
        match flag.as_str() {
            "--rounds" => rounds = value.parse().map_err(|_| "--rounds takes a number")?,
            "--external" | "--seed-js" => {
                let text = std::fs::read_to_string(value).map_err(|e| e.to_string())?;
                externals.push(mrtr_gate_cli::bench::External::parse(&text)?);
            }
            _ => {
                return Err(
                    "usage: mrtr-gate bench [--rounds N] [--external RESULT.json]... [--scaling]"
                        .into(),
                );
            }
        }
    }
    if cfg!(debug_assertions) {
        eprintln!(
            "mrtr-gate: a debug build; run `cargo run --release -p mrtr-gate-cli --bin mrtr-gate -- bench` for real numbers"
        );
    }
    let runtime = GateRuntime::embedded().map_err(|e| error_chain(&e))?;
    if scaling {
        print!(
            "{}",
            mrtr_gate_cli::bench::scaling(&runtime, rounds.min(500))?
        );
    } else {
        print!(
            "{}",
            mrtr_gate_cli::bench::run_with(&runtime, rounds, &externals)?
        );
    }
    Ok(())
}

fn rounds(args: &[String]) -> Result<(), String> {
    use mrtr_gate_cli::bench::{RoundKind, plain_rounds};
    use mrtr_gate_cli::fixture::ScenarioHosts;
    use mrtr_gate_host::{ComponentGate, NativeGate};
    const USAGE: &str = "usage: mrtr-gate rounds component|native form|form-new|url|state-only N";
    let [engine, kind, count] = args else {
        return Err(USAGE.into());
    };
    let kind = RoundKind::parse(kind).ok_or(USAGE)?;
    let count: usize = count.parse().map_err(|_| USAGE)?;
    let hosts = ScenarioHosts::for_bench();
    match engine.as_str() {
        "component" => {
            let runtime = GateRuntime::embedded().map_err(|e| error_chain(&e))?;
            plain_rounds(
                &mut ComponentGate::new(&runtime, hosts.services()),
                kind,
                count,
            )
        }
        "native" => plain_rounds(&mut NativeGate::new(hosts.services()), kind, count),
        _ => Err(USAGE.into()),
    }
}

fn info() -> Result<(), String> {
    let runtime = GateRuntime::embedded().map_err(|e| error_chain(&e))?;
    println!("component size: {} bytes", EMBEDDED_COMPONENT.len());
    println!("imports: {}", runtime.imports().join(", "));
    println!("exports: {}", runtime.exports().join(", "));
    Ok(())
}

fn export(path: Option<&String>) -> Result<(), String> {
    let path = path.ok_or("usage: mrtr-gate export-component FILE")?;
    std::fs::write(path, EMBEDDED_COMPONENT).map_err(|e| format!("writing {path}: {e}"))?;
    println!("{path}: {} bytes", EMBEDDED_COMPONENT.len());
    Ok(())
}

fn verify(path: Option<&String>) -> Result<(), String> {
    let path = path.ok_or("usage: mrtr-gate verify-audit FILE")?;
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let n = mrtr_gate_core::audit::verify_chain(text.lines())
        .map_err(|b| format!("the chain is broken: {b:?}"))?;
    println!("{path}: {n} events, chain intact");
    Ok(())
}
