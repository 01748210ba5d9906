//! The small configurations, every schedule (shuttle's DFS scheduler): part of the test
//! command. Each prints how many schedules it explored and how long it took
//! (`cargo test -p mrtr-gate-checker --test exhaustive -- --nocapture`).

use mrtr_gate_checker::configs;
use mrtr_gate_checker::replica::Confirm;
use mrtr_gate_checker::scenario::Config;
use mrtr_gate_checker::world::VersionsAfterLoss;
use mrtr_gate_checker::{Search, explore};

fn every_schedule(config: Config) {
    let name = config.name;
    let explored = explore(config, Search::Dfs(None));
    println!(
        "{name}: every schedule explored, {} schedules in {:.1?}",
        explored.schedules, explored.elapsed
    );
    assert!(explored.schedules > 1, "{name}: nothing interleaved");
}

#[test]
fn two_gates_race_for_one_round() {
    every_schedule(configs::race_two_gates());
}

#[test]
fn a_sink_losing_a_confirmed_line_anywhere_never_lets_a_retry_rest_on_nothing() {
    every_schedule(configs::retry_with_a_lost_line());
}

#[test]
fn a_store_restarting_empty_anywhere_never_lets_a_used_round_be_answered_again() {
    every_schedule(configs::restart_after_use(VersionsAfterLoss::NewEpoch));
}

#[test]
fn a_process_dying_between_any_two_host_calls_never_lets_a_round_be_used_twice() {
    every_schedule(configs::kill_mid_retry());
}

/// The checker's own test: with a store that breaks the storage contract as the stores
/// before commit 9b4e630 did (versions start again at 1 after a restart), the checker
/// finds the defect of issue 26 (a used round answered again from a gate's cache).
#[test]
#[should_panic(expected = "submitted twice")]
fn the_checker_finds_a_used_round_answered_again_when_versions_come_round() {
    every_schedule(configs::restart_after_use(VersionsAfterLoss::RestartAtOne));
}

/// Finding F1 (docs/checker-counterexamples.md): a retry whose round gate 0 consumed was
/// audited `submitted` after another process's cancel of the binding was audited
/// `terminal`, and returned to its caller. Fixed: the retry reads its record again whenever
/// another writer's event gets in first, and a binding ended meanwhile gets no retry.
#[test]
fn a_retry_racing_a_cancel_is_never_built_after_the_binding_ended() {
    every_schedule(configs::retry_cancel());
}

/// Finding F2 (docs/checker-counterexamples.md): a response for the retry id, taken at
/// another process after the round was consumed and before the retry's `submitted` event,
/// put the next round's `received` before that `submitted`. Fixed: a retry is marked handed
/// out only after its `submitted` event, and no response is taken for it before.
#[test]
fn no_response_is_taken_for_a_retry_before_it_is_handed_out() {
    every_schedule(configs::retry_and_early_answer());
}

/// Finding F3 (docs/checker-counterexamples.md): the server's next round taken at one
/// process while another cancels the call put its `received` after the `terminal`, or a
/// `terminal` naming round 1 after round 2's `received`. Fixed: the `received` append reads
/// the record again when another writer's event gets in first, and `reconcile` takes a
/// refusal of round 2's store, before or after the end, as what explains such a `terminal`.
#[test]
fn a_next_round_racing_a_cancel_reconciles() {
    every_schedule(configs::next_round_cancel());
}

/// Responses from another server on the binding's ids, and a late one from its own,
/// interleaved with a retry: none touches the binding but the late one (which ends it,
/// expired), and no denied call leaves anything in force.
#[test]
fn answers_from_another_server_or_too_late_change_nothing() {
    every_schedule(configs::answers_from_elsewhere_and_late());
}

/// F1's race with an expiry sweep, the clock passing the lifetime anywhere.
#[test]
fn a_retry_racing_an_expiry_sweep_is_never_built_after_the_binding_ended() {
    every_schedule(configs::retry_expire());
}

/// Issue 40 (Redis Cluster, asynchronous replication): the store's master fails over to a
/// replica that lags, anywhere while gate 0 uses round `S1` and then tries it again, a WAIT
/// timing out anywhere. Writes confirmed only once the replica holds them (the Redis host's
/// `WAIT`): the round is used at most once, whatever the promotion lost.
#[test]
fn a_store_failover_never_brings_a_used_round_back_when_writes_wait_for_the_replica() {
    every_schedule(configs::store_failover_mid_retry(Confirm::WaitForReplica));
}

/// The checker's own test: with the same store confirming a write as soon as its master applied
/// it (one server's rule, on a Cluster), the round's use is lost with the promotion and the
/// round used again (docs/testing.md, "Replication").
#[test]
#[should_panic(expected = "submitted twice")]
fn the_checker_finds_a_used_round_brought_back_by_a_failover_when_writes_do_not_wait() {
    every_schedule(configs::store_failover_mid_retry(Confirm::Unconfirmed));
}

/// The sink's master fails over to a replica that lags, anywhere while gate 0 uses round `S1`
/// and the caller then cancels, a WAIT timing out anywhere. Appends confirmed only once the
/// replica holds them: every line confirmed to the gate is in the trail after the promotion,
/// the chain verifies, and the gate writes on from the head the promotion left.
#[test]
fn a_sink_failover_never_loses_a_confirmed_line_when_appends_wait_for_the_replica() {
    every_schedule(configs::sink_failover_mid_retry(Confirm::WaitForReplica));
}

/// The checker's own test: with appends confirmed as soon as the master wrote them, a line
/// confirmed to the gate is gone from the trail after the promotion.
#[test]
#[should_panic(expected = "a line confirmed to its gate is not in the trail")]
fn the_checker_finds_a_confirmed_line_lost_by_a_failover_when_appends_do_not_wait() {
    every_schedule(configs::sink_failover_mid_retry(Confirm::Unconfirmed));
}
