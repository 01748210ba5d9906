//! The operations and their generators. Pools are small so ids, servers and principals collide.

use crate::common::*;
use crate::model::content::Request;
use crate::model::rules::*;
use mrtr_gate_core::{EXPIRY_GRACE_MS, MAX_TIME_MS, Policy, RequestId};
use proptest::prelude::*;
use std::collections::BTreeMap;

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
    /// The id the k-th binding used just before its live one (its original id if none).
    Previous { k: usize },
    /// Any id seen so far (the pool or a retry id), on either server.
    Any { n: usize, server: usize },
}

/// The policy and params of a registration: what they let a round ask for, its limits.
#[derive(Clone, Debug)]
pub(crate) struct Setup {
    /// The 10 s lifetime rather than the default 5 min.
    pub(crate) short_lifetime: bool,
    /// `max_rounds` 1 to 3 rather than the default.
    pub(crate) max_rounds: Option<u32>,
    pub(crate) url_declared: bool,
    pub(crate) roots_declared: bool,
    pub(crate) roots_approved: bool,
}

#[derive(Clone, Debug)]
pub(crate) enum ReplyPick {
    InputRequired {
        requests: BTreeMap<String, Request>,
        state: Option<String>,
    },
    Complete,
    Error,
    BadResultType,
}

/// How to answer a round: per input, an index into its pool of answers (0 is a right
/// answer), cycled over the round's keys; then an optional change to the whole object.
#[derive(Clone, Debug)]
pub(crate) struct AnswerPlan {
    pub(crate) picks: Vec<usize>,
    pub(crate) change: Option<WholeChange>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum WholeChange {
    ExtraKey,
    MissingKey,
    NotAnObject,
}

#[derive(Clone, Debug)]
pub(crate) enum RetryIdPick {
    Fresh,
    /// The last fresh id handed out: taken if its retry went out, free again if it was
    /// refused (the reservation is released).
    LastFresh,
    OwnOriginal,
    /// The lowest number no live binding on the server uses (often one an ended binding used).
    LowestFree,
    Pool(usize),
}

/// `retry-from-client` rather than `build-retry`: the client sends the request it saw again
/// (its params as registered, the round's state, the answers; `{}` answers omitted), with
/// this change.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ClientChange {
    None,
    /// The client's own `_meta`.
    Meta,
    Arguments,
    Name,
    Method,
    /// The round's state edited, or one added to a round that sent none.
    State,
    /// The state dropped.
    NoState,
    /// The relay found no round: no request id.
    NoRound,
}

#[derive(Clone, Debug)]
pub(crate) enum ClockPick {
    Forward(u64),
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
        setup: Setup,
        defect: Option<Defect>,
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
        answers: AnswerPlan,
        other_user: bool,
        other_tenant: bool,
        /// `None`: `build-retry`.
        client: Option<ClientChange>,
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
        1 => any::<usize>().prop_map(|k| Target::Previous { k }),
        1 => (any::<usize>(), 0usize..2).prop_map(|(n, server)| Target::Any { n, server }),
    ]
}

/// Targets for a retry: mostly a binding with an open round.
fn arb_retry_target() -> impl Strategy<Value = Target> {
    prop_oneof![
        6 => any::<usize>().prop_map(|k| Target::Open { k }),
        1 => (any::<usize>(), prop::bool::weighted(0.15)).prop_map(|(k, other_server)| Target::Live { k, other_server }),
        1 => any::<usize>().prop_map(|k| Target::Original { k }),
        1 => any::<usize>().prop_map(|k| Target::Previous { k }),
        1 => (any::<usize>(), 0usize..2).prop_map(|(n, server)| Target::Any { n, server }),
    ]
}

/// Targets for `finish`: any id a binding used, or none.
fn arb_target() -> impl Strategy<Value = Target> {
    prop_oneof![
        4 => (any::<usize>(), prop::bool::weighted(0.1)).prop_map(|(k, other_server)| Target::Live { k, other_server }),
        1 => any::<usize>().prop_map(|k| Target::Original { k }),
        1 => any::<usize>().prop_map(|k| Target::Previous { k }),
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

fn arb_request() -> impl Strategy<Value = Request> {
    prop_oneof![
        24 => Just(Request::Form),
        12 => Just(Request::Url),
        3 => Just(Request::Roots),
        1 => Just(Request::FormBadSchema),
        1 => Just(Request::UrlUnsafe),
        1 => Just(Request::UnknownMode),
    ]
}

/// Mostly rounds with requests; a state-only round mostly with a state (an empty payload or
/// an empty state ends the binding, so they are rarer).
fn arb_reply() -> impl Strategy<Value = ReplyPick> {
    let keys = prop::sample::select(vec!["f0", "f1", "u0", "a b", "名前"]);
    let requests = prop::collection::btree_map(keys.prop_map(str::to_owned), arb_request(), 1..3);
    let state = prop_oneof![
        6 => Just(None),
        3 => arb_state().prop_map(Some),
        1 => Just(Some(String::new())),
    ];
    let state_only = prop_oneof![
        8 => arb_state().prop_map(Some),
        1 => Just(None),
        1 => Just(Some(String::new())),
    ];
    prop_oneof![
        10 => (requests, state).prop_map(|(requests, state)| ReplyPick::InputRequired { requests, state }),
        3 => state_only.prop_map(|state| ReplyPick::InputRequired { requests: BTreeMap::new(), state }),
        2 => Just(ReplyPick::Complete),
        1 => Just(ReplyPick::Error),
        1 => Just(ReplyPick::BadResultType),
    ]
}

/// Mostly `build-retry`; a client's retry mostly unchanged (its own `_meta` is no change).
fn arb_client() -> impl Strategy<Value = Option<ClientChange>> {
    prop_oneof![
        12 => Just(None),
        4 => Just(Some(ClientChange::None)),
        2 => Just(Some(ClientChange::Meta)),
        1 => Just(Some(ClientChange::Arguments)),
        1 => Just(Some(ClientChange::Name)),
        1 => Just(Some(ClientChange::Method)),
        1 => Just(Some(ClientChange::State)),
        1 => Just(Some(ClientChange::NoState)),
        1 => Just(Some(ClientChange::NoRound)),
    ]
}

fn arb_answers() -> impl Strategy<Value = AnswerPlan> {
    let pick = prop_oneof![4 => Just(0usize), 1 => 0usize..16];
    let change = prop_oneof![
        12 => Just(None),
        1 => Just(Some(WholeChange::ExtraKey)),
        1 => Just(Some(WholeChange::MissingKey)),
        1 => Just(Some(WholeChange::NotAnObject)),
    ];
    (prop::collection::vec(pick, 1..3), change)
        .prop_map(|(picks, change)| AnswerPlan { picks, change })
}

/// Small steps mostly; exact lifetimes and the grace, to land on the boundaries.
fn arb_clock() -> impl Strategy<Value = ClockPick> {
    let default_lifetime = Policy::default().round_trip_lifetime_ms;
    prop_oneof![
        6 => (0u64..4_000).prop_map(ClockPick::Forward),
        1 => (5_000u64..70_000).prop_map(ClockPick::Forward),
        2 => prop::sample::select(vec![
            1,
            SHORT_LIFETIME_MS,
            default_lifetime,
            EXPIRY_GRACE_MS,
            EXPIRY_GRACE_MS + 1_000,
        ])
        .prop_map(ClockPick::Forward),
        1 => prop_oneof![Just(4_000u64), Just(5_000), Just(5_001), Just(30_000)].prop_map(ClockPick::Back),
        1 => prop_oneof![Just(MAX_TIME_MS + 1), Just(u64::MAX)].prop_map(ClockPick::OutOfRange),
    ]
}

fn arb_setup() -> impl Strategy<Value = Setup> {
    (
        prop::bool::weighted(0.2),
        prop_oneof![3 => Just(None), 1 => (1u32..4).prop_map(Some)],
        prop::bool::weighted(0.85),
        prop::bool::weighted(0.85),
        prop::bool::weighted(0.85),
    )
        .prop_map(
            |(short_lifetime, max_rounds, url_declared, roots_declared, roots_approved)| Setup {
                short_lifetime,
                max_rounds,
                url_declared,
                roots_declared,
                roots_approved,
            },
        )
}

fn arb_defect() -> impl Strategy<Value = Option<Defect>> {
    prop_oneof![
        40 => Just(None),
        1 => Just(Some(Defect::EmptyUser)),
        1 => Just(Some(Defect::ZeroLifetime)),
        1 => Just(Some(Defect::EmptyUserAndZeroLifetime)),
        1 => Just(Some(Defect::ParamsCarryState)),
    ]
}

pub(crate) fn arb_op() -> impl Strategy<Value = Op> {
    let gate = 0usize..2;
    let who = prop::bool::weighted(0.1);
    prop_oneof![
        4 => (gate.clone(), 0usize..2, 0usize..5, 0usize..2, 0usize..2, 0u8..3, arb_setup(), arb_defect())
            .prop_map(|(gate, server, id, user, tenant, arg, setup, defect)| Op::Register { gate, server, id, user, tenant, arg, setup, defect }),
        8 => (gate.clone(), arb_response_target(), arb_reply()).prop_map(|(gate, target, reply)| Op::Respond { gate, target, reply }),
        6 => (
            gate.clone(),
            arb_retry_target(),
            prop_oneof![
                6 => Just(RetryIdPick::Fresh),
                2 => Just(RetryIdPick::LastFresh),
                1 => Just(RetryIdPick::OwnOriginal),
                1 => Just(RetryIdPick::LowestFree),
                2 => (0usize..5).prop_map(RetryIdPick::Pool),
            ],
            arb_answers(),
            who,
            who,
            arb_client(),
        )
            .prop_map(|(gate, target, retry_id, answers, other_user, other_tenant, client)| Op::Retry { gate, target, retry_id, answers, other_user, other_tenant, client }),
        1 => prop_oneof![
            Just(ConsentAnswer::Refuse),
            Just(ConsentAnswer::GrantOtherView),
            Just(ConsentAnswer::GrantOtherAnswers),
            Just(ConsentAnswer::Fail),
            Just(ConsentAnswer::Grant),
        ].prop_map(Op::QueueConsent),
        2 => (gate.clone(), arb_target(), who, who, any::<bool>()).prop_map(|(gate, target, other_user, other_tenant, transport_failed)| Op::Finish { gate, target, other_user, other_tenant, transport_failed }),
        1 => gate.prop_map(|gate| Op::ExpireStale { gate }),
        3 => arb_clock().prop_map(Op::Clock),
    ]
}
