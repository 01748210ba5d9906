//! The answer to a retry is never cacheable.
//!
//! MCP 2026-07-28 lets a client cache a complete `resources/read` result for the `ttlMs` its
//! server gives, keyed on the method and the URI, but forbids caching a result produced by
//! retrying a request through MRTR (one that carried `inputResponses` or `requestState`): it
//! depends on answers the key lacks, so a later read served from the cache would hand over what
//! an earlier round's consent bought without asking again. Some clients cache it anyway (the
//! TypeScript SDK 2.4.0 does, docs/probe.md). The proxy therefore hands a retry's complete
//! result to the client with `ttlMs` 0: every client reads it as stale at once. That one value
//! is the only byte changed besides the id (docs/proxy.md, "Every message").

use mrtr_gate_host::core::parse_members;
use mrtr_gate_host::wire::MAX_MESSAGE_BYTES;

/// `message` (a JSON-RPC response the gate judged complete) with its result's `ttlMs` set to
/// `0`; unchanged when the result has no `ttlMs` or it is `0` already.
pub fn uncacheable(message: &str) -> String {
    match ttl_span(message) {
        Some((start, end)) if message.get(start..end) != Some("0") => {
            let (before, after) = (
                message.get(..start).unwrap_or_default(),
                message.get(end..).unwrap_or_default(),
            );
            format!("{before}0{after}")
        }
        _ => message.to_owned(),
    }
}

/// The byte range of `result.ttlMs`'s value in `message`.
fn ttl_span(message: &str) -> Option<(usize, usize)> {
    let members = parse_members(message, MAX_MESSAGE_BYTES).ok()?;
    let result = members.get("result")?.get();
    let ttl = parse_members(result, MAX_MESSAGE_BYTES)
        .ok()?
        .get("ttlMs")?
        .get();
    // The parser hands out slices of the text it was given: the value's place is its offset.
    let start = (ttl.as_ptr() as usize).checked_sub(message.as_ptr() as usize)?;
    let end = start.checked_add(ttl.len())?;
    (message.get(start..end) == Some(ttl)).then_some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retrys_result_is_stale_at_once_and_nothing_else_changes() {
        let judged = r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","ttlMs" : 600000,"cacheScope":"private","contents":[{"uri":"a","text":"ttlMs 9"}],"big":12345678901234567890}}"#;
        assert_eq!(
            uncacheable(judged),
            r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","ttlMs" : 0,"cacheScope":"private","contents":[{"uri":"a","text":"ttlMs 9"}],"big":12345678901234567890}}"#
        );
    }

    #[test]
    fn what_has_no_ttl_or_cannot_be_read_passes_as_it_is() {
        for text in [
            r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","ttlMs":0}}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","x":{"ttlMs":5}}}"#,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"m","ttlMs":5}}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":[1]}"#,
            "not json",
            "",
        ] {
            assert_eq!(uncacheable(text), text);
        }
    }
}
