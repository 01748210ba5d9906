//! `refuse-unbound`: a relay (`mrtr-gate proxy`) refuses a message that asks for, or gives,
//! input outside every round the gate holds: a 2025-era server's own `elicitation/create`,
//! `sampling/createMessage` or `roots/list` request, an answer to an ungated request (or a
//! notification) that carries a round's `inputRequests`, a client's `inputResponses` with no
//! round behind them. No binding judges such a message, so without this export its refusal
//! would be the one thing the trail never saw; the gate writes it like every other refusal.

use super::Gate;
use super::api::Unbound;
use crate::audit::{Event, EventKind, Field};
use crate::error::{CallerMisuse, Denial, GateError, PeerMisbehaved};
use crate::host::Host;
use crate::ids::ServerIdentity;
use crate::json::quoted;

/// The server-to-client requests the trail names by method; any other method is recorded as
/// `null` (a server's free text never reaches the trail).
pub const LEGACY_SERVER_REQUESTS: [&str; 3] =
    ["elicitation/create", "sampling/createMessage", "roots/list"];

impl Unbound {
    /// The denial the gate gives for this refusal (one mapping: a host that refuses without
    /// a gate, such as a benchmark's stand-in, gives the same).
    pub fn error(&self) -> GateError {
        match self {
            Self::ServerRequest(method) => {
                PeerMisbehaved::ServerSentLegacyRequest(quoted(method)).into()
            }
            Self::InputRequired => PeerMisbehaved::ServerAnsweredUnboundWithInputRequired.into(),
            Self::InputRequestsNotified => PeerMisbehaved::ServerNotifiedInputRequests.into(),
            Self::InputResponses => CallerMisuse::InputResponsesNotBound.into(),
        }
    }
}

impl<H: Host> Gate<H> {
    pub(super) fn refuse(
        &mut self,
        server: &ServerIdentity,
        user: &str,
        tenant: &str,
        refusal: &Unbound,
    ) -> Denial {
        if let Err(e) = self.begin_call() {
            return Denial::unaudited(e);
        }
        let error = refusal.error();
        let digests = self.principals.server(server);
        let mut event = Event::new(EventKind::Rejected, digests.key)
            .set_raw(Field::Server, digests.audited)
            .set(Field::UserSha256, self.principals.user(user))
            .set(Field::TenantSha256, self.principals.tenant(tenant));
        if let Unbound::ServerRequest(method) = refusal
            && let Some(known) = LEGACY_SERVER_REQUESTS.iter().find(|m| **m == method)
        {
            event = event.set_str(Field::Method, known);
        }
        self.deny(error, event)
    }
}
