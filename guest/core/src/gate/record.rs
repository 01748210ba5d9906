//! A binding as stored: one record under the key of its original id, and under the key of
//! each retry id it used a pointer to that id (its JSON). Keys are per server (SDK clients
//! number requests per connection: id 1 to one server and id 1 to another are two requests). The record is written by hand
//! (`Binding::encode`), not by serde: serde's pass costs a measurable share of a form round
//! (`./scripts/instructions`; the figure is in docs/performance.md). Records are read back by serde, and a
//! property test holds the hand-written text to what serde's derive writes.

use crate::audit::{Event, EventKind, Field};
use crate::canonical;
use crate::error::{GateError, HostFault};
use crate::gate::memo::Derived;
use crate::gate::round::{Declared, InputRule};
use crate::ids::{RequestId, ServerIdentity};
use crate::policy::Policy;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use std::rc::Rc;

/// Storage key prefix of every id in use: `<prefix><server key part>/<id as JSON>`
/// ([`ServerIdentity::key_part`]). The key of an original id holds its binding's record (a
/// JSON object), the key of a retry id a pointer (the original id, as JSON).
pub const ID_PREFIX: &str = "mrtr-gate/v3/id/";

/// An open round, as stored (written by [`OpenRound::write_record`], read by serde).
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct OpenRound {
    pub(crate) number: u32,
    pub(crate) state: Option<String>,
    pub(crate) state_sha256: Option<String>,
    pub(crate) inputs: BTreeMap<String, InputRule>,
    /// Canonical JSON, stored as JSON (not as an escaped string): written and read without
    /// escaping a kilobyte per round. Held as the text the gate wrote: no pass to check it.
    #[serde(deserialize_with = "raw_json_text")]
    pub(crate) view_json: String,
    pub(crate) view_sha256: String,
    /// The audit sequence number of this round's `received` event. The round is stored only
    /// after that event was written and read back, so an open round in storage always rests
    /// on an audited `received`; a retry refuses a round without one.
    pub(crate) received_seq: u64,
    /// This round's fields of every event, rendered on first use.
    #[serde(skip)]
    pub(crate) rendered: Derived<Rc<RenderedRound>>,
}

/// The canonical JSON of the round fields every event of an open round repeats.
#[derive(Debug)]
pub(crate) struct RenderedRound {
    state_sha256: Rc<str>,
    schema_sha256: Rc<str>,
    input_kinds: Rc<str>,
    view_sha256: Rc<str>,
}

impl OpenRound {
    fn rendered(&self) -> Rc<RenderedRound> {
        Rc::clone(self.rendered.get_or_init(|| {
            // Canonical order is UTF-16 order; the map's byte order differs from it only
            // when a key holds a character above U+FFFF.
            let mut inputs: Vec<_> = self.inputs.iter().collect();
            if inputs.iter().any(|(key, _)| !key.is_ascii()) {
                inputs.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            }
            let mut schemas = String::from("{");
            let mut kinds = String::from("{");
            for (key, rule) in inputs {
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

/// A string's canonical JSON text.
pub(crate) fn json_string(s: &str) -> Rc<str> {
    let mut out = String::with_capacity(s.len().saturating_add(2));
    canonical::write_string(&mut out, s);
    Rc::from(out)
}

/// What a binding fixes at registration and never changes.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Fixed {
    pub(crate) original_id: RequestId,
    pub(crate) server: ServerIdentity,
    pub(crate) user: String,
    pub(crate) tenant: String,
    /// Digests recorded in every event (computed once, at registration).
    pub(crate) user_sha256: String,
    pub(crate) tenant_sha256: String,
    pub(crate) method: String,
    /// The name shown to the user (tool or prompt name, resource URI).
    pub(crate) name: String,
    /// The name as the audit trail may record it (a resource URI through `redact::uri`).
    pub(crate) audit_name: String,
    /// Canonical JSON, stored as JSON; checked against `params_sha256` before every retry.
    pub(crate) params_json: Box<RawValue>,
    /// The params as the client wrote their numbers ([`canonical::to_sent_form`]), when that
    /// differs from `params_json`: what goes upstream, the request and every retry. A record
    /// read from storage is held to `params_json` before a retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) params_sent: Option<Box<RawValue>>,
    pub(crate) params_sha256: String,
    pub(crate) policy: Policy,
    pub(crate) declared: Declared,
    pub(crate) created_at_ms: u64,
    pub(crate) expires_at_ms: u64,
    /// The server as the trail records it (canonical JSON text), when the gate already
    /// knew it at registration (the last server it redacted): redacting hashes the endpoint.
    #[serde(skip)]
    pub(crate) audited_server: Derived<Rc<str>>,
    /// The server's part of this binding's keys ([`ServerIdentity::key_part`]), when known.
    #[serde(skip)]
    pub(crate) server_key: Derived<Rc<str>>,
    /// The fields every event of this binding repeats, rendered on first use.
    #[serde(skip)]
    pub(crate) rendered: Derived<Rc<RenderedFixed>>,
}

/// The canonical JSON of the fixed fields every event of a binding repeats.
#[derive(Debug)]
pub(crate) struct RenderedFixed {
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
    /// The server's part of this binding's keys.
    pub(crate) fn server_key(&self) -> &Rc<str> {
        self.server_key
            .get_or_init(|| Rc::from(self.server.key_part()))
    }

    fn rendered(&self) -> Rc<RenderedFixed> {
        Rc::clone(self.rendered.get_or_init(|| {
            Rc::new(RenderedFixed {
                request_id: Rc::from(self.original_id.key_fragment()),
                server: Rc::clone(
                    self.audited_server
                        .get_or_init(|| json_string(&self.server.audited())),
                ),
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
    /// The params text that goes upstream: the client's numbers as written.
    pub(crate) fn sent_params(&self) -> &str {
        self.params_sent
            .as_deref()
            .map_or_else(|| self.params_json.get(), RawValue::get)
    }

    /// The fixed part's record text, written once at registration. Read back by serde (the
    /// field names and shapes are `Fixed`'s; a test holds the two together).
    pub(crate) fn record_json(&self) -> String {
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
        if let Some(sent) = &self.params_sent {
            out.push_str(",\"params_sent\":");
            out.push_str(sent.get());
        }
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
    pub(crate) fn write_record(&self, out: &mut String) -> Result<(), GateError> {
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
        out.push_str(",\"received_seq\":");
        canonical::write_u64_digits(out, self.received_seq);
        out.push('}');
        Ok(())
    }
}

/// A live binding: its fixed part, shared and serialized once, and what moves.
#[derive(Clone, Debug)]
pub(crate) struct Binding {
    pub(crate) fixed: Rc<Fixed>,
    /// `fixed` as stored: written once at registration and copied into every record written
    /// (about two thirds of a record that used to be serialized three times a round).
    pub(crate) fixed_json: Rc<str>,
    pub(crate) live_id: RequestId,
    pub(crate) used_ids: Vec<RequestId>,
    /// The storage version of each retry id's pointer, in `used_ids` order after the
    /// original: the pointers are deleted with one compare-and-swap each, no read first.
    /// `UNKNOWN_VERSION` (0) for a pointer written in the same storage call as the record
    /// (`BindingStore::consume`): learned when the pointer is next read, else read first.
    pub(crate) alias_versions: Vec<u64>,
    pub(crate) rounds: u32,
    /// The storage version the record was registered at (the version it still has when the
    /// binding's first round arrives: nothing writes it before): what makes every consent
    /// view of this binding its own and names the binding in its audit events, since a store
    /// never reuses a key's version (the `storage` contract), not even after the key was
    /// deleted. Stored from the first round on (the registration's write cannot know its own
    /// version); filled in from the version read or written until then
    /// (`Binding::decode_at`, `BindingStore::store`).
    pub(crate) binding_version: Option<u64>,
    pub(crate) open: Option<OpenRound>,
    pub(crate) audited: bool,
    /// False from the moment a retry consumed the round (the live id is the retry's) until
    /// its `submitted` event is confirmed and the retry is handed out: a response for the
    /// live id before then answers a request not sent yet, and is refused. Without it,
    /// another process could audit the next round's `received` before this one's
    /// `submitted` (found by the schedule checker: docs/checker-counterexamples.md, F2).
    pub(crate) sent: bool,
    /// True when this instance hashed `fixed.params_json` itself (it registered the binding):
    /// a record read from storage is checked against `params_sha256` before a retry.
    pub(crate) params_hashed_here: bool,
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
    binding_version: Option<u64>,
    open: Option<OpenRound>,
    audited: bool,
    sent: bool,
}

const BINDING_FORMAT: u32 = 5;

impl Binding {
    pub(crate) fn key(&self) -> String {
        id_key(self.fixed.server_key(), &self.fixed.original_id)
    }

    /// The key of `id` on this binding's server.
    pub(crate) fn id_key(&self, id: &RequestId) -> String {
        id_key(self.fixed.server_key(), id)
    }

    /// The record's text: `RecordIn`'s fields, written directly (the fixed part and the
    /// view are text already; serde would check and copy them again).
    pub(crate) fn encode(&self) -> Result<String, GateError> {
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
        out.push_str(",\"binding_version\":");
        match self.binding_version {
            Some(v) => canonical::write_u64_digits(&mut out, v),
            None => out.push_str("null"),
        }
        out.push_str(",\"open\":");
        match &self.open {
            Some(open) => open.write_record(&mut out)?,
            None => out.push_str("null"),
        }
        out.push_str(",\"audited\":");
        out.push_str(if self.audited { "true" } else { "false" });
        out.push_str(",\"sent\":");
        out.push_str(if self.sent { "true" } else { "false" });
        out.push('}');
        Ok(out)
    }

    /// A record read from storage at `version`: [`Self::decode`], with `binding_version`
    /// filled in from `version` when the record does not carry it yet (a record not written
    /// since its registration is still at the version it was registered at).
    pub(crate) fn decode_at(text: &str, version: u64) -> Result<Self, GateError> {
        let mut binding = Self::decode(text)?;
        binding.binding_version.get_or_insert(version);
        Ok(binding)
    }

    /// A record read back: refused unless it is this format and parses whole.
    pub(crate) fn decode(text: &str) -> Result<Self, GateError> {
        let corrupted = |_| GateError::Host(HostFault::StorageCorrupted);
        let r: RecordIn = serde_json::from_str(text).map_err(corrupted)?;
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
            binding_version: r.binding_version,
            open: r.open,
            audited: r.audited,
            sent: r.sent,
            params_hashed_here: false,
        })
    }

    /// An event of `kind` with everything this binding knows filled in.
    pub(crate) fn event(&self, kind: EventKind) -> Event {
        self.event_with(kind, self.open.as_ref())
    }

    /// An event of `kind` for this binding with `open` as its open round (the `received`
    /// event is written before the round is stored in the binding).
    pub(crate) fn event_with(&self, kind: EventKind, open: Option<&OpenRound>) -> Event {
        let f = self.fixed.rendered();
        let mut e = Event::new(kind, Rc::clone(self.fixed.server_key()))
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
        // Which binding of the id: an id may be registered again once its record is gone,
        // and a late event of the ended binding must not be read as the new one's (F4).
        if let Some(v) = self.binding_version {
            e = e.set(Field::Binding, v);
        }
        if let Some(open) = open {
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

/// The storage key of an id on a server (the id as canonical JSON: `1` and `"1"` are
/// different ids). `server_key` is [`ServerIdentity::key_part`]: a fixed number of hex
/// digits, so the `/` after it is unambiguous.
pub(crate) fn id_key(server_key: &str, id: &RequestId) -> String {
    let mut key = String::with_capacity(
        ID_PREFIX
            .len()
            .saturating_add(server_key.len())
            .saturating_add(25),
    );
    key.push_str(ID_PREFIX);
    key.push_str(server_key);
    key.push('/');
    id.write_json(&mut key);
    key
}

/// A record is a JSON object; a pointer is a JSON number or string.
pub(crate) fn is_record(value: &str) -> bool {
    value.starts_with('{')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest;
    use crate::policy::DeprecatedMethod;
    use proptest::prelude::*;
    use serde_json::Value;

    fn fixed(id: RequestId, server: ServerIdentity, text: &str, deprecated: bool) -> Fixed {
        // Half of them with a number the client wrote otherwise than the canonical layout.
        let value: Value = serde_json::from_str(&format!(
            r#"{{"name":{},"arguments":{{"n":{}}}}}"#,
            serde_json::Value::String(text.to_owned()),
            if deprecated { "1.0" } else { "1" }
        ))
        .unwrap();
        let params = canonical::to_canonical(&value);
        let sent = canonical::to_sent_form(&value);
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
            params_sha256: digest::text_sha256_hex(&params),
            params_sent: (sent != params).then(|| RawValue::from_string(sent).unwrap()),
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
            audited_server: Derived::new(),
            server_key: Derived::new(),
            rendered: Derived::new(),
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
                binding_version: versions.first().copied(),
                alias_versions: versions,
                rounds: 7,
                open: open.then(|| OpenRound {
                    number: 3,
                    state_sha256: state.as_deref().map(digest::digest_str),
                    state,
                    inputs,
                    view_json: view.clone(),
                    view_sha256: digest::text_sha256_hex(&view),
                    received_seq: 9,
                    rendered: Derived::new(),
                }),
                audited: open,
                sent: !open,
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
            prop_assert_eq!(back.binding_version, binding.binding_version);
            prop_assert_eq!(back.audited, binding.audited);
            prop_assert_eq!(back.sent, binding.sent);
            prop_assert!(!back.params_hashed_here);
            match (&back.open, &binding.open) {
                (Some(a), Some(b)) => {
                    prop_assert_eq!(a.number, b.number);
                    prop_assert_eq!(&a.state, &b.state);
                    prop_assert_eq!(&a.state_sha256, &b.state_sha256);
                    prop_assert_eq!(&a.inputs, &b.inputs);
                    prop_assert_eq!(&a.view_json, &b.view_json);
                    prop_assert_eq!(&a.view_sha256, &b.view_sha256);
                    prop_assert_eq!(a.received_seq, b.received_seq);
                }
                (None, None) => {}
                _ => prop_assert!(false, "the open round did not read back"),
            }
            // And a second write of what was read gives the same bytes.
            prop_assert_eq!(back.encode().unwrap(), bytes);
        }
    }
}
