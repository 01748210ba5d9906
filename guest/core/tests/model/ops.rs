//! The operations and their generators. Pools are small so ids, servers and principals collide.

use crate::common::*;
use crate::rules::*;
use mrtr_gate_core::{MAX_TIME_MS, RequestId};
use proptest::prelude::*;

pub(crate) const SERVERS: [&str; 2] = [SERVER, OTHER_SERVER];
pub(crate) const USERS: [&str; 2] = [USER, "bob@example.com"];
pub(crate) const TENANTS: [&str; 2] = [TENANT, "tenant-b"];
pub(crate) const SHORT_LIFETIME_MS: u64 = 10_000;

/// `1`, `2`, `3`, and the strings `"1"` and `"b"` (`1` and `"1"` are different ids).
pub(crate) fn pool_id(n: usize) -> RequestId {
    match n % 5 {
        0 => RequestId::Number(1),
        1 => RequestId::Number(2),
        2 => RequestId::Number(3),
        3 => RequestId::Text("1".into()),
        _ => RequestId::Text("b".into()),
    }
}

/// Which binding or id an operation names.
#[derive(Clone, Debug)]
pub(crate) enum Target {
    /// The live id of the k-th binding the model holds, on its server or on the other one.
    Live { k: usize, other_server: bool },
    /// The live id of the k-th binding with an open round (the live id of any if none).
    Open { k: usize },
    /// The live id of the k-th binding without an open round (the live id of any if none).
    Idle { k: usize },
    /// The original id of the k-th binding (stale once a retry went out).
    Original { k: usize },
    /// Any id seen so far (the pool or a retry id), on either server.
    Any { n: usize, server: usize },
}

#[derive(Clone, Debug)]
pub(crate) enum PolicyPick {
    Default,
    MaxRoundsTwo,
    ShortLifetime,
}

#[derive(Clone, Debug)]
pub(crate) enum ReplyPick {
    Forms(usize),
    Url,
    FormAndUrl,
    StateOnly(String),
    FormWithState(String),
    Complete,
    Error,
    BadResultType,
}

#[derive(Clone, Debug)]
pub(crate) enum AnswersPick {
    Right,
    Decline,
    Extra,
    Missing,
    BadContent(usize),
    DeclineWithContent,
    BadAction,
    NotAnObject,
}

#[derive(Clone, Debug)]
pub(crate) enum RetryIdPick {
    Fresh,
    /// The last fresh id handed out: taken if its retry went out, free again if it was
    /// refused (the reservation is released).
    LastFresh,
    OwnOriginal,
    Pool(usize),
}

#[derive(Clone, Debug)]
pub(crate) enum ClockPick {
    Small(u64),
    PastShortLifetime,
    PastDefaultLifetime,
    Back(u64),
    OutOfRange(u64),
}

#[derive(Clone, Debug)]
pub(crate) enum Op {
    Register {
        gate: usize,
        server: usize,
        id: usize,
        user: usize,
        tenant: usize,
        arg: u8,
        policy: PolicyPick,
    },
    Respond {
        gate: usize,
        target: Target,
        reply: ReplyPick,
    },
    Retry {
        gate: usize,
        target: Target,
        retry_id: RetryIdPick,
        answers: AnswersPick,
        other_user: bool,
        other_tenant: bool,
    },
    QueueConsent(ConsentAnswer),
    Finish {
        gate: usize,
        target: Target,
        other_user: bool,
        other_tenant: bool,
        /// The transport failed (`CallerOutcome::Error`) rather than the user cancelling.
        transport_failed: bool,
    },
    ExpireStale {
        gate: usize,
    },
    Clock(ClockPick),
}

/// Targets for a server's response: mostly a binding waiting for one.
fn arb_response_target() -> impl Strategy<Value = Target> {
    prop_oneof![
        5 => any::<usize>().prop_map(|k| Target::Idle { k }),
        2 => (any::<usize>(), prop::bool::weighted(0.15)).prop_map(|(k, other_server)| Target::Live { k, other_server }),
        1 => any::<usize>().prop_map(|k| Target::Original { k }),
        1 => (any::<usize>(), 0usize..2).prop_map(|(n, server)| Target::Any { n, server }),
    ]
}

/// Targets for a retry: mostly a binding with an open round.
fn arb_retry_target() -> impl Strategy<Value = Target> {
    prop_oneof![
        6 => any::<usize>().prop_map(|k| Target::Open { k }),
        1 => (any::<usize>(), prop::bool::weighted(0.15)).prop_map(|(k, other_server)| Target::Live { k, other_server }),
        1 => any::<usize>().prop_map(|k| Target::Original { k }),
        1 => (any::<usize>(), 0usize..2).prop_map(|(n, server)| Target::Any { n, server }),
    ]
}

/// Targets for `finish`: any id a binding used, or none.
fn arb_target() -> impl Strategy<Value = Target> {
    prop_oneof![
        4 => (any::<usize>(), prop::bool::weighted(0.1)).prop_map(|(k, other_server)| Target::Live { k, other_server }),
        1 => any::<usize>().prop_map(|k| Target::Original { k }),
        2 => (any::<usize>(), 0usize..2).prop_map(|(n, server)| Target::Any { n, server }),
    ]
}

fn arb_state() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("s1".to_owned()),
        Just("é😀\"\\".to_owned()),
        "[ -~]{1,8}"
    ]
}

fn arb_reply() -> impl Strategy<Value = ReplyPick> {
    prop_oneof![
        4 => (1usize..3).prop_map(ReplyPick::Forms),
        2 => Just(ReplyPick::Url),
        2 => Just(ReplyPick::FormAndUrl),
        2 => arb_state().prop_map(ReplyPick::StateOnly),
        2 => arb_state().prop_map(ReplyPick::FormWithState),
        2 => Just(ReplyPick::Complete),
        1 => Just(ReplyPick::Error),
        1 => Just(ReplyPick::BadResultType),
    ]
}

fn arb_answers() -> impl Strategy<Value = AnswersPick> {
    prop_oneof![
        8 => Just(AnswersPick::Right),
        2 => Just(AnswersPick::Decline),
        1 => Just(AnswersPick::Extra),
        1 => Just(AnswersPick::Missing),
        2 => (0usize..4).prop_map(AnswersPick::BadContent),
        1 => Just(AnswersPick::DeclineWithContent),
        1 => Just(AnswersPick::BadAction),
        1 => Just(AnswersPick::NotAnObject),
    ]
}

fn arb_clock() -> impl Strategy<Value = ClockPick> {
    prop_oneof![
        6 => (0u64..4_000).prop_map(ClockPick::Small),
        1 => Just(ClockPick::PastShortLifetime),
        1 => Just(ClockPick::PastDefaultLifetime),
        1 => prop_oneof![Just(4_000u64), Just(5_000), Just(5_001), Just(30_000)].prop_map(ClockPick::Back),
        1 => prop_oneof![Just(MAX_TIME_MS + 1), Just(u64::MAX)].prop_map(ClockPick::OutOfRange),
    ]
}

pub(crate) fn arb_op() -> impl Strategy<Value = Op> {
    let gate = 0usize..2;
    let policy = prop_oneof![
        3 => Just(PolicyPick::Default),
        1 => Just(PolicyPick::MaxRoundsTwo),
        1 => Just(PolicyPick::ShortLifetime),
    ];
    let who = prop::bool::weighted(0.1);
    prop_oneof![
        3 => (gate.clone(), 0usize..2, 0usize..5, 0usize..2, 0usize..2, 0u8..3, policy)
            .prop_map(|(gate, server, id, user, tenant, arg, policy)| Op::Register { gate, server, id, user, tenant, arg, policy }),
        8 => (gate.clone(), arb_response_target(), arb_reply()).prop_map(|(gate, target, reply)| Op::Respond { gate, target, reply }),
        6 => (
            gate.clone(),
            arb_retry_target(),
            prop_oneof![6 => Just(RetryIdPick::Fresh), 2 => Just(RetryIdPick::LastFresh), 1 => Just(RetryIdPick::OwnOriginal), 2 => (0usize..5).prop_map(RetryIdPick::Pool)],
            arb_answers(),
            who,
            who,
        )
            .prop_map(|(gate, target, retry_id, answers, other_user, other_tenant)| Op::Retry { gate, target, retry_id, answers, other_user, other_tenant }),
        1 => prop_oneof![
            Just(ConsentAnswer::Refuse),
            Just(ConsentAnswer::GrantOtherView),
            Just(ConsentAnswer::Fail),
            Just(ConsentAnswer::Grant),
        ].prop_map(Op::QueueConsent),
        2 => (gate.clone(), arb_target(), who, who, any::<bool>()).prop_map(|(gate, target, other_user, other_tenant, transport_failed)| Op::Finish { gate, target, other_user, other_tenant, transport_failed }),
        1 => gate.prop_map(|gate| Op::ExpireStale { gate }),
        3 => arb_clock().prop_map(Op::Clock),
    ]
}
