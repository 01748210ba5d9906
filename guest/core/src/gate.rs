//! The gate: register, accept a response, build the retry, finish, expire.
//!
//! Every live binding lives in host storage: its record under the key of its original id,
//! and under the key of each retry id it used, a pointer to the original id. Ids share one
//! key space, so reserving a key reserves the id against every live binding. All changes
//! are compare-and-swap on the version read, so two gate instances sharing a store can never
//! both consume one round. The instance itself keeps only caches (parsed records, the audit
//! chain head): a fresh instance loses nothing.

use crate::audit::{ChainWriter, Event, EventKind, Field};
use crate::canonical;
use crate::digest;
use crate::error::{CallerMisuse, Denial, GateError, HostFault, PeerMisbehaved};
use crate::host::{CasOutcome, ConsentDecision, ConsentPrompt, Host, HostError, Versioned};
use crate::ids::{RequestId, ServerIdentity};
use crate::json::{self, JsonError, bounded};
use crate::policy::{Policy, limits};
use crate::responses;
use crate::round::{self, Declared, InputRule};
use crate::schema::SchemaCache;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::rc::Rc;

/// Storage key prefix of every id in use: the key of an original id holds its binding's
/// record (a JSON object), the key of a retry id a pointer (the original id, as JSON).
pub const ID_PREFIX: &str = "mrtr-gate/v2/id/";
/// How long an expired binding stays in storage so its end can still be audited.
pub const EXPIRY_GRACE_MS: u64 = 60_000;
/// The methods that may receive `input_required`.
pub const MRTR_METHODS: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];

/// A request about to be sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    /// Its JSON-RPC id.
    pub request_id: RequestId,
    /// The verified server (already normalised by [`ServerIdentity::origin`]/[`ServerIdentity::endpoint`]).
    pub server: ServerIdentity,
    /// The user on whose behalf it is sent.
    pub user: String,
    /// The tenant.
    pub tenant: String,
    /// `tools/call`, `prompts/get` or `resources/read`.
    pub method: String,
    /// The exact params, as JSON text.
    pub params_json: String,
    /// The binding's policy.
    pub policy: Policy,
}

/// A registered request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registered {
    /// The request text to send.
    pub request_json: String,
    /// Digest of the params.
    pub params_sha256: String,
    /// When the binding expires.
    pub expires_at_ms: u64,
}

/// An accepted `input_required` round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsentView {
    /// What the consent screen must show, canonical JSON.
    pub view_json: String,
    /// Its digest.
    pub view_sha256: String,
    /// 1-based round number.
    pub round: u32,
    /// The round's input keys, sorted.
    pub input_keys: Vec<String>,
    /// Digest of the `requestState`, when present.
    pub request_state_sha256: Option<String>,
}

/// What a response meant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResponseVerdict {
    /// A round to show and answer.
    InputRequired(ConsentView),
    /// A complete result: the binding ended.
    Complete,
    /// A JSON-RPC error: the binding ended.
    Error(i64),
}

/// The caller's answers for a round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryRequest {
    /// The id the round arrived on.
    pub request_id: RequestId,
    /// A new id for the retry.
    pub retry_id: RequestId,
    /// Must be the binding's user.
    pub user: String,
    /// Must be the binding's tenant.
    pub tenant: String,
    /// The `inputResponses` object, JSON text.
    pub responses_json: String,
}

/// A retry ready to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retry {
    /// The complete JSON-RPC request text.
    pub request_json: String,
    /// The round it answers.
    pub round: u32,
    /// The consent receipt it rests on (none for a state-only round: nothing of the user's is sent).
    pub consent_receipt_id: Option<String>,
}

/// Why the caller ends a binding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallerOutcome {
    /// Cancelled by the user or the client.
    Cancelled,
    /// The transport failed or the client gave up (a short reason code).
    Error(String),
}

/// How a binding ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TerminalOutcome {
    /// A complete result.
    Complete,
    /// An error (from the server, the transport, or a denial that ends the binding).
    Error,
    /// Cancelled.
    Cancelled,
    /// The lifetime passed.
    Expired,
}

impl TerminalOutcome {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Error => "error",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
        }
    }
}

/// An open round, as stored (written by [`OpenRound::write_record`], read by serde).
#[derive(Clone, Debug, Deserialize)]
struct OpenRound {
    number: u32,
    state: Option<String>,
    state_sha256: Option<String>,
    inputs: BTreeMap<String, InputRule>,
    /// Canonical JSON, stored as JSON (not as an escaped string): written and read without
    /// escaping a kilobyte per round. Held as the text the gate wrote: no pass to check it.
    #[serde(deserialize_with = "raw_json_text")]
    view_json: String,
    view_sha256: String,
    /// This round's fields of every event, rendered on first use.
    #[serde(skip)]
    rendered: std::cell::OnceCell<Rc<RenderedRound>>,
}

/// The canonical JSON of the round fields every event of an open round repeats.
#[derive(Debug)]
struct RenderedRound {
    state_sha256: Rc<str>,
    schema_sha256: Rc<str>,
    input_kinds: Rc<str>,
    view_sha256: Rc<str>,
}

impl OpenRound {
    fn rendered(&self) -> Rc<RenderedRound> {
        Rc::clone(self.rendered.get_or_init(|| {
            // Input keys are `[A-Za-z0-9._-]`: the map's byte order is canonical order.
            let mut schemas = String::from("{");
            let mut kinds = String::from("{");
            for (key, rule) in &self.inputs {
                if let InputRule::Form { schema } = rule {
                    if schemas.len() > 1 {
                        schemas.push(',');
                    }
                    canonical::write_string(&mut schemas, key);
                    schemas.push(':');
                    canonical::write_string(&mut schemas, &schema.schema_sha256);
                }
                if kinds.len() > 1 {
                    kinds.push(',');
                }
                canonical::write_string(&mut kinds, key);
                kinds.push(':');
                canonical::write_string(&mut kinds, rule.kind());
            }
            schemas.push('}');
            kinds.push('}');
            Rc::new(RenderedRound {
                state_sha256: self
                    .state_sha256
                    .as_deref()
                    .map_or_else(|| Rc::from("null"), json_string),
                schema_sha256: Rc::from(schemas),
                input_kinds: Rc::from(kinds),
                view_sha256: json_string(&self.view_sha256),
            })
        }))
    }
}

/// The last text digested in one role (user or tenant) and its digest.
type LastDigest = std::cell::RefCell<Option<(String, String)>>;

/// `digest::digest_str(text)`, from `last` when it is the text digested last time.
fn remembered_digest(last: &LastDigest, text: &str) -> String {
    if let Ok(known) = last.try_borrow()
        && let Some((t, digest)) = known.as_ref()
        && t == text
    {
        return digest.clone();
    }
    let digest = digest::digest_str(text);
    if let Ok(mut slot) = last.try_borrow_mut() {
        *slot = Some((text.to_owned(), digest.clone()));
    }
    digest
}

/// A string's canonical JSON text.
fn json_string(s: &str) -> Rc<str> {
    let mut out = String::with_capacity(s.len().saturating_add(2));
    canonical::write_string(&mut out, s);
    Rc::from(out)
}

/// What a binding fixes at registration and never changes.
#[derive(Debug, Serialize, Deserialize)]
struct Fixed {
    original_id: RequestId,
    server: ServerIdentity,
    user: String,
    tenant: String,
    /// Digests recorded in every event (computed once, at registration).
    user_sha256: String,
    tenant_sha256: String,
    method: String,
    /// The name shown to the user (tool or prompt name, resource URI).
    name: String,
    /// The name as the audit trail may record it (a resource URI without query).
    audit_name: String,
    /// Canonical JSON, stored as JSON; checked against `params_sha256` before every retry.
    params_json: Box<RawValue>,
    params_sha256: String,
    policy: Policy,
    declared: Declared,
    created_at_ms: u64,
    expires_at_ms: u64,
    /// The fields every event of this binding repeats, rendered on first use.
    #[serde(skip)]
    rendered: std::cell::OnceCell<Rc<RenderedFixed>>,
}

/// The canonical JSON of the fixed fields every event of a binding repeats.
#[derive(Debug)]
struct RenderedFixed {
    request_id: Rc<str>,
    server: Rc<str>,
    method: Rc<str>,
    name: Rc<str>,
    user_sha256: Rc<str>,
    tenant_sha256: Rc<str>,
    policy_version: Rc<str>,
    params_sha256: Rc<str>,
}

impl Fixed {
    fn rendered(&self) -> Rc<RenderedFixed> {
        Rc::clone(self.rendered.get_or_init(|| {
            Rc::new(RenderedFixed {
                request_id: Rc::from(self.original_id.key_fragment()),
                server: json_string(&self.server.display()),
                method: json_string(&self.method),
                name: json_string(&self.audit_name),
                user_sha256: json_string(&self.user_sha256),
                tenant_sha256: json_string(&self.tenant_sha256),
                policy_version: json_string(&self.policy.policy_version),
                params_sha256: json_string(&self.params_sha256),
            })
        }))
    }
}

/// A JSON value in a stored record, kept as its text.
fn raw_json_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Box::<RawValue>::deserialize(d).map(|raw| String::from(Box::<str>::from(raw)))
}

/// A record's JSON text for a request id: exact digits (ids are within ±(2^53 - 1), but a
/// record must keep whatever it holds).
fn write_record_id(out: &mut String, id: &RequestId) {
    match id {
        RequestId::Number(n) => canonical::write_i64_exact(out, *n),
        RequestId::Text(s) => canonical::write_string(out, s),
    }
}

/// A record's optional string.
fn write_record_opt(out: &mut String, s: Option<&str>) {
    match s {
        Some(s) => canonical::write_string(out, s),
        None => out.push_str("null"),
    }
}

impl Fixed {
    /// The fixed part's record text, written once at registration. Read back by serde (the
    /// field names and shapes are `Fixed`'s; a test holds the two together).
    fn record_json(&self) -> String {
        let mut out = String::with_capacity(self.params_json.get().len().saturating_add(768));
        out.push_str("{\"original_id\":");
        write_record_id(&mut out, &self.original_id);
        out.push_str(",\"server\":{");
        match &self.server {
            ServerIdentity::Origin(s) => {
                out.push_str("\"origin\":");
                canonical::write_string(&mut out, s);
            }
            ServerIdentity::Endpoint(s) => {
                out.push_str("\"endpoint\":");
                canonical::write_string(&mut out, s);
            }
        }
        for (key, value) in [
            ("},\"user\":", &self.user),
            (",\"tenant\":", &self.tenant),
            (",\"user_sha256\":", &self.user_sha256),
            (",\"tenant_sha256\":", &self.tenant_sha256),
            (",\"method\":", &self.method),
            (",\"name\":", &self.name),
            (",\"audit_name\":", &self.audit_name),
        ] {
            out.push_str(key);
            canonical::write_string(&mut out, value);
        }
        out.push_str(",\"params_json\":");
        out.push_str(self.params_json.get());
        out.push_str(",\"params_sha256\":");
        canonical::write_string(&mut out, &self.params_sha256);
        let p = &self.policy;
        out.push_str(",\"policy\":{\"round_trip_lifetime_ms\":");
        canonical::write_u64_digits(&mut out, p.round_trip_lifetime_ms);
        out.push_str(",\"max_request_state_bytes\":");
        canonical::write_u64_digits(&mut out, u64::from(p.max_request_state_bytes));
        out.push_str(",\"max_rounds\":");
        canonical::write_u64_digits(&mut out, u64::from(p.max_rounds));
        out.push_str(",\"allowed_deprecated\":[");
        for (i, m) in p.allowed_deprecated.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            canonical::write_string(&mut out, m.as_str());
        }
        out.push_str("],\"policy_version\":");
        canonical::write_string(&mut out, &p.policy_version);
        let d = self.declared;
        for (key, on) in [
            ("},\"declared\":{\"form\":", d.form),
            (",\"url\":", d.url),
            (",\"roots\":", d.roots),
            (",\"sampling\":", d.sampling),
            (",\"sampling_tools\":", d.sampling_tools),
        ] {
            out.push_str(key);
            out.push_str(if on { "true" } else { "false" });
        }
        out.push_str("},\"created_at_ms\":");
        canonical::write_u64_digits(&mut out, self.created_at_ms);
        out.push_str(",\"expires_at_ms\":");
        canonical::write_u64_digits(&mut out, self.expires_at_ms);
        out.push('}');
        out
    }
}

impl OpenRound {
    /// Append the open round's record text (read back by serde, as [`Fixed::record_json`]).
    fn write_record(&self, out: &mut String) -> Result<(), GateError> {
        out.push_str("{\"number\":");
        canonical::write_u64_digits(out, u64::from(self.number));
        out.push_str(",\"state\":");
        write_record_opt(out, self.state.as_deref());
        out.push_str(",\"state_sha256\":");
        write_record_opt(out, self.state_sha256.as_deref());
        out.push_str(",\"inputs\":");
        let inputs = serde_json::to_string(&self.inputs)
            .map_err(|_| GateError::Host(HostFault::StorageCorrupted))?;
        out.push_str(&inputs);
        out.push_str(",\"view_json\":");
        out.push_str(&self.view_json);
        out.push_str(",\"view_sha256\":");
        canonical::write_string(out, &self.view_sha256);
        out.push('}');
        Ok(())
    }
}

/// A live binding: its fixed part, shared and serialized once, and what moves.
#[derive(Clone, Debug)]
struct Binding {
    fixed: Rc<Fixed>,
    /// `fixed` as stored: written once at registration and copied into every record written
    /// (about two thirds of a record that used to be serialized three times a round).
    fixed_json: Rc<str>,
    live_id: RequestId,
    used_ids: Vec<RequestId>,
    /// The storage version of each retry id's pointer, in `used_ids` order after the
    /// original: the pointers are deleted with one compare-and-swap each, no read first.
    alias_versions: Vec<u64>,
    rounds: u32,
    open: Option<OpenRound>,
    audited: bool,
    /// True when this instance hashed `fixed.params_json` itself (it registered the binding):
    /// a record read from storage is checked against `params_sha256` before a retry.
    params_hashed_here: bool,
}

/// A binding's record, as read.
#[derive(Deserialize)]
struct RecordIn {
    format: u32,
    fixed: Box<RawValue>,
    live_id: RequestId,
    used_ids: Vec<RequestId>,
    alias_versions: Vec<u64>,
    rounds: u32,
    open: Option<OpenRound>,
    audited: bool,
}

const BINDING_FORMAT: u32 = 3;

impl Binding {
    fn key(&self) -> String {
        id_key(&self.fixed.original_id)
    }

    /// The record's bytes: `RecordIn`'s fields, written directly (the fixed part and the
    /// view are text already; serde would check and copy them again).
    fn encode(&self) -> Result<Vec<u8>, GateError> {
        let open_len = self.open.as_ref().map_or(0, |o| o.view_json.len() + 1024);
        let mut out = String::with_capacity(self.fixed_json.len() + open_len + 256);
        out.push_str("{\"format\":");
        canonical::write_u64_digits(&mut out, u64::from(BINDING_FORMAT));
        out.push_str(",\"fixed\":");
        out.push_str(&self.fixed_json);
        out.push_str(",\"live_id\":");
        write_record_id(&mut out, &self.live_id);
        out.push_str(",\"used_ids\":[");
        for (i, id) in self.used_ids.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_record_id(&mut out, id);
        }
        out.push_str("],\"alias_versions\":[");
        for (i, v) in self.alias_versions.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            canonical::write_u64_digits(&mut out, *v);
        }
        out.push_str("],\"rounds\":");
        canonical::write_u64_digits(&mut out, u64::from(self.rounds));
        out.push_str(",\"open\":");
        match &self.open {
            Some(open) => open.write_record(&mut out)?,
            None => out.push_str("null"),
        }
        out.push_str(",\"audited\":");
        out.push_str(if self.audited { "true" } else { "false" });
        out.push('}');
        Ok(out.into_bytes())
    }

    /// A record read back: refused unless it is this format and parses whole.
    fn decode(bytes: &[u8]) -> Result<Self, GateError> {
        let corrupted = |_| GateError::Host(HostFault::StorageCorrupted);
        let r: RecordIn = serde_json::from_slice(bytes).map_err(corrupted)?;
        if r.format != BINDING_FORMAT {
            return Err(GateError::Host(HostFault::StorageCorrupted));
        }
        let fixed: Fixed = serde_json::from_str(r.fixed.get()).map_err(corrupted)?;
        Ok(Self {
            fixed: Rc::new(fixed),
            fixed_json: Rc::from(r.fixed.get()),
            live_id: r.live_id,
            used_ids: r.used_ids,
            alias_versions: r.alias_versions,
            rounds: r.rounds,
            open: r.open,
            audited: r.audited,
            params_hashed_here: false,
        })
    }

    /// An event of `kind` with everything this binding knows filled in.
    fn event(&self, kind: EventKind) -> Event {
        let f = self.fixed.rendered();
        let mut e = Event::new(kind)
            .set_raw(Field::RequestId, Rc::clone(&f.request_id))
            .set(Field::LiveId, self.live_id.to_json())
            .set_raw(Field::Server, Rc::clone(&f.server))
            .set_raw(Field::Method, Rc::clone(&f.method))
            .set_raw(Field::Name, Rc::clone(&f.name))
            .set_raw(Field::UserSha256, Rc::clone(&f.user_sha256))
            .set_raw(Field::TenantSha256, Rc::clone(&f.tenant_sha256))
            .set_raw(Field::PolicyVersion, Rc::clone(&f.policy_version))
            .set_raw(Field::ParamsSha256, Rc::clone(&f.params_sha256))
            .set(Field::Round, self.rounds);
        if let Some(open) = &self.open {
            let r = open.rendered();
            e = e
                .set(Field::Round, open.number)
                .set_raw(Field::StateSha256, Rc::clone(&r.state_sha256))
                .set_raw(Field::SchemaSha256, Rc::clone(&r.schema_sha256))
                .set_raw(Field::InputKinds, Rc::clone(&r.input_kinds))
                .set_raw(Field::ViewSha256, Rc::clone(&r.view_sha256));
        }
        e
    }
}

/// The canonical text of a JSON-RPC request whose params are already canonical JSON: the
/// envelope's keys (`id`, `jsonrpc`, `method`, `params`) are already in canonical order.
fn request_text(id: &RequestId, method: &str, params_canonical: &str) -> String {
    let mut out = String::with_capacity(params_canonical.len().saturating_add(64));
    out.push_str("{\"id\":");
    id.write_json(&mut out);
    out.push_str(",\"jsonrpc\":\"2.0\",\"method\":");
    canonical::write_string(&mut out, method);
    out.push_str(",\"params\":");
    out.push_str(params_canonical);
    out.push('}');
    out
}

/// The storage key of an id (its canonical JSON: `1` and `"1"` are different ids).
fn id_key(id: &RequestId) -> String {
    let mut key = String::with_capacity(ID_PREFIX.len().saturating_add(24));
    key.push_str(ID_PREFIX);
    id.write_json(&mut key);
    key
}

/// A record is a JSON object; a pointer is a JSON number or string.
fn is_record(value: &[u8]) -> bool {
    value.first() == Some(&b'{')
}

fn storage_failed(e: HostError) -> GateError {
    GateError::Host(HostFault::StorageFailed(e.message))
}

fn caller(e: CallerMisuse) -> GateError {
    GateError::Caller(e)
}

fn peer(e: PeerMisbehaved) -> GateError {
    GateError::Peer(e)
}

fn peer_json(e: JsonError) -> GateError {
    match e {
        JsonError::Syntax(why) => peer(PeerMisbehaved::ServerSentMalformedResponse(why)),
        JsonError::DuplicateKey(k) => peer(PeerMisbehaved::ServerSentDuplicateJsonKey(k)),
        JsonError::Limit(why) => peer(PeerMisbehaved::ServerExceededLimit(why)),
    }
}

fn non_empty_principal(value: &str, field: &'static str) -> Result<(), GateError> {
    if value.is_empty() {
        return Err(caller(CallerMisuse::BindingFieldMissing(field)));
    }
    if value.len() > limits::MAX_PRINCIPAL_BYTES || value.chars().any(char::is_control) {
        return Err(caller(CallerMisuse::InvalidPrincipal(field)));
    }
    Ok(())
}

/// The last records this instance read or wrote, with the exact bytes and version they
/// had: a record whose bytes and version are unchanged in storage parses to the same value,
/// so the parse is skipped. Bounded; it only saves work, it never decides anything.
#[derive(Default)]
struct RecordCache {
    entries: std::collections::VecDeque<(String, u64, usize, Rc<Binding>)>,
}

const RECORD_CACHE_SIZE: usize = 32;

impl RecordCache {
    fn get(&self, key: &str, stored: &Versioned) -> Option<Rc<Binding>> {
        self.entries
            .iter()
            // The store's contract: a key's version changes on every write and is never
            // reused. Version and length are checked, not every byte (a byte compare of
            // every record is measurable in wasm); a host that broke the contract would
            // at worst get back the record this gate itself wrote.
            .find(|(k, v, len, _)| k == key && *v == stored.version && *len == stored.value.len())
            .map(|(_, _, _, b)| Rc::clone(b))
    }

    fn put(&mut self, key: String, version: u64, len: usize, binding: Rc<Binding>) {
        self.forget(&key);
        if self.entries.len() >= RECORD_CACHE_SIZE {
            self.entries.pop_front();
        }
        self.entries.push_back((key, version, len, binding));
    }

    fn forget(&mut self, key: &str) {
        self.entries.retain(|(k, _, _, _)| k != key);
    }
}

/// The gate over a host.
pub struct Gate<H: Host> {
    host: H,
    chain: ChainWriter,
    records: std::cell::RefCell<RecordCache>,
    /// Form schemas checked before (by value; bounded).
    schemas: std::cell::RefCell<SchemaCache>,
    /// The last user and tenant digested, with their digests: a client registers request
    /// after request for the same principals (a pure function, so it cannot change a verdict).
    last_user: LastDigest,
    last_tenant: LastDigest,
    /// The time of the current call, read from the clock once (each import call costs, most
    /// on hosts such as jco); reset at every entry and after every wait on the user.
    call_now: std::cell::Cell<Option<u64>>,
}

impl<H: Host> Gate<H> {
    /// A gate over `host`.
    pub fn new(host: H) -> Self {
        Self {
            host,
            chain: ChainWriter::default(),
            records: std::cell::RefCell::default(),
            schemas: std::cell::RefCell::default(),
            last_user: LastDigest::default(),
            last_tenant: LastDigest::default(),
            call_now: std::cell::Cell::new(None),
        }
    }

    /// A new call starts: its time is read afresh when first needed.
    fn begin_call(&self) {
        self.call_now.set(None);
    }

    /// The host.
    pub fn host(&self) -> &H {
        &self.host
    }

    fn now(&self) -> u64 {
        if let Some(now) = self.call_now.get() {
            return now;
        }
        let now = self.host.clock().now_ms();
        self.call_now.set(Some(now));
        now
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

    // ---- storage -------------------------------------------------------------------------

    fn load(&self, id: &RequestId) -> Result<Option<(Rc<Binding>, u64)>, GateError> {
        let storage = self.host.storage();
        let key = id_key(id);
        let Some(first) = storage.get(&key).map_err(storage_failed)? else {
            return Ok(None);
        };
        // The original id: one read. A retry id: its pointer, then the record.
        let (original, key, stored) = if is_record(&first.value) {
            (id.clone(), key, first)
        } else {
            let original: RequestId = serde_json::from_slice(&first.value)
                .map_err(|_| GateError::Host(HostFault::StorageCorrupted))?;
            if original == *id {
                return Err(GateError::Host(HostFault::StorageCorrupted));
            }
            let key = id_key(&original);
            let Some(stored) = storage.get(&key).map_err(storage_failed)? else {
                return Ok(None);
            };
            if !is_record(&stored.value) {
                return Err(GateError::Host(HostFault::StorageCorrupted));
            }
            (original, key, stored)
        };
        let cached = self
            .records
            .try_borrow()
            .ok()
            .and_then(|c| c.get(&key, &stored));
        let binding = match cached {
            Some(b) => b,
            None => {
                let b = Rc::new(Binding::decode(&stored.value)?);
                if let Ok(mut c) = self.records.try_borrow_mut() {
                    c.put(key, stored.version, stored.value.len(), Rc::clone(&b));
                }
                b
            }
        };
        let version = stored.version;
        if binding.fixed.original_id != original || !binding.used_ids.contains(id) {
            return Err(GateError::Host(HostFault::StorageCorrupted));
        }
        Ok(Some((binding, version)))
    }

    fn ttl(&self, binding: &Binding) -> u64 {
        binding
            .fixed
            .expires_at_ms
            .saturating_sub(self.now())
            .saturating_add(EXPIRY_GRACE_MS)
    }

    /// Write `binding` if its record is still at `expected` (absent when `None`).
    fn store(
        &self,
        binding: Binding,
        expected: Option<u64>,
    ) -> Result<(Rc<Binding>, u64), (GateError, Box<Binding>)> {
        let bytes = match binding.encode() {
            Ok(b) => b,
            Err(e) => return Err((e, Box::new(binding))),
        };
        let key = binding.key();
        let ttl = self.ttl(&binding);
        match self
            .host
            .storage()
            .compare_and_swap(&key, expected, Some(&bytes), ttl)
        {
            Ok(CasOutcome::Applied(v)) => {
                let binding = Rc::new(binding);
                if let Ok(mut c) = self.records.try_borrow_mut() {
                    c.put(key, v, bytes.len(), Rc::clone(&binding));
                }
                Ok((binding, v))
            }
            Ok(CasOutcome::Conflict) => Err((
                GateError::Host(HostFault::StateAlreadyUsed),
                Box::new(binding),
            )),
            Err(e) => Err((storage_failed(e), Box::new(binding))),
        }
    }

    /// The binding behind `rc`, owned: the cached copy is dropped first, so the usual case
    /// (no other holder) takes it without a copy.
    fn take(&self, rc: Rc<Binding>) -> Binding {
        if let Ok(mut c) = self.records.try_borrow_mut() {
            c.forget(&rc.key());
        }
        Rc::unwrap_or_clone(rc)
    }

    /// Reserve `id` for `binding`: the alias's version, or none when the id is live elsewhere.
    fn reserve_alias(&self, id: &RequestId, binding: &Binding) -> Result<Option<u64>, GateError> {
        let target = serde_json::to_vec(&binding.fixed.original_id)
            .map_err(|_| GateError::Host(HostFault::StorageCorrupted))?;
        Ok(
            match self
                .host
                .storage()
                .compare_and_swap(&id_key(id), None, Some(&target), self.ttl(binding))
                .map_err(storage_failed)?
            {
                CasOutcome::Applied(v) => Some(v),
                CasOutcome::Conflict => None,
            },
        )
    }

    /// Give a reserved id back (best effort: a failure leaves an alias that expires).
    fn release_alias(&self, id: &RequestId, version: u64) {
        let _ = self
            .host
            .storage()
            .compare_and_swap(&id_key(id), Some(version), None, 0);
    }

    /// Delete a key if it still holds what we expect (best effort for aliases).
    fn delete_alias(&self, id: &RequestId, original: &RequestId) -> Result<(), GateError> {
        let storage = self.host.storage();
        let key = id_key(id);
        if let Some(v) = storage.get(&key).map_err(storage_failed)? {
            let points_here = !is_record(&v.value)
                && serde_json::from_slice::<RequestId>(&v.value)
                    .is_ok_and(|target| &target == original);
            if points_here {
                storage
                    .compare_and_swap(&key, Some(v.version), None, 0)
                    .map_err(storage_failed)?;
            }
        }
        Ok(())
    }

    /// Remove a binding (record first: that is the atomic step) and its aliases.
    fn remove(&self, binding: &Binding, version: u64) -> Result<(), GateError> {
        if let Ok(mut c) = self.records.try_borrow_mut() {
            c.forget(&binding.key());
        }
        match self
            .host
            .storage()
            .compare_and_swap(&binding.key(), Some(version), None, 0)
            .map_err(storage_failed)?
        {
            CasOutcome::Applied(_) => {}
            CasOutcome::Conflict => return Err(GateError::Host(HostFault::StateAlreadyUsed)),
        }
        // The record was the original id's key; then each retry id's pointer.
        for (i, id) in binding.used_ids.iter().skip(1).enumerate() {
            match binding.alias_versions.get(i) {
                // The version we wrote: delete without reading. A conflict means the pointer
                // already expired or was replaced; either way it is not ours to delete.
                Some(&v) => {
                    self.host
                        .storage()
                        .compare_and_swap(&id_key(id), Some(v), None, 0)
                        .map_err(storage_failed)?;
                }
                None => self.delete_alias(id, &binding.fixed.original_id)?,
            }
        }
        Ok(())
    }

    /// End a binding: remove it, then audit the terminal event (when the binding had
    /// audited anything: plain requests that never saw a round leave no trail).
    fn end(
        &mut self,
        binding: &Binding,
        version: u64,
        outcome: TerminalOutcome,
        reason: Option<&str>,
    ) -> Result<(), GateError> {
        self.remove(binding, version)?;
        if binding.audited {
            let mut e = binding
                .event(EventKind::Terminal)
                .set_str(Field::Outcome, outcome.as_str());
            if let Some(r) = reason {
                e = e.set(Field::Reason, r);
            }
            self.audit(e)?;
        }
        Ok(())
    }

    fn expired(&self, binding: &Binding) -> bool {
        self.now() >= binding.fixed.expires_at_ms
    }

    // ---- register ------------------------------------------------------------------------

    /// Bind a request before it is sent.
    pub fn register(&mut self, r: Registration) -> Result<Registered, Denial> {
        self.begin_call();
        self.register_inner(r).map_err(Denial::unaudited)
    }

    fn register_inner(&mut self, r: Registration) -> Result<Registered, GateError> {
        let request_id = r.request_id.validated()?;
        non_empty_principal(&r.user, "subject")?;
        non_empty_principal(&r.tenant, "tenantId")?;
        if r.method.is_empty() {
            return Err(caller(CallerMisuse::BindingFieldMissing("method")));
        }
        if !MRTR_METHODS.contains(&r.method.as_str()) {
            return Err(caller(CallerMisuse::UnsupportedMethod(bounded(
                &r.method, 64,
            ))));
        }
        if r.params_json.is_empty() {
            return Err(caller(CallerMisuse::BindingFieldMissing("params")));
        }
        r.policy.validate()?;
        let params = json::parse_strict(&r.params_json, limits::PARAMS).map_err(|e| {
            caller(CallerMisuse::InvalidParams(match e {
                JsonError::Syntax(w) | JsonError::Limit(w) => w,
                JsonError::DuplicateKey(k) => format!("the key `{k}` appears twice"),
            }))
        })?;
        let Value::Object(params) = params else {
            return Err(caller(CallerMisuse::InvalidParams(
                "params must be an object".into(),
            )));
        };
        if params.contains_key("inputResponses") || params.contains_key("requestState") {
            return Err(caller(CallerMisuse::ParamsCarriedMrtrFields));
        }
        let name_field = if r.method == "resources/read" {
            "uri"
        } else {
            "name"
        };
        let name = params
            .get(name_field)
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty() && n.len() <= 4096)
            .ok_or_else(|| {
                caller(CallerMisuse::InvalidParams(format!(
                    "`{}` needs a `{name_field}` string",
                    r.method
                )))
            })?
            .to_owned();
        let audit_name = if r.method == "resources/read" {
            url::Url::parse(&name)
                .map(|u| crate::url_view::redacted(&u))
                .unwrap_or_else(|_| format!("sha256:{}", digest::digest_str(&name)))
        } else {
            name.clone()
        };
        let declared = Declared::from_params(&params);
        let params_json = canonical::to_canonical(&Value::Object(params));
        let params_sha256 = digest::sha256_hex(params_json.as_bytes());
        let params_json = RawValue::from_string(params_json)
            .map_err(|_| caller(CallerMisuse::InvalidParams("params must be json".into())))?;
        let now = self.now();
        let fixed = Fixed {
            original_id: request_id.clone(),
            server: r.server,
            user_sha256: remembered_digest(&self.last_user, &r.user),
            tenant_sha256: remembered_digest(&self.last_tenant, &r.tenant),
            user: r.user,
            tenant: r.tenant,
            method: r.method,
            name,
            audit_name,
            declared,
            params_json,
            params_sha256: params_sha256.clone(),
            expires_at_ms: now.saturating_add(r.policy.round_trip_lifetime_ms),
            policy: r.policy,
            created_at_ms: now,
            rendered: std::cell::OnceCell::new(),
        };
        let fixed_json = fixed.record_json();
        let binding = Binding {
            fixed: Rc::new(fixed),
            fixed_json: Rc::from(fixed_json),
            live_id: request_id.clone(),
            used_ids: vec![request_id.clone()],
            alias_versions: Vec::new(),
            rounds: 0,
            open: None,
            audited: false,
            params_hashed_here: true,
        };
        // Writing the record under the id's key, if the key is free, reserves the id against
        // every live binding (original and retry ids share the key space) in one step.
        let binding = match self.store(binding, None) {
            Ok((b, _)) => b,
            Err((e, _)) => {
                return Err(match e {
                    GateError::Host(HostFault::StateAlreadyUsed) => {
                        caller(CallerMisuse::RequestIdInUse)
                    }
                    other => other,
                });
            }
        };
        Ok(Registered {
            request_json: request_text(
                &request_id,
                &binding.fixed.method,
                binding.fixed.params_json.get(),
            ),
            params_sha256,
            expires_at_ms: binding.fixed.expires_at_ms,
        })
    }

    // ---- accept --------------------------------------------------------------------------

    /// Judge a JSON-RPC response (the whole message text) that arrived from `server`.
    pub fn accept_response(
        &mut self,
        server: &ServerIdentity,
        response_json: &str,
    ) -> Result<ResponseVerdict, Denial> {
        self.begin_call();
        let unbound = || Event::new(EventKind::Rejected).set(Field::Server, server.display());
        let message = match json::parse_strict(response_json, limits::RESPONSE) {
            Ok(Value::Object(m)) => m,
            Ok(_) => {
                let e = peer(PeerMisbehaved::ServerSentMalformedResponse(
                    "a json-rpc response must be an object".into(),
                ));
                return Err(self.deny(e, unbound()));
            }
            Err(e) => return Err(self.deny(peer_json(e), unbound())),
        };
        let id = match message.get("id").and_then(RequestId::from_json) {
            Some(id) => id,
            None => {
                let e = peer(PeerMisbehaved::ServerSentMalformedResponse(
                    "the response has no integer or string `id`".into(),
                ));
                return Err(self.deny(e, unbound()));
            }
        };
        let unbound_id = || unbound().set(Field::LiveId, id.to_json());
        let (binding, version) = match self.load(&id) {
            Ok(Some(found)) => found,
            Ok(None) => {
                let e = peer(PeerMisbehaved::ServerSentUnsolicitedResponse);
                return Err(self.deny(e, unbound_id()));
            }
            Err(e) => return Err(self.deny(e, unbound_id())),
        };
        if binding.fixed.server != *server {
            // Another server may not touch this binding, nor end it.
            let e = peer(PeerMisbehaved::ServerIdentityChanged);
            let event = binding
                .event(EventKind::Rejected)
                .set(Field::LiveId, id.to_json())
                .set(Field::Server, server.display());
            return Err(self.deny(e, event));
        }
        if binding.live_id != id {
            // A response for an id this binding has moved on from: late or replayed.
            let e = peer(PeerMisbehaved::ServerSentUnsolicitedResponse);
            let event = binding
                .event(EventKind::Rejected)
                .set(Field::LiveId, id.to_json());
            return Err(self.deny(e, event));
        }
        if self.expired(&binding) {
            let e = peer(PeerMisbehaved::ServerSentUnsolicitedResponse);
            return Err(self.fail_binding(binding, version, e, TerminalOutcome::Expired));
        }
        match self.judge(&binding, &message) {
            Ok(Judged::Complete) => self
                .end(&binding, version, TerminalOutcome::Complete, None)
                .map(|()| ResponseVerdict::Complete)
                .map_err(Denial::unaudited),
            Ok(Judged::Error(code)) => self
                .end(
                    &binding,
                    version,
                    TerminalOutcome::Error,
                    Some("server_error"),
                )
                .map(|()| ResponseVerdict::Error(code))
                .map_err(Denial::unaudited),
            Ok(Judged::Round(round)) => {
                // The checked fields are the compiled form of each schema: nothing more
                // to compile, and the retry validates against exactly what was shown.
                self.open_round(binding, version, round)
            }
            Err(Judgement::Ignore(e)) => {
                let event = binding.event(EventKind::Rejected);
                Err(self.deny(e, event))
            }
            Err(Judgement::End(e)) => {
                Err(self.fail_binding(binding, version, e, TerminalOutcome::Error))
            }
        }
    }

    /// Deny, and end the binding: the bound server misbehaved (fail closed).
    fn fail_binding(
        &mut self,
        binding: Rc<Binding>,
        version: u64,
        error: GateError,
        outcome: TerminalOutcome,
    ) -> Denial {
        let event = binding.event(EventKind::Rejected);
        let denial = self.deny(error, event);
        let mut binding = self.take(binding);
        binding.audited = true;
        let code = denial.error.code();
        let _ = self.end(&binding, version, outcome, Some(code));
        denial
    }

    fn judge(&self, binding: &Binding, message: &Map<String, Value>) -> Result<Judged, Judgement> {
        let end = |e| Judgement::End(peer(e));
        if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(end(PeerMisbehaved::ServerSentMalformedResponse(
                "`jsonrpc` must be \"2.0\"".into(),
            )));
        }
        if let Some(k) = message
            .keys()
            .find(|k| !matches!(k.as_str(), "jsonrpc" | "id" | "result" | "error"))
        {
            return Err(end(PeerMisbehaved::ServerSentMalformedResponse(format!(
                "the response carries the unexpected member `{}`",
                bounded(k, 64)
            ))));
        }
        match (message.get("result"), message.get("error")) {
            (None, Some(error)) => {
                let code = error.get("code").and_then(Value::as_i64).ok_or_else(|| {
                    end(PeerMisbehaved::ServerSentMalformedResponse(
                        "`error.code` must be an integer".into(),
                    ))
                })?;
                Ok(Judged::Error(code))
            }
            (Some(Value::Object(result)), None) => {
                // Exact wire casing: a key that is `resultType` (or the MRTR fields) in any
                // other spelling is a smuggling attempt, not an absent field.
                for k in result.keys() {
                    let lower = k.to_ascii_lowercase();
                    let exact =
                        matches!(k.as_str(), "resultType" | "inputRequests" | "requestState");
                    if !exact
                        && matches!(
                            lower.as_str(),
                            "resulttype" | "inputrequests" | "requeststate"
                        )
                    {
                        return Err(end(PeerMisbehaved::ServerSentInvalidResultType));
                    }
                }
                match result.get("resultType") {
                    None => Ok(Judged::Complete),
                    Some(Value::String(t)) if t == "complete" => Ok(Judged::Complete),
                    Some(Value::String(t)) if t == "input_required" => {
                        if binding.open.is_some() {
                            // A second answer on the same id: the open round stays as it was.
                            return Err(Judgement::Ignore(peer(
                                PeerMisbehaved::ServerSentDuplicateRound,
                            )));
                        }
                        if binding.rounds >= binding.fixed.policy.max_rounds {
                            return Err(end(PeerMisbehaved::ServerExceededRoundLimit));
                        }
                        // The cache is only ever borrowed here; should it be busy, a fresh
                        // one gives the same verdict.
                        let mut spare = SchemaCache::default();
                        let mut cached = self.schemas.try_borrow_mut();
                        let schemas = match cached.as_deref_mut() {
                            Ok(c) => c,
                            Err(_) => &mut spare,
                        };
                        round::check_round(
                            result,
                            &binding.fixed.policy,
                            binding.fixed.declared,
                            schemas,
                        )
                        .map(Judged::Round)
                        .map_err(Judgement::End)
                    }
                    Some(_) => Err(end(PeerMisbehaved::ServerSentInvalidResultType)),
                }
            }
            _ => Err(end(PeerMisbehaved::ServerSentMalformedResponse(
                "a response needs exactly one of `result` (an object) and `error`".into(),
            ))),
        }
    }

    fn open_round(
        &mut self,
        binding: Rc<Binding>,
        version: u64,
        round: round::Round,
    ) -> Result<ResponseVerdict, Denial> {
        let number = binding.rounds.saturating_add(1);
        let state_sha256 = round.state.as_deref().map(digest::digest_str);
        let view_json = self.view(&binding, number, &round, state_sha256.as_deref());
        let view_sha256 = digest::sha256_hex(view_json.as_bytes());
        let input_keys: Vec<String> = round.inputs.keys().cloned().collect();
        let mut binding = self.take(binding);
        binding.rounds = number;
        binding.audited = true;
        binding.open = Some(OpenRound {
            number,
            state: round.state,
            state_sha256: state_sha256.clone(),
            inputs: round.inputs,
            view_json: view_json.clone(),
            view_sha256: view_sha256.clone(),
            rendered: std::cell::OnceCell::new(),
        });
        let (binding, version) = match self.store(binding, Some(version)) {
            Ok(stored) => stored,
            Err((e, binding)) => {
                let event = binding.event(EventKind::Rejected);
                return Err(self.deny(e, event));
            }
        };
        let received = binding
            .event(EventKind::Received)
            .set_str(Field::Outcome, "accepted");
        if let Err(e) = self.audit(received) {
            // Nothing may rest on a round the audit trail does not hold: end the binding.
            let _ = self.remove(&binding, version);
            return Err(Denial::unaudited(e));
        }
        Ok(ResponseVerdict::InputRequired(ConsentView {
            view_json,
            view_sha256,
            round: number,
            input_keys,
            request_state_sha256: state_sha256,
        }))
    }

    /// The consent view as canonical JSON, written key by key in canonical (JCS) order: the
    /// same text `canonical::to_canonical` gives for the object (checked in the tests), with
    /// no object built, copied and dropped on the way.
    fn view(
        &self,
        binding: &Binding,
        number: u32,
        round: &round::Round,
        state_sha256: Option<&str>,
    ) -> String {
        let server = binding.fixed.server.display();
        let mut out = String::with_capacity(1024);
        out.push_str("{\"effects\":[");
        for input in &round.view_inputs {
            let key = input.get("key").and_then(Value::as_str).unwrap_or_default();
            let effect = match input.get("kind").and_then(Value::as_str) {
                Some("form") => format!(
                    "{key}: what you enter in {} field(s) is sent to {server}",
                    input
                        .get("fields")
                        .and_then(Value::as_array)
                        .map_or(0, Vec::len)
                ),
                Some("url") => format!(
                    "{key}: accepting opens {} in your browser; the client and the model cannot see the page",
                    input
                        .pointer("/url/full")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                ),
                Some("roots") => format!("{key}: your workspace roots are sent to {server}"),
                Some("sampling") => {
                    format!("{key}: your model generates a reply for {server}, which receives it")
                }
                _ => String::new(),
            };
            canonical::write_string(&mut out, &effect);
            out.push(',');
        }
        let then = format!(
            "then {} `{}` is retried at {server}{}",
            binding.fixed.method,
            binding.fixed.name,
            if round.state.is_some() {
                " with the server's saved state"
            } else {
                ""
            }
        );
        canonical::write_string(&mut out, &then);
        out.push_str("],\"inputs\":[");
        for (i, input) in round.view_inputs.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            canonical::write_value(&mut out, input);
        }
        out.push_str("],\"max_rounds\":");
        canonical::write_u64(&mut out, u64::from(binding.fixed.policy.max_rounds));
        out.push_str(",\"request\":{\"id\":");
        binding.live_id.write_json(&mut out);
        out.push_str(",\"method\":");
        canonical::write_string(&mut out, &binding.fixed.method);
        out.push_str(",\"name\":");
        canonical::write_string(&mut out, &binding.fixed.name);
        out.push_str(",\"original_id\":");
        binding.fixed.original_id.write_json(&mut out);
        out.push_str("},\"round\":");
        canonical::write_u64(&mut out, u64::from(number));
        out.push_str(",\"server\":");
        canonical::write_string(&mut out, &server);
        out.push_str(",\"state\":");
        canonical::write_value(
            &mut out,
            &round::state_view(round.state.as_deref().zip(state_sha256)),
        );
        out.push_str(",\"view\":\"mrtr-gate/consent-view/v1\"}");
        out
    }

    // ---- retry ---------------------------------------------------------------------------

    /// Validate the answers, obtain consent, consume the round, return the retry.
    pub fn build_retry(&mut self, r: RetryRequest) -> Result<Retry, Denial> {
        self.begin_call();
        let request_id = r
            .request_id
            .clone()
            .validated()
            .map_err(Denial::unaudited)?;
        let unbound = || {
            Event::new(EventKind::Rejected)
                .set(Field::LiveId, request_id.to_json())
                .set(
                    Field::UserSha256,
                    remembered_digest(&self.last_user, &r.user),
                )
                .set(
                    Field::TenantSha256,
                    remembered_digest(&self.last_tenant, &r.tenant),
                )
        };
        let (binding, version) = match self.load(&request_id) {
            Ok(Some(found)) => found,
            Ok(None) => return Err(self.deny(caller(CallerMisuse::InactiveRound), unbound())),
            Err(e) => return Err(self.deny(e, unbound())),
        };
        if self.expired(&binding) {
            return Err(self.fail_binding(
                binding,
                version,
                caller(CallerMisuse::InactiveRound),
                TerminalOutcome::Expired,
            ));
        }
        let rejected = |b: &Binding| {
            b.event(EventKind::Rejected)
                .set(Field::LiveId, request_id.to_json())
                .set(Field::RetryId, r.retry_id.to_json())
        };
        let prepared = match self.prepare_retry(&binding, &r) {
            Ok(p) => p,
            Err(e) => {
                let event = rejected(&binding);
                return Err(self.deny(e, event));
            }
        };
        let Prepared {
            retry_id,
            alias_version,
            receipt_id,
            params,
        } = prepared;
        let submitted = binding
            .event(EventKind::Submitted)
            .set_str(Field::Outcome, "accepted")
            .set(Field::ConsentReceiptId, receipt_id.clone())
            .set(Field::RetryId, retry_id.to_json());

        // Single use, step 2: consume the round with one compare-and-swap on the version read.
        let mut next = self.take(binding);
        let Some(open) = next.open.take() else {
            self.release_alias(&retry_id, alias_version);
            return Err(self.deny(caller(CallerMisuse::InactiveRound), rejected(&next)));
        };
        next.live_id = retry_id.clone();
        next.used_ids.push(retry_id.clone());
        next.alias_versions.push(alias_version);
        let (next, new_version) = match self.store(next, Some(version)) {
            Ok(stored) => stored,
            Err((e, mut back)) => {
                self.release_alias(&retry_id, alias_version);
                // The event names the binding as it was: the round it failed to consume.
                back.open = Some(open);
                back.live_id = request_id.clone();
                let event = rejected(&back);
                return Err(self.deny(e, event));
            }
        };
        if let Err(e) = self.audit(submitted) {
            // The round is consumed but the trail does not show it: the retry must not go out.
            let _ = self.end(&next, new_version, TerminalOutcome::Error, Some(e.code()));
            return Err(Denial::unaudited(e));
        }

        Ok(Retry {
            request_json: request_text(&retry_id, &next.fixed.method, &params),
            round: open.number,
            consent_receipt_id: receipt_id,
        })
    }

    /// Everything a retry needs before the round is consumed: the checks, the answers, the
    /// retry id reserved and the consent obtained.
    fn prepare_retry(
        &mut self,
        binding: &Binding,
        r: &RetryRequest,
    ) -> Result<Prepared, GateError> {
        let open = match (&binding.open, binding.live_id == r.request_id) {
            (Some(open), true) => open,
            _ => return Err(caller(CallerMisuse::InactiveRound)),
        };
        let retry_id = r
            .retry_id
            .clone()
            .validated()
            .map_err(|_| caller(CallerMisuse::RetryIdNotNew))?;
        if binding.used_ids.contains(&retry_id) {
            return Err(caller(CallerMisuse::RetryIdNotNew));
        }
        // The params a retry is rebuilt from must be the ones registered: a record read from
        // storage may have been rewritten behind the gate. (A binding this instance registered
        // and still holds in its cache is the one it hashed; the cache is keyed by version.)
        let params_changed = !binding.params_hashed_here
            && digest::sha256_hex(binding.fixed.params_json.get().as_bytes())
                != binding.fixed.params_sha256;
        if binding.fixed.user != r.user || binding.fixed.tenant != r.tenant || params_changed {
            return Err(caller(CallerMisuse::IdentityOrArgumentMismatch));
        }
        let responses = match json::parse_strict(&r.responses_json, limits::RESPONSES) {
            Ok(Value::Object(m)) => m,
            Ok(_) => {
                return Err(caller(CallerMisuse::InvalidInputResponse(
                    "`inputResponses` must be an object".into(),
                )));
            }
            Err(e) => {
                return Err(caller(CallerMisuse::InvalidInputResponse(match e {
                    JsonError::Syntax(w) | JsonError::Limit(w) => w,
                    JsonError::DuplicateKey(k) => format!("the key `{k}` appears twice"),
                })));
            }
        };
        responses::check_responses(&responses, &open.inputs)?;
        // Read before anything is reserved or asked, so a corrupt record can never leave a
        // `consented` or `submitted` event for a retry that does not go out.
        let params = canonical::CanonicalObject::parse(binding.fixed.params_json.get())
            .ok_or(GateError::Host(HostFault::StorageCorrupted))?;

        // Single use, step 1: reserve the retry id against every live binding. Done before
        // consent, so the trail never shows consent for a retry whose id is taken.
        let Some(alias_version) = self.reserve_alias(&retry_id, binding)? else {
            return Err(caller(CallerMisuse::RetryIdNotNew));
        };

        // Consent: exactly this view, exactly these answers. A state-only round sends
        // nothing of the user's (the spec lets the client retry at once): no prompt.
        let (receipt_id, responses_json) = if open.inputs.is_empty() {
            (None, None)
        } else {
            let responses_json = canonical::to_canonical(&Value::Object(responses));
            match self.consent(binding, open, &responses_json, &retry_id) {
                // The binding may have expired while the user decided: no retry then.
                Ok(_) if self.expired(binding) => {
                    self.release_alias(&retry_id, alias_version);
                    return Err(caller(CallerMisuse::InactiveRound));
                }
                Ok(id) => (Some(id), Some(responses_json)),
                Err(e) => {
                    self.release_alias(&retry_id, alias_version);
                    return Err(e);
                }
            }
        };

        // Built from the registered params: nothing of an earlier round can be carried along.
        // The answers go out as the exact text the user consented to.
        let mut added: Vec<(&str, &str)> = Vec::with_capacity(2);
        if let Some(responses_json) = &responses_json {
            added.push(("inputResponses", responses_json));
        }
        let state_json = open.state.as_deref().map(|state| {
            let mut out = String::with_capacity(state.len().saturating_add(2));
            canonical::write_string(&mut out, state);
            out
        });
        if let Some(state_json) = &state_json {
            added.push(("requestState", state_json));
        }
        let Some(params) = params.with(&added) else {
            // Registration refuses params that carry either key: only a corrupt record can.
            self.release_alias(&retry_id, alias_version);
            return Err(GateError::Host(HostFault::StorageCorrupted));
        };
        Ok(Prepared {
            retry_id,
            alias_version,
            receipt_id,
            params,
        })
    }

    /// Ask the consent import about exactly this view and these answers, check the receipt,
    /// and audit it. Returns the receipt id.
    fn consent(
        &mut self,
        binding: &Binding,
        open: &OpenRound,
        responses_json: &str,
        retry_id: &RequestId,
    ) -> Result<String, GateError> {
        let prompt = ConsentPrompt {
            view_json: open.view_json.clone(),
            view_sha256: open.view_sha256.clone(),
            responses_sha256: digest::sha256_hex(responses_json.as_bytes()),
            responses_json: responses_json.to_owned(),
        };
        let receipt = self.host.consent().request_consent(&prompt);
        // The user may have taken minutes: what follows happens now, not when the call began.
        self.begin_call();
        let receipt =
            receipt.map_err(|e| GateError::Host(HostFault::ConsentUnavailable(e.message)))?;
        let id_ok = !receipt.receipt_id.is_empty()
            && receipt.receipt_id.len() <= limits::MAX_RECEIPT_ID_BYTES
            && receipt.receipt_id.bytes().all(|b| b.is_ascii_graphic());
        if !id_ok {
            return Err(GateError::Host(HostFault::ConsentUnavailable(
                "the receipt id must be 1 to 128 printable ascii bytes".into(),
            )));
        }
        if receipt.decision != ConsentDecision::Granted {
            return Err(caller(CallerMisuse::ConsentRefused));
        }
        let same = |a: &str, b: &str| digest::bytes_equal(a.as_bytes(), b.as_bytes());
        if !same(&receipt.view_sha256, &prompt.view_sha256)
            || !same(&receipt.responses_sha256, &prompt.responses_sha256)
        {
            return Err(caller(CallerMisuse::ConsentMismatch));
        }
        let consented = binding
            .event(EventKind::Consented)
            .set_str(Field::Outcome, "granted")
            .set(Field::ConsentReceiptId, receipt.receipt_id.clone())
            .set(Field::RetryId, retry_id.to_json());
        self.audit(consented)?;
        Ok(receipt.receipt_id)
    }

    // ---- finish and expiry ---------------------------------------------------------------

    /// End a binding from the caller's side.
    pub fn finish(
        &mut self,
        request_id: &RequestId,
        outcome: CallerOutcome,
    ) -> Result<TerminalOutcome, Denial> {
        self.begin_call();
        let (binding, version) = self
            .load(request_id)
            .map_err(Denial::unaudited)?
            .ok_or_else(|| Denial::unaudited(caller(CallerMisuse::UnknownRequest)))?;
        let (terminal, reason) = if self.expired(&binding) {
            (TerminalOutcome::Expired, None)
        } else {
            match &outcome {
                CallerOutcome::Cancelled => (TerminalOutcome::Cancelled, None),
                CallerOutcome::Error(code) => {
                    // The reason goes into the audit trail: codes only, never caller text.
                    let is_code = !code.is_empty()
                        && code.len() <= 64
                        && code
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
                    let reason = if is_code {
                        code.clone()
                    } else {
                        "caller_error".to_owned()
                    };
                    (TerminalOutcome::Error, Some(reason))
                }
            }
        };
        self.end(&binding, version, terminal, reason.as_deref())
            .map_err(Denial::unaudited)?;
        Ok(terminal)
    }

    /// End every binding whose lifetime has passed.
    pub fn expire_stale(&mut self) -> Result<u32, Denial> {
        self.begin_call();
        let keys = self
            .host
            .storage()
            .list_keys(ID_PREFIX)
            .map_err(|e| Denial::unaudited(storage_failed(e)))?;
        let mut ended = 0u32;
        for key in keys {
            let Some(found) = self
                .host
                .storage()
                .get(&key)
                .map_err(|e| Denial::unaudited(storage_failed(e)))?
            else {
                continue;
            };
            // Pointers are skipped: their record is listed under its own key.
            if !is_record(&found.value) {
                continue;
            }
            // Only what `load` would accept: this format, under its own original id's key.
            let Ok(binding) = Binding::decode(&found.value) else {
                continue;
            };
            if binding.key() != key {
                continue;
            }
            if self.expired(&binding) {
                match self.end(&binding, found.version, TerminalOutcome::Expired, None) {
                    Ok(()) => ended = ended.saturating_add(1),
                    // Someone else ended or changed it meanwhile: theirs is the last word.
                    Err(GateError::Host(HostFault::StateAlreadyUsed)) => {}
                    Err(e) => return Err(Denial::unaudited(e)),
                }
            }
        }
        Ok(ended)
    }
}

enum Judged {
    Complete,
    Error(i64),
    Round(round::Round),
}

enum Judgement {
    /// Deny, leave the binding as it is.
    Ignore(GateError),
    /// Deny and end the binding.
    End(GateError),
}

/// A retry checked, its id reserved and its consent given; the round not yet consumed.
struct Prepared {
    retry_id: RequestId,
    alias_version: u64,
    receipt_id: Option<String>,
    /// The retry's params, canonical JSON: the registered ones with the answers (none in a
    /// state-only round) and the state (when the server sent one).
    params: String,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::policy::DeprecatedMethod;
    use proptest::prelude::*;

    fn fixed(id: RequestId, server: ServerIdentity, text: &str, deprecated: bool) -> Fixed {
        let params = canonical::to_canonical(&serde_json::json!({"name": text, "arguments": {}}));
        Fixed {
            original_id: id,
            server,
            user: text.to_owned(),
            tenant: format!("{text}-tenant"),
            user_sha256: digest::digest_str(text),
            tenant_sha256: digest::digest_str("t"),
            method: "tools/call".into(),
            name: text.to_owned(),
            audit_name: text.to_owned(),
            params_sha256: digest::sha256_hex(params.as_bytes()),
            params_json: RawValue::from_string(params).unwrap(),
            policy: Policy {
                allowed_deprecated: if deprecated {
                    vec![
                        DeprecatedMethod::RootsList,
                        DeprecatedMethod::SamplingCreateMessage,
                    ]
                } else {
                    Vec::new()
                },
                policy_version: text.to_owned(),
                ..Policy::default()
            },
            declared: Declared {
                form: true,
                url: deprecated,
                roots: !deprecated,
                sampling: false,
                sampling_tools: deprecated,
            },
            created_at_ms: u64::MAX,
            expires_at_ms: 1,
            rendered: std::cell::OnceCell::new(),
        }
    }

    fn arb_id() -> impl Strategy<Value = RequestId> {
        prop_oneof![
            any::<i64>().prop_map(RequestId::Number),
            "\\PC{0,12}".prop_map(RequestId::Text),
            prop::sample::select(vec!["\"", "\\", "\n", "\u{1}", "\u{7f}", "é😀", "\u{2028}"])
                .prop_map(|s| RequestId::Text(s.to_owned())),
        ]
    }

    fn arb_text() -> impl Strategy<Value = String> {
        prop_oneof![
            "\\PC{0,16}",
            "[\"\\\\\n\t\u{0}-\u{1f}\u{7f}é😀\u{2028}a-z]{0,16}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The record text written by hand is, as JSON, exactly what serde's derive writes,
        /// and a record reads back as it was written.
        #[test]
        fn records_are_what_serde_writes_and_read_back_whole(
            id in arb_id(),
            live in arb_id(),
            text in arb_text(),
            state in prop::option::of(arb_text()),
            origin in any::<bool>(),
            deprecated in any::<bool>(),
            open in any::<bool>(),
            versions in prop::collection::vec(any::<u64>(), 0..3),
        ) {
            let server = if origin {
                ServerIdentity::Origin(format!("https://{text}/"))
            } else {
                ServerIdentity::Endpoint(text.clone())
            };
            let f = fixed(id.clone(), server, &text, deprecated);
            let hand: Value = serde_json::from_str(&f.record_json()).unwrap();
            prop_assert_eq!(&hand, &serde_json::to_value(&f).unwrap());

            let view = canonical::to_canonical(&serde_json::json!({"effects": [text.clone()], "round": 1}));
            let mut inputs = BTreeMap::new();
            inputs.insert("u".to_owned(), InputRule::Url { host: text.clone() });
            inputs.insert(text.clone(), InputRule::Roots);
            let binding = Binding {
                fixed_json: Rc::from(f.record_json()),
                fixed: Rc::new(f),
                live_id: live.clone(),
                used_ids: vec![id, live],
                alias_versions: versions,
                rounds: 7,
                open: open.then(|| OpenRound {
                    number: 3,
                    state_sha256: state.as_deref().map(digest::digest_str),
                    state,
                    inputs,
                    view_json: view.clone(),
                    view_sha256: digest::sha256_hex(view.as_bytes()),
                    rendered: std::cell::OnceCell::new(),
                }),
                audited: open,
                params_hashed_here: true,
            };
            let bytes = binding.encode().unwrap();
            let back = Binding::decode(&bytes).unwrap();
            prop_assert_eq!(&*back.fixed_json, &*binding.fixed_json);
            prop_assert_eq!(
                serde_json::to_value(&*back.fixed).unwrap(),
                serde_json::to_value(&*binding.fixed).unwrap()
            );
            prop_assert_eq!(&back.live_id, &binding.live_id);
            prop_assert_eq!(&back.used_ids, &binding.used_ids);
            prop_assert_eq!(&back.alias_versions, &binding.alias_versions);
            prop_assert_eq!(back.rounds, binding.rounds);
            prop_assert_eq!(back.audited, binding.audited);
            prop_assert!(!back.params_hashed_here);
            match (&back.open, &binding.open) {
                (Some(a), Some(b)) => {
                    prop_assert_eq!(a.number, b.number);
                    prop_assert_eq!(&a.state, &b.state);
                    prop_assert_eq!(&a.state_sha256, &b.state_sha256);
                    prop_assert_eq!(&a.inputs, &b.inputs);
                    prop_assert_eq!(&a.view_json, &b.view_json);
                    prop_assert_eq!(&a.view_sha256, &b.view_sha256);
                }
                (None, None) => {}
                _ => prop_assert!(false, "the open round did not read back"),
            }
            // And a second write of what was read gives the same bytes.
            prop_assert_eq!(back.encode().unwrap(), bytes);
        }
    }
}
