//! Print the host calls and faults of one run of a sampled configuration under a random
//! schedule: `cargo run -p mrtr-gate-checker --example one_run -- <fault set> <seed>`
//! (fault sets: `mrtr_gate_checker::configs::fault_sets`).

fn main() {
    let mut args = std::env::args().skip(1);
    let set = args.next().unwrap_or_else(|| "deep_no_faults".into());
    let seed = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let Some((name, faults)) = mrtr_gate_checker::configs::fault_sets()
        .into_iter()
        .find(|(name, _)| *name == set)
    else {
        eprintln!("no fault set {set}");
        std::process::exit(2);
    };
    let config = mrtr_gate_checker::configs::three_gates_two_rounds(name, faults);
    match mrtr_gate_checker::one_run(config, seed) {
        Ok(log) => log.iter().for_each(|line| println!("{line}")),
        Err(violation) => println!("{violation}"),
    }
}
