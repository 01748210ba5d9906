//! URL-mode elicitation: refuse what cannot be shown safely, and describe the rest so the
//! user sees where they would go (spec: show the full URL, highlight the domain, warn on
//! Punycode). The gate never fetches the URL.

use crate::error::{GateError, PeerMisbehaved};
use crate::policy::limits;
use serde::{Deserialize, Serialize};

/// A warning shown next to the URL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UrlWarning {
    /// A label of the host is Punycode (`xn--`): the Unicode form may imitate another name.
    Punycode,
    /// A label mixes letters of several scripts (e.g. Latin and Cyrillic).
    MixedScript,
    /// The host is an IP address, not a name.
    IpLiteral,
    /// The port is not 443.
    NonDefaultPort,
}

/// What the consent view shows about a URL.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UrlView {
    /// The full URL, as it will be opened (normalised by the URL parser).
    pub full: String,
    /// The host as sent on the wire (ASCII, Punycode where needed).
    pub ascii_host: String,
    /// The host as a person reads it (Unicode).
    pub unicode_host: String,
    /// The port, when not the default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Reasons to look twice.
    pub warnings: Vec<UrlWarning>,
    /// Does the URL carry a query (it may hold tokens; the audit trail never records it).
    pub has_query: bool,
}

fn unsafe_url(why: &str) -> GateError {
    GateError::Peer(PeerMisbehaved::ServerSentUnsafeUrl(why.into()))
}

/// Check an elicitation URL and describe it.
pub fn check_url(raw: &str) -> Result<(UrlView, url::Url), GateError> {
    if raw.is_empty() || raw.len() > limits::MAX_URL_BYTES {
        return Err(unsafe_url(&format!(
            "the url must be 1 to {} bytes",
            limits::MAX_URL_BYTES
        )));
    }
    // The URL parser silently drops tabs and newlines and reads `\` as `/`: the text a
    // user would see would not be the URL opened. Refuse such input outright.
    if raw
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || c == '\\')
    {
        return Err(unsafe_url(
            "the url contains white space, control characters or `\\`",
        ));
    }
    // `https:///host` and `https:host` parse as `https://host/`: refuse any spelling but the plain one.
    let plain = raw
        .get(..8)
        .is_some_and(|p| p.eq_ignore_ascii_case("https://"))
        && !raw.get(8..).is_some_and(|rest| rest.starts_with('/'));
    if !plain {
        return Err(unsafe_url("the url must start with `https://` and a host"));
    }
    let url = url::Url::parse(raw).map_err(|_| unsafe_url("the url does not parse"))?;
    if url.scheme() != "https" {
        return Err(unsafe_url("only https urls may be opened"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(unsafe_url("the url carries userinfo"));
    }
    let host = url
        .host()
        .ok_or_else(|| unsafe_url("the url has no host"))?;
    let mut warnings = Vec::new();
    let (ascii_host, unicode_host) = match host {
        url::Host::Domain(d) => {
            let (unicode, result) = idna::domain_to_unicode(d);
            if result.is_err() {
                return Err(unsafe_url("the host is not a valid internationalised name"));
            }
            if d.split('.').any(|l| l.starts_with("xn--")) {
                warnings.push(UrlWarning::Punycode);
            }
            if unicode.split('.').any(mixes_scripts) {
                warnings.push(UrlWarning::MixedScript);
            }
            (d.to_owned(), unicode)
        }
        url::Host::Ipv4(_) | url::Host::Ipv6(_) => {
            warnings.push(UrlWarning::IpLiteral);
            let h = host.to_string();
            (h.clone(), h)
        }
    };
    if url.port().is_some() {
        warnings.push(UrlWarning::NonDefaultPort);
    }
    let view = UrlView {
        full: url.to_string(),
        ascii_host,
        unicode_host,
        port: url.port(),
        warnings,
        has_query: url.query().is_some(),
    };
    Ok((view, url))
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Script {
    Latin,
    Greek,
    Cyrillic,
    Armenian,
    Hebrew,
    Arabic,
    Cjk,
    Hangul,
    Other,
}

fn script_of(c: char) -> Option<Script> {
    let u = c as u32;
    if c.is_ascii_digit() || c == '-' || c == '_' {
        return None; // neutral
    }
    Some(match u {
        0x0041..=0x024F | 0x1E00..=0x1EFF | 0x2C60..=0x2C7F | 0xA720..=0xA7FF | 0xFF21..=0xFF5A => {
            Script::Latin
        }
        0x0370..=0x03FF | 0x1F00..=0x1FFF => Script::Greek,
        0x0400..=0x052F | 0x1C80..=0x1C8F | 0x2DE0..=0x2DFF | 0xA640..=0xA69F => Script::Cyrillic,
        0x0530..=0x058F => Script::Armenian,
        0x0590..=0x05FF => Script::Hebrew,
        0x0600..=0x06FF | 0x0750..=0x077F => Script::Arabic,
        // Han, Hiragana and Katakana are written together (Japanese): one bucket.
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF => Script::Cjk,
        0xAC00..=0xD7AF | 0x1100..=0x11FF => Script::Hangul,
        _ => Script::Other,
    })
}

/// True when one label holds letters of more than one script.
fn mixes_scripts(label: &str) -> bool {
    let mut first = None;
    for s in label.chars().filter_map(script_of) {
        match first {
            None => first = Some(s),
            Some(f) if f != s => return true,
            Some(_) => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warnings(raw: &str) -> Vec<UrlWarning> {
        check_url(raw).map(|(v, _)| v.warnings).unwrap_or_default()
    }

    #[test]
    fn refuses_unsafe_urls() {
        for bad in [
            "http://example.com/",
            "javascript:alert(1)",
            "https://user:pw@example.com/",
            "https://user@example.com/",
            "https://exa\tmple.com/",
            "https://example.com\\@evil.com",
            "data:text/html,hi",
            "file:///etc/passwd",
            "https:///nohost",
            "",
        ] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
        let long = format!("https://example.com/{}", "a".repeat(limits::MAX_URL_BYTES));
        assert!(check_url(&long).is_err());
    }

    #[test]
    fn flags_punycode_mixed_script_and_ip_hosts() {
        // "аpple.com" with a Cyrillic а.
        let (v, _) = check_url("https://\u{430}pple.com/login").unwrap_or_else(|e| panic!("{e}"));
        assert!(v.ascii_host.starts_with("xn--"));
        assert_eq!(v.unicode_host, "\u{430}pple.com");
        assert_eq!(
            v.warnings,
            vec![UrlWarning::Punycode, UrlWarning::MixedScript]
        );
        assert_eq!(warnings("https://127.0.0.1/"), vec![UrlWarning::IpLiteral]);
        assert_eq!(warnings("https://0x7f.1/"), vec![UrlWarning::IpLiteral]);
        assert_eq!(
            warnings("https://[::1]:8443/"),
            vec![UrlWarning::IpLiteral, UrlWarning::NonDefaultPort]
        );
        assert!(warnings("https://example.com/pay?x=1").is_empty());
        assert_eq!(
            warnings("https://\u{65e5}\u{672c}.jp/"),
            vec![UrlWarning::Punycode]
        );
    }
}
