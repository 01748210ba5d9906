//! Replay a schedule shuttle printed for a failing run:
//! `MRTR_GATE_CHECK_REPLAY=<configuration>:<schedule> cargo test -p mrtr-gate-checker --test replay -- --nocapture`
//! (configurations: `retry_replay_cancel`, `restart_after_use`,
//! `restart_after_use_counter_from_one`, `race_two_gates`, `race_three_gates`,
//! `kill_mid_retry`). Without the variable it does nothing.

use mrtr_gate_checker::configs;
use mrtr_gate_checker::world::VersionsAfterLoss;

#[test]
fn replay_a_printed_schedule() {
    let Ok(asked) = std::env::var("MRTR_GATE_CHECK_REPLAY") else {
        return;
    };
    let (name, schedule) = asked
        .split_once(':')
        .expect("MRTR_GATE_CHECK_REPLAY=<configuration>:<schedule>");
    let config = match name {
        "retry_replay_cancel" => configs::retry_replay_cancel(),
        "restart_after_use" => configs::restart_after_use(VersionsAfterLoss::NewEpoch),
        "restart_after_use_counter_from_one" => {
            configs::restart_after_use(VersionsAfterLoss::RestartAtOne)
        }
        "race_two_gates" => configs::race_two_gates(),
        "race_three_gates" => configs::race_three_gates(),
        "kill_mid_retry" => configs::kill_mid_retry(),
        other => panic!("no configuration {other}"),
    };
    mrtr_gate_checker::replay(config, schedule.trim());
}
