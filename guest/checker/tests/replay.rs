//! Replay a schedule shuttle printed for a failing run:
//! `MRTR_GATE_CHECK_REPLAY=<configuration>:<schedule> cargo test -p mrtr-gate-checker --test replay -- --nocapture`
//! (configurations: `configs::named`). Without the variable it does nothing.

use mrtr_gate_checker::configs;

#[test]
fn replay_a_printed_schedule() {
    let Ok(asked) = std::env::var("MRTR_GATE_CHECK_REPLAY") else {
        return;
    };
    let (name, schedule) = asked
        .split_once(':')
        .expect("MRTR_GATE_CHECK_REPLAY=<configuration>:<schedule>");
    let config = configs::named(name).unwrap_or_else(|| panic!("no configuration {name}"));
    mrtr_gate_checker::replay(config, schedule.trim());
}
