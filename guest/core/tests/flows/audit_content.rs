//! Audit content (G002): what events carry, tampering, secrets kept out, users who decide slowly.

use crate::common::*;
use crate::flows::support::*;
use mrtr_gate_core::audit::{FIELDS, verify_chain};
use mrtr_gate_core::digest::digest_str;
use mrtr_gate_core::host::{Audit, HostError, Services};
use mrtr_gate_core::memory::{
    ManualClock, MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent,
};
use mrtr_gate_core::{
    CallerOutcome, DeprecatedMethod, Gate, Policy, Registration, ResponseVerdict,
};
use serde_json::{Value, json};
use std::sync::Arc;

#[test]
fn audit_events_carry_the_bindings_and_nothing_else() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    let view = fx.round(
        1,
        input_required_state(
            json!({"f": form("F"), "u": url_request("https://u.example.com/")}),
            "S",
        ),
    );
    fx.retry_ok(
        n(1),
        n(2),
        &json!({"f": {"action": "cancel"}, "u": {"action": "decline"}}),
    );
    fx.accept(2, complete()).unwrap();
    let events = fx.events_of(1);
    assert_eq!(
        kinds(&events),
        ["received", "consented", "submitted", "terminal"]
    );
    for e in &events {
        let obj = e.as_object().unwrap();
        for f in FIELDS {
            assert!(obj.contains_key(f), "missing field {f} in {e}");
        }
        for f in ["schema", "seq", "prev_sha256", "shard"] {
            assert!(obj.contains_key(f), "missing {f}");
        }
        assert_eq!(obj.len(), FIELDS.len() + 4, "unexpected fields in {e}");
        // The server's chain: its key part, whatever the server's URL holds.
        assert_eq!(e["shard"], server().key_part());
        assert_eq!(e["server"], redacted("https://mcp.example.com", SERVER));
        assert_eq!(e["method"], "tools/call");
        assert_eq!(e["name"], "get_weather");
        assert_eq!(e["user_sha256"], digest_str(USER));
        assert_eq!(e["tenant_sha256"], digest_str(TENANT));
        assert_eq!(e["policy_version"], "default");
        assert_eq!(e["at_ms"], T0);
    }
    let received = &events[0];
    assert_eq!(received["state_sha256"], digest_str("S"));
    assert_eq!(received["view_sha256"], view.view_sha256);
    assert_eq!(received["input_kinds"], json!({"f": "form", "u": "url"}));
    assert_eq!(
        received["schema_sha256"]["f"],
        mrtr_gate_core::digest::digest(&form_schema())
    );
    assert_eq!(received["round"], 1);
    assert_eq!(events[2]["retry_id"], 2);
    assert_eq!(events[3]["live_id"], 2);
    fx.assert_chain();
}

/// Each server's events go to its own chain (its shard), and the host's root anchors every
/// shard's head: a shard cut below its anchor is found though its chain alone still verifies.
#[test]
fn each_server_has_its_own_chain_and_the_root_anchors_every_head() {
    use mrtr_gate_core::audit::{ChainBreak, ROOT_SHARD, anchor_root};
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, input_required(json!({"a": form("A")})));
    // Another server answering id 1: refused, and audited on that server's own chain.
    assert!(
        fx.accept_from(OTHER_SERVER, 1, input_required(json!({"a": form("A")})))
            .is_err()
    );
    fx.retry_ok(n(1), n(2), &json!({"a": {"action": "cancel"}}));
    let entries = fx.audit.entries();
    let ours = server().key_part();
    let theirs = mrtr_gate_core::ServerIdentity::origin(OTHER_SERVER)
        .unwrap()
        .key_part();
    let seqs = |shard: &str| -> Vec<u64> {
        entries
            .iter()
            .filter(|e| e.shard == shard)
            .map(|e| e.seq)
            .collect()
    };
    assert_eq!(seqs(&ours), [1, 2, 3]);
    assert_eq!(seqs(&theirs), [1]);
    let mut last = std::collections::BTreeMap::new();
    assert_eq!(anchor_root(&fx.audit, &mut last, T0).unwrap(), Some(1));
    // Nothing moved: nothing to anchor.
    assert_eq!(anchor_root(&fx.audit, &mut last, T0).unwrap(), None);
    let lines: Vec<String> = fx.audit.entries().into_iter().map(|e| e.line).collect();
    assert_eq!(verify_chain(lines.iter().map(String::as_str)), Ok(5));
    let root: Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    assert_eq!(root["shard"], ROOT_SHARD);
    assert_eq!(root["heads"][&ours]["seq"], 3);
    assert_eq!(root["heads"][&theirs]["seq"], 1);
    // The server's last line cut away: its chain still verifies, its anchor does not.
    let mut cut = lines.clone();
    cut.remove(3);
    assert_eq!(
        verify_chain(cut.iter().map(String::as_str)),
        Err(ChainBreak::Cut(3))
    );
    // A new round moves one head: the next anchor names only it.
    fx.register_tool(5);
    fx.round(5, input_required(json!({"a": form("A")})));
    assert_eq!(anchor_root(&fx.audit, &mut last, T0).unwrap(), Some(2));
    let root: Value = serde_json::from_str(&fx.audit.entries().last().unwrap().line).unwrap();
    assert_eq!(
        root["heads"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        [&ours]
    );
    // A sink that lost lines the root anchored: the next anchor says so, and writes nothing.
    assert!(fx.audit.lose_newest().is_some()); // the root line
    assert!(fx.audit.lose_newest().is_some()); // round 5's received
    fx.register_tool(6);
    assert!(anchor_root(&fx.audit, &mut last, T0).is_err());
}

/// A writer that anchored nothing yet (another process, or this one started again) starts from
/// the heads the root's newest line anchored: it anchors nothing new, and a shard cut below that
/// anchor is a loss it reports.
#[test]
fn a_new_root_writer_starts_from_the_newest_anchor() {
    use mrtr_gate_core::audit::anchor_root;
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, input_required(json!({"a": form("A")})));
    fx.retry_ok(n(1), n(2), &json!({"a": {"action": "cancel"}}));
    assert_eq!(
        anchor_root(&fx.audit, &mut Default::default(), T0).unwrap(),
        Some(1)
    );
    assert_eq!(
        anchor_root(&fx.audit, &mut Default::default(), T0).unwrap(),
        None
    );
    // The same trail with the shard's last line cut away, the root line kept.
    let cut = MemoryAudit::new();
    let entries = fx.audit.entries();
    for e in entries
        .iter()
        .filter(|e| !(e.shard != "root" && e.seq == 3))
    {
        assert!(cut.append(e).unwrap().written);
    }
    let lost = anchor_root(&cut, &mut Default::default(), T0).unwrap_err();
    assert!(
        lost.message.contains("lost lines the root anchored"),
        "{lost:?}"
    );
    assert_eq!(cut.entries().len(), entries.len() - 1, "nothing written");
}

#[test]
fn tampered_audit_chain_is_detected() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, input_required(json!({"a": form("A")})));
    fx.retry_ok(n(1), n(2), &json!({"a": {"action": "cancel"}}));
    let lines: Vec<String> = fx.audit.entries().into_iter().map(|e| e.line).collect();
    assert_eq!(verify_chain(lines.iter().map(String::as_str)), Ok(3));
    let mut dropped = lines.clone();
    dropped.remove(1);
    assert!(verify_chain(dropped.iter().map(String::as_str)).is_err());
    let mut edited = lines.clone();
    edited[0] = edited[0].replace("\"received\"", "\"rejected\"");
    assert!(verify_chain(edited.iter().map(String::as_str)).is_err());
    let mut swapped = lines;
    swapped.swap(1, 2);
    assert!(verify_chain(swapped.iter().map(String::as_str)).is_err());
}

/// Canaries planted in every secret-bearing place must never reach an audit line.
#[test]
fn canary_secrets_never_reach_the_audit_trail() {
    const STATE: &str = "CANARY-STATE-91ab7e";
    const STATE2: &str = "CANARY-STATE2-0c44d1";
    const FORM_VALUE: &str = "CANARY-FORM-55cd02";
    const URL_TOKEN: &str = "CANARY-URL-3e8f6a";
    const URL_FRAGMENT: &str = "CANARY-FRAG-aa17";
    const ARG: &str = "CANARY-ARG-7f3a9c";
    const ARG_KEY: &str = "CANARY_ARGKEY_6612";
    const SAMPLED: &str = "CANARY-SAMPLED-cafe";
    const ROOT: &str = "CANARY-ROOT-beef";
    const RES_QUERY: &str = "CANARY-RESQUERY-9090";
    let canaries = [
        STATE,
        STATE2,
        FORM_VALUE,
        URL_TOKEN,
        URL_FRAGMENT,
        ARG,
        ARG_KEY,
        SAMPLED,
        ROOT,
        RES_QUERY,
        USER,
        TENANT,
    ];

    let mut fx = Fx::new();
    let policy = Policy {
        allowed_deprecated: vec![
            DeprecatedMethod::RootsList,
            DeprecatedMethod::SamplingCreateMessage,
        ],
        ..Policy::default()
    };
    let params = tool_params_caps(
        "get_weather",
        json!({"api_key": ARG, ARG_KEY: {"nested": [ARG]}}),
        all_caps(),
    );
    fx.register(n(1), &params, policy).unwrap();

    // Round 1: form + url + state; some wrong answers first (denials are audited too).
    let url = format!("https://auth.example.com/cb?token={URL_TOKEN}#{URL_FRAGMENT}");
    fx.round(
        1,
        input_required_state(json!({"f": form("F"), "u": url_request(&url)}), STATE),
    );
    let good = json!({"f": accept_with(json!({"login": FORM_VALUE, "count": 2})), "u": {"action": "accept"}});
    let bad_schema = json!({"f": accept_with(json!({"login": FORM_VALUE, "count": "NaN"})), "u": {"action": "accept"}});
    let bad_extra = json!({"f": accept_with(json!({"login": FORM_VALUE, FORM_VALUE: 1})), "u": {"action": "accept"}});
    assert_code(
        fx.retry(n(1), n(2), &bad_schema),
        "input_response_schema_mismatch",
    );
    assert_code(
        fx.retry(n(1), n(2), &bad_extra),
        "input_response_schema_mismatch",
    );
    let mut cross = retry_request(n(1), n(2), &good);
    cross.user = format!("{USER}-other");
    assert_code(
        fx.gate.build_retry(cross),
        "mrtr_identity_or_argument_mismatch",
    );
    fx.consent.push(ScriptedAnswer::Refuse);
    assert_code(fx.retry(n(1), n(2), &good), "consent_refused");
    let r1 = fx.retry_ok(n(1), n(2), &good);
    assert!(
        r1.request_json.contains(STATE)
            && r1.request_json.contains(FORM_VALUE)
            && r1.request_json.contains(ARG)
    );

    // Round 2: roots + sampling + another state.
    fx.round(
        2,
        input_required_state(
            json!({"r": roots_request(), "s": sampling_request(false)}),
            STATE2,
        ),
    );
    let answers = json!({
        "r": {"roots": [{"uri": format!("file:///home/{ROOT}"), "name": ROOT}]},
        "s": {"role": "assistant", "content": {"type": "text", "text": SAMPLED}, "model": "m"}
    });
    fx.retry_ok(n(2), n(3), &answers);
    // A replay of round 1 carrying the secrets, and an unsafe url carrying one.
    assert_code(
        fx.accept(
            1,
            input_required_state(json!({"u": url_request(&url)}), STATE),
        ),
        "no_live_request",
    );
    assert_code(
        fx.accept(
            3,
            input_required_state(
                json!({"u": url_request(&format!("http://x.example.com/?t={URL_TOKEN}"))}),
                STATE2,
            ),
        ),
        "unsafe_url_elicitation",
    );

    // A resource whose URI carries a secret query.
    let r = Registration {
        method: "resources/read".into(),
        ..registration(
            n(20),
            &json!({"_meta": meta(), "uri": format!("https://files.example.com/d?sig={RES_QUERY}")}),
            Policy::default(),
        )
    };
    fx.gate.register(r).unwrap();
    fx.round(20, state_only(STATE));
    fx.retry_ok(n(20), n(21), &json!({}));
    fx.clock.advance(Policy::default().round_trip_lifetime_ms);
    fx.gate.expire_stale().unwrap();

    let entries = fx.audit.entries();
    assert!(
        entries.len() >= 15,
        "the flow wrote {} events",
        entries.len()
    );
    for entry in &entries {
        for canary in canaries {
            assert!(
                !entry.line.contains(canary),
                "audit line leaks `{canary}`: {}",
                entry.line
            );
        }
    }
    verify_chain(entries.iter().map(|e| e.line.as_str())).unwrap();
}

/// A `resources/read` URI with userinfo must never reach an audit event's `name` with its
/// password (the redaction keeps scheme, host and port only). Found by this test.
#[test]
fn resource_uri_userinfo_never_reaches_the_audit_trail() {
    const PASSWORD: &str = "CANARY-PASSWORD-4242";
    let mut fx = Fx::new();
    let r = Registration {
        method: "resources/read".into(),
        ..registration(
            n(1),
            &json!({"_meta": meta(), "uri": format!("https://bob:{PASSWORD}@files.example.com/doc")}),
            Policy::default(),
        )
    };
    fx.gate.register(r).unwrap();
    fx.round(1, state_only("s"));
    for entry in fx.audit.entries() {
        assert!(
            !entry.line.contains(PASSWORD),
            "audit line leaks the uri password: {}",
            entry.line
        );
    }
}

/// A user who takes `ms` to decide, then grants: the clock moves while the prompt is open.
struct SlowUser {
    clock: Arc<ManualClock>,
    ms: u64,
    inner: ScriptedConsent,
}

impl mrtr_gate_core::host::Consent for SlowUser {
    fn request_consent(
        &self,
        prompt: &mrtr_gate_core::host::ConsentPrompt,
    ) -> Result<mrtr_gate_core::host::ConsentReceipt, HostError> {
        self.clock.advance(self.ms);
        self.inner.request_consent(prompt)
    }
}

type SlowUserGate = Gate<Services<Arc<ManualClock>, MemoryStorage, SlowUser, MemoryAudit>>;

fn slow_user_gate(ms: u64) -> (SlowUserGate, MemoryAudit) {
    let clock = Arc::new(ManualClock::new(T0));
    let audit = MemoryAudit::new();
    let gate = Gate::new(Services {
        clock: clock.clone(),
        storage: MemoryStorage::new(clock.clone()),
        consent: SlowUser {
            clock,
            ms,
            inner: ScriptedConsent::new(ScriptedAnswer::Grant),
        },
        audit: audit.clone(),
    });
    (gate, audit)
}

/// Register 1, open a form round, and answer it through a user who takes `ms` to decide.
fn slow_user_round(
    ms: u64,
) -> (
    SlowUserGate,
    MemoryAudit,
    Result<mrtr_gate_core::Retry, mrtr_gate_core::Denial>,
) {
    let (mut gate, audit) = slow_user_gate(ms);
    gate.register(registration(
        n(1),
        &tool_params("t", json!({})),
        Policy::default(),
    ))
    .unwrap();
    assert!(matches!(
        gate.accept_response(
            &server(),
            &response(1, input_required(json!({"who": form("Who?")})))
        ),
        Ok(ResponseVerdict::InputRequired(_))
    ));
    let retry = gate.build_retry(retry_request(
        n(1),
        n(2),
        &json!({"who": accept_with(form_content())}),
    ));
    (gate, audit, retry)
}

#[test]
fn a_binding_that_expires_while_the_user_decides_sends_no_retry() {
    let lifetime = Policy::default().round_trip_lifetime_ms;
    let (mut gate, audit, retry) = slow_user_round(lifetime + 1);
    assert_code(retry, "inactive_mrtr_round");
    // The consent was given and is on record, then the retry was refused; id 2 was given back.
    let events = audit.events();
    assert_eq!(kinds(&events), ["received", "consented", "rejected"]);
    assert_eq!(events[2]["reason"], "inactive_mrtr_round");
    assert!(
        events[1]["at_ms"].as_u64() > events[0]["at_ms"].as_u64(),
        "consent time is after the wait"
    );
    assert!(verify_chain(audit.entries().iter().map(|e| e.line.as_str())).is_ok());
    assert!(
        gate.register(registration(
            n(2),
            &tool_params("t", json!({})),
            Policy::default()
        ))
        .is_ok(),
        "the retry id was released"
    );
}

#[test]
fn a_user_who_decides_in_time_gets_the_retry_and_the_consent_is_stamped_when_given() {
    let (_gate, audit, retry) = slow_user_round(30_000);
    assert!(retry.is_ok());
    let events = audit.events();
    assert_eq!(kinds(&events), ["received", "consented", "submitted"]);
    assert_eq!(events[1]["at_ms"].as_u64(), Some(T0 + 30_000));
    assert_eq!(events[2]["at_ms"].as_u64(), Some(T0 + 30_000));
}

/// F4 (docs/checker-counterexamples.md): an id may be registered again once its binding
/// ended, so every event names which binding of the id it is about (`binding`: the record's
/// version at registration, which its consent views carry too); an event of a binding that
/// ended before any round names it as well.
#[test]
fn every_event_names_its_binding_and_an_id_registered_again_is_another_binding() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    let first = fx.round(1, input_required_state(json!({"f": form("F")}), "S"));
    fx.retry_ok(n(1), n(2), &json!({"f": {"action": "cancel"}}));
    fx.accept(2, complete()).unwrap();
    // Again, ended by the caller before any round: nothing to audit.
    fx.register_tool(1);
    fx.gate
        .finish(finish_request(n(1), CallerOutcome::Cancelled))
        .unwrap();
    // Again, its first response refused: the refusal and the end name the binding.
    fx.register_tool(1);
    let bogus = input_required(json!({"x": {"method": "bogus/method", "params": {}}}));
    assert!(fx.accept(1, bogus).is_err());
    // And a third time, through another instance of the gate: still open.
    fx.register_tool(1);
    let mut other = fx.second_gate();
    let third = match other.accept_response(&server(), &response(1, state_only("T"))) {
        Ok(ResponseVerdict::InputRequired(v)) => v,
        other => panic!("{other:?}"),
    };
    let events = fx.events_of(1);
    assert_eq!(
        kinds(&events),
        [
            "received",
            "consented",
            "submitted",
            "terminal",
            "rejected",
            "terminal",
            "received"
        ]
    );
    let named: Vec<u64> = events
        .iter()
        .map(|e| {
            e["binding"]
                .as_u64()
                .unwrap_or_else(|| panic!("no binding in {e}"))
        })
        .collect();
    let view_of = |v: &mrtr_gate_core::AcceptedRound| {
        parse(&v.view_json)["request"]["binding_version"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(&named[..4], [view_of(&first); 4]);
    assert_eq!(named[4], named[5]);
    assert_eq!(named[6], view_of(&third));
    let mut distinct = vec![named[0], named[4], named[6]];
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "three bindings of one id: {named:?}");
    fx.assert_reconciles();
    assert_eq!(
        fx.reconciled().bindings,
        2,
        "two of the three received a round"
    );
}
