//! Storage faults (lost compare-and-swap, failing store), and two gate instances over one store.

use crate::common::*;
use crate::flows::support::*;
use mrtr_gate_core::{CallerOutcome, Policy, ResponseVerdict, TerminalOutcome};
use serde_json::{Value, json};

#[test]
fn lost_compare_and_swap_is_refused_everywhere() {
    let mut fx = Fx::new();
    // Register: the id reservation loses.
    fx.storage.set_losing_cas(true);
    assert_code(
        fx.register(n(1), &tool_params("t", json!({})), Policy::default()),
        "request_id_in_use",
    );
    fx.storage.set_losing_cas(false);
    assert!(fx.storage.is_empty());

    // Accept: opening the round loses.
    fx.register_tool(1);
    fx.storage.set_losing_cas(true);
    let d = assert_code(fx.accept(1, state_only("s")), "state_already_used");
    assert!(d.audited);
    fx.storage.set_losing_cas(false);
    // The binding is as it was: the same round can be accepted now.
    fx.round(1, state_only("s"));

    // Retry: reserving the retry id loses (reported as a retry id that is not new).
    fx.storage.set_losing_cas(true);
    assert_code(
        fx.retry(n(1), n(2), &json!({})),
        "retry_requires_new_jsonrpc_id",
    );
    fx.storage.set_losing_cas(false);
    // Nothing was consumed.
    fx.retry_ok(n(1), n(2), &json!({}));

    // Finish: removing the binding loses.
    fx.storage.set_losing_cas(true);
    assert_code(
        fx.gate
            .finish(finish_request(n(2), CallerOutcome::Cancelled)),
        "state_already_used",
    );
    fx.storage.set_losing_cas(false);
    assert_eq!(
        fx.gate
            .finish(finish_request(n(2), CallerOutcome::Cancelled))
            .unwrap(),
        TerminalOutcome::Cancelled
    );
    assert_eq!(terminal_of(&fx, 1).len(), 1);
}

#[test]
fn failing_storage_is_refused() {
    let mut fx = Fx::new();
    fx.storage.set_failing(true);
    assert_code(
        fx.register(n(1), &tool_params("t", json!({})), Policy::default()),
        "storage_failed",
    );
    fx.storage.set_failing(false);
    fx.register_tool(1);
    fx.storage.set_failing(true);
    assert_code(fx.accept(1, state_only("s")), "storage_failed");
    fx.storage.set_failing(false);
    fx.round(1, state_only("s"));
    fx.storage.set_failing(true);
    assert_code(fx.retry(n(1), n(2), &json!({})), "storage_failed");
    assert!(fx.gate.expire_stale().is_err());
    fx.storage.set_failing(false);
    fx.retry_ok(n(1), n(2), &json!({}));
}

#[test]
fn two_instances_share_bindings_and_never_both_consume_a_round() {
    let mut fx = Fx::new();
    let mut other = fx.second_gate();
    fx.register_tool(1);
    // The round arrives at the other instance.
    assert!(matches!(
        other.accept_response(
            &server(),
            &response(1, input_required_state(json!({"a": form("A")}), "S"))
        ),
        Ok(ResponseVerdict::InputRequired(_))
    ));
    let answers = json!({"a": {"action": "decline"}});
    fx.retry_ok(n(1), n(2), &answers);
    assert_code(
        other.build_retry(retry_request(n(1), n(3), &answers)),
        "inactive_mrtr_round",
    );
    // Registering an id live in the other instance is refused.
    assert_code(
        other.register(registration(
            n(2),
            &tool_params("t", json!({})),
            Policy::default(),
        )),
        "request_id_in_use",
    );
    assert_eq!(
        other
            .accept_response(&server(), &response(2, complete()))
            .unwrap(),
        ResponseVerdict::Complete
    );
    // Both instances wrote to one chain.
    fx.assert_chain();
    // The late second retry was denied (and audited as such); one round, one submission.
    assert_eq!(
        kinds(&fx.events_of(1)),
        ["received", "consented", "submitted", "rejected", "terminal"]
    );
    let rejected = &fx.events_of(1)[3];
    assert_eq!(rejected["reason"], "inactive_mrtr_round");
    assert_eq!(rejected["retry_id"], 3);
}

/// A user whose consent prompt stays open while another gate instance retries the same
/// round: the other instance's `build_retry` runs inside this one's prompt.
struct RacingUser {
    rival: std::cell::RefCell<Option<(TestGate, mrtr_gate_core::RetryRequest)>>,
    rival_got: std::cell::RefCell<Option<Result<mrtr_gate_core::Retry, mrtr_gate_core::Denial>>>,
    inner: mrtr_gate_core::memory::ScriptedConsent,
}

impl mrtr_gate_core::host::Consent for RacingUser {
    fn request_consent(
        &self,
        prompt: &mrtr_gate_core::host::ConsentPrompt,
    ) -> Result<mrtr_gate_core::host::ConsentReceipt, mrtr_gate_core::host::HostError> {
        if let Some((mut rival, request)) = self.rival.borrow_mut().take() {
            *self.rival_got.borrow_mut() = Some(rival.build_retry(request));
        }
        self.inner.request_consent(prompt)
    }
}

#[test]
fn a_round_retried_by_two_instances_at_once_yields_exactly_one_retry() {
    use mrtr_gate_core::Gate;
    use mrtr_gate_core::host::Services;
    let fx = Fx::new();
    let mut a = Gate::new(Services {
        clock: fx.clock.clone(),
        storage: fx.storage.clone(),
        consent: RacingUser {
            rival: std::cell::RefCell::new(None),
            rival_got: std::cell::RefCell::new(None),
            inner: fx.consent.clone(),
        },
        audit: fx.audit.clone(),
    });
    a.register(registration(
        n(1),
        &tool_params("t", json!({})),
        Policy::default(),
    ))
    .unwrap();
    a.accept_response(
        &server(),
        &response(1, input_required(json!({"a": form("A")}))),
    )
    .unwrap();
    let answers = json!({"a": accept_with(form_content())});
    // B retries the same round (with its own new id) while A's user is deciding.
    *a.host().consent.rival.borrow_mut() =
        Some((fx.second_gate(), retry_request(n(1), n(3), &answers)));
    let a_got = a.build_retry(retry_request(n(1), n(2), &answers));
    let b_got = a.host().consent.rival_got.borrow_mut().take().unwrap();
    // B was first to consume the round; A lost the compare-and-swap and sends nothing.
    let b_retry = b_got.unwrap();
    assert_eq!(parse(&b_retry.request_json)["id"], 3);
    assert_code(a_got, "state_already_used");
    let submitted = fx
        .events()
        .iter()
        .filter(|e| e["event"] == "submitted")
        .count();
    assert_eq!(submitted, 1, "exactly one `submitted` event");
    // The loser's reserved id was given back; the winner's is live.
    assert_code(
        fx.second_gate().register(registration(
            n(3),
            &tool_params("t", json!({})),
            Policy::default(),
        )),
        "request_id_in_use",
    );
    fx.second_gate()
        .register(registration(
            n(2),
            &tool_params("t", json!({})),
            Policy::default(),
        ))
        .unwrap();
    fx.assert_chain();
}

/// An audit sink that lets a rival process act just before the first `submitted` event is
/// offered: the rival's event then moves the head the retry's append was built on.
/// A sink that runs `rival` (once) around the first line of `event` it is offered: before
/// the line is offered to the real sink, or right after the real sink took it.
struct RivalBefore {
    event: std::cell::Cell<&'static str>,
    after: std::cell::Cell<bool>,
    rival: std::cell::RefCell<Option<Box<dyn FnOnce()>>>,
    inner: mrtr_gate_core::memory::MemoryAudit,
}

impl RivalBefore {
    fn arm(&self, event: &'static str, after: bool, rival: impl FnOnce() + 'static) {
        self.event.set(event);
        self.after.set(after);
        *self.rival.borrow_mut() = Some(Box::new(rival));
    }
}

impl mrtr_gate_core::host::Audit for RivalBefore {
    fn append(
        &self,
        entry: &mrtr_gate_core::host::AuditEntry,
    ) -> Result<mrtr_gate_core::host::AppendOutcome, mrtr_gate_core::host::HostError> {
        let ours = entry
            .line
            .contains(&format!("\"event\":\"{}\"", self.event.get()));
        let rival = if ours {
            self.rival.borrow_mut().take()
        } else {
            None
        };
        let Some(rival) = rival else {
            return self.inner.append(entry);
        };
        if self.after.get() {
            let appended = self.inner.append(entry);
            rival();
            appended
        } else {
            rival();
            self.inner.append(entry)
        }
    }
}

/// Instance A of `fx`, whose sink runs a rival (armed later: `RivalBefore::arm`) around one
/// of A's events, with request 1 registered and its form round open.
fn gate_with_a_round_before_a_rival(
    fx: &Fx,
) -> mrtr_gate_core::Gate<
    mrtr_gate_core::host::Services<
        std::sync::Arc<mrtr_gate_core::memory::ManualClock>,
        mrtr_gate_core::memory::MemoryStorage,
        mrtr_gate_core::memory::ScriptedConsent,
        RivalBefore,
    >,
> {
    use mrtr_gate_core::Gate;
    use mrtr_gate_core::host::Services;
    let mut a = Gate::new(Services {
        clock: fx.clock.clone(),
        storage: fx.storage.clone(),
        consent: fx.consent.clone(),
        audit: RivalBefore {
            event: std::cell::Cell::new("submitted"),
            after: std::cell::Cell::new(false),
            rival: std::cell::RefCell::new(None),
            inner: fx.audit.clone(),
        },
    });
    a.register(registration(
        n(1),
        &tool_params("t", json!({})),
        Policy::default(),
    ))
    .unwrap();
    a.accept_response(
        &server(),
        &response(1, input_required(json!({"a": form("A")}))),
    )
    .unwrap();
    a
}

/// Finding F1 (docs/checker-counterexamples.md) without the checker: instance A consumes the
/// round, and before its `submitted` event is written instance B ends the binding (`end`
/// says how). A must send nothing and audit nothing of the retry after B's `terminal`.
fn a_retry_ended_while_auditing(
    end: impl FnOnce(&mrtr_gate_core::memory::ManualClock, TestGate) + 'static,
) -> (Fx, Vec<Value>) {
    let fx = Fx::new();
    let mut a = gate_with_a_round_before_a_rival(&fx);
    let b = fx.second_gate();
    let clock = fx.clock.clone();
    a.host()
        .audit
        .arm("submitted", false, move || end(&clock, b));
    let answers = json!({"a": accept_with(form_content())});
    let got = a.build_retry(retry_request(n(1), n(2), &answers));
    assert_code(got, "inactive_mrtr_round");
    let events = fx.events();
    (fx, events)
}

fn assert_ended_without_submitted(fx: &Fx, events: &[Value], outcome: &str) {
    assert_eq!(
        kinds(events),
        ["received", "consented", "terminal", "rejected"],
        "{events:?}"
    );
    assert_eq!(events[2]["outcome"], outcome);
    assert_eq!(events[3]["reason"], "inactive_mrtr_round");
    fx.assert_reconciles();
    // Nothing is left: the retry id's pointer went with the binding.
    assert!(fx.storage.is_empty());
}

#[test]
fn a_retry_whose_binding_is_cancelled_before_its_submitted_event_sends_nothing() {
    let (fx, events) = a_retry_ended_while_auditing(|_, mut b| {
        let ended = b.finish(finish_request(n(1), CallerOutcome::Cancelled));
        assert_eq!(ended.unwrap(), TerminalOutcome::Cancelled);
    });
    assert_ended_without_submitted(&fx, &events, "cancelled");
}

#[test]
fn a_retry_whose_binding_expires_before_its_submitted_event_sends_nothing() {
    let (fx, events) = a_retry_ended_while_auditing(|clock, mut b| {
        clock.advance(5 * 60 * 1000 + 1_000);
        assert_eq!(b.expire_stale().unwrap(), 1);
    });
    assert_ended_without_submitted(&fx, &events, "expired");
}

/// Finding F3 (docs/checker-counterexamples.md) without the checker: instance A has handed
/// out the retry for round 1 and takes the server's next round; instance B cancels the call
/// around A's `received` event (`after`: once the sink took it, else just before). Returns
/// A's verdict and the trail.
fn a_round_received_while_cancelled(
    after: bool,
) -> (Fx, Result<ResponseVerdict, mrtr_gate_core::Denial>) {
    let fx = Fx::new();
    let mut a = gate_with_a_round_before_a_rival(&fx);
    let answers = json!({"a": accept_with(form_content())});
    a.build_retry(retry_request(n(1), n(2), &answers)).unwrap();
    let mut b = fx.second_gate();
    a.host().audit.arm("received", after, move || {
        let ended = b.finish(finish_request(n(1), CallerOutcome::Cancelled));
        assert_eq!(ended.unwrap(), TerminalOutcome::Cancelled);
    });
    let got = a.accept_response(&server(), &response(2, state_only("s2")));
    (fx, got)
}

/// Ended before A's `received` lands: A reads its record again when the sink refuses the
/// line on the old head, finds it gone, and audits no round after the `terminal`.
#[test]
fn a_round_whose_binding_is_cancelled_before_its_received_event_is_not_audited_after_the_end() {
    let (fx, got) = a_round_received_while_cancelled(false);
    assert_code(got, "no_live_request");
    assert_eq!(
        kinds(&fx.events()),
        ["received", "consented", "submitted", "terminal", "rejected"]
    );
    fx.assert_reconciles();
    assert!(fx.storage.is_empty());
}

/// Ended after A's `received` landed and before A stores the round: A's store finds the
/// record gone and audits the refusal; the `terminal` names round 1, the round B removed,
/// and the refusal of round 2 is what explains it to `reconcile`.
#[test]
fn a_round_whose_binding_is_cancelled_after_its_received_event_is_refused_and_reconciles() {
    let (fx, got) = a_round_received_while_cancelled(true);
    assert_code(got, "state_already_used");
    let events = fx.events();
    assert_eq!(
        kinds(&events),
        [
            "received",
            "consented",
            "submitted",
            "received",
            "terminal",
            "rejected"
        ]
    );
    assert_eq!(
        (
            &events[3]["round"],
            &events[4]["round"],
            &events[5]["round"]
        ),
        (&json!(2), &json!(1), &json!(2))
    );
    fx.assert_reconciles();
    assert!(fx.storage.is_empty());
}

/// Finding F2 (docs/checker-counterexamples.md): between the consume and the `submitted`
/// event, the retry id is the binding's live id but nobody has sent it. A response for it
/// then, at another instance, answers a request not sent: refused, so the next round's
/// `received` can never come before this round's `submitted`.
#[test]
fn a_response_for_a_retry_not_yet_handed_out_is_refused_at_every_instance() {
    let fx = Fx::new();
    let mut a = gate_with_a_round_before_a_rival(&fx);
    let early = std::rc::Rc::new(std::cell::RefCell::new(None));
    let seen = std::rc::Rc::clone(&early);
    let mut b = fx.second_gate();
    a.host().audit.arm("submitted", false, move || {
        let got = b.accept_response(&server(), &response(2, state_only("s2")));
        *seen.borrow_mut() = Some(got);
    });
    let answers = json!({"a": accept_with(form_content())});
    let retry = a.build_retry(retry_request(n(1), n(2), &answers)).unwrap();
    assert_eq!(parse(&retry.request_json)["id"], 2);
    let early = early.borrow_mut().take().unwrap();
    assert_code(early, "no_live_request");
    // Once handed out, the response is taken at any instance.
    let verdict = fx
        .second_gate()
        .accept_response(&server(), &response(2, state_only("s2")))
        .unwrap();
    assert!(matches!(verdict, ResponseVerdict::InputRequired(_)));
    assert_eq!(
        kinds(&fx.events()),
        ["received", "consented", "rejected", "submitted", "received"]
    );
    fx.assert_reconciles();
}

#[test]
fn a_retry_whose_consuming_compare_and_swap_loses_sends_nothing() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, input_required(json!({"a": form("A")})));
    let answers = json!({"a": accept_with(form_content())});
    // build_retry's compare-and-swaps: reserve the retry id (applies), consume the round
    // (loses, as if another instance had consumed it between the read and the write).
    fx.storage.lose_cas_after(1);
    let d = assert_code(fx.retry(n(1), n(2), &answers), "state_already_used");
    assert!(d.audited);
    let events = fx.events();
    assert_eq!(
        events.iter().filter(|e| e["event"] == "submitted").count(),
        0,
        "a lost race is never recorded as a retry"
    );
    // The round is still open (the rival in this simulation does not exist) and the retry
    // id was given back: the same answers go out once, with the same id.
    let retry = fx.retry_ok(n(1), n(2), &answers);
    assert_eq!(parse(&retry.request_json)["id"], 2);
    assert_eq!(
        fx.events()
            .iter()
            .filter(|e| e["event"] == "submitted")
            .count(),
        1
    );
}

/// A store that answers a read with fewer entries than keys (a broken or hostile host).
#[derive(Clone)]
struct ShortReads(mrtr_gate_core::memory::MemoryStorage);

impl mrtr_gate_core::host::Storage for ShortReads {
    fn read(
        &self,
        keys: &[mrtr_gate_core::host::ReadKey<'_>],
    ) -> Result<Vec<mrtr_gate_core::host::Versioned>, mrtr_gate_core::host::HostError> {
        let mut found = self.0.read(keys)?;
        found.pop();
        Ok(found)
    }
    fn write(
        &self,
        writes: &[mrtr_gate_core::host::Write<'_>],
    ) -> Result<Vec<u64>, mrtr_gate_core::host::HostError> {
        self.0.write(writes)
    }
    fn list_due(
        &self,
        due_by_ms: u64,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<mrtr_gate_core::host::DuePage, mrtr_gate_core::host::HostError> {
        self.0.list_due(due_by_ms, cursor, limit)
    }
}

#[test]
fn a_store_that_answers_fewer_entries_than_keys_denies_and_is_never_read_as_absent() {
    use mrtr_gate_core::Gate;
    use mrtr_gate_core::host::Services;
    let fx = Fx::new();
    let mut gate = Gate::new(Services {
        clock: fx.clock.clone(),
        storage: ShortReads(fx.storage.clone()),
        consent: fx.consent.clone(),
        audit: fx.audit.clone(),
    });
    gate.register(registration(
        n(1),
        &tool_params("t", json!({})),
        Policy::default(),
    ))
    .unwrap();
    // A missing entry is a failure, not "no binding": `no_live_request` would let a caller
    // think the request is gone.
    let d = assert_code(
        gate.accept_response(&server(), &response(1, state_only("s"))),
        "storage_failed",
    );
    assert!(d.audited);
    // A sweep reads only what is due: one binding that is, so that the sweep reads.
    let brief = Policy {
        round_trip_lifetime_ms: 1,
        ..Policy::default()
    };
    gate.register(registration(n(2), &tool_params("t", json!({})), brief))
        .unwrap();
    fx.clock.advance(1);
    assert_code(gate.expire_stale(), "storage_failed");
    // The binding is untouched: a gate over the whole store still sees it.
    fx.second_gate()
        .accept_response(&server(), &response(1, complete()))
        .unwrap();
}

#[test]
fn expire_stale_reads_only_what_is_due_and_ends_exactly_that() {
    use mrtr_gate_core::Gate;
    use mrtr_gate_core::host::Services;
    let fx = Fx::new();
    let store = Recorded::over(fx.storage.clone());
    let mut gate = Gate::new(Services {
        clock: fx.clock.clone(),
        storage: store.clone(),
        consent: fx.consent.clone(),
        audit: fx.audit.clone(),
    });
    let short = Policy {
        round_trip_lifetime_ms: 1_000,
        ..Policy::default()
    };
    // 150 bindings that outlive the sweep, 70 that do not (more than one page of 64), five
    // of those with a retry pointer (ended with their record).
    for id in 0..150 {
        gate.register(registration(
            n(id),
            &tool_params("t", json!({})),
            Policy::default(),
        ))
        .unwrap();
    }
    for id in 1_000..1_070 {
        gate.register(registration(
            n(id),
            &tool_params("t", json!({})),
            short.clone(),
        ))
        .unwrap();
    }
    for id in 1_000..1_005 {
        gate.accept_response(&server(), &response(id, state_only("s")))
            .unwrap();
        gate.build_retry(retry_request(n(id), n(id + 10_000), &json!({})))
            .unwrap();
    }
    let live_before = fx.storage.live_keys("").len();
    fx.clock.advance(1_000);
    store.read.borrow_mut().clear();
    assert_eq!(gate.expire_stale().unwrap(), 70);
    let read = store.read.borrow().clone();
    // Only the 70 records were read, each once; none of the 150.
    let mut got: Vec<String> = read
        .iter()
        .filter_map(|k| k.rsplit('/').next().map(str::to_owned))
        .collect();
    got.sort();
    let want: Vec<String> = (1_000..1_070).map(|id| id.to_string()).collect();
    assert_eq!(got, want, "{read:?}");
    assert_eq!(store.cursors.borrow().len(), 2, "list-due pages");
    assert_eq!(fx.storage.live_keys("").len(), live_before - 75);
    // A second sweep finds nothing due and reads nothing.
    store.read.borrow_mut().clear();
    assert_eq!(gate.expire_stale().unwrap(), 0);
    assert!(store.read.borrow().is_empty());
}

/// A store whose `list-due` misbehaves in one of a few ways (a broken or hostile host).
#[derive(Clone)]
struct BadListing(mrtr_gate_core::memory::MemoryStorage, &'static str);

impl mrtr_gate_core::host::Storage for BadListing {
    fn read(
        &self,
        keys: &[mrtr_gate_core::host::ReadKey<'_>],
    ) -> Result<Vec<mrtr_gate_core::host::Versioned>, mrtr_gate_core::host::HostError> {
        self.0.read(keys)
    }
    fn write(
        &self,
        writes: &[mrtr_gate_core::host::Write<'_>],
    ) -> Result<Vec<u64>, mrtr_gate_core::host::HostError> {
        self.0.write(writes)
    }
    fn list_due(
        &self,
        due_by_ms: u64,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<mrtr_gate_core::host::DuePage, mrtr_gate_core::host::HostError> {
        let key = "mrtr-gate/v3/id/x/1".to_owned();
        match self.1 {
            "too_many" => Ok(mrtr_gate_core::host::DuePage {
                keys: vec![key; limit as usize + 1],
                next: None,
            }),
            "same_cursor" => Ok(mrtr_gate_core::host::DuePage {
                keys: Vec::new(),
                next: Some(cursor.unwrap_or("c").to_owned()),
            }),
            // Always a new cursor, never done: bounded by the gate's page limit.
            "endless" => Ok(mrtr_gate_core::host::DuePage {
                keys: Vec::new(),
                next: Some(format!("{}x", cursor.unwrap_or(""))),
            }),
            _ => self.0.list_due(due_by_ms, cursor, limit),
        }
    }
}

#[test]
fn a_store_whose_due_listing_misbehaves_is_denied_and_never_loops() {
    use mrtr_gate_core::Gate;
    use mrtr_gate_core::host::Services;
    for how in ["too_many", "same_cursor", "endless"] {
        let fx = Fx::new();
        let mut gate = Gate::new(Services {
            clock: fx.clock.clone(),
            storage: BadListing(fx.storage.clone(), how),
            consent: fx.consent.clone(),
            audit: fx.audit.clone(),
        });
        match how {
            "endless" => assert_eq!(gate.expire_stale().unwrap(), 0, "{how}"),
            _ => {
                let d = assert_code(gate.expire_stale(), "storage_failed");
                assert!(!d.audited, "{how}");
            }
        }
    }
}
