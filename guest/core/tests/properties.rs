//! Property tests: random operation sequences over two gate instances sharing one store and
//! one audit sink, and random input that must never panic the gate.
#![cfg(test)]

mod common;

use common::*;
use mrtr_gate_core::ALL_CODES;
use mrtr_gate_core::EXPIRY_GRACE_MS;
use mrtr_gate_core::audit::verify_chain;
use mrtr_gate_core::host::Storage;
use mrtr_gate_core::memory::ScriptedAnswer;
use mrtr_gate_core::{CallerOutcome, Denial, Policy, RequestId, ResponseVerdict};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

// ---------------------------------------------------------------------------------------
// Random operation sequences
// ---------------------------------------------------------------------------------------

const LIFETIMES: [u64; 3] = [8_000, 30_000, 50_000];
/// The sweeper runs at least this often (well inside the 60 s grace).
const SWEEP_EVERY_MS: u64 = 55_000;

#[derive(Clone, Debug)]
enum Op {
    Register {
        gate: usize,
        lifetime: usize,
        max_rounds: u32,
    },
    Round {
        gate: usize,
        pick: usize,
        forms: usize,
        urls: usize,
        state: Option<String>,
        stale: bool,
        garbage: bool,
    },
    Retry {
        gate: usize,
        pick: usize,
        wrong: Option<u8>,
        reuse_id: bool,
        consent: bool,
    },
    DuplicateRetry {
        gate: usize,
        pick: usize,
    },
    Complete {
        gate: usize,
        pick: usize,
        stale: bool,
    },
    ServerError {
        gate: usize,
        pick: usize,
    },
    Cancel {
        gate: usize,
        pick: usize,
    },
    Advance {
        ms: u64,
    },
    Expire {
        gate: usize,
    },
}

fn arb_state() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        1 => Just(None),
        2 => "[ -~]{1,16}".prop_map(Some),
        1 => "\\PC{1,8}".prop_map(Some),
    ]
}

fn arb_op() -> impl Strategy<Value = Op> {
    let g = 0usize..2;
    prop_oneof![
        3 => (g.clone(), 0usize..3, 1u32..4).prop_map(|(gate, lifetime, max_rounds)| Op::Register { gate, lifetime, max_rounds }),
        5 => (g.clone(), any::<usize>(), 0usize..3, 0usize..2, arb_state(), prop::bool::weighted(0.1), prop::bool::weighted(0.03))
            .prop_map(|(gate, pick, forms, urls, state, stale, garbage)| Op::Round { gate, pick, forms, urls, state, stale, garbage }),
        7 => (g.clone(), any::<usize>(), prop::option::weighted(0.2, 0u8..4), prop::bool::weighted(0.1), prop::bool::weighted(0.9))
            .prop_map(|(gate, pick, wrong, reuse_id, consent)| Op::Retry { gate, pick, wrong, reuse_id, consent }),
        2 => (g.clone(), any::<usize>()).prop_map(|(gate, pick)| Op::DuplicateRetry { gate, pick }),
        2 => (g.clone(), any::<usize>(), prop::bool::weighted(0.2)).prop_map(|(gate, pick, stale)| Op::Complete { gate, pick, stale }),
        1 => (g.clone(), any::<usize>()).prop_map(|(gate, pick)| Op::ServerError { gate, pick }),
        1 => (g.clone(), any::<usize>()).prop_map(|(gate, pick)| Op::Cancel { gate, pick }),
        2 => prop_oneof![3 => 0u64..3_000, 1 => 0u64..25_000].prop_map(|ms| Op::Advance { ms }),
        1 => g.prop_map(|gate| Op::Expire { gate }),
    ]
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Form,
    Url,
}

#[derive(Clone, Debug)]
struct OpenModel {
    on: RequestId,
    keys: Vec<(String, Kind)>,
}

#[derive(Clone, Debug)]
struct Model {
    original: i64,
    live: RequestId,
    ids: Vec<RequestId>,
    open: Option<OpenModel>,
    answered: Vec<RequestId>,
    expires_at_ms: u64,
    /// Our belief that the binding ended (only used to steer picks; never asserted).
    ended: bool,
}

fn answers_for(keys: &[(String, Kind)], wrong: Option<u8>) -> Value {
    let mut m = serde_json::Map::new();
    for (k, kind) in keys {
        let v = match kind {
            Kind::Form => accept_with(json!({"login": "octocat", "count": 2})),
            Kind::Url => json!({"action": "accept"}),
        };
        m.insert(k.clone(), v);
    }
    match wrong {
        None => {}
        Some(0) => {
            let first = m.keys().next().cloned();
            match first {
                Some(k) => {
                    m.remove(&k);
                }
                None => {
                    m.insert("zz".into(), json!({"action": "accept"}));
                }
            }
        }
        Some(1) => {
            m.insert("zz".into(), json!({"action": "decline"}));
        }
        Some(2) => {
            // Schema-invalid form content, or content on a url answer, or an extra key.
            match keys.first() {
                Some((k, Kind::Form)) => {
                    m.insert(k.clone(), accept_with(json!({"login": 5})));
                }
                Some((k, Kind::Url)) => {
                    m.insert(k.clone(), accept_with(json!({"x": 1})));
                }
                None => {
                    m.insert("zz".into(), json!({"action": "cancel"}));
                }
            }
        }
        Some(_) => return json!(["not", "an", "object"]),
    }
    Value::Object(m)
}

struct World {
    fx: Fx,
    other: TestGate,
    models: Vec<Model>,
    next_id: i64,
    last_sweep: u64,
    /// (original, round) -> retries built.
    retries: BTreeMap<(i64, u32), u32>,
    /// Request ids a retry was built for.
    answered_ids: BTreeSet<String>,
}

fn id_key(id: &RequestId) -> String {
    id.key_fragment()
}

fn assert_known(d: &Denial) {
    assert!(
        ALL_CODES.contains(&d.error.code()),
        "unknown code {}",
        d.error.code()
    );
}

impl World {
    fn new() -> Self {
        let fx = Fx::new();
        let other = fx.second_gate();
        let now = T0;
        Self {
            fx,
            other,
            models: Vec::new(),
            next_id: 1,
            last_sweep: now,
            retries: BTreeMap::new(),
            answered_ids: BTreeSet::new(),
        }
    }

    fn gate(&mut self, which: usize) -> &mut TestGate {
        if which == 0 {
            &mut self.fx.gate
        } else {
            &mut self.other
        }
    }

    fn now(&self) -> u64 {
        use mrtr_gate_core::host::Clock;
        self.fx.clock.now_ms()
    }

    fn fresh_id(&mut self) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn pick(&self, pick: usize) -> Option<usize> {
        self.pick_where(pick, |m| !m.ended)
    }

    /// Mostly a binding that matches `want` (none if none does); one time in eight any binding
    /// at all, to exercise the denials.
    fn pick_where(&self, pick: usize, want: impl Fn(&Model) -> bool) -> Option<usize> {
        if self.models.is_empty() {
            return None;
        }
        let matching: Vec<usize> = (0..self.models.len())
            .filter(|&i| want(&self.models[i]))
            .collect();
        if pick.is_multiple_of(8) {
            Some(pick % self.models.len())
        } else if matching.is_empty() {
            None
        } else {
            Some(matching[(pick / 8) % matching.len()])
        }
    }

    fn sweep(&mut self, gate: usize) {
        let r = self.gate(gate).expire_stale();
        assert!(r.is_ok(), "expire_stale: {r:?}");
        self.last_sweep = self.now();
    }

    fn advance(&mut self, ms: u64) {
        // The host's sweeper runs within the grace period (the documented contract).
        if self.now() + ms - self.last_sweep > SWEEP_EVERY_MS {
            self.sweep(0);
        }
        self.fx.clock.advance(ms);
    }

    fn apply(&mut self, op: &Op) {
        match op.clone() {
            Op::Register {
                gate,
                lifetime,
                max_rounds,
            } => {
                let id = self.fresh_id();
                let policy = Policy {
                    round_trip_lifetime_ms: LIFETIMES[lifetime],
                    max_rounds,
                    ..Policy::default()
                };
                let reg = registration(
                    RequestId::Number(id),
                    &tool_params("t", json!({"n": id})),
                    policy,
                );
                let r = self.gate(gate).register(reg).expect("a fresh id registers");
                self.models.push(Model {
                    original: id,
                    live: RequestId::Number(id),
                    ids: vec![RequestId::Number(id)],
                    open: None,
                    answered: Vec::new(),
                    expires_at_ms: r.expires_at_ms,
                    ended: false,
                });
            }
            Op::Round {
                gate,
                pick,
                forms,
                urls,
                state,
                stale,
                garbage,
            } => {
                let Some(i) = self.pick_where(pick, |m| !m.ended && m.open.is_none()) else {
                    return;
                };
                let m = self.models[i].clone();
                let on = if stale {
                    m.ids[0].clone()
                } else {
                    m.live.clone()
                };
                let mut requests = serde_json::Map::new();
                let mut keys = Vec::new();
                for f in 0..forms {
                    let k = format!("f{f}");
                    requests.insert(k.clone(), form("F"));
                    keys.push((k, Kind::Form));
                }
                for u in 0..urls {
                    let k = format!("u{u}");
                    requests.insert(k.clone(), url_request("https://auth.example.com/x?y=1"));
                    keys.push((k, Kind::Url));
                }
                keys.sort_by(|a, b| a.0.cmp(&b.0));
                let mut result = json!({"resultType": if garbage { "input_Required" } else { "input_required" }});
                if !requests.is_empty() {
                    result["inputRequests"] = Value::Object(requests);
                }
                if let Some(s) = &state {
                    result["requestState"] = json!(s);
                }
                let text = response(on.to_json(), result);
                match self.gate(gate).accept_response(&server(), &text) {
                    Ok(ResponseVerdict::InputRequired(view)) => {
                        assert!(!garbage);
                        assert_eq!(on, m.live, "a round was accepted on a stale id");
                        let want: Vec<String> = keys.iter().map(|k| k.0.clone()).collect();
                        assert_eq!(view.input_keys, want);
                        self.models[i].open = Some(OpenModel { on, keys });
                    }
                    Ok(other) => panic!("an input_required result gave {other:?}"),
                    Err(d) => {
                        assert_known(&d);
                        if on == m.live && d.error.code() != "duplicate_round" {
                            self.models[i].ended = true;
                        }
                    }
                }
            }
            Op::Retry {
                gate,
                pick,
                wrong,
                reuse_id,
                consent,
            } => {
                let Some(i) = self.pick_where(pick, |m| !m.ended && m.open.is_some()) else {
                    return;
                };
                let m = self.models[i].clone();
                let (on, keys) = match &m.open {
                    Some(o) => (o.on.clone(), o.keys.clone()),
                    None => (m.live.clone(), Vec::new()),
                };
                let retry_id = if reuse_id {
                    m.ids[0].clone()
                } else {
                    RequestId::Number(self.fresh_id())
                };
                if !consent {
                    self.fx.consent.push(ScriptedAnswer::Refuse);
                }
                let answers = answers_for(&keys, wrong);
                let before = self.fx.consent.prompts().len();
                let r = self.gate(gate).build_retry(retry_request(
                    on.clone(),
                    retry_id.clone(),
                    &answers,
                ));
                let asked = self.fx.consent.prompts().len() > before;
                if !consent {
                    if asked {
                        assert!(
                            matches!(&r, Err(d) if d.error.code() == "consent_refused"),
                            "a refused consent gave {r:?}"
                        );
                    } else {
                        // The refusal was not used (denied earlier, or a state-only round).
                        self.drain_script();
                    }
                }
                if let Ok(retry) = &r {
                    assert_eq!(
                        retry.consent_receipt_id.is_some(),
                        asked,
                        "receipt without prompt or prompt without receipt"
                    );
                    // Only a round without inputs may go out without a prompt.
                    if !asked {
                        assert!(
                            !parse(&retry.request_json)["params"]
                                .as_object()
                                .unwrap()
                                .contains_key("inputResponses")
                        );
                    }
                }
                self.on_retry(i, &on, &retry_id, r);
            }
            Op::DuplicateRetry { gate, pick } => {
                let Some(i) = self.pick(pick) else { return };
                let Some(on) = self.models[i].answered.last().cloned() else {
                    return;
                };
                let retry_id = RequestId::Number(self.fresh_id());
                let r = self.gate(gate).build_retry(retry_request(
                    on.clone(),
                    retry_id.clone(),
                    &json!({}),
                ));
                match &r {
                    Ok(retry) => panic!("a consumed round gave a second retry: {retry:?}"),
                    Err(d) => assert_known(d),
                }
                self.on_retry(i, &on, &retry_id, r);
            }
            Op::Complete { gate, pick, stale } => {
                let Some(i) = self.pick(pick) else { return };
                let m = self.models[i].clone();
                let on = if stale {
                    m.ids[0].clone()
                } else {
                    m.live.clone()
                };
                let r = self
                    .gate(gate)
                    .accept_response(&server(), &response(on.to_json(), complete()));
                match r {
                    Ok(v) => {
                        assert_eq!(v, ResponseVerdict::Complete);
                        assert_eq!(on, m.live, "a stale id completed a binding");
                        self.models[i].open = None;
                        self.models[i].ended = true;
                    }
                    Err(d) => assert_known(&d),
                }
            }
            Op::ServerError { gate, pick } => {
                let Some(i) = self.pick(pick) else { return };
                let on = self.models[i].live.clone();
                match self
                    .gate(gate)
                    .accept_response(&server(), &error_response(on.to_json(), -32603))
                {
                    Ok(v) => {
                        assert_eq!(v, ResponseVerdict::Error(-32603));
                        self.models[i].ended = true;
                    }
                    Err(d) => assert_known(&d),
                }
            }
            Op::Cancel { gate, pick } => {
                let Some(i) = self.pick(pick) else { return };
                let on = self.models[i].live.clone();
                match self
                    .gate(gate)
                    .finish(finish_request(on.clone(), CallerOutcome::Cancelled))
                {
                    Ok(_) => self.models[i].ended = true,
                    Err(d) => assert_known(&d),
                }
            }
            Op::Advance { ms } => self.advance(ms),
            Op::Expire { gate } => self.sweep(gate),
        }
    }

    fn on_retry(
        &mut self,
        i: usize,
        on: &RequestId,
        retry_id: &RequestId,
        r: Result<mrtr_gate_core::Retry, Denial>,
    ) {
        match r {
            Ok(retry) => {
                let key = (self.models[i].original, retry.round);
                let n = self.retries.entry(key).or_insert(0);
                *n += 1;
                assert_eq!(*n, 1, "(a) round {key:?} yielded two retries");
                assert!(
                    self.answered_ids.insert(id_key(on)),
                    "(a) the id {on:?} was answered twice"
                );
                let msg = parse(&retry.request_json);
                assert_eq!(msg["id"], retry_id.to_json());
                assert!(
                    !self.models[i].ids.contains(retry_id),
                    "a retry reused an id"
                );
                let m = &mut self.models[i];
                m.live = retry_id.clone();
                m.ids.push(retry_id.clone());
                m.open = None;
                m.answered.push(on.clone());
            }
            Err(d) => {
                assert_known(&d);
                if d.error.code() == "inactive_mrtr_round"
                    && self.models[i].open.as_ref().is_some_and(|o| &o.on == on)
                {
                    self.models[i].ended = true;
                }
            }
        }
    }

    fn drain_script(&mut self) {
        // ScriptedConsent has no "clear"; consume the queued refusal with a throwaway prompt.
        use mrtr_gate_core::host::{Consent, ConsentPrompt};
        let _ = self.fx.consent.request_consent(&ConsentPrompt {
            view_json: String::new(),
            view_sha256: String::new(),
            responses_json: String::new(),
            responses_sha256: String::new(),
        });
    }

    /// Sweep until every lifetime has passed, never letting an expired binding outlive the grace.
    fn finish_all(&mut self) {
        let last = self
            .models
            .iter()
            .map(|m| m.expires_at_ms)
            .max()
            .unwrap_or(0);
        self.sweep(0);
        while self.now() <= last {
            self.fx.clock.advance(20_000);
            self.sweep(1);
            self.sweep(0);
        }
    }
}

fn check_audit(world: &World) {
    let entries = world.fx.audit.entries();
    // (c) the chain verifies.
    let n = verify_chain(entries.iter().map(|e| e.line.as_str()));
    assert_eq!(n, Ok(entries.len() as u64), "(c) audit chain");
    for e in &entries {
        let parsed: Value = serde_json::from_str(&e.line).unwrap_or(Value::Null);
        assert_eq!(
            mrtr_gate_core::canonical::to_canonical(&parsed),
            e.line,
            "(c) every line is canonical JSON"
        );
    }
    // (b) every binding that received a round has exactly one terminal event.
    let mut received: BTreeMap<String, u32> = BTreeMap::new();
    let mut terminal: BTreeMap<String, u32> = BTreeMap::new();
    let mut submitted: BTreeMap<(String, String), u32> = BTreeMap::new();
    for e in world.fx.audit.events() {
        let id = &e["request_id"];
        if id.is_null() {
            continue;
        }
        let id = id.to_string();
        match e["event"].as_str() {
            Some("received") => *received.entry(id).or_insert(0) += 1,
            Some("terminal") => *terminal.entry(id).or_insert(0) += 1,
            Some("submitted") => *submitted.entry((id, e["round"].to_string())).or_insert(0) += 1,
            _ => {}
        }
    }
    for (id, count) in &terminal {
        assert_eq!(*count, 1, "(b) binding {id} has {count} terminal events");
    }
    for id in received.keys() {
        assert_eq!(
            terminal.get(id),
            Some(&1),
            "(b) binding {id} received a round but never ended"
        );
    }
    // (a) seen from the audit trail too.
    for (k, count) in &submitted {
        assert_eq!(*count, 1, "(a) round {k:?} was submitted {count} times");
    }
    let built: u32 = world.retries.values().sum();
    assert_eq!(
        submitted.len() as u32,
        built,
        "every built retry has its submitted event"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_over_two_instances(ops in prop::collection::vec(arb_op(), 1..80)) {
        let mut world = World::new();
        for op in &ops {
            world.apply(op);
        }
        world.finish_all();
        check_audit(&world);
        // (d) storage: nothing live once every binding ended ...
        let live = world.fx.storage.list_keys("").unwrap();
        prop_assert!(live.is_empty(), "live keys left: {:?}", live);
        // ... and nothing at all once the grace has passed and expired keys are purged.
        world.fx.clock.advance(EXPIRY_GRACE_MS + 1);
        world.fx.storage.purge_expired();
        prop_assert!(world.fx.storage.is_empty(), "{} keys left", world.fx.storage.len());
    }
}

// ---------------------------------------------------------------------------------------
// Random input never panics
// ---------------------------------------------------------------------------------------

fn arb_key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "resultType", "inputRequests", "requestState", "method", "params", "mode", "message",
            "requestedSchema", "type", "properties", "required", "url", "jsonrpc", "id", "result",
            "error", "code", "_meta", "$ref", "enum", "oneOf", "items", "anyOf", "const", "title",
            "a", "f0", "roots", "messages", "maxTokens",
        ])
        .prop_map(str::to_owned),
        1 => "[a-zA-Z$_.-]{0,8}",
    ]
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f)
            .map(Value::Number)),
        prop::sample::select(vec![
            "input_required",
            "complete",
            "elicitation/create",
            "roots/list",
            "sampling/createMessage",
            "form",
            "url",
            "https://auth.example.com/",
            "http://x/",
            "object",
            "string",
            "integer",
            "array",
            "boolean",
            "2.0",
            "",
            "#",
        ])
        .prop_map(|s| Value::String(s.into())),
        "\\PC{0,10}".prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(arb_key(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A result that is often a plausible round, mutated at random.
fn arb_result() -> impl Strategy<Value = Value> {
    let plausible = (
        prop::sample::select(vec!["input_required", "complete", "Input_required"]),
        prop::option::of(prop::collection::btree_map(
            "[a-z0-9]{1,3}",
            prop_oneof![
                Just(form("m")),
                Just(url_request("https://auth.example.com/p?q=1")),
                Just(json!({"method": "roots/list"})),
                arb_json(),
                arb_json().prop_map(|p| json!({"method": "elicitation/create", "params": p})),
                arb_json().prop_map(|s| json!({"method": "elicitation/create", "params": {"message": "m", "requestedSchema": s}})),
            ],
            0..4,
        )),
        prop::option::of(prop_oneof![arb_json(), "\\PC{0,20}".prop_map(Value::String)]),
        prop::option::of((arb_key(), arb_json())),
    )
        .prop_map(|(rt, requests, state, extra)| {
            let mut r = json!({"resultType": rt});
            if let Some(req) = requests {
                r["inputRequests"] = Value::Object(req.into_iter().collect());
            }
            if let Some(s) = state {
                r["requestState"] = s;
            }
            if let Some((k, v)) = extra {
                r[k.as_str()] = v;
            }
            r
        });
    prop_oneof![3 => plausible, 1 => arb_json()]
}

fn fresh() -> Fx {
    let mut fx = Fx::new();
    let caps = json!({"elicitation": {"form": {}, "url": {}}, "roots": {}, "sampling": {}});
    let policy = Policy {
        allowed_deprecated: vec![
            mrtr_gate_core::DeprecatedMethod::RootsList,
            mrtr_gate_core::DeprecatedMethod::SamplingCreateMessage,
        ],
        ..Policy::default()
    };
    fx.register(
        RequestId::Number(1),
        &tool_params_caps("t", json!({}), caps),
        policy,
    )
    .unwrap();
    fx
}

fn judged(r: &Result<ResponseVerdict, Denial>) {
    if let Err(d) = r {
        assert_known(d);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic_accept(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let mut fx = fresh();
        let text = String::from_utf8_lossy(&bytes);
        let r = fx.gate.accept_response(&server(), &text);
        judged(&r);
        // Garbage that is not a response for id 1 leaves the binding alone.
        if r.is_err() {
            let again = fx.accept(1, state_only("s"));
            prop_assert!(again.is_ok() || parse_id(&text) == Some(json!(1)), "{:?}", again);
        }
    }

    #[test]
    fn random_json_messages_never_panic_accept(msg in arb_json()) {
        let mut fx = fresh();
        judged(&fx.gate.accept_response(&server(), &msg.to_string()));
    }

    #[test]
    fn random_results_give_a_consistent_verdict(result in arb_result()) {
        let mut fx = fresh();
        let r = fx.accept(1, result.clone());
        judged(&r);
        let rt = result.get("resultType").cloned();
        match &r {
            Ok(ResponseVerdict::InputRequired(view)) => {
                prop_assert_eq!(rt, Some(json!("input_required")));
                let keys: Vec<String> = result
                    .get("inputRequests")
                    .and_then(Value::as_object)
                    .map(|m| m.keys().cloned().collect())
                    .unwrap_or_default();
                prop_assert_eq!(&view.input_keys, &keys);
                let has_state = result.get("requestState").and_then(Value::as_str).is_some_and(|s| !s.is_empty());
                prop_assert!(!keys.is_empty() || has_state);
            }
            Ok(ResponseVerdict::Complete) => {
                prop_assert!(rt.is_none() || rt == Some(json!("complete")), "{:?}", rt);
            }
            Ok(ResponseVerdict::Error(_)) => prop_assert!(false, "a result gave an error verdict"),
            Err(_) => {}
        }
        fx.assert_chain();
    }

    #[test]
    fn random_input_responses_never_panic_retry(answers in arb_json(), raw in "\\PC{0,40}") {
        let mut fx = fresh();
        fx.round(1, input_required_state(json!({
            "f": form("F"),
            "u": url_request("https://auth.example.com/"),
            "r": {"method": "roots/list"},
        }), "S"));
        let r = fx.retry(RequestId::Number(1), RequestId::Number(2), &answers);
        if let Err(d) = &r {
            assert_known(d);
        }
        let mut req = retry_request(RequestId::Number(1), RequestId::Number(3), &json!({}));
        req.responses_json = raw;
        if let Err(d) = fx.gate.build_retry(req) {
            assert_known(&d);
        }
        fx.assert_chain();
    }
}

fn parse_id(text: &str) -> Option<Value> {
    serde_json::from_str::<Value>(text).ok()?.get("id").cloned()
}

// ---------------------------------------------------------------------------------------
// A retry's params: members added to canonical text stay canonical
// ---------------------------------------------------------------------------------------

/// Keys that test canonical order where it is subtle: UTF-16 order differs from code point
/// order from U+E000 on, and escapes sort by the character, not by their text.
fn arb_ordering_key() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => arb_key(),
        1 => "\\PC{0,4}",
        1 => prop::sample::select(vec![
            "\u{e000}", "\u{ffff}", "\u{10000}", "\u{1f600}", "\u{7f}", "é", "\"", "\\", "\n",
            "inputResponses", "requestState", "",
        ])
        .prop_map(str::to_owned),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn members_added_to_canonical_text_give_the_canonical_text_of_the_whole(
        object in prop::collection::btree_map(arb_ordering_key(), arb_json(), 0..6),
        extra in prop::collection::btree_map(arb_ordering_key(), arb_json(), 0..3),
    ) {
        use mrtr_gate_core::canonical::{CanonicalObject, to_canonical};
        let object: serde_json::Map<String, Value> = object.into_iter().collect();
        let text = to_canonical(&Value::Object(object.clone()));
        let members = CanonicalObject::parse(&text);
        prop_assert!(members.is_some(), "the canonical text of an object: {}", text);
        let extra_text: Vec<(String, String)> =
            extra.iter().map(|(k, v)| (k.clone(), to_canonical(v))).collect();
        let added: Vec<(&str, &str)> =
            extra_text.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let got = members.and_then(|m| m.with(&added));
        if extra.keys().any(|k| object.contains_key(k)) {
            prop_assert_eq!(got, None, "a key already there is refused");
        } else {
            let mut whole = object;
            whole.extend(extra);
            prop_assert_eq!(got, Some(to_canonical(&Value::Object(whole))));
        }
    }

    #[test]
    fn member_lists_of_random_text_never_panic(text in "\\PC{0,40}", json in arb_json()) {
        use mrtr_gate_core::canonical::CanonicalObject;
        let _ = CanonicalObject::parse(&text).map(|m| m.with(&[("k", "1")]));
        // serde_json writes object keys in byte order, which is canonical order for the
        // keys arb_json makes: every object is read, nothing else is.
        let as_text = json.to_string();
        prop_assert_eq!(CanonicalObject::parse(&as_text).is_some(), json.is_object());
    }
}

/// A URI of each shape the trail may meet, with `c` planted in every part but the host.
fn uris_with(c: &str, scheme: &str, host: &str) -> Vec<String> {
    vec![
        format!("{scheme}://user:{c}@{host}/{c}/doc?sig={c}#{c}"),
        format!("{scheme}://{c}@{host}:8443/{c}"),
        format!("{scheme}://{host}/files/{c}.txt"),
        format!("jdbc:mysql://{c}:{c}@db.example/{c}?password={c}"),
        format!("mailto:{c}@example.com?subject={c}"),
        format!("urn:x-secret:{c}"),
        format!("x-custom+app://{c}@{host}/{c}"),
        format!("file:///home/{c}/notes.txt"),
        format!("{c}/relative/{c}"),
    ]
}

fn arb_canary() -> impl Strategy<Value = String> {
    // Token-like, and never lowercase hex only (so never a piece of a digest by chance).
    "[A-Z][A-Za-z0-9_-]{15,31}"
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// A canary planted in every secret-bearing part of every URL and URI the gate is given
    /// (the server endpoint's path and query, another server's, an elicitation URL's path,
    /// query and fragment, a resource URI's userinfo, path, query, fragment and opaque part)
    /// never reaches an audit line, through rounds, retries, denials that name the server,
    /// completion, errors and expiry.
    #[test]
    fn no_url_part_but_the_host_reaches_the_trail(
        c in arb_canary(),
        scheme in prop_oneof![Just("https"), Just("http")],
        host in "[a-z]{1,8}\\.example",
        port in prop_oneof![Just(String::new()), Just(":8443".to_owned())],
    ) {
        use mrtr_gate_core::{Registration, RetryRequest, ServerIdentity};
        let mut fx = Fx::new();
        let endpoint = format!("{scheme}://{host}{port}/api/mcp/s/{c}/mcp?api_key={c}");
        let ours = ServerIdentity::origin(&endpoint).unwrap();
        let theirs = ServerIdentity::origin(&format!("https://evil.example/{c}?k={c}")).unwrap();
        let with = |id: i64, method: &str, params: Value| Registration {
            server: ours.clone(),
            method: method.into(),
            ..registration(RequestId::Number(id), &params, Policy::default())
        };
        fx.gate
            .register(with(1, "tools/call", tool_params("t", json!({}))))
            .unwrap();
        let url = format!("https://auth.example.com/{c}/cb?token={c}#{c}");
        let round = input_required_state(json!({"f": form("F"), "u": url_request(&url)}), &c);
        let view = fx.gate.accept_response(&ours, &response(1, round.clone())).unwrap();
        prop_assert!(matches!(view, ResponseVerdict::InputRequired(_)));
        // Denials that write `rejected` with a server: another server's response for the
        // binding, an unsolicited id, a message with no id.
        prop_assert!(fx.gate.accept_response(&theirs, &response(1, complete())).is_err());
        prop_assert!(fx.gate.accept_response(&theirs, &response(77, complete())).is_err());
        prop_assert!(fx.gate.accept_response(&ours, &response(78, complete())).is_err());
        let no_id = json!({"jsonrpc": "2.0"}).to_string();
        prop_assert!(fx.gate.accept_response(&theirs, &no_id).is_err());
        prop_assert!(fx.gate.accept_response(&ours, "[]").is_err());
        // A retry refused (schema mismatch), then one built, then the result.
        // A retry naming no binding (another server's id) writes the server the caller named.
        let retry_on = |server: &ServerIdentity, responses: &Value| RetryRequest {
            server: server.clone(),
            ..retry_request(RequestId::Number(1), RequestId::Number(2), responses)
        };
        let wrong = json!({"f": accept_with(json!({"login": 5})), "u": {"action": "accept"}});
        prop_assert!(fx.gate.build_retry(retry_on(&theirs, &wrong)).is_err());
        prop_assert!(fx.gate.build_retry(retry_on(&ours, &wrong)).is_err());
        let right = json!({"f": accept_with(form_content()), "u": {"action": "accept"}});
        prop_assert!(fx.gate.build_retry(retry_on(&ours, &right)).is_ok());
        prop_assert!(fx.gate.accept_response(&ours, &response(2, complete())).is_ok());
        // Resource URIs of every shape: a round each (so the binding is audited), then the
        // result, a JSON-RPC error, or expiry.
        for (i, uri) in (10..).zip(uris_with(&c, scheme, &host)) {
            fx.gate
                .register(with(i, "resources/read", json!({"_meta": meta(), "uri": uri})))
                .unwrap();
            fx.gate.accept_response(&ours, &response(i, state_only("s"))).unwrap();
            match i % 3 {
                0 => {
                    fx.gate.accept_response(&ours, &response(i, complete())).unwrap();
                }
                1 => {
                    let _ = fx.gate.accept_response(&ours, &error_response(i, -32000));
                }
                _ => {}
            }
        }
        fx.clock.advance(Policy::default().round_trip_lifetime_ms);
        fx.gate.expire_stale().unwrap();
        let entries = fx.audit.entries();
        prop_assert!(entries.len() >= 20, "the flows wrote {} events", entries.len());
        for entry in &entries {
            prop_assert!(!entry.line.contains(&c), "audit line leaks `{}`: {}", c, entry.line);
        }
        verify_chain(entries.iter().map(|e| e.line.as_str())).unwrap();
    }
}
