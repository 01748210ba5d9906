//! The gate: register, accept a response, build the retry, finish, expire.
//!
//! Every live binding lives in host storage ([`store`]): its record under the key of its
//! original id, and under the key of each retry id it used, a pointer to the original id
//! ([`record`]). Each server has its own key space (clients number requests per
//! connection), so reserving a key reserves the id against every live binding on that
//! server. All changes are compare-and-swap on the version read, so two gate
//! instances sharing a store can never both consume one round. The instance itself keeps
//! only memos ([`memo`]) and the audit chain head: a fresh instance loses nothing.
//!
//! Each operation has its own file: [`register`], [`accept`] (with [`round`], what a
//! server's round may hold, and [`consent_view`], what the user is shown, read back as a type
//! by [`view_model`]), [`retry`] (with [`responses`], what the answers must be, and
//! [`client_retry`], a client's own retry held to its round) and [`finish`]
//! (also expiry); how any binding ends is [`lifecycle`]; a store write made in one host call with
//! the audit line that records it is [`journal`]. A relay's refusal of a message that
//! asks for or gives input outside any round is [`unbound`].

mod accept;
mod api;
mod client_retry;
mod consent_view;
mod finish;
mod journal;
mod lifecycle;
mod memo;
mod record;
mod register;
mod responses;
mod retry;
mod round;
mod store;
mod unbound;
mod view_model;

pub use accept::URL_ELICITATION_REQUIRED;
pub use api::{
    AcceptedRound, CallerOutcome, ClientRetry, FinishRequest, Registered, Registration,
    ResponseVerdict, Retry, RetryRequest, TerminalOutcome, Unbound,
};
pub use consent_view::VIEW_FORMAT;
pub use memo::OriginMemo;
#[cfg(test)]
pub(crate) use memo::SCHEMA_CACHE_ENTRIES;
pub(crate) use memo::SchemaCache;
pub use record::ID_PREFIX;
pub use retry::canonical_responses;
pub use store::EXPIRY_GRACE_MS;
pub use unbound::LEGACY_SERVER_REQUESTS;
pub use view_model::{ConsentView, ShownArguments, ViewError, ViewInput, ViewRequest, ViewState};

use crate::audit::{ChainWriter, Event};
use crate::error::{Denial, GateError};
use crate::host::Host;
use crate::ids::RequestId;
use memo::{CallClock, PrincipalDigests};
use store::BindingStore;

/// The latest time the clock may give, in ms since the epoch: 2^53 - 1, the largest integer
/// every JSON parser and JavaScript host reads exactly.
pub const MAX_TIME_MS: u64 = (1 << 53) - 1;

/// How far the clock may read before a binding's registration and still judge it: instances
/// sharing a store on several machines differ by their clocks' skew. Beyond it the clock
/// jumped back, which would stretch the binding's lifetime by as much: deny.
pub const CLOCK_SKEW_TOLERANCE_MS: u64 = 5_000;

/// The methods that may receive `input_required`: the one allow-list of gated methods (the
/// client library routes exactly these through the gate; no host keeps a copy).
pub const MRTR_METHODS: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];

/// The gate over a host: the operations a client (or a relay for its client) calls around
/// each request.
pub struct Gate<H: Host> {
    host: H,
    chain: ChainWriter,
    store: BindingStore,
    /// Form schemas checked before ([`memo`]).
    schemas: SchemaCache,
    /// The last user, tenant and server digested ([`memo`]).
    principals: PrincipalDigests,
    /// The time of the current call ([`memo`]).
    clock: CallClock,
}

impl<H: Host> Gate<H> {
    /// A gate over `host`.
    pub fn new(host: H) -> Self {
        Self {
            host,
            chain: ChainWriter::default(),
            store: BindingStore::default(),
            schemas: SchemaCache::default(),
            principals: PrincipalDigests::default(),
            clock: CallClock::default(),
        }
    }

    /// Bind a request before it is sent: its id, server, user, tenant, method and exact
    /// params. Returns the request text to send.
    pub fn register(&mut self, r: Registration) -> Result<Registered, Denial> {
        self.begin_call().map_err(Denial::unaudited)?;
        self.register_request(r).map_err(Denial::unaudited)
    }

    /// Judge a JSON-RPC response (the whole message text) that arrived from `server`: an
    /// `input_required` round comes back as the consent view to show; a complete or error
    /// result ends the binding.
    pub fn accept_response(
        &mut self,
        server: &crate::ids::ServerIdentity,
        response_json: &str,
    ) -> Result<ResponseVerdict, Denial> {
        self.begin_call().map_err(Denial::unaudited)?;
        self.judge_response(server, response_json)
    }

    /// Validate the answers, obtain consent, consume the round, return the retry to send.
    pub fn build_retry(&mut self, r: RetryRequest) -> Result<Retry, Denial> {
        self.begin_call().map_err(Denial::unaudited)?;
        self.retry_round(r)
    }

    /// A client's own retry of a round (a relay's client sent it): held to the binding's
    /// method, params and round state, then built as [`Gate::build_retry`] builds one, with
    /// the client's answers.
    pub fn retry_from_client(&mut self, r: ClientRetry) -> Result<Retry, Denial> {
        self.begin_call().map_err(Denial::unaudited)?;
        self.retry_client(r)
    }

    /// Record a relay's refusal of a message no binding judges (a server's request outside
    /// any round, an ungated answer or notification that asks for input, a client's answers
    /// no round asked for), for the client of `user` and `tenant`: the denial, audited. Only
    /// a clock out of range or an invalid server identity gives its own code instead,
    /// unaudited.
    pub fn refuse_unbound(
        &mut self,
        server: &crate::ids::ServerIdentity,
        user: &str,
        tenant: &str,
        refusal: &Unbound,
    ) -> Denial {
        self.refuse(server, user, tenant, refusal)
    }

    /// End a binding from the caller's side (cancelled, or the transport failed), on behalf
    /// of the binding's own user and tenant.
    pub fn finish(&mut self, r: FinishRequest) -> Result<TerminalOutcome, Denial> {
        self.begin_call().map_err(Denial::unaudited)?;
        self.finish_binding(r)
    }

    /// End every binding whose lifetime has passed; returns how many ended.
    pub fn expire_stale(&mut self) -> Result<u32, Denial> {
        self.begin_call().map_err(Denial::unaudited)?;
        self.expire_bindings()
    }

    /// The host services the gate runs over (tests and hosts read their state through it).
    pub fn host(&self) -> &H {
        &self.host
    }

    /// A new call starts: the clock is read once (refused out of range, unaudited: there is
    /// no time to stamp an event with).
    fn begin_call(&self) -> Result<(), GateError> {
        self.clock.begin(self.host.clock())
    }

    /// The time of the current call.
    fn now(&self) -> u64 {
        self.clock.now()
    }

    fn audit(&mut self, event: Event) -> Result<u64, GateError> {
        let now = self.now();
        self.chain.write(self.host.audit(), event, now)
    }

    /// Audit a denial; the denial stands whatever the sink does.
    fn deny(&mut self, error: GateError, event: Event) -> Denial {
        let audited = self.audit(event.denied(&error)).is_ok();
        Denial { error, audited }
    }
}

/// The canonical text of a JSON-RPC request whose params are already canonical JSON: the
/// envelope's keys (`id`, `jsonrpc`, `method`, `params`) are already in canonical order.
fn request_text(id: &RequestId, method: &str, params_canonical: &str) -> String {
    let mut out = String::with_capacity(params_canonical.len().saturating_add(64));
    out.push_str("{\"id\":");
    id.write_json(&mut out);
    out.push_str(",\"jsonrpc\":\"2.0\",\"method\":");
    crate::canonical::write_string(&mut out, method);
    out.push_str(",\"params\":");
    out.push_str(params_canonical);
    out.push('}');
    out
}
