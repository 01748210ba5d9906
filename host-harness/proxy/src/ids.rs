//! The ids the proxy sends upstream, and the client's ids put back.
//!
//! A gated request goes upstream under an id the proxy mints, never the client's: the gate
//! keys bindings per server, and every client of one upstream (every SDK client starts at a
//! small integer), every replica on one Redis, would otherwise collide on `1`; and a
//! client's id the gate will not bind (a 300-byte string, an integer past 2^53) still gets
//! its call gated. The answer the gate judged goes back to the client with the client's id
//! written where the minted one was, every other byte as the gate judged it.

use mrtr_gate_host::core::{JsonError, RequestId, parse_members};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The prefix of every minted id. A client's own id that starts with it is refused, so a
/// response can never be taken for another request's.
pub const MINTED_PREFIX: &str = "mg:";

/// The largest message the proxy reads, in bytes ([`mrtr_gate_host::wire`]'s, the gate's own
/// bound).
pub use mrtr_gate_host::wire::MAX_MESSAGE_BYTES;

/// Mints ids unique to this replica: `mg:<nonce, 16 hex>:<counter>`. The engines of one
/// process share its minter ([`IdMinter::shared`]): one nonce names the process in the trail,
/// one counter keeps their ids apart.
#[derive(Debug)]
pub struct IdMinter {
    nonce: String,
    next: Arc<AtomicU64>,
}

impl IdMinter {
    /// Ids under `nonce` (tests name theirs).
    pub fn with_nonce(nonce: u64) -> Self {
        Self {
            nonce: format!("{nonce:016x}"),
            next: Arc::new(AtomicU64::new(1)),
        }
    }

    /// A minter of the same ids as this one (the same nonce, the same counter), for another
    /// engine of the process.
    #[must_use]
    pub fn shared(&self) -> Self {
        Self {
            nonce: self.nonce.clone(),
            next: Arc::clone(&self.next),
        }
    }

    /// Ids under a random nonce, so replicas sharing one store never mint the same id.
    pub fn random() -> Result<Self, String> {
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes)
            .map_err(|e| format!("no randomness from the operating system: {e}"))?;
        Ok(Self::with_nonce(u64::from_le_bytes(bytes)))
    }

    /// This replica's nonce (16 hex digits).
    pub fn nonce(&self) -> &str {
        &self.nonce
    }

    /// The next id.
    pub fn mint(&self) -> RequestId {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        RequestId::Text(format!("{MINTED_PREFIX}{}:{n}", self.nonce))
    }
}

/// Why a message's id could not be replaced.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpliceError {
    /// The message is not one JSON object with unique keys.
    Unreadable(JsonError),
    /// It has no `id` member.
    NoId,
}

/// The byte range of the `id` member's value in `text` (a JSON object, keys unique), and
/// the value's text.
pub fn id_span(text: &str) -> Result<(usize, usize), SpliceError> {
    let members = parse_members(text, MAX_MESSAGE_BYTES).map_err(SpliceError::Unreadable)?;
    let raw = members.get("id").ok_or(SpliceError::NoId)?.get();
    // The parser hands out slices of `text` itself: the id's place is its offset.
    let start = (raw.as_ptr() as usize)
        .checked_sub(text.as_ptr() as usize)
        .ok_or(SpliceError::NoId)?;
    let end = start.checked_add(raw.len()).ok_or(SpliceError::NoId)?;
    match text.get(start..end) {
        Some(found) if found == raw => Ok((start, end)),
        _ => Err(SpliceError::NoId),
    }
}

/// `text` with its `id` member's value replaced by `raw_id` (exact JSON text), every other
/// byte unchanged.
pub fn splice_id(text: &str, raw_id: &str) -> Result<String, SpliceError> {
    let (start, end) = id_span(text)?;
    let before = text.get(..start).ok_or(SpliceError::NoId)?;
    let after = text.get(end..).ok_or(SpliceError::NoId)?;
    let mut out = String::with_capacity(before.len() + raw_id.len() + after.len());
    out.push_str(before);
    out.push_str(raw_id);
    out.push_str(after);
    Ok(out)
}

/// Whether `raw` (the exact JSON text of a client's id) is one the proxy relays: a string
/// (not one of the proxy's own) or a number. JSON-RPC allows `null`, but a response to it
/// cannot be told from the answer to an unreadable message, and MCP forbids it; objects,
/// arrays and booleans are no ids.
pub fn client_id_problem(raw: &str) -> Option<&'static str> {
    match raw.as_bytes().first() {
        Some(b'"') => {
            let reserved =
                serde_json::from_str::<String>(raw).map_or(true, |s| s.starts_with(MINTED_PREFIX));
            reserved.then_some("the id is one the proxy mints for its own requests")
        }
        Some(b'-' | b'0'..=b'9') => None,
        _ => Some("a request id is a string or a number"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINTED: &str = r#""mg:0000000000000007:1""#;

    fn answer(id: &str) -> String {
        format!(r#"{{"jsonrpc":"2.0", "id" : {id} ,"result":{{"id":{id},"content":[]}}}}"#)
    }

    #[test]
    fn minted_ids_are_unique_and_carry_the_nonce() {
        let m = IdMinter::with_nonce(7);
        assert_eq!(m.mint(), RequestId::Text("mg:0000000000000007:1".into()));
        assert_eq!(m.mint(), RequestId::Text("mg:0000000000000007:2".into()));
        let a = IdMinter::random().unwrap().mint();
        let b = IdMinter::random().unwrap().mint();
        assert_ne!(a, b, "two replicas mint apart");
    }

    #[test]
    fn the_splice_puts_back_ids_of_every_json_type_byte_exact() {
        let huge_number = "9".repeat(400);
        let huge_string = format!("\"{}\"", "x".repeat(100_000));
        for id in [
            "1",
            "-0",
            "1.50",
            "1e400",
            huge_number.as_str(),
            r#""1""#,
            r#""""#,
            r#""\u0041\"\\""#,
            r#""é𝄞""#,
            huge_string.as_str(),
            "null",
            "true",
            "{\"a\":[1,{\"id\":2}]}",
            "[1,2]",
        ] {
            let sent = answer(MINTED);
            let back = splice_id(&sent, id).unwrap();
            // Only the envelope's id changed: the result's own `id` member is the minted text.
            assert_eq!(back, sent.replacen(MINTED, id, 1), "{id}");
            assert_eq!(id_span(&back).map(|(s, e)| &back[s..e]), Ok(id));
        }
    }

    #[test]
    fn the_splice_finds_the_envelope_id_wherever_it_is() {
        let text = r#"{"result":{"id":"inner"},"jsonrpc":"2.0","id":"mg:1:1"}"#;
        assert_eq!(
            splice_id(text, "42").unwrap(),
            r#"{"result":{"id":"inner"},"jsonrpc":"2.0","id":42}"#
        );
        let spaced = "\n {\t\"id\"\r\n:\n\"mg:1:1\"\t}\n";
        assert_eq!(splice_id(spaced, "7").unwrap(), "\n {\t\"id\"\r\n:\n7\t}\n");
    }

    #[test]
    fn the_splice_refuses_what_is_not_one_object_with_one_id() {
        assert_eq!(
            splice_id(r#"{"jsonrpc":"2.0","result":{}}"#, "1"),
            Err(SpliceError::NoId)
        );
        for broken in [
            r#"{"id":"mg:1:1","id":2,"result":{}}"#,
            r#"[{"id":"mg:1:1","result":{}}]"#,
            r#"{"id":"mg:1:1","result":{}} {"id":3}"#,
            "",
            "5",
        ] {
            assert!(
                matches!(splice_id(broken, "1"), Err(SpliceError::Unreadable(_))),
                "{broken}"
            );
        }
    }

    #[test]
    fn only_strings_and_numbers_are_client_ids_and_the_minted_prefix_is_kept() {
        for ok in ["1", "-5", "1.5", "1e400", r#""a""#, r#""mg""#, r#"" mg:""#] {
            assert_eq!(client_id_problem(ok), None, "{ok}");
        }
        // The minted prefix is refused however the string spells it.
        for refused in [
            "null",
            "true",
            "false",
            "{}",
            "[]",
            r#""mg:1:1""#,
            r#""\u006dg:1""#,
        ] {
            assert!(client_id_problem(refused).is_some(), "{refused}");
        }
    }
}
