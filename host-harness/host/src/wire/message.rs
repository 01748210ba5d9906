//! What a server's message is, read once with the gate's own member parser (a key given twice
//! is refused, the values are kept as their exact text): the one reading of the proxy and the
//! client library. Nothing here decides on content; that is the gate's.

use mrtr_gate_core::limits::MAX_MESSAGE_BYTES;
use mrtr_gate_core::{RequestId, parse_members};

/// A message from the server.
#[derive(Debug, PartialEq, Eq)]
pub enum FromServer<'a> {
    /// A response (or an error).
    Response {
        /// Its id (`None`: no id a request can carry here: `null`, an object, a number past
        /// i64, an empty string).
        id: Option<RequestId>,
        /// Its id's exact JSON text.
        raw_id: &'a str,
        /// Its `result` member's exact text, if it has one.
        result: Option<&'a str>,
    },
    /// A request of the server's own: `(its id's JSON text, its method)`.
    Request(String, String),
    /// A notification.
    Notification,
    /// Not one JSON object with unique keys, or neither (or both) a request and a response.
    Unreadable,
}

/// Read a server's message: one JSON object with unique keys (the gate's own member parser),
/// told apart by its members. A batch, broken text, or a message that is both a request and
/// a response is [`FromServer::Unreadable`]: what to do with it is the reader's (the proxy
/// hands it to the gate when one call is in flight; the client library always does).
pub fn from_server(text: &str) -> FromServer<'_> {
    let Ok(members) = parse_members(text, MAX_MESSAGE_BYTES) else {
        return FromServer::Unreadable;
    };
    let id = members.get("id").map(|id| id.get());
    let answers = members.contains_key("result") || members.contains_key("error");
    match (id, members.get("method")) {
        // Both a request and a response: no reader can say which it is.
        (_, Some(_)) if answers => FromServer::Unreadable,
        (Some(id), Some(method)) => match serde_json::from_str::<String>(method.get()) {
            Ok(method) => FromServer::Request(id.to_owned(), method),
            Err(_) => FromServer::Unreadable,
        },
        (None, Some(_)) => FromServer::Notification,
        (Some(raw_id), None) => FromServer::Response {
            id: serde_json::from_str::<serde_json::Value>(raw_id)
                .ok()
                .and_then(|v| RequestId::from_json(&v)),
            raw_id,
            result: members.get("result").map(|r| r.get()),
        },
        (None, None) => FromServer::Unreadable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_messages_are_told_apart() {
        assert_eq!(
            from_server(r#"{"jsonrpc":"2.0","id":"mg:1:1","result":{}}"#),
            FromServer::Response {
                id: Some(RequestId::Text("mg:1:1".into())),
                raw_id: r#""mg:1:1""#,
                result: Some("{}")
            }
        );
        assert_eq!(
            from_server(r#"{"jsonrpc":"2.0","id":null,"error":{}}"#),
            FromServer::Response {
                id: None,
                raw_id: "null",
                result: None
            }
        );
        assert_eq!(
            from_server(r#"{"jsonrpc":"2.0","id":5,"method":"elicitation/create"}"#),
            FromServer::Request("5".into(), "elicitation/create".into())
        );
        assert_eq!(
            from_server(r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#),
            FromServer::Notification
        );
        for broken in [
            "",
            "[]",
            r#"{"id":1,"id":2,"result":{}}"#,
            r#"{"jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"x","result":{}}"#,
            r#"{"jsonrpc":"2.0","method":"x","error":{}}"#,
        ] {
            assert_eq!(from_server(broken), FromServer::Unreadable, "{broken}");
        }
    }
}
