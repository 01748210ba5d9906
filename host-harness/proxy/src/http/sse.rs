//! Server-sent events written to the proxy's clients: afresh, never the upstream's framing
//! (read with [`mrtr_gate_host::wire::sse`]): no `id:` (a client that resumes by it could be
//! replayed a response around the gate), no `retry:`, no event type but `message`.

use bytes::Bytes;

/// One `message` event carrying `data` (a JSON-RPC message), in the proxy's own framing.
pub fn message_event(data: &str) -> Bytes {
    let mut out = String::with_capacity(data.len() + 24);
    out.push_str("event: message\n");
    // The data of a parsed event holds no `\r`; each of its lines is a line of its own.
    for line in data.split(['\n', '\r']) {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mrtr_gate_host::wire::sse::{Event, Parser};

    #[test]
    fn the_proxys_events_carry_only_the_message() {
        assert_eq!(
            message_event("{\"a\":\n1}"),
            Bytes::from("event: message\ndata: {\"a\":\ndata: 1}\n\n")
        );
        let mut p = Parser::new(1 << 20, None);
        let round_trip = p.feed(&message_event("x\ny")).unwrap();
        assert_eq!(
            round_trip,
            [Event {
                kind: "message".into(),
                data: "x\ny".into()
            }]
        );
    }
}
