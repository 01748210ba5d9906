//! Differential test: a small executable model of the gate's rules, written from the rules
//! (docs/errors.md, docs/corpus.md, the control's G001/G002, the MRTR notes), not from the
//! gate's code. Random operation sequences run through the real gate (two instances over one
//! in-memory store) and through the model; for every operation both must allow with the same
//! visible result, or deny with the same code. See docs/testing.md for what it covers and
//! leaves out.

mod content;
mod driver;
mod ops;
mod rules;
mod wire;

use content::Request;
use driver::*;
use ops::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1000,
        // Next to this file (the default would be `tests/proptest-regressions/mod.txt`,
        // a name every `tests/*/mod.rs` shares).
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Direct(
            "tests/model/mod.proptest-regressions",
        ))),
        ..ProptestConfig::default()
    })]

    /// For every operation, the gate and the model agree: allowed with the same visible
    /// result, or denied with the same code; and the trail the run left is one intact chain.
    #[test]
    fn gate_agrees_with_the_model(ops in prop::collection::vec(arb_op(), 1..80)) {
        let mut world = World::new();
        for op in &ops {
            world.apply(op);
        }
        world.assert_chain();
    }
}

fn register(id: usize, server: usize, short_lifetime: bool) -> Op {
    Op::Register {
        gate: 0,
        server,
        id,
        user: 0,
        tenant: 0,
        arg: 0,
        setup: Setup {
            short_lifetime,
            max_rounds: Some(1),
            url_declared: false,
            roots_declared: false,
            roots_approved: false,
        },
        defect: None,
    }
}

fn respond(requests: &[(&str, Request)], state: Option<&str>) -> Op {
    Op::Respond {
        gate: 0,
        target: Target::Idle { k: 0 },
        reply: ReplyPick::InputRequired {
            requests: requests
                .iter()
                .map(|(k, r)| ((*k).to_owned(), *r))
                .collect::<BTreeMap<_, _>>(),
            state: state.map(str::to_owned),
        },
    }
}

fn retry(picks: Vec<usize>, other_tenant: bool) -> Op {
    Op::Retry {
        gate: 0,
        target: Target::Open { k: 0 },
        retry_id: RetryIdPick::Fresh,
        answers: AnswerPlan {
            picks,
            change: None,
        },
        other_user: false,
        other_tenant,
        client: None,
    }
}

/// Each change a client can make to its own retry, on a form round with a state and on a
/// state-only round, through the gate and the model; then the retry with only its own `_meta`,
/// which goes out.
#[test]
fn client_retries_agree_with_the_model() {
    let changes = [
        ClientChange::Arguments,
        ClientChange::Name,
        ClientChange::Method,
        ClientChange::State,
        ClientChange::NoState,
        ClientChange::NoRound,
        ClientChange::Meta,
    ];
    for round in [
        respond(&[("f0", Request::Form)], Some("s1")),
        respond(&[], Some("s1")),
    ] {
        let mut world = World::new();
        world.apply(&register(0, 0, false));
        world.apply(&round);
        for change in changes {
            let mut op = retry(vec![0], false);
            if let Op::Retry { client, .. } = &mut op {
                *client = Some(change);
            }
            world.apply(&op);
        }
        assert!(
            world.model.bindings.iter().all(|b| b.open.is_none()),
            "the retry with the client's own _meta went out"
        );
        world.assert_chain();
    }
}

/// Cases the random runs once found (kept as sequences: a saved seed only replays with the
/// generator it came from).
#[test]
fn cases_found_before() {
    let cases = [
        // Form content `{"login": "o", "count": 2.0}`: `2.0` is an integer, and the retry
        // carries it as given, `2.0`.
        vec![
            register(0, 0, false),
            register(0, 0, false),
            respond(&[("f0", Request::Form)], None),
            retry(vec![4], false),
        ],
        // A state-only round answered by another tenant.
        vec![
            register(0, 0, false),
            register(0, 1, false),
            respond(&[], Some("a")),
            retry(vec![0], true),
        ],
        // An empty payload after the lifetime: the lifetime is judged first.
        vec![
            register(0, 0, true),
            Op::Clock(ClockPick::Forward(SHORT_LIFETIME_MS)),
            respond(&[], None),
        ],
    ];
    for ops in cases {
        let mut world = World::new();
        for op in &ops {
            world.apply(op);
        }
        world.assert_chain();
    }
}
