//! Print the host calls and faults of one run of a configuration under a random schedule:
//! `cargo run -p mrtr-gate-checker --example one_run -- <configuration> <seed>`
//! (configurations: `mrtr_gate_checker::configs::named`, the sampled fault sets among them).

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "deep_no_faults".into());
    let seed = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let Some(config) = mrtr_gate_checker::configs::named(&name) else {
        eprintln!("no configuration {name}");
        std::process::exit(2);
    };
    match mrtr_gate_checker::one_run(config, seed) {
        Ok(log) => log.iter().for_each(|line| println!("{line}")),
        Err(violation) => println!("{violation}"),
    }
}
