//! What a transport that sees each exchange on its own (HTTP: one POST, one answer) needs of
//! the engine beyond the message-at-a-time calls: ending one call whose answer could not be
//! read, and asking whether a call's round is still open. Added for the HTTP endpoint; the
//! engine's own flow is untouched.

use super::{Action, Engine};
use crate::errors::Refusal;
use crate::trace::Outcome;
use mrtr_gate_host::GateApi;
use mrtr_gate_host::core::{CallerOutcome, RequestId};

impl<G: GateApi> Engine<G> {
    /// The answer to the gated call sent upstream as `upstream_id` could not be taken (the
    /// upstream failed, or sent what the transport refuses before the gate sees it): the
    /// binding ends with `refusal`'s code, and the refusal under the client's id is what the
    /// client gets. `None`: no such call is in flight (it was abandoned or answered).
    pub fn on_upstream_failed(&mut self, upstream_id: &RequestId, refusal: &Refusal) -> Action {
        let Some(call) = self.in_flight.remove(upstream_id) else {
            return Action::Drop("a failure of no gated request in flight");
        };
        self.end(
            upstream_id,
            &call,
            CallerOutcome::Error(refusal.code.clone()),
        );
        call.trace.end(Outcome::Failed, Some(&refusal.code));
        crate::metrics::global().ended(crate::metrics::Ended::Failed);
        self.gauges();
        Action::ToClient(refusal.response(&call.client_id))
    }

    /// Whether the call sent upstream as `upstream_id` holds an accepted round the client
    /// may still answer.
    pub fn is_open(&self, upstream_id: &RequestId) -> bool {
        self.open_rounds.contains_key(upstream_id)
    }
}
