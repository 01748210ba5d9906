//! The MCP request headers: `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` checked
//! against the body they mirror (the `=?base64?…?=` sentinel decoded, a header given twice
//! refused), and which headers cross the proxy in each direction.
//!
//! The headers are checked because an intermediary or server that routes or authorises on
//! them would otherwise act on a tool other than the one the gate bound. They are then passed
//! on as the client sent them: the gate keeps the method, the name and the protocol version
//! of what it sends, so they stay true of the text that goes upstream.

use crate::ids::MAX_MESSAGE_BYTES;
use base64::Engine as _;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use mrtr_gate_host::core::parse_members;

/// The protocol version the client speaks, mirrored from `params._meta`.
pub const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// The JSON-RPC method, mirrored from the body.
pub const METHOD: &str = "mcp-method";
/// The tool or prompt name, or the resource URI, mirrored from the params.
pub const NAME: &str = "mcp-name";
/// The 2025-era protocol session, opaque to the proxy both ways.
pub const SESSION: &str = "mcp-session-id";
/// A 2025-era stream resumption: never passed on (a replayed stream could carry a response
/// around the gate).
pub const LAST_EVENT_ID: &str = "last-event-id";

/// The body's member a protocol version is read from, inside `params._meta`.
const PROTOCOL_VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";

/// Headers that describe one connection, never the message (RFC 9110 7.6.1), and those the
/// proxy sets itself for the next hop.
const NOT_COPIED: [&str; 12] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "accept-encoding",
];

/// Why the headers disagree with the body (HTTP 400, JSON-RPC −32020).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch(pub String);

/// The values a header names, decoded: `None` if the header is absent, an error if it is
/// given twice, is not text, or carries a sentinel that does not decode.
fn mirrored(headers: &HeaderMap, name: &str) -> Result<Option<String>, Mismatch> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        // A reader of the first copy and a reader of the last would disagree.
        return Err(Mismatch(format!(
            "the {name} header is given more than once"
        )));
    }
    let text = value
        .to_str()
        .map_err(|_| Mismatch(format!("the {name} header is not visible ascii")))?;
    decode_sentinel(text).map(Some).ok_or_else(|| {
        Mismatch(format!(
            "the {name} header's base64 sentinel does not decode"
        ))
    })
}

/// A header value as the sender meant it: `=?base64?<payload>?=` is the canonical base64 of
/// UTF-8 text; anything else is the text itself. `None`: a sentinel that is not canonical
/// base64 of UTF-8 (it can match no body value).
pub fn decode_sentinel(value: &str) -> Option<String> {
    let Some(payload) = value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    else {
        return Some(value.to_owned());
    };
    // The standard engine refuses missing padding and non-zero trailing bits: only the
    // canonical form an encoder writes is read.
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(payload)
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// What a client message mirrored in the headers says.
#[derive(Debug, Default, PartialEq, Eq)]
struct Body {
    method: Option<String>,
    /// `params._meta`'s protocol version: `Some(None)` when present but not a string.
    version: Option<Option<String>>,
    /// Whether the method is one whose name is mirrored (`Mcp-Name`).
    name_bearing: bool,
    /// `params.name` (`tools/call`, `prompts/get`) or `params.uri` (`resources/read`):
    /// `Some(None)` when present but not a string.
    name: Option<Option<String>>,
}

fn read_body(text: &str) -> Body {
    let mut body = Body::default();
    let Ok(members) = parse_members(text, MAX_MESSAGE_BYTES) else {
        return body;
    };
    body.method = members
        .get("method")
        .and_then(|m| serde_json::from_str::<String>(m.get()).ok());
    let name_member = match body.method.as_deref() {
        Some("tools/call" | "prompts/get") => Some("name"),
        Some("resources/read") => Some("uri"),
        _ => None,
    };
    body.name_bearing = name_member.is_some();
    let Some(params) = members
        .get("params")
        .and_then(|p| parse_members(p.get(), MAX_MESSAGE_BYTES).ok())
    else {
        return body;
    };
    let as_string =
        |raw: &serde_json::value::RawValue| serde_json::from_str::<String>(raw.get()).ok();
    body.version = params
        .get("_meta")
        .and_then(|m| parse_members(m.get(), MAX_MESSAGE_BYTES).ok())
        .and_then(|meta| meta.get(PROTOCOL_VERSION_META).map(|v| as_string(v)));
    body.name = name_member.and_then(|key| params.get(key).map(|v| as_string(v)));
    body
}

/// Check the mirrored headers of a POST against its body (one JSON-RPC message, unparsed
/// bodies are left to the engine). A message that carries a protocol version in its
/// `_meta` (2026-07-28 on) must mirror it and its method, and its name when it has one; an
/// earlier message is checked only on the headers it sends. Any mirrored header given twice
/// is refused whatever the body.
pub fn check_mirrored(headers: &HeaderMap, body_text: &str) -> Result<(), Mismatch> {
    let version = mirrored(headers, PROTOCOL_VERSION)?;
    let method = mirrored(headers, METHOD)?;
    let name = mirrored(headers, NAME)?;
    let body = read_body(body_text);
    let refuse = |what: &str| {
        Err(Mismatch(format!(
            "the {what} header does not match the body"
        )))
    };
    // A 2025-era client sends the version header with bodies that carry none: only a body
    // that names its version is held to it, and then every mirrored header is required.
    let modern = body.version.is_some();
    match (&version, &body.version) {
        (_, None) => {}
        (Some(h), Some(Some(v))) if h == v => {}
        _ => return refuse(PROTOCOL_VERSION),
    }
    match (&method, &body.method) {
        (Some(h), Some(m)) if h != m => return refuse(METHOD),
        (None, Some(_)) if modern => return refuse(METHOD),
        _ => {}
    }
    if body.name_bearing {
        match (&name, &body.name) {
            (Some(h), Some(Some(n))) if h == n => {}
            (None, Some(Some(_))) if !modern => {}
            (None, None | Some(None)) => {}
            _ => return refuse(NAME),
        }
    }
    Ok(())
}

/// Whether `name` never crosses the proxy (besides the ones named in `Connection`).
fn never_copied(name: &HeaderName) -> bool {
    NOT_COPIED.contains(&name.as_str())
}

/// The headers named by `Connection` (hop-by-hop by declaration).
fn connection_named(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

/// The headers of a client's request as they go upstream: end-to-end headers as sent
/// (`Mcp-Session-Id`, `Mcp-Param-*`, the mirrored headers, `Authorization`, …), without the
/// hop-by-hop ones, `Host`, `Content-Length`, `Origin` (checked here, the proxy's own
/// concern), `Last-Event-ID`, and the headers in `strip` (a trusted principal's); and
/// `Accept-Encoding: identity`, so the gate judges text, not compressed bytes.
pub fn upstream_request(client: &HeaderMap, strip: &[&str]) -> HeaderMap {
    let named = connection_named(client);
    let mut out = HeaderMap::with_capacity(client.len() + 1);
    for (name, value) in client {
        let n = name.as_str();
        if never_copied(name)
            || n == "origin"
            || n == LAST_EVENT_ID
            || named.iter().any(|c| c == n)
            || strip.iter().any(|s| s.eq_ignore_ascii_case(n))
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out.insert(
        header::ACCEPT_ENCODING,
        HeaderValue::from_static("identity"),
    );
    out
}

/// The headers of the upstream's answer as they go to the client: end-to-end ones as sent
/// (`Mcp-Session-Id` among them), without the hop-by-hop ones, `Content-Length` (the body
/// the client gets is the proxy's) and `Content-Type` (set for what the proxy sends).
pub fn client_response(upstream: &HeaderMap) -> HeaderMap {
    let named = connection_named(upstream);
    let mut out = HeaderMap::with_capacity(upstream.len());
    for (name, value) in upstream {
        let n = name.as_str();
        if never_copied(name)
            || name == header::CONTENT_TYPE
            || name == header::CONTENT_ENCODING
            || named.iter().any(|c| c == n)
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// Whether the upstream's body is encoded (`Content-Encoding` other than `identity`): the
/// gate would judge compressed bytes, so such an answer is refused.
pub fn encoded(upstream: &HeaderMap) -> bool {
    upstream
        .get_all(header::CONTENT_ENCODING)
        .iter()
        .any(|v| !v.as_bytes().eq_ignore_ascii_case(b"identity"))
}

/// The media type of a `Content-Type`, lowercased, without parameters.
pub fn media_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    let media = value.split(';').next()?.trim().to_ascii_lowercase();
    Some(media)
}

/// Whether `origin` (an `Origin` header's value) is one a local client sends: `http`
/// or `https` on a loopback host, any port; or one of `allowed`, exactly.
pub fn origin_allowed(origin: &str, allowed: &[String]) -> bool {
    if allowed.iter().any(|a| a == origin) {
        return true;
    }
    origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .and_then(host_of)
        .is_some_and(|host| match host {
            Host::Name(name) => name == "localhost",
            Host::Ip(ip) => ip.is_loopback(),
        })
}

/// Whether `host` (a `Host` header's value) names this proxy as a local client or a front
/// would: an IP address (any; a rebinding page can only name its own domain), `localhost`,
/// or one of `allowed` exactly (a front's name, `name` or `name:port`). Another name is a
/// page that rebound its domain to the proxy's address.
pub fn host_allowed(host: &str, allowed: &[String]) -> bool {
    if allowed.iter().any(|a| a.eq_ignore_ascii_case(host)) {
        return true;
    }
    host_of(host).is_some_and(|h| match h {
        Host::Name(name) => name.eq_ignore_ascii_case("localhost"),
        Host::Ip(_) => true,
    })
}

/// The host of an authority (`host`, `host:port`, `[v6]`, `[v6]:port`).
enum Host<'a> {
    Name(&'a str),
    Ip(std::net::IpAddr),
}

fn host_of(authority: &str) -> Option<Host<'_>> {
    if let Some(v6) = authority.strip_prefix('[') {
        let (h, port) = v6.split_once(']')?;
        if !(port.is_empty() || port.strip_prefix(':').is_some_and(is_port)) {
            return None;
        }
        return h
            .parse::<std::net::Ipv6Addr>()
            .ok()
            .map(|ip| Host::Ip(ip.into()));
    }
    let host = match authority.split_once(':') {
        Some((h, port)) if is_port(port) => h,
        Some(_) => return None,
        None => authority,
    };
    if host.is_empty() {
        return None;
    }
    Some(match host.parse::<std::net::Ipv4Addr>() {
        Ok(ip) => Host::Ip(ip.into()),
        Err(_) => Host::Name(host),
    })
}

fn is_port(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && s.parse::<u16>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_bytes(v.as_bytes()).unwrap(),
            );
        }
        h
    }

    const CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book é","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;

    fn modern(name: &str) -> Vec<(&'static str, String)> {
        vec![
            ("mcp-protocol-version", "2026-07-28".into()),
            ("mcp-method", "tools/call".into()),
            ("mcp-name", name.to_owned()),
        ]
    }

    fn check(pairs: &[(&str, String)], body: &str) -> Result<(), Mismatch> {
        let pairs: Vec<(&str, &str)> = pairs.iter().map(|(n, v)| (*n, v.as_str())).collect();
        check_mirrored(&headers(&pairs), body)
    }

    #[test]
    fn headers_that_mirror_the_body_pass_the_sentinel_decoded() {
        // base64 of "book é" in UTF-8.
        assert_eq!(check(&modern("=?base64?Ym9vayDDqQ==?="), CALL), Ok(()));
        // A 2025-era body (no version in `_meta`) need not mirror anything.
        let old = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#;
        assert_eq!(check(&[], old), Ok(()));
        assert_eq!(check(&[("mcp-name", "t".into())], old), Ok(()));
        assert_eq!(
            check(&[("mcp-protocol-version", "2025-06-18".into())], old),
            Ok(())
        );
        // A notification and a response.
        assert_eq!(
            check(
                &[("mcp-method", "notifications/initialized".into())],
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
            ),
            Ok(())
        );
        assert_eq!(
            check(&[], r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Ok(())
        );
    }

    #[test]
    fn a_header_that_differs_is_missing_or_is_given_twice_is_refused() {
        let refused = |pairs: Vec<(&'static str, String)>, body: &str| {
            assert!(check(&pairs, body).is_err(), "{pairs:?} {body}");
        };
        refused(modern("book e"), CALL);
        refused(modern("book é"), CALL); // not header-safe: never a raw value
        refused(modern("=?base64?Ym9vayDDqQ?=").to_vec(), CALL); // padding missing
        refused(modern("=?base64?Ym9vayDDqR==?=").to_vec(), CALL); // trailing bits
        refused(modern("=?base64?/w==?=").to_vec(), CALL); // not UTF-8
        let mut twice = modern("=?base64?Ym9vayDDqQ==?=");
        twice.push(("Mcp-Name", "=?base64?Ym9vayDDqQ==?=".into()));
        refused(twice, CALL);
        let mut method = modern("=?base64?Ym9vayDDqQ==?=");
        method[1].1 = "tools/list".into();
        refused(method, CALL);
        let mut version = modern("=?base64?Ym9vayDDqQ==?=");
        version[0].1 = "2025-11-25".into();
        refused(version, CALL);
        // A modern body whose headers are missing.
        refused(vec![], CALL);
        refused(modern("=?base64?Ym9vayDDqQ==?=")[..2].to_vec(), CALL);
        // A name header on a body with none.
        let no_name = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        refused(modern("x"), no_name);
        // A version that is not a string matches no header.
        let bad_version = CALL.replace(r#""2026-07-28""#, "20260728");
        refused(modern("=?base64?Ym9vayDDqQ==?="), &bad_version);
        // Duplicates are refused whatever the body.
        refused(
            vec![("mcp-method", "a".into()), ("mcp-method", "a".into())],
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
        );
    }

    #[test]
    fn resources_are_named_by_uri() {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a b","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        let mut h = modern("file:///a b");
        h[1].1 = "resources/read".into();
        // An inner space is header-safe: sent raw, compared raw.
        assert_eq!(check(&h, body), Ok(()));
        h[2].1 = "=?base64?ZmlsZTovLy9hIGI=?=".into();
        assert_eq!(check(&h, body), Ok(()));
    }

    #[test]
    fn hop_by_hop_host_origin_resumption_and_principal_headers_stay_behind() {
        let client = headers(&[
            ("host", "proxy"),
            ("connection", "keep-alive, x-secret"),
            ("x-secret", "1"),
            ("keep-alive", "timeout=5"),
            ("content-length", "10"),
            ("accept-encoding", "gzip"),
            ("origin", "http://localhost"),
            ("last-event-id", "5"),
            ("x-user", "alice"),
            ("mcp-session-id", "s1"),
            ("mcp-param-region", "eu"),
            ("authorization", "Bearer t"),
            ("accept", "application/json, text/event-stream"),
        ]);
        let up = upstream_request(&client, &["X-User"]);
        let names: Vec<&str> = up.keys().map(|k| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "mcp-session-id",
                "mcp-param-region",
                "authorization",
                "accept",
                "accept-encoding"
            ]
        );
        assert_eq!(up["accept-encoding"], "identity");
        let down = client_response(&headers(&[
            ("transfer-encoding", "chunked"),
            ("content-type", "text/event-stream"),
            ("mcp-session-id", "s1"),
            ("set-cookie", "a=b"),
        ]));
        let names: Vec<&str> = down.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["mcp-session-id", "set-cookie"]);
        assert!(encoded(&headers(&[("content-encoding", "gzip")])));
        assert!(!encoded(&headers(&[("content-encoding", "identity")])));
        assert!(!encoded(&headers(&[])));
    }

    #[test]
    fn only_loopback_or_listed_origins_are_allowed() {
        for ok in [
            "http://localhost",
            "http://localhost:6274",
            "https://127.0.0.1:8080",
            "http://127.9.9.9",
            "http://[::1]:3000",
            "http://[::1]",
        ] {
            assert!(origin_allowed(ok, &[]), "{ok}");
        }
        for bad in [
            "null",
            "http://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example",
            "http://localhost:99999",
            "http://localhost:",
            "file://localhost",
            "http://[::2]",
            "http://10.0.0.1",
            "",
        ] {
            assert!(!origin_allowed(bad, &[]), "{bad}");
        }
        assert!(origin_allowed(
            "https://app.example",
            &["https://app.example".into()]
        ));
    }

    #[test]
    fn only_addresses_localhost_or_listed_hosts_are_allowed() {
        for ok in [
            "localhost",
            "LOCALHOST:6274",
            "127.0.0.1:8080",
            "10.1.2.3",
            "[::1]:3000",
            "[::1]",
            "[fd00::2]:443",
        ] {
            assert!(host_allowed(ok, &[]), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "127.0.0.1.evil.example",
            "127.0.0.1.nip.io:8080",
            "localhost:99999",
            "localhost:",
            ":8080",
            "[::1",
            "[::1]x",
            "[evil.example]",
            "",
            "localhost:80:80",
        ] {
            assert!(!host_allowed(bad, &[]), "{bad}");
        }
        let fronts = ["mcp-gw.internal:8443".to_owned()];
        assert!(host_allowed("mcp-gw.internal:8443", &fronts));
        assert!(!host_allowed("mcp-gw.internal", &fronts));
    }
}
