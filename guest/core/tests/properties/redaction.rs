//! No part of a URL or URI but its host reaches the trail: a canary planted in every
//! position never appears in any audit line.

use super::*;

/// A URI of each shape the trail may meet, with `c` planted in every part but the host.
fn uris_with(c: &str, scheme: &str, host: &str) -> Vec<String> {
    vec![
        format!("{scheme}://user:{c}@{host}/{c}/doc?sig={c}#{c}"),
        format!("{scheme}://{c}@{host}:8443/{c}"),
        format!("{scheme}://{host}/files/{c}.txt"),
        format!("jdbc:mysql://{c}:{c}@db.example/{c}?password={c}"),
        format!("mailto:{c}@example.com?subject={c}"),
        format!("urn:x-secret:{c}"),
        format!("x-custom+app://{c}@{host}/{c}"),
        format!("file:///home/{c}/notes.txt"),
        format!("{c}/relative/{c}"),
    ]
}

fn arb_canary() -> impl Strategy<Value = String> {
    // Token-like, and never lowercase hex only (so never a piece of a digest by chance).
    "[A-Z][A-Za-z0-9_-]{15,31}"
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// A canary planted in every secret-bearing part of every URL and URI the gate is given
    /// (the server endpoint's path and query, another server's, an elicitation URL's path,
    /// query and fragment, a resource URI's userinfo, path, query, fragment and opaque part)
    /// never reaches an audit line, through rounds, retries, denials that name the server,
    /// completion, errors and expiry.
    #[test]
    fn no_url_part_but_the_host_reaches_the_trail(
        c in arb_canary(),
        scheme in prop_oneof![Just("https"), Just("http")],
        host in "[a-z]{1,8}\\.example",
        port in prop_oneof![Just(String::new()), Just(":8443".to_owned())],
    ) {
        use mrtr_gate_core::{Registration, RetryRequest, ServerIdentity};
        let mut fx = Fx::new();
        let endpoint = format!("{scheme}://{host}{port}/api/mcp/s/{c}/mcp?api_key={c}");
        let ours = ServerIdentity::origin(&endpoint).unwrap();
        let theirs = ServerIdentity::origin(&format!("https://evil.example/{c}?k={c}")).unwrap();
        let with = |id: i64, method: &str, params: Value| Registration {
            server: ours.clone(),
            method: method.into(),
            ..registration(RequestId::Number(id), &params, Policy::default())
        };
        fx.gate
            .register(with(1, "tools/call", tool_params("t", json!({}))))
            .unwrap();
        let url = format!("https://auth.example.com/{c}/cb?token={c}#{c}");
        let round = input_required_state(json!({"f": form("F"), "u": url_request(&url)}), &c);
        let view = fx.gate.accept_response(&ours, &response(1, round.clone())).unwrap();
        prop_assert!(matches!(view, ResponseVerdict::InputRequired(_)));
        // Denials that write `rejected` with a server: another server's response for the
        // binding, an unsolicited id, a message with no id.
        prop_assert!(fx.gate.accept_response(&theirs, &response(1, complete())).is_err());
        prop_assert!(fx.gate.accept_response(&theirs, &response(77, complete())).is_err());
        prop_assert!(fx.gate.accept_response(&ours, &response(78, complete())).is_err());
        let no_id = json!({"jsonrpc": "2.0"}).to_string();
        prop_assert!(fx.gate.accept_response(&theirs, &no_id).is_err());
        prop_assert!(fx.gate.accept_response(&ours, "[]").is_err());
        // A retry refused (schema mismatch), then one built, then the result.
        // A retry naming no binding (another server's id) writes the server the caller named.
        let retry_on = |server: &ServerIdentity, responses: &Value| RetryRequest {
            server: server.clone(),
            ..retry_request(RequestId::Number(1), RequestId::Number(2), responses)
        };
        let wrong = json!({"f": accept_with(json!({"login": 5})), "u": {"action": "accept"}});
        prop_assert!(fx.gate.build_retry(retry_on(&theirs, &wrong)).is_err());
        prop_assert!(fx.gate.build_retry(retry_on(&ours, &wrong)).is_err());
        let right = json!({"f": accept_with(form_content()), "u": {"action": "accept"}});
        prop_assert!(fx.gate.build_retry(retry_on(&ours, &right)).is_ok());
        prop_assert!(fx.gate.accept_response(&ours, &response(2, complete())).is_ok());
        // Resource URIs of every shape: a round each (so the binding is audited), then the
        // result, a JSON-RPC error, or expiry.
        for (i, uri) in (10..).zip(uris_with(&c, scheme, &host)) {
            fx.gate
                .register(with(i, "resources/read", json!({"_meta": meta(), "uri": uri})))
                .unwrap();
            fx.gate.accept_response(&ours, &response(i, state_only("s"))).unwrap();
            match i % 3 {
                0 => {
                    fx.gate.accept_response(&ours, &response(i, complete())).unwrap();
                }
                1 => {
                    let _ = fx.gate.accept_response(&ours, &error_response(i, -32000));
                }
                _ => {}
            }
        }
        fx.clock.advance(Policy::default().round_trip_lifetime_ms);
        fx.gate.expire_stale().unwrap();
        let entries = fx.audit.entries();
        prop_assert!(entries.len() >= 20, "the flows wrote {} events", entries.len());
        for entry in &entries {
            prop_assert!(!entry.line.contains(&c), "audit line leaks `{}`: {}", c, entry.line);
        }
        verify_chain(entries.iter().map(|e| e.line.as_str())).unwrap();
    }
}
