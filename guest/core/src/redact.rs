//! The one redaction policy for every URL and URI that reaches the audit trail: the server
//! endpoint (`server`) and a `resources/read` URI (`name`).
//!
//! A secret can sit anywhere in a URI: in userinfo, in the path (hosted MCP servers put a
//! token there: `https://host/api/mcp/s/<token>/mcp`), in the query (`?api_key=`), in the
//! fragment, or anywhere in an opaque URI the URL parser cannot take apart
//! (`jdbc:mysql://user:pass@db/prod`, `mailto:`, `urn:`). Telling secret parts from harmless
//! ones is guesswork, so the rule keeps only what identifies *where* (the scheme, and for a
//! URI with an authority its host and port) and replaces everything else by a digest of the
//! whole text:
//!
//! - `scheme://host[:port]#sha256:<hex>` for a URI with an authority (`scheme://...`), the
//!   userinfo dropped;
//! - `scheme:#sha256:<hex>` for any other URI with a scheme (opaque: nothing after the scheme
//!   is kept);
//! - `sha256:<hex>` for text with no scheme.
//!
//! The digest is SHA-256 of the exact text the binding holds (its UTF-8 bytes, as
//! `printf %s "$uri" | sha256sum` computes it), so an auditor who knows the URI
//! can confirm an event names it, and two endpoints on one host stay distinct in the trail.
//! The policy works on the text, not on a parsed URL: it does not depend on what a parser
//! accepts, and any character outside a plain host name is not kept.

use crate::digest;

/// The longest scheme kept (real schemes are short; a longer one is not kept at all).
const MAX_SCHEME_BYTES: usize = 32;
/// The longest host kept (a DNS name is at most 253 bytes).
const MAX_HOST_BYTES: usize = 253;

/// What the audit trail may record of `uri`: see the module documentation.
pub fn uri(uri: &str) -> String {
    let hex = digest::text_sha256_hex(uri);
    let kept = kept_prefix(uri);
    let mut out = String::with_capacity(kept.len().saturating_add(72));
    out.push_str(&kept);
    if !kept.is_empty() {
        out.push('#');
    }
    out.push_str("sha256:");
    out.push_str(&hex);
    out
}

/// `scheme://host[:port]`, `scheme:`, or nothing.
fn kept_prefix(uri: &str) -> String {
    let Some((scheme, rest)) = uri.split_once(':') else {
        return String::new();
    };
    let scheme_ok = scheme.len() <= MAX_SCHEME_BYTES
        && scheme
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b));
    if !scheme_ok {
        return String::new();
    }
    let mut out = scheme.to_ascii_lowercase();
    out.push(':');
    let Some(after) = rest.strip_prefix("//") else {
        return out;
    };
    let authority = after.split(['/', '?', '#']).next().unwrap_or_default();
    // Userinfo ends at the last `@` of the authority.
    let host_port = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    out.push_str("//");
    if let Some((host, port)) = split_port(host_port)
        && plain_host(host)
    {
        out.push_str(&host.to_ascii_lowercase());
        if let Some(port) = port {
            out.push(':');
            out.push_str(port);
        }
    }
    out
}

/// Split `host[:port]`; `None` when the port is not 1 to 5 digits.
fn split_port(host_port: &str) -> Option<(&str, Option<&str>)> {
    let (host, port) = match host_port.rsplit_once(':') {
        // An IPv6 literal's colons are inside its brackets.
        Some((host, port)) if !port.contains(']') => (host, Some(port)),
        _ => (host_port, None),
    };
    match port {
        Some(p) if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) => None,
        _ => Some((host, port)),
    }
}

/// A registered name of letters, digits, `-` and `.`, or a bracketed IPv6 literal: nothing
/// percent-encoded, nothing that could carry text other than a host.
fn plain_host(host: &str) -> bool {
    if host.is_empty() || host.len() > MAX_HOST_BYTES {
        return false;
    }
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return !inner.is_empty()
            && inner
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b":.".contains(&b));
    }
    host.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-.".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(raw: &str) -> String {
        let out = uri(raw);
        let hex = digest::text_sha256_hex(raw);
        assert!(out.ends_with(&hex), "{out}");
        out.trim_end_matches(&hex)
            .trim_end_matches("sha256:")
            .trim_end_matches('#')
            .to_owned()
    }

    #[test]
    fn keeps_scheme_host_and_port_only() {
        assert_eq!(
            kept("https://host.example/api/mcp/s/TOKEN/mcp"),
            "https://host.example"
        );
        assert_eq!(
            kept("https://host.example:8443/mcp?api_key=TOKEN#F"),
            "https://host.example:8443"
        );
        assert_eq!(
            kept("HTTPS://bob:PW@Files.Example.com/doc"),
            "https://files.example.com"
        );
        assert_eq!(kept("https://a@b:PW@host.example/"), "https://host.example");
        assert_eq!(kept("http://[::1]:8080/x"), "http://[::1]:8080");
        assert_eq!(kept("file:///project/README.md"), "file://");
        assert_eq!(kept("jdbc:mysql://user:PW@db/prod"), "jdbc:");
        assert_eq!(kept("mailto:SECRET@example.com"), "mailto:");
        assert_eq!(kept("urn:uuid:SECRET"), "urn:");
        assert_eq!(kept("custom+x://TOKEN%40x@host/"), "custom+x://host");
        assert_eq!(uri("no scheme").len(), "sha256:".len() + 64);
    }

    #[test]
    fn hosts_and_ports_that_are_not_plain_are_not_kept() {
        assert_eq!(kept("https://ho%41st/"), "https://");
        assert_eq!(kept("https://host:SECRET/"), "https://");
        assert_eq!(kept("https://host:123456/"), "https://");
        assert_eq!(kept("https://[SECRET]/"), "https://");
        assert_eq!(kept("https://h\u{f6}st/"), "https://");
        assert_eq!(kept("1http://host/"), "");
        assert_eq!(kept(&format!("{}://host/", "a".repeat(40))), "");
        assert_eq!(kept(":"), "");
        assert_eq!(kept(""), "");
    }

    /// The output grammar: nothing, `scheme:`, `scheme://` or `scheme://host[:port]` in
    /// lowercase plain characters, then the digest. No other character can reach the trail.
    fn well_formed(out: &str) -> bool {
        let (kept, hex) = match out.rsplit_once("sha256:") {
            Some((k, h)) => (k, h),
            None => return false,
        };
        if !crate::digest::is_sha256_hex(hex) {
            return false;
        }
        if kept.is_empty() {
            return true;
        }
        let Some(kept) = kept.strip_suffix('#') else {
            return false;
        };
        let Some((scheme, rest)) = kept.split_once(':') else {
            return false;
        };
        let scheme_ok = scheme
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+-.".contains(&b));
        let rest_ok = rest.is_empty()
            || rest.strip_prefix("//").is_some_and(|hp| {
                hp.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.:[]".contains(&b))
            });
        scheme_ok && rest_ok
    }

    proptest::proptest! {
        #[test]
        fn any_text_redacts_to_the_grammar_and_never_panics(raw in "\\PC{0,80}") {
            let out = uri(&raw);
            proptest::prop_assert!(well_formed(&out), "{}", out);
        }

        #[test]
        fn a_token_outside_the_host_never_survives(
            token in "[A-Z][A-Za-z0-9_~%-]{7,20}",
            scheme in "[a-zA-Z][a-zA-Z0-9+.-]{0,8}",
            host in "[a-z0-9.-]{1,12}",
            shape in 0usize..8,
        ) {
            let raw = match shape {
                0 => format!("{scheme}://{token}@{host}/"),
                1 => format!("{scheme}://u:{token}@{host}:80/"),
                2 => format!("{scheme}://{host}/{token}"),
                3 => format!("{scheme}://{host}?{token}"),
                4 => format!("{scheme}://{host}#{token}"),
                5 => format!("{scheme}:{token}"),
                6 => format!("{scheme}:x//{token}@{host}"),
                _ => format!("{scheme}://{host}:{token}/"),
            };
            let out = uri(&raw);
            proptest::prop_assert!(well_formed(&out), "{}", out);
            proptest::prop_assert!(!out.contains(&token), "{} keeps {}", out, token);
        }
    }

    #[test]
    fn different_uris_on_one_host_stay_distinct() {
        assert_ne!(
            uri("https://host.example/s/A/mcp"),
            uri("https://host.example/s/B/mcp")
        );
    }
}
