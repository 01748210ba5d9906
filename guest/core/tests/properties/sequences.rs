//! Random operation sequences.

use super::*;

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
        let live = world.fx.storage.live_keys("");
        prop_assert!(live.is_empty(), "live keys left: {:?}", live);
        // ... and nothing at all once the grace has passed and expired keys are purged.
        world.fx.clock.advance(EXPIRY_GRACE_MS + 1);
        world.fx.storage.purge_expired();
        prop_assert!(world.fx.storage.is_empty(), "{} keys left", world.fx.storage.len());
    }
}
