//! The configurations explored (docs/testing.md, "The schedule checker"). Every round the
//! server sends carries a `requestState` of its own (`S1`, `S2`, ...), so a state submitted
//! twice is a round used twice.

use crate::replica::{Confirm, Replication, Service};
use crate::scenario::{Config, Msg, Op, User};
use crate::world::{Fault, VersionsAfterLoss};

/// The binding's lifetime under the default policy, and past it.
const PAST_LIFETIME_MS: u64 = 5 * 60 * 1000 + 1_000;
/// Further back than the gate's clock-skew tolerance.
const SET_BACK_MS: u64 = 10_000;

fn retry(id: i64, retry_id: i64) -> Op {
    Op::Retry {
        id,
        retry_id,
        user: User::Owner,
    }
}

/// Gate 0 registers request 1 and accepts the server's round `S1` on it: its cache holds it.
fn round_one_at_gate_zero() -> Vec<Op> {
    vec![Op::Register(1), Op::Respond(1, Msg::Round("S1"))]
}

/// Two gates race to use round `S1`: gate 0, which holds it in its cache, and gate 1, which
/// reads it from the store. Exactly one may win.
pub fn race_two_gates() -> Config {
    let mut config = race_three_gates();
    config.name = "race_two_gates";
    config.gates.truncate(2);
    config
}

/// Gate 0 retries round `S1` while the audit sink loses its newest line, confirmed,
/// anywhere (the round's `received` among them): the retry rests on lines the sink wrote,
/// and a gate that sees the head go back before its own last line writes no more.
pub fn retry_with_a_lost_line() -> Config {
    Config {
        name: "retry_with_a_lost_line",
        mode: VersionsAfterLoss::NewEpoch,
        replication: Replication::NONE,
        warm: round_one_at_gate_zero(),
        earlier: vec![],
        gates: vec![vec![retry(1, 101)], vec![Op::Respond(101, Msg::Complete)]],
        faults: vec![Fault::SinkLoseNewest],
    }
}

/// [`race_two_gates`] while the audit sink loses its newest line, confirmed, anywhere: the
/// round is still used at most once over every line the sink ever wrote, and a gate that
/// sees the head go back before its own last line writes no more.
pub fn race_with_a_lost_line() -> Config {
    let mut config = race_two_gates();
    config.name = "race_with_a_lost_line";
    config.faults = vec![Fault::SinkLoseNewest];
    config
}

/// Three gates race to use round `S1`: gate 0 (which holds it in its cache) and gate 1
/// build a retry, gate 2 takes a client's own retry of it. Exactly one may win.
pub fn race_three_gates() -> Config {
    Config {
        name: "race_three_gates",
        mode: VersionsAfterLoss::NewEpoch,
        replication: Replication::NONE,
        warm: round_one_at_gate_zero(),
        earlier: vec![],
        gates: vec![
            vec![retry(1, 101)],
            vec![retry(1, 102)],
            vec![Op::ClientRetry {
                id: 1,
                retry_id: 103,
                state: "S1",
            }],
        ],
        faults: vec![],
    }
}

/// Round `S1` retried at gate 0 while gate 1 ends the call (the caller cancels): the retry
/// and the end may each come first, never a retry audited after the end (finding F1).
pub fn retry_cancel() -> Config {
    Config {
        name: "retry_cancel",
        mode: VersionsAfterLoss::NewEpoch,
        replication: Replication::NONE,
        warm: round_one_at_gate_zero(),
        earlier: vec![],
        gates: vec![vec![retry(1, 101)], vec![Op::Finish(1)]],
        faults: vec![],
    }
}

/// Round `S1` retried at gate 0 while gate 1 takes the server's next round on the retry id
/// (finding F2): taken only once the retry was handed out, never before its `submitted`.
pub fn retry_and_early_answer() -> Config {
    Config {
        name: "retry_and_early_answer",
        mode: VersionsAfterLoss::NewEpoch,
        replication: Replication::NONE,
        warm: round_one_at_gate_zero(),
        earlier: vec![],
        gates: vec![
            vec![retry(1, 101)],
            vec![Op::Respond(101, Msg::StateOnly("S2"))],
        ],
        faults: vec![],
    }
}

/// Round `S1` retried and handed out; then gate 0 takes the server's next round on the retry
/// id while gate 1 cancels the call (finding F3): no `received` after the `terminal`, and a
/// `terminal` that names round 1 after round 2's `received` only with round 2's store refused.
pub fn next_round_cancel() -> Config {
    let mut warm = round_one_at_gate_zero();
    warm.push(retry(1, 101));
    Config {
        name: "next_round_cancel",
        mode: VersionsAfterLoss::NewEpoch,
        replication: Replication::NONE,
        warm,
        earlier: vec![],
        gates: vec![
            vec![Op::Respond(101, Msg::StateOnly("S2"))],
            vec![Op::Finish(1)],
        ],
        faults: vec![],
    }
}

/// Round `S1` retried at gate 0 while gate 1 receives, from another server, a result on the
/// retry id and a round on the original id (ids are per server: neither may touch the
/// binding), and then the bound server's round again, late (past the lifetime).
pub fn answers_from_elsewhere_and_late() -> Config {
    Config {
        name: "answers_from_elsewhere_and_late",
        mode: VersionsAfterLoss::NewEpoch,
        replication: Replication::NONE,
        warm: round_one_at_gate_zero(),
        earlier: vec![],
        gates: vec![
            vec![retry(1, 101)],
            vec![
                Op::RespondFromOther(101, Msg::Complete),
                Op::RespondFromOther(1, Msg::StateOnly("S9")),
                Op::Late(1, Msg::Round("S1")),
            ],
        ],
        faults: vec![],
    }
}

/// Round `S1` retried at gate 0 while the clock passes the binding's lifetime anywhere and
/// gate 1 sweeps expired bindings: F1's race with the sweep.
pub fn retry_expire() -> Config {
    Config {
        name: "retry_expire",
        mode: VersionsAfterLoss::NewEpoch,
        replication: Replication::NONE,
        warm: round_one_at_gate_zero(),
        earlier: vec![],
        gates: vec![vec![retry(1, 101)], vec![Op::Expire]],
        faults: vec![Fault::ClockForward(PAST_LIFETIME_MS)],
    }
}

/// Round `S1` retried at gate 0, the server's round delivered again at gate 1 (a duplicate,
/// or a replay once used), and the call cancelled at gate 2: where F1 was first found.
pub fn retry_replay_cancel() -> Config {
    Config {
        name: "retry_replay_cancel",
        mode: VersionsAfterLoss::NewEpoch,
        replication: Replication::NONE,
        warm: round_one_at_gate_zero(),
        earlier: vec![],
        gates: vec![
            vec![retry(1, 101)],
            vec![Op::Respond(1, Msg::Round("S1"))],
            vec![Op::Finish(1)],
        ],
        faults: vec![],
    }
}

/// The restart defect's configuration (issue 26; fixed by commit 9b4e630). Gate 0 holds
/// round `S1` of request 1 in its cache; through gate 1 the round was used and the request
/// completed. Then, anywhere the scheduler places it, the store restarts empty, while
/// gate 1 registers request 1 again (the client reuses the id) and accepts its round `S2`,
/// and gate 0 retries round `S1` from what it holds. Under `mode` the store's versions
/// after the restart are new ([`VersionsAfterLoss::NewEpoch`]) or start again at 1
/// ([`VersionsAfterLoss::RestartAtOne`], the stores before that commit).
pub fn restart_after_use(mode: VersionsAfterLoss) -> Config {
    Config {
        name: match mode {
            VersionsAfterLoss::NewEpoch => "restart_after_use",
            VersionsAfterLoss::RestartAtOne => "restart_after_use_counter_from_one",
        },
        mode,
        replication: Replication::NONE,
        warm: round_one_at_gate_zero(),
        earlier: vec![retry(1, 101), Op::Respond(101, Msg::Complete)],
        gates: vec![
            vec![retry(1, 102)],
            vec![Op::Register(1), Op::Respond(1, Msg::Round("S2"))],
        ],
        faults: vec![Fault::StoreRestart],
    }
}

/// Gate 0's process dies between any two host calls while it uses round `S1` (or before,
/// or after), and a fresh process (empty cache) retries it again under a new id: the round
/// is used at most once, and a retry returned always has its `submitted` event.
pub fn kill_mid_retry() -> Config {
    Config {
        name: "kill_mid_retry",
        mode: VersionsAfterLoss::NewEpoch,
        replication: Replication::NONE,
        warm: round_one_at_gate_zero(),
        earlier: vec![],
        gates: vec![vec![retry(1, 101), retry(1, 104)]],
        faults: vec![Fault::Kill(0)],
    }
}

/// The faults of a failover of `service`: a WAIT times out (the next one that finds its write
/// not on the replica yet), the replica takes up to `steps` writes, then it is promoted; each
/// placed anywhere, in this order (a step after the promotion would change nothing a gate can
/// see). Under [`Confirm::WaitForReplica`] a WAIT that ends in time leaves the replica holding
/// every write up to its own, so the writes pending at once are at most one per gate under
/// WAIT and one per WAIT timed out: as many steps reach every prefix the replica may hold when
/// it is promoted (with one gate, two: none, the older, both). Under [`Confirm::Unconfirmed`]
/// the replica lags by every write no step took.
pub fn failover(service: Service, steps: usize) -> Vec<Fault> {
    let promote = match service {
        Service::Store => Fault::PromoteStore,
        Service::Sink => Fault::PromoteSink,
    };
    let mut faults = vec![Fault::WaitTimesOut];
    faults.extend(std::iter::repeat_n(Fault::Replicate(service), steps));
    faults.push(promote);
    faults
}

/// Gate 0 retries round `S1`, then again under a new id (its client sends the answers again,
/// as one that never got the first retry does), while the store's master fails over to its
/// replica anywhere, the replica lagging ([`failover`]; the sink is one server). With writes
/// confirmed before the replica holds them ([`Confirm::Unconfirmed`]) the round's use is lost
/// with the promotion and the round used again; with [`Confirm::WaitForReplica`], never
/// (issue 40, Redis Cluster).
pub fn store_failover_mid_retry(confirm: Confirm) -> Config {
    Config {
        name: match confirm {
            Confirm::Unconfirmed => "store_failover_mid_retry_unconfirmed",
            Confirm::WaitForReplica => "store_failover_mid_retry",
        },
        mode: VersionsAfterLoss::NewEpoch,
        replication: Replication {
            store: true,
            sink: false,
            confirm,
        },
        warm: round_one_at_gate_zero(),
        earlier: vec![],
        gates: vec![vec![retry(1, 101), retry(1, 104)]],
        faults: failover(Service::Store, 2),
    }
}

/// Gate 0 retries round `S1`, then the caller cancels the call, while the sink's master fails
/// over to its replica anywhere, the replica lagging ([`failover`]; the store is one server).
/// With appends confirmed before the replica holds them, a line confirmed to the gate is gone
/// from the trail after the promotion; with [`Confirm::WaitForReplica`], only a line whose
/// append the gate was told failed can go, and the gate writes on from the head the
/// promotion left.
pub fn sink_failover_mid_retry(confirm: Confirm) -> Config {
    Config {
        name: match confirm {
            Confirm::Unconfirmed => "sink_failover_mid_retry_unconfirmed",
            Confirm::WaitForReplica => "sink_failover_mid_retry",
        },
        mode: VersionsAfterLoss::NewEpoch,
        replication: Replication {
            store: false,
            sink: true,
            confirm,
        },
        warm: round_one_at_gate_zero(),
        earlier: vec![],
        gates: vec![vec![retry(1, 101), Op::Finish(1)]],
        faults: failover(Service::Sink, 2),
    }
}

/// [`store_failover_mid_retry`] with the sink replicated too, and each failing over anywhere,
/// writes confirmed once the replica holds them: too many schedules for the test command.
/// Both timeouts may hit appends before the sink's promotion (three pending, two steps): the
/// replica holding all three is the WAIT under way ending in time just before the promotion.
pub fn failovers_mid_retry() -> Config {
    let mut faults = failover(Service::Store, 2);
    faults.extend(failover(Service::Sink, 2));
    Config {
        name: "failovers_mid_retry",
        replication: Replication::both(Confirm::WaitForReplica),
        faults,
        ..store_failover_mid_retry(Confirm::WaitForReplica)
    }
}

/// Two gates race to use round `S1` ([`race_two_gates`]) while the store and the sink each
/// fail over anywhere, replicas lagging, under `confirm`: sampled.
pub fn race_with_failovers(confirm: Confirm) -> Config {
    // Two gates under WAIT and two WAITs timed out (one per failover) at most.
    let mut faults = failover(Service::Store, 4);
    faults.extend(failover(Service::Sink, 4));
    Config {
        name: match confirm {
            Confirm::Unconfirmed => "race_with_failovers_unconfirmed",
            Confirm::WaitForReplica => "race_with_failovers",
        },
        replication: Replication::both(confirm),
        faults,
        ..race_two_gates()
    }
}

/// [`three_gates_two_rounds`] over a replicated store and sink, each failing over anywhere,
/// under `confirm`: sampled.
pub fn deep_failovers(confirm: Confirm) -> Config {
    // Three gates under WAIT and two WAITs timed out at most.
    let mut faults = failover(Service::Store, 5);
    faults.extend(failover(Service::Sink, 5));
    let name = match confirm {
        Confirm::Unconfirmed => "deep_failovers_unconfirmed",
        Confirm::WaitForReplica => "deep_failovers",
    };
    Config {
        replication: Replication::both(confirm),
        ..three_gates_two_rounds(name, faults)
    }
}

/// Three gates over two rounds of one request (`S1` with a form, then `S2` state only) and a
/// second request on the reused id (`S3`), with duplicates, replays, a client's retry,
/// another user's retry, a result from another server, a cancel, an expiry sweep and a late
/// result; `faults` placed anywhere.
pub fn three_gates_two_rounds(name: &'static str, faults: Vec<Fault>) -> Config {
    Config {
        name,
        mode: VersionsAfterLoss::NewEpoch,
        replication: Replication::NONE,
        warm: round_one_at_gate_zero(),
        earlier: vec![],
        gates: vec![
            vec![
                retry(1, 101),
                Op::Respond(101, Msg::StateOnly("S2")),
                retry(101, 102),
                Op::Respond(102, Msg::Complete),
            ],
            vec![
                Op::Respond(1, Msg::Round("S1")),
                retry(1, 201),
                Op::ClientRetry {
                    id: 101,
                    retry_id: 202,
                    state: "S2",
                },
                Op::Finish(101),
                Op::Register(1),
                Op::Respond(1, Msg::Round("S3")),
            ],
            vec![
                Op::Retry {
                    id: 1,
                    retry_id: 301,
                    user: User::Other,
                },
                Op::Respond(101, Msg::StateOnly("S2")),
                Op::RespondFromOther(101, Msg::Complete),
                Op::Expire,
                retry(1, 302),
                Op::Late(102, Msg::Complete),
            ],
        ],
        faults,
    }
}

/// The fault sets the sampled runs of [`three_gates_two_rounds`] use.
pub fn fault_sets() -> Vec<(&'static str, Vec<Fault>)> {
    vec![
        ("deep_no_faults", vec![]),
        (
            "deep_store_faults",
            vec![Fault::StoreRestart, Fault::LoseCounter, Fault::Evict(101)],
        ),
        (
            "deep_processes_die",
            vec![Fault::Kill(0), Fault::Kill(1), Fault::Kill(2)],
        ),
        (
            "deep_clock",
            vec![
                Fault::ClockBack(SET_BACK_MS),
                Fault::ClockForward(SET_BACK_MS),
                Fault::ClockForward(PAST_LIFETIME_MS),
            ],
        ),
        (
            "deep_sink_and_consent",
            vec![
                Fault::SinkRefuse,
                Fault::ConsentRefuse,
                Fault::SinkReadbackLost,
                Fault::ConsentOtherView,
                Fault::SinkLoseNewest,
            ],
        ),
        (
            "deep_all_faults",
            vec![
                Fault::ConsentOtherView,
                Fault::Kill(1),
                Fault::StoreRestart,
                Fault::ClockBack(SET_BACK_MS),
                Fault::Evict(1),
                Fault::SinkRefuse,
                Fault::Kill(0),
                Fault::SinkReadbackLost,
                Fault::ClockForward(PAST_LIFETIME_MS),
                Fault::LoseCounter,
                Fault::SinkLoseNewest,
            ],
        ),
    ]
}

/// The configuration of this name (the names `Config::name` carries, and each fault set of
/// [`fault_sets`] over [`three_gates_two_rounds`]): what a printed schedule is replayed on.
pub fn named(name: &str) -> Option<Config> {
    let config = match name {
        "race_two_gates" => race_two_gates(),
        "race_three_gates" => race_three_gates(),
        "race_with_a_lost_line" => race_with_a_lost_line(),
        "retry_with_a_lost_line" => retry_with_a_lost_line(),
        "retry_cancel" => retry_cancel(),
        "answers_from_elsewhere_and_late" => answers_from_elsewhere_and_late(),
        "retry_and_early_answer" => retry_and_early_answer(),
        "next_round_cancel" => next_round_cancel(),
        "retry_expire" => retry_expire(),
        "retry_replay_cancel" => retry_replay_cancel(),
        "restart_after_use" => restart_after_use(VersionsAfterLoss::NewEpoch),
        "restart_after_use_counter_from_one" => restart_after_use(VersionsAfterLoss::RestartAtOne),
        "kill_mid_retry" => kill_mid_retry(),
        "store_failover_mid_retry" => store_failover_mid_retry(Confirm::WaitForReplica),
        "store_failover_mid_retry_unconfirmed" => store_failover_mid_retry(Confirm::Unconfirmed),
        "sink_failover_mid_retry" => sink_failover_mid_retry(Confirm::WaitForReplica),
        "sink_failover_mid_retry_unconfirmed" => sink_failover_mid_retry(Confirm::Unconfirmed),
        "failovers_mid_retry" => failovers_mid_retry(),
        "race_with_failovers" => race_with_failovers(Confirm::WaitForReplica),
        "race_with_failovers_unconfirmed" => race_with_failovers(Confirm::Unconfirmed),
        "deep_failovers" => deep_failovers(Confirm::WaitForReplica),
        "deep_failovers_unconfirmed" => deep_failovers(Confirm::Unconfirmed),
        other => {
            let (set, faults) = fault_sets().into_iter().find(|(set, _)| *set == other)?;
            three_gates_two_rounds(set, faults)
        }
    };
    Some(config)
}
