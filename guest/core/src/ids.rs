//! JSON-RPC ids and server identities: the two things every binding is keyed and checked on.

use crate::error::{CallerMisuse, GateError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Longest string id accepted, in bytes.
pub const MAX_STRING_ID_BYTES: usize = 256;

/// Largest integer id accepted, in magnitude: 2^53 - 1, the largest every JSON parser reads
/// exactly (I-JSON, RFC 7493; JavaScript's `Number.MAX_SAFE_INTEGER`). Beyond it, `2^53` and
/// `2^53 + 1` are one number to a JavaScript server and one canonical text, so the gate could
/// neither send the id back exactly nor tell the two apart.
pub const MAX_INTEGER_ID: u64 = (1 << 53) - 1;

/// A JSON-RPC id. `Number(1)` and `Text("1")` are different ids.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    /// An integer id.
    Number(i64),
    /// A string id.
    Text(String),
}

impl RequestId {
    /// Refuse ids the gate will not bind (empty or oversized strings).
    pub fn validated(self) -> Result<Self, GateError> {
        match &self {
            Self::Text(s) if s.is_empty() || s.len() > MAX_STRING_ID_BYTES => {
                Err(GateError::Caller(CallerMisuse::InvalidRequestId))
            }
            Self::Number(n) if n.unsigned_abs() > MAX_INTEGER_ID => {
                Err(GateError::Caller(CallerMisuse::InvalidRequestId))
            }
            _ => Ok(self),
        }
    }

    /// The id as it appears in JSON.
    pub fn to_json(&self) -> Value {
        match self {
            Self::Number(n) => Value::from(*n),
            Self::Text(s) => Value::String(s.clone()),
        }
    }

    /// Read a JSON-RPC id off the wire: integers (within i64) and strings only.
    pub fn from_json(value: &Value) -> Option<Self> {
        match value {
            Value::Number(n) => n.as_i64().map(Self::Number),
            Value::String(s) if !s.is_empty() && s.len() <= MAX_STRING_ID_BYTES => {
                Some(Self::Text(s.clone()))
            }
            _ => None,
        }
    }

    /// An unambiguous storage-key fragment: the canonical JSON of the id (`1` vs `"1"`).
    pub fn key_fragment(&self) -> String {
        let mut out = String::new();
        self.write_json(&mut out);
        out
    }

    /// Append the id's canonical JSON (no `Value` built: ids are written several times a round).
    pub fn write_json(&self, out: &mut String) {
        match self {
            Self::Number(n) => crate::canonical::write_i64(out, *n),
            Self::Text(s) => crate::canonical::write_string(out, s),
        }
    }
}

/// The largest endpoint id, in bytes.
pub const MAX_ENDPOINT_ID_BYTES: usize = 128;
/// The largest origin URL, in bytes.
pub const MAX_ORIGIN_BYTES: usize = 2048;

/// The server the host verified at the transport, normalised.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerIdentity {
    /// A normalised `http`/`https` endpoint URL.
    Origin(String),
    /// A host-assigned endpoint id.
    Endpoint(String),
}

/// Hex digits of a server's key part ([`ServerIdentity::key_part`]): 128 bits.
pub const KEY_PART_HEX_DIGITS: usize = 32;

impl ServerIdentity {
    /// Normalise an endpoint URL: scheme and host lowercased, IDNA to ASCII, default port
    /// elided, path normalised, the query kept as sent (hosted servers take a key there:
    /// `?api_key=`) and bound with the rest. Userinfo and a fragment are refused, not
    /// dropped: HTTP clients never send either (the Fetch standard refuses a request URL with
    /// credentials; a fragment stays on the client), so a caller who passes them has passed
    /// something other than the endpoint the transport verified.
    pub fn origin(raw: &str) -> Result<Self, GateError> {
        let bad = |why: &str| GateError::Caller(CallerMisuse::InvalidServerIdentity(why.into()));
        if raw.is_empty() || raw.len() > MAX_ORIGIN_BYTES {
            return Err(bad(&format!(
                "the origin must be 1 to {MAX_ORIGIN_BYTES} bytes"
            )));
        }
        if raw
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || c == '\\')
        {
            return Err(bad(
                "the origin contains white space, control characters or `\\`",
            ));
        }
        let url = url::Url::parse(raw).map_err(|_| bad("the origin is not a url"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad("the origin must be an http or https url"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(bad("the origin must not carry userinfo"));
        }
        if url.fragment().is_some() {
            return Err(bad("the origin must not carry a fragment"));
        }
        if url.host().is_none() {
            return Err(bad("the origin has no host"));
        }
        Ok(Self::Origin(url.to_string()))
    }

    /// Validate a host-assigned endpoint id.
    pub fn endpoint(raw: &str) -> Result<Self, GateError> {
        let ok = !raw.is_empty()
            && raw.len() <= MAX_ENDPOINT_ID_BYTES
            && raw
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._:/@-".contains(&b));
        if ok {
            Ok(Self::Endpoint(raw.to_owned()))
        } else {
            Err(GateError::Caller(CallerMisuse::InvalidServerIdentity(
                format!(
                    "an endpoint id is 1 to {MAX_ENDPOINT_ID_BYTES} bytes of `[A-Za-z0-9._:/@-]`"
                ),
            )))
        }
    }

    /// How the server is shown to people: the whole normalised endpoint.
    pub fn display(&self) -> String {
        match self {
            Self::Origin(url) => url.clone(),
            Self::Endpoint(id) => format!("endpoint:{id}"),
        }
    }

    /// The server's part of a storage key: the first 128 bits of the SHA-256 of
    /// [`Self::display`], in hex (32 digits: fixed length and key-safe whatever the endpoint
    /// holds; `https://…` and `endpoint:…` never meet). 128 bits, not 256: every key carries
    /// it across the storage boundary several times a round, and its length is measurable
    /// there (docs/performance.md). A binding found under a key is still compared with the
    /// server whole, so even a collision could not let one server's messages reach another's
    /// binding; it could at most make an id look in use (and finding a server endpoint that
    /// collides with a given one takes about 2^128 hashes).
    pub fn key_part(&self) -> String {
        let mut hex = crate::digest::text_sha256_hex(&self.display());
        hex.truncate(KEY_PART_HEX_DIGITS);
        hex
    }

    /// How the server is recorded in the audit trail: an endpoint URL's path and query may
    /// hold a token, so only its origin and a digest of the whole ([`crate::redact::uri`]).
    /// An endpoint id is a name the host assigns, recorded as given.
    pub fn audited(&self) -> String {
        match self {
            Self::Origin(url) => crate::redact::uri(url),
            Self::Endpoint(id) => format!("endpoint:{id}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_of_different_types_differ() {
        assert_ne!(
            RequestId::Number(1).key_fragment(),
            RequestId::Text("1".into()).key_fragment()
        );
        assert_eq!(RequestId::from_json(&Value::from(1.5)), None);
        assert_eq!(RequestId::from_json(&Value::Null), None);
        assert_eq!(RequestId::from_json(&Value::from("")), None);
    }

    #[test]
    fn key_parts_are_fixed_length_hex_and_tell_servers_apart() {
        let servers = [
            ServerIdentity::origin("https://example.com/mcp").ok(),
            ServerIdentity::origin("https://example.com/mcp?api_key=x").ok(),
            ServerIdentity::origin("https://example.com/other").ok(),
            ServerIdentity::endpoint("stdio:weather").ok(),
            ServerIdentity::endpoint("https:a").ok(),
        ];
        let parts: Vec<String> = servers
            .iter()
            .flatten()
            .map(ServerIdentity::key_part)
            .collect();
        assert_eq!(parts.len(), servers.len());
        for p in &parts {
            assert_eq!(p.len(), KEY_PART_HEX_DIGITS);
            assert!(
                p.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            );
        }
        let distinct: std::collections::BTreeSet<_> = parts.iter().collect();
        assert_eq!(distinct.len(), parts.len());
    }

    #[test]
    fn origins_normalise_and_refuse_smuggling() {
        let a = ServerIdentity::origin("HTTPS://Example.COM:443/mcp/../mcp").ok();
        assert_eq!(
            a,
            Some(ServerIdentity::Origin("https://example.com/mcp".into()))
        );
        for bad in [
            "https://user:pw@example.com/",
            "https://user@example.com/",
            "https://example.com/#f",
            "https://example.com/?token=x#f",
            "ftp://example.com/",
            "https://exa\nmple.com/",
            "https://example.com\\@evil.com/",
            "not a url",
            "",
        ] {
            assert!(ServerIdentity::origin(bad).is_err(), "{bad}");
        }
        assert!(ServerIdentity::endpoint("stdio:weather-1").is_ok());
    }

    #[test]
    fn origins_keep_and_bind_their_query() {
        let a = ServerIdentity::origin("HTTPS://Host.example/mcp?api_key=K1").ok();
        assert_eq!(
            a,
            Some(ServerIdentity::Origin(
                "https://host.example/mcp?api_key=K1".into()
            ))
        );
        assert_ne!(
            ServerIdentity::origin("https://host.example/mcp?api_key=K1").ok(),
            ServerIdentity::origin("https://host.example/mcp?api_key=K2").ok()
        );
        assert_ne!(
            ServerIdentity::origin("https://host.example/mcp?api_key=K1").ok(),
            ServerIdentity::origin("https://host.example/mcp").ok()
        );
    }

    /// The component normalises what the host passes, and the host may pass a normalised
    /// endpoint back (a stored identity): normalising twice must give the same identity.
    #[test]
    fn normalising_an_endpoint_with_a_query_is_idempotent() {
        for raw in [
            "https://h.example/mcp?api_key=K&x=%zz",
            "https://h.example/mcp?q='\"<>`{}|^",
            "https://h.example/mcp?",
            "https://h.example?k=v",
            "https://h.example/a/../b?k=%41",
            "HTTPS://H.example:443/mcp?K=V",
            "https://[::1]:8443/mcp?k=v",
        ] {
            let once = ServerIdentity::origin(raw).unwrap_or_else(|e| panic!("{raw}: {e}"));
            let twice =
                ServerIdentity::origin(&once.display()).unwrap_or_else(|e| panic!("{raw}: {e}"));
            assert_eq!(once, twice, "{raw}");
        }
    }

    #[test]
    fn the_audited_form_is_the_origin_and_a_digest() {
        let raw = "https://host.example/api/mcp/s/TOKEN/mcp?api_key=KEY";
        let s = ServerIdentity::origin(raw).unwrap_or_else(|e| panic!("{e}"));
        let audited = s.audited();
        assert_eq!(
            audited,
            format!(
                "https://host.example#sha256:{}",
                crate::digest::sha256_hex(raw.as_bytes())
            )
        );
        assert_eq!(s.display(), raw);
        let e = ServerIdentity::endpoint("stdio:weather-1").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(e.audited(), "endpoint:stdio:weather-1");
        assert!(ServerIdentity::endpoint("bad id").is_err());
    }
}
