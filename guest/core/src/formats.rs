//! The four string formats MCP form fields may ask for: `email`, `uri`, `date`, `date-time`.
//!
//! Each check is deliberately conservative: it accepts a subset of what JSON Schema's format
//! definitions (and `jsonschema`'s implementation of them) accept, never more. A value a
//! reference validator would refuse is refused here too; a few exotic-but-valid spellings
//! (quoted email local parts, IP-literal hosts, leap seconds) are refused as well. The
//! differential property test in `tests/oracle.rs` holds the implementation to that.

/// True when `value` is valid for `format` (unknown formats never reach here: the schema
/// check refuses them).
pub fn check(format: &str, value: &str) -> bool {
    match format {
        "email" => email(value),
        "uri" => uri(value),
        "date" => date(value),
        "date-time" => date_time(value),
        _ => false,
    }
}

fn digits(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// RFC 3339 `full-date`: `YYYY-MM-DD`, a real day of a real month.
pub fn date(s: &str) -> bool {
    let (Some(y), Some(m), Some(d)) = (s.get(0..4), s.get(5..7), s.get(8..10)) else {
        return false;
    };
    if s.len() != 10 || s.get(4..5) != Some("-") || s.get(7..8) != Some("-") {
        return false;
    }
    let (Some(y), Some(m), Some(d)) = (digits(y), digits(m), digits(d)) else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

/// RFC 3339 `partial-time` plus `time-offset`: `HH:MM:SS[.frac](Z|±HH:MM)`. Leap seconds
/// (`:60`) are refused.
fn time(s: &str) -> bool {
    let (Some(h), Some(mi), Some(se)) = (s.get(0..2), s.get(3..5), s.get(6..8)) else {
        return false;
    };
    if s.get(2..3) != Some(":") || s.get(5..6) != Some(":") {
        return false;
    }
    let (Some(h), Some(mi), Some(se)) = (digits(h), digits(mi), digits(se)) else {
        return false;
    };
    if h > 23 || mi > 59 || se > 59 {
        return false;
    }
    let mut rest = s.get(8..).unwrap_or_default();
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = frac.get(n..).unwrap_or_default();
    }
    match rest {
        "Z" | "z" => true,
        offset => {
            let sign_ok = offset.starts_with('+') || offset.starts_with('-');
            let (Some(oh), Some(om)) = (offset.get(1..3), offset.get(4..6)) else {
                return false;
            };
            sign_ok
                && offset.len() == 6
                && offset.get(3..4) == Some(":")
                && digits(oh).is_some_and(|v| v <= 23)
                && digits(om).is_some_and(|v| v <= 59)
        }
    }
}

/// RFC 3339 `date-time`.
pub fn date_time(s: &str) -> bool {
    let (Some(d), Some(sep), Some(t)) = (s.get(0..10), s.get(10..11), s.get(11..)) else {
        return false;
    };
    matches!(sep, "T" | "t") && date(d) && time(t)
}

/// A DNS host name in ASCII: dot-separated labels of letters, digits and inner hyphens,
/// 1..=63 bytes each, 253 in all, at least two labels. A label with `--` in its third and
/// fourth places must be an IDNA A-label (`xn--`, see [`a_label`]); other such labels are
/// reserved (RFC 5891) and refused.
fn hostname(s: &str) -> bool {
    if s.is_empty() || s.len() > 253 {
        return false;
    }
    let mut labels = 0;
    for label in s.split('.') {
        labels += 1;
        let ok = !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
            && (label.get(2..4) != Some("--") || a_label(label));
        if !ok {
            return false;
        }
    }
    labels >= 2
}

/// The letters an A-label may decode to here, each range only letters (general category
/// L*): accented Latin, Greek, Cyrillic, Hebrew and Arabic letters, kana, the CJK unified
/// ideographs of Unicode 1.1 and Hangul syllables. JSON Schema's reference implementations
/// take any IDNA2008 PVALID code point (letters, marks, digits, under contextual rules);
/// without a general-category table in the sandbox the gate accepts these, which no such
/// rule refuses, and refuses the rest (marks, non-ASCII digits, the contextual ones).
const A_LABEL_LETTERS: [(char, char); 12] = [
    ('\u{00DF}', '\u{00F6}'),
    ('\u{00F8}', '\u{00FF}'),
    ('\u{0100}', '\u{024F}'),
    ('\u{03AC}', '\u{03CE}'),
    ('\u{0430}', '\u{045F}'),
    ('\u{05D0}', '\u{05EA}'),
    ('\u{0621}', '\u{063A}'),
    ('\u{0641}', '\u{064A}'),
    ('\u{3041}', '\u{3096}'),
    ('\u{30A1}', '\u{30FA}'),
    ('\u{4E00}', '\u{9FA5}'),
    ('\u{AC00}', '\u{D7A3}'),
];

/// An IDNA A-label (`xn--` and Punycode, lowercase as it is registered): its Punycode
/// decodes, re-encodes to the same text, holds at least one non-ASCII letter, every
/// non-ASCII character is one of [`A_LABEL_LETTERS`], and the decoded label passes UTS #46
/// (NFC, valid code points only, hyphen and bidi rules).
fn a_label(label: &str) -> bool {
    let Some(payload) = label.strip_prefix("xn--") else {
        return false;
    };
    let Some(decoded) = idna::punycode::decode_to_string(payload) else {
        return false;
    };
    let letters_ok = !decoded.is_ascii()
        && decoded.chars().all(|c| {
            c.is_ascii_lowercase()
                || c.is_ascii_digit()
                || c == '-'
                || A_LABEL_LETTERS
                    .iter()
                    .any(|&(lo, hi)| (lo..=hi).contains(&c))
        });
    if !letters_ok || idna::punycode::encode_str(&decoded).as_deref() != Some(payload) {
        return false;
    }
    let (unicode, result) = idna::uts46::Uts46::new().to_unicode(
        label.as_bytes(),
        idna::uts46::AsciiDenyList::STD3,
        idna::uts46::Hyphens::Check,
    );
    result.is_ok() && unicode == decoded.as_str()
}

/// `local@domain` with a dot-atom local part (RFC 5322 `atext`, no quoting) and a DNS
/// host name as the domain. JSON Schema's `email` is RFC 5321's ASCII mailbox: an
/// internationalised domain is accepted in its A-label form (`user@xn--bcher-kva.example`);
/// a Unicode domain (U-label) is `idn-email`, a format the spec does not offer, and is
/// refused.
pub fn email(s: &str) -> bool {
    let Some((local, domain)) = s.rsplit_once('@') else {
        return false;
    };
    const ATEXT: &[u8] = b"!#$%&'*+-/=?^_`{|}~";
    let local_ok = !local.is_empty()
        && local.len() <= 64
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..")
        && local
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || ATEXT.contains(&b));
    local_ok && s.len() <= 254 && hostname(domain)
}

fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn sub_delim(b: u8) -> bool {
    matches!(
        b,
        b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
    )
}

/// Every byte is allowed by `extra` or is `unreserved`/`sub-delims`, and every `%` starts a
/// two-hex-digit escape.
fn chars_ok(s: &str, extra: &[u8]) -> bool {
    let bytes = s.as_bytes();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = |j: usize| bytes.get(j).is_some_and(u8::is_ascii_hexdigit);
            if !(hex(i + 1) && hex(i + 2)) {
                return false;
            }
            i += 3;
            continue;
        }
        if !(unreserved(b) || sub_delim(b) || extra.contains(&b)) {
            return false;
        }
        i += 1;
    }
    true
}

/// An absolute RFC 3986 URI (`scheme:hier-part[?query][#fragment]`), without IP-literal
/// (`[...]`) hosts.
pub fn uri(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once(':') else {
        return false;
    };
    let scheme_ok = scheme
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    if !scheme_ok {
        return false;
    }
    let (before_fragment, fragment) = match rest.split_once('#') {
        Some((a, f)) => (a, Some(f)),
        None => (rest, None),
    };
    let (hier, query) = match before_fragment.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (before_fragment, None),
    };
    let tail_ok = |t: Option<&str>| t.is_none_or(|t| chars_ok(t, b":@/?"));
    if !tail_ok(query) || !tail_ok(fragment) {
        return false;
    }
    match hier.strip_prefix("//") {
        Some(after) => {
            let (authority, path) = match after.find('/') {
                Some(i) => (
                    after.get(..i).unwrap_or_default(),
                    after.get(i..).unwrap_or_default(),
                ),
                None => (after, ""),
            };
            let (userinfo, hostport) = match authority.rsplit_once('@') {
                Some((u, h)) => (Some(u), h),
                None => (None, authority),
            };
            let (host, port) = match hostport.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            };
            userinfo.is_none_or(|u| chars_ok(u, b":"))
                && chars_ok(host, b"")
                && port.is_none_or(|p| p.bytes().all(|b| b.is_ascii_digit()))
                && chars_ok(path, b":@/")
        }
        // path-absolute, path-rootless or path-empty: segments of pchars.
        None => chars_ok(hier, b":@/"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        for ok in ["2024-02-29", "1999-12-31", "0001-01-01"] {
            assert!(date(ok), "{ok}");
        }
        for bad in [
            "2023-02-29",
            "2024-13-01",
            "2024-00-10",
            "2024-1-01",
            "24-01-01",
            "2024-01-32",
            "2024/01/01",
            "२०२४-01-01",
            "",
        ] {
            assert!(!date(bad), "{bad}");
        }
    }

    #[test]
    fn date_times() {
        for ok in [
            "2024-02-29T23:59:59Z",
            "2024-02-29t00:00:00.123+05:30",
            "2024-01-01T12:00:00-00:00",
        ] {
            assert!(date_time(ok), "{ok}");
        }
        for bad in [
            "2024-02-29T24:00:00Z",
            "2024-02-29T23:59:60Z",
            "2024-02-29 23:59:59Z",
            "2024-02-29T23:59:59",
            "2024-02-29T23:59:59.Z",
            "2024-02-29T23:59:59+5:30",
        ] {
            assert!(!date_time(bad), "{bad}");
        }
    }

    #[test]
    fn emails() {
        for ok in ["a@b.co", "first.last+tag@sub.example.org", "x_y-z@a-b.io"] {
            assert!(email(ok), "{ok}");
        }
        for bad in [
            "a@b",
            "@b.co",
            "a@",
            "a..b@c.co",
            ".a@c.co",
            "a@-b.co",
            "a b@c.co",
            "\"q\"@c.co",
            "a@b..co",
            "a@xn--.co",
            "a@ab--c.co",
        ] {
            assert!(!email(bad), "{bad}");
        }
    }

    #[test]
    fn email_domains_take_idna_a_labels_only() {
        for ok in [
            "a@xn--bcher-kva.example",
            "a@xn--d1acpjx3f.xn--p1ai",
            "a@sub.xn--r8jz45g.jp",
        ] {
            assert!(email(ok), "{ok}");
        }
        for bad in [
            // U-labels: `idn-email`, not `email`.
            "a@bücher.example",
            "a@例え.jp",
            // Not canonical (uppercase), undecodable, plain ASCII, or not IDNA-valid
            // (a leading combining mark, a symbol, a character UTS #46 maps).
            "a@XN--BCHER-KVA.example",
            "a@xn--bcher-KVA.example",
            "a@xn--zz.example",
            "a@xn--abc-.example",
            "a@xn---abc.example",
            "a@xn--a-wbb.example",
            "a@xn--n3h.example",
            "a@xn--4th.example",
            "a@yn--bcher-kva.example",
        ] {
            assert!(!email(bad), "{bad}");
        }
    }

    #[test]
    fn uris() {
        for ok in [
            "https://example.com/a?b=c#d",
            "urn:isbn:0451450523",
            "mailto:a@b.co",
            "file:///etc/x",
            "http://u:p@h:8080/%20",
        ] {
            assert!(uri(ok), "{ok}");
        }
        for bad in [
            "example.com",
            "/relative",
            "1http://x",
            "http://h:port/",
            "http://[::1]/",
            "http://a b/",
            "http://h/%zz",
            "http://h/a#b#c",
            "",
        ] {
            assert!(!uri(bad), "{bad}");
        }
    }
}
