//! What a client's message is, read once with the gate's own member parser (a key given twice
//! is refused, the values are kept as their exact text): a request, a notification or a
//! response, and for a request whether the gate binds it (a server's message is read by
//! [`mrtr_gate_host::wire::from_server`], as the client library reads it). Nothing here
//! decides on content; that is the gate's.

use crate::errors::Refusal;
use crate::ids::{MAX_MESSAGE_BYTES, client_id_problem};
use mrtr_gate_host::core::{JsonError, MRTR_METHODS, parse_members};

/// A message from the client.
#[derive(Debug, PartialEq, Eq)]
pub enum FromClient<'a> {
    /// A `tools/call`, `prompts/get` or `resources/read`: the gate binds it.
    Gated {
        /// The client's id, its exact JSON text.
        raw_id: &'a str,
        /// The method.
        method: String,
        /// The params, their exact JSON text (`None`: the request had none).
        params: Option<&'a str>,
    },
    /// `notifications/cancelled`: the client gives up a request (its params' exact text).
    Cancelled {
        /// The params, their exact JSON text (`None`: none).
        params: Option<&'a str>,
    },
    /// The client's response to a server's request: `id`'s exact JSON text.
    Answer {
        /// The id, its exact JSON text.
        raw_id: &'a str,
    },
    /// Any other request or notification: relayed as it came (a request's id, its exact JSON
    /// text: only a response under an id the client is waiting on may reach it).
    Relay {
        /// A request's id, its exact JSON text (`None`: a notification).
        raw_id: Option<&'a str>,
    },
}

/// Read a client's message; a refusal is answered to the client and nothing goes upstream.
pub fn from_client(text: &str) -> Result<FromClient<'_>, (String, Refusal)> {
    let null = || "null".to_owned();
    if text.trim_start().starts_with('[') {
        // A batch would carry gated requests past the one-request-one-binding reading;
        // 2025-06-18 removed batches, and no SDK client sends them.
        return Err((
            null(),
            Refusal::message(
                "batch_message",
                "a batch is not relayed: send one message at a time",
            ),
        ));
    }
    let members = parse_members(text, MAX_MESSAGE_BYTES)
        .map_err(|e| (null(), Refusal::message("invalid_message", describe(&e))))?;
    let method = members.get("method").map(|m| m.get());
    let Some(raw_id) = members.get("id").map(|id| id.get()) else {
        // A gated method without an id would run upstream with no binding and no answer.
        if method.is_some_and(|m| {
            serde_json::from_str::<String>(m).is_ok_and(|m| MRTR_METHODS.contains(&m.as_str()))
        }) {
            return Err((
                null(),
                Refusal::message(
                    "invalid_message",
                    "a tools/call, prompts/get or resources/read needs an id",
                ),
            ));
        }
        if method == Some(r#""notifications/cancelled""#) {
            return Ok(FromClient::Cancelled {
                params: members.get("params").map(|p| p.get()),
            });
        }
        return Ok(FromClient::Relay { raw_id: None });
    };
    let Some(method) = method else {
        return Ok(FromClient::Answer { raw_id });
    };
    if let Some(problem) = client_id_problem(raw_id) {
        // A string is an id the response can carry back; anything else is answered as `null`.
        let shown = if raw_id.starts_with('"') {
            raw_id.to_owned()
        } else {
            null()
        };
        return Err((shown, Refusal::message("invalid_request_id", problem)));
    }
    let method: String = serde_json::from_str(method).map_err(|_| {
        (
            raw_id.to_owned(),
            Refusal::message("invalid_message", "the method is not a string"),
        )
    })?;
    if !MRTR_METHODS.contains(&method.as_str()) {
        return Ok(FromClient::Relay {
            raw_id: Some(raw_id),
        });
    }
    Ok(FromClient::Gated {
        raw_id,
        method,
        params: members.get("params").map(|p| p.get()),
    })
}

/// A parser's refusal in words.
pub fn describe(e: &JsonError) -> String {
    match e {
        JsonError::Syntax(why) => format!("not json: {why}"),
        JsonError::DuplicateKey(key) => format!("the key {key} is given twice"),
        JsonError::Limit(what) => format!("too large: {what}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gated_requests_are_the_cores_methods_with_an_id() {
        let m =
            from_client(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t"}}"#);
        assert_eq!(
            m,
            Ok(FromClient::Gated {
                raw_id: "3",
                method: "tools/call".into(),
                params: Some(r#"{"name":"t"}"#),
            })
        );
        for (relayed, raw_id) in [
            (
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
                Some("3"),
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                None,
            ),
            (
                r#"{"jsonrpc":"2.0","id":4,"method":"notifications/cancelled"}"#,
                Some("4"),
            ),
        ] {
            assert_eq!(
                from_client(relayed),
                Ok(FromClient::Relay { raw_id }),
                "{relayed}"
            );
        }
        assert_eq!(
            from_client(
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}"#
            ),
            Ok(FromClient::Cancelled {
                params: Some(r#"{"requestId":3}"#)
            })
        );
    }

    #[test]
    fn batches_broken_text_duplicate_members_and_bad_ids_are_refused() {
        fn code(text: &str) -> Result<(), (String, String)> {
            from_client(text)
                .map(|_| ())
                .map_err(|(id, r)| (id, r.code))
        }
        assert_eq!(
            code(r#" [{"jsonrpc":"2.0","id":1,"method":"tools/call"}]"#),
            Err(("null".into(), "batch_message".into()))
        );
        for broken in [
            "",
            "{",
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/list"}"#,
        ] {
            assert_eq!(
                code(broken),
                Err(("null".into(), "invalid_message".into())),
                "{broken}"
            );
        }
        for (id, shown) in [
            ("null", "null"),
            ("true", "null"),
            ("{}", "null"),
            ("[1]", "null"),
            (r#""mg:1:1""#, r#""mg:1:1""#),
        ] {
            let text = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call"}}"#);
            assert_eq!(
                code(&text),
                Err((shown.into(), "invalid_request_id".into())),
                "{id}"
            );
        }
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":7}"#),
            Err(("1".into(), "invalid_message".into()))
        );
    }
}
