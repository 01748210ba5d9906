//! The round limit of a binding.

use crate::common::*;
use crate::flows::support::*;
use mrtr_gate_core::Policy;
use serde_json::json;

#[test]
fn rounds_up_to_the_limit_then_refused_and_binding_gone() {
    let mut fx = Fx::new();
    let policy = Policy {
        max_rounds: 3,
        ..Policy::default()
    };
    fx.register(n(1), &tool_params("t", json!({})), policy)
        .unwrap();
    for round in 1..=3 {
        let id = round as i64;
        let view = fx.round(
            id,
            input_required_state(json!({"a": form("A")}), &format!("state-{round}")),
        );
        assert_eq!(view.round, round);
        assert_eq!(parse(&view.view_json)["max_rounds"], 3);
        let r = fx.retry_ok(n(id), n(id + 1), &json!({"a": {"action": "decline"}}));
        assert_eq!(r.round, round);
    }
    let d = assert_code(fx.accept(4, state_only("state-4")), "round_limit_exceeded");
    assert!(d.audited);
    // The binding is gone.
    assert_code(fx.retry(n(4), n(5), &json!({})), "inactive_mrtr_round");
    assert_code(fx.accept(4, complete()), "no_live_request");
    let t = terminal_of(&fx, 1);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0]["outcome"], "error");
    assert_eq!(t[0]["reason"], "round_limit_exceeded");
    assert_eq!(
        fx.events_of(1)
            .iter()
            .filter(|e| e["event"] == "received")
            .count(),
        3
    );
    assert!(fx.storage.is_empty());
    fx.assert_chain();
}

#[test]
fn one_round_policy_allows_exactly_one() {
    let mut fx = Fx::new();
    let policy = Policy {
        max_rounds: 1,
        ..Policy::default()
    };
    fx.register(n(1), &tool_params("t", json!({})), policy)
        .unwrap();
    fx.round(1, state_only("a"));
    fx.retry_ok(n(1), n(2), &json!({}));
    assert_code(fx.accept(2, state_only("b")), "round_limit_exceeded");
}

/// The hard round cap is inclusive, end to end: a policy at `MAX_ROUNDS` registers and gets
/// exactly that many rounds; one over the cap is refused at registration, unaudited and
/// unstored (a policy may tighten the caps, never lift them).
#[test]
fn a_policy_at_the_round_cap_gets_every_round_and_one_over_the_cap_is_refused() {
    use mrtr_gate_core::{ErrorCause, limits::MAX_ROUNDS};
    let mut fx = Fx::new();
    let over = Policy {
        max_rounds: MAX_ROUNDS + 1,
        ..Policy::default()
    };
    let d = assert_code(
        fx.register(n(1), &tool_params("t", json!({})), over),
        "invalid_policy",
    );
    assert_eq!(d.error.cause(), ErrorCause::Caller);
    assert!(!d.audited);
    assert!(fx.events().is_empty());
    assert!(fx.storage.is_empty());

    let at_cap = Policy {
        max_rounds: MAX_ROUNDS,
        ..Policy::default()
    };
    fx.register(n(1), &tool_params("t", json!({})), at_cap)
        .unwrap();
    let last = i64::from(MAX_ROUNDS);
    for id in 1..=last {
        let view = fx.round(id, state_only(&format!("state-{id}")));
        assert_eq!(i64::from(view.round), id);
        assert_eq!(parse(&view.view_json)["max_rounds"], MAX_ROUNDS);
        fx.retry_ok(n(id), n(id + 1), &json!({}));
    }
    assert_code(
        fx.accept(last + 1, state_only("one-too-many")),
        "round_limit_exceeded",
    );
    assert_eq!(terminal_of(&fx, 1).len(), 1);
    fx.assert_chain();
}
