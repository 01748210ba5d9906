//! `refuse-server-request`: a 2025-era server sends `elicitation/create`,
//! `sampling/createMessage` or `roots/list` as a request of its own, outside any round. A relay
//! whose client never registered anything for it (`mrtr-gate proxy`) refuses it; the gate
//! writes the refusal to the trail, so a server asking outside the MRTR rounds is on record
//! like every other refusal.

use super::Gate;
use crate::audit::{Event, EventKind, Field};
use crate::error::{Denial, GateError, PeerMisbehaved};
use crate::host::Host;
use crate::ids::ServerIdentity;
use crate::json::quoted;

/// The server-to-client requests the trail names by method; any other method is recorded as
/// `null` (a server's free text never reaches the trail).
pub const LEGACY_SERVER_REQUESTS: [&str; 3] =
    ["elicitation/create", "sampling/createMessage", "roots/list"];

impl<H: Host> Gate<H> {
    pub(super) fn refuse_legacy(
        &mut self,
        server: &ServerIdentity,
        user: &str,
        tenant: &str,
        method: &str,
    ) -> Denial {
        if let Err(e) = self.begin_call() {
            return Denial::unaudited(e);
        }
        let error = GateError::from(PeerMisbehaved::ServerSentLegacyRequest(quoted(method)));
        let mut event = Event::new(EventKind::Rejected)
            .set_raw(Field::Server, self.principals.server(server).audited)
            .set(Field::UserSha256, self.principals.user(user))
            .set(Field::TenantSha256, self.principals.tenant(tenant));
        if let Some(known) = LEGACY_SERVER_REQUESTS.iter().find(|m| **m == method) {
            event = event.set_str(Field::Method, known);
        }
        self.deny(error, event)
    }
}
