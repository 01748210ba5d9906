//! What the gate registers, validates and shows is what it sends: numbers exactly (any size,
//! any fraction), large and deep complete results and lone surrogates where the gate does not
//! decide on the content.

use crate::common::*;
use crate::flows::support::*;
use mrtr_gate_core::{Policy, RequestId, ResponseVerdict};
use num_bigint::BigInt;
use proptest::prelude::*;
use serde_json::{Value, json};

/// A number's exact value as `mantissa × 10^exp`, read by the reference big-integer parser.
fn exact(text: &str) -> (BigInt, i64) {
    let (mantissa, exp) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], text[at + 1..].parse::<i64>().unwrap()),
        None => (text, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{int}{frac}");
    (digits.parse::<BigInt>().unwrap(), exp - frac.len() as i64)
}

fn same_number(a: &str, b: &str) -> bool {
    let ((ma, ea), (mb, eb)) = (exact(a), exact(b));
    let low = ea.min(eb);
    let scale = |m: BigInt, e: i64| m * BigInt::from(10u8).pow((e - low) as u32);
    scale(ma, ea) == scale(mb, eb)
}

/// Equal JSON with numbers compared by exact decimal value.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => same_number(x.as_str(), y.as_str()),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_value(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_value(v, w)))
        }
        _ => a == b,
    }
}

fn register_text(
    fx: &mut Fx,
    id: i64,
    params_json: &str,
) -> Result<mrtr_gate_core::Registered, mrtr_gate_core::Denial> {
    let mut r = registration(RequestId::Number(id), &json!({}), Policy::default());
    r.params_json = params_json.into();
    fx.gate.register(r)
}

fn number_form(field: Value) -> Value {
    input_required(json!({"a": form_request(None, "How many?", json!({
        "type": "object", "properties": {"x": field}, "required": ["x"]
    }))}))
}

fn retry_text(
    fx: &mut Fx,
    id: i64,
    retry: i64,
    responses_json: &str,
) -> Result<String, mrtr_gate_core::Denial> {
    let mut r = retry_request(n(id), n(retry), &json!({}));
    r.responses_json = responses_json.into();
    fx.gate.build_retry(r).map(|ok| ok.request_json)
}

#[test]
fn a_big_integer_argument_reaches_the_retry_exactly_and_has_its_own_digest() {
    let mut fx = Fx::new();
    let text = |v: &str| {
        format!(
            r#"{{"name":"t","arguments":{{"n":{v}}},"_meta":{{"io.modelcontextprotocol/clientCapabilities":{{"elicitation":{{"form":{{}}}}}},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}}"#
        )
    };
    let a = register_text(&mut fx, 1, &text("9007199254740993")).unwrap();
    let b = register_text(&mut fx, 2, &text("9007199254740992")).unwrap();
    assert_ne!(a.params_sha256, b.params_sha256);
    let c = register_text(&mut fx, 3, &text("0.10000000000000001")).unwrap();
    let d = register_text(&mut fx, 4, &text("0.1")).unwrap();
    assert_ne!(c.params_sha256, d.params_sha256);
    // One value, one digest: `1.0` and `1` are one number.
    let e = register_text(&mut fx, 5, &text("1.0")).unwrap();
    let f = register_text(&mut fx, 6, &text("1")).unwrap();
    assert_eq!(e.params_sha256, f.params_sha256);
    assert!(
        a.request_json.contains(r#""n":9007199254740993"#),
        "{}",
        a.request_json
    );
    fx.round(1, state_only("s"));
    let sent = retry_text(&mut fx, 1, 10, "{}").unwrap();
    assert!(sent.contains(r#""n":9007199254740993"#), "{sent}");
}

#[test]
fn answers_are_validated_and_sent_exactly() {
    let mut fx = Fx::new();
    let mut id = 0;
    let mut case = |fx: &mut Fx, field: Value, answer: &str| {
        id += 1;
        fx.register_tool(id);
        fx.round(id, number_form(field));
        retry_text(
            fx,
            id,
            id + 1000,
            &format!(r#"{{"a":{{"action":"accept","content":{{"x":{answer}}}}}}}"#),
        )
    };
    let big = json!({"type": "integer", "maximum": 9007199254740993u64});
    let sent = case(&mut fx, big.clone(), "9007199254740993").unwrap();
    assert!(sent.contains(r#""x":9007199254740993"#), "{sent}");
    assert_code(
        case(&mut fx, big, "9007199254740994"),
        "input_response_schema_mismatch",
    );
    // A bound beyond 64 bits is compared exactly, not through a double.
    let huge: Value =
        serde_json::from_str(r#"{"type":"integer","maximum":1000000000000000000000000000000}"#)
            .unwrap();
    assert_code(
        case(&mut fx, huge.clone(), "1000000000000000000000000000001"),
        "input_response_schema_mismatch",
    );
    // Sent with the digits it was given (a server reading `1e+30` takes a float).
    let sent = case(&mut fx, huge, "1000000000000000000000000000000").unwrap();
    assert!(
        sent.contains(r#""x":1000000000000000000000000000000}"#),
        "{sent}"
    );
    // Integrality is the exact value's, not its double's.
    let int = json!({"type": "integer"});
    assert_code(
        case(&mut fx, int.clone(), "1.0000000000000001"),
        "input_response_schema_mismatch",
    );
    let sent = case(&mut fx, int, "1.0").unwrap();
    assert!(sent.contains(r#""x":1.0}"#), "{sent}");
    let num = json!({"type": "number", "minimum": 0});
    let sent = case(
        &mut fx,
        num.clone(),
        "0.1234567890123456789012345678901234567890",
    )
    .unwrap();
    assert!(
        sent.contains(r#""x":0.1234567890123456789012345678901234567890}"#),
        "{sent}"
    );
    let sent = case(&mut fx, num.clone(), "-0").unwrap();
    assert!(sent.contains(r#""x":-0}"#), "{sent}");
    let sent = case(&mut fx, num.clone(), "1E400").unwrap();
    assert!(sent.contains(r#""x":1e+400}"#), "{sent}");
    assert_code(
        case(&mut fx, num, "-1e-400"),
        "input_response_schema_mismatch",
    );
}

#[test]
fn numbers_no_exact_form_can_hold_are_refused_with_a_code() {
    let mut fx = Fx::new();
    let exp = "1e1000000000000000";
    assert_code(
        register_text(
            &mut fx,
            1,
            &format!(r#"{{"name":"t","arguments":{{"n":{exp}}}}}"#),
        ),
        "invalid_params",
    );
    fx.register_tool(2);
    fx.round(2, number_form(json!({"type": "number"})));
    assert_code(
        retry_text(
            &mut fx,
            2,
            3,
            &format!(r#"{{"a":{{"action":"accept","content":{{"x":{exp}}}}}}}"#),
        ),
        "invalid_input_response",
    );
    fx.register_tool(4);
    let text = format!(
        r#"{{"jsonrpc":"2.0","id":4,"result":{{"resultType":"input_required","requestState":"s","_meta":{{"n":{exp}}}}}}}"#
    );
    assert_code(fx.accept_text(&text), "limit_exceeded");
    // The same exponent with leading zeros is an ordinary number.
    let sent = register_text(
        &mut fx,
        5,
        r#"{"name":"t","arguments":{"n":1e0000000000000000000002}}"#,
    )
    .unwrap();
    // The client's own digits (the exponent's sign written out, as JSON readers take it).
    assert!(
        sent.request_json
            .contains(r#""n":1e+0000000000000000000002"#),
        "the client's own digits: {}",
        sent.request_json
    );
}

fn complete_text(id: i64, content: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"complete","content":{content}}}}}"#
    )
}

#[test]
fn large_and_deep_complete_and_error_results_pass() {
    let mut fx = Fx::new();
    let big = format!(r#"[{{"type":"text","text":"{}"}}]"#, "a".repeat(16 << 20));
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    let many = format!("[{}]", vec!["1"; 200_000].join(","));
    // Duplicate keys and lone surrogates inside content the gate does not decide on.
    let odd = r#"[{"type":"text","text":"cut \ud83d","text":"twice"}]"#;
    for (i, content) in [big.as_str(), &deep, &many, odd].into_iter().enumerate() {
        let id = i as i64 + 1;
        fx.register_tool(id);
        assert!(
            matches!(
                fx.accept_text(&complete_text(id, content)),
                Ok(ResponseVerdict::Complete)
            ),
            "{id}"
        );
    }
    fx.register_tool(10);
    let error = format!(
        r#"{{"jsonrpc":"2.0","id":10,"error":{{"code":-32000,"message":"cut \udc00","data":{}}}}}"#,
        deep
    );
    assert!(matches!(
        fx.accept_text(&error),
        Ok(ResponseVerdict::Error(-32000))
    ));
}

#[test]
fn what_the_gate_decides_on_stays_strict() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    for text in [
        // The result's own members and the envelope's decide the verdict.
        r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","resultType":"input_required","requestState":"s"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"id":2,"result":{"resultType":"complete"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"code":2}}"#,
    ] {
        assert_code(fx.accept_text(text), "duplicate_json_key");
    }
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"resultType":"input_required","requestState":"s","_meta":{{"x":{}1{}}}}}}}"#,
        "[".repeat(40),
        "]".repeat(40)
    );
    assert_code(fx.accept_text(&deep), "limit_exceeded");
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"resultType":"input_required","requestState":"s","_meta":{{"x":"{}"}}}}}}"#,
        "a".repeat(5 << 20)
    );
    assert_code(fx.accept_text(&big), "limit_exceeded");
    let cut = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{"message":"cut \ud83d","requestedSchema":{"type":"object","properties":{}}}}}}}"#;
    let d = assert_code(fx.accept_text(cut), "malformed_response");
    assert!(
        d.error.to_string().contains("lone surrogate"),
        "{}",
        d.error
    );
    // None of these touched the binding.
    fx.round(1, state_only("s"));
    // The whole message has a bound the sandbox holds.
    fx.register_tool(2);
    let over = complete_text(2, &format!(r#""{}""#, "a".repeat(64 << 20)));
    assert_code(fx.accept_text(&over), "limit_exceeded");
    // Malformed content is still malformed, however deep.
    let broken = complete_text(2, &format!("{}1{}", "[".repeat(300), "]".repeat(299)));
    assert_code(fx.accept_text(&broken), "malformed_response");
}

fn arb_number() -> impl Strategy<Value = String> {
    prop_oneof![
        (any::<i64>()).prop_map(|i| i.to_string()),
        (9007199254740990u64..9007199254741000).prop_map(|u| u.to_string()),
        "-?[1-9][0-9]{15,45}",
        "-?(0|[1-9][0-9]{0,3})\\.[0-9]{1,45}",
        "-?(0|[1-9][0-9]{0,2})(\\.[0-9]{1,20})?[eE][+-]?[0-9]{1,3}",
        Just("-0".to_owned()),
        Just("-0.0e-5".to_owned()),
        Just("1e400".to_owned()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// register → input_required → build_retry: the retry, read with an arbitrary-precision
    /// parser, is the registered params plus the answers, number for number.
    #[test]
    fn the_retry_is_the_registered_params_plus_the_answers_exactly(
        args in prop::collection::vec(arb_number(), 1..6),
        answer in arb_number(),
    ) {
        let mut fx = Fx::new();
        let list = args.join(",");
        let params_json = format!(
            r#"{{"name":"t","arguments":{{"first":{},"all":[{list}]}},"_meta":{{"io.modelcontextprotocol/clientCapabilities":{{"elicitation":{{"form":{{}}}}}},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}}"#,
            args[0]
        );
        register_text(&mut fx, 1, &params_json).unwrap();
        fx.round(1, number_form(json!({"type": "number"})));
        let responses_json = format!(r#"{{"a":{{"action":"accept","content":{{"x":{answer}}}}}}}"#);
        let sent: Value = serde_json::from_str(&retry_text(&mut fx, 1, 2, &responses_json).unwrap()).unwrap();
        let mut want: Value = serde_json::from_str(&params_json).unwrap();
        want["inputResponses"] = serde_json::from_str(&responses_json).unwrap();
        prop_assert!(same_value(&sent["params"], &want), "{} vs {}", sent["params"], want);
    }
}

/// Each number as a client might write it, the way it must reach the server: exactly.
const WRITTEN: [&str; 8] = [
    "1234567890123456",
    "1234567890123456789012",
    "1234567890123456789012345678901234567890",
    "-0",
    "1.0",
    "1e2",
    "3.14159265358979323846264338327",
    "-12345678901234567890123e-3",
];

/// [`WRITTEN`] in the canonical layout: the same values, written as the gate compares them.
fn canonical_layout() -> Vec<String> {
    WRITTEN
        .iter()
        .map(|n| {
            let v: Value = serde_json::from_str(n).unwrap();
            mrtr_gate_core::canonical::to_canonical(&v)
        })
        .collect()
}

fn arguments_text(numbers: &[&str]) -> String {
    let members: Vec<String> = numbers
        .iter()
        .enumerate()
        .map(|(i, n)| format!(r#""a{i}":{n}"#))
        .collect();
    format!(
        r#"{{"name":"t","arguments":{{{}}},"_meta":{{"io.modelcontextprotocol/clientCapabilities":{{"elicitation":{{"form":{{}}}}}},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}}"#,
        members.join(",")
    )
}

/// Every argument of `request_json` is the number written, digit for digit: the same text
/// but for the exponent's sign, which the parser writes out (`1e2` reads as `1e+2`, one
/// number to every JSON reader); never the canonical layout's (`1`, `100`, `0`, an exponent).
fn assert_written(request_json: &str) {
    let request: Value = serde_json::from_str(request_json).unwrap();
    for (i, n) in WRITTEN.iter().enumerate() {
        let written: Value = serde_json::from_str(n).unwrap();
        let got = &request["params"]["arguments"][format!("a{i}")];
        assert_eq!(
            got.as_number().map(serde_json::Number::as_str),
            written.as_number().map(serde_json::Number::as_str),
            "a{i} in {request_json}"
        );
        assert!(
            request_json.contains(&format!(r#""a{i}":{written}"#)),
            "a{i} in {request_json}"
        );
    }
}

#[test]
fn a_clients_numbers_reach_the_server_with_the_digits_it_wrote() {
    let mut fx = Fx::new();
    let registered = register_text(&mut fx, 1, &arguments_text(&WRITTEN)).unwrap();
    assert_written(&registered.request_json);
    // Compared and digested by value: the same numbers written canonically are one request.
    let canonical = canonical_layout();
    let canonical: Vec<&str> = canonical.iter().map(String::as_str).collect();
    assert_ne!(canonical, WRITTEN, "the layouts differ");
    let same = register_text(&mut fx, 2, &arguments_text(&canonical)).unwrap();
    assert_eq!(registered.params_sha256, same.params_sha256);
    // The gate's retry carries them as written too.
    fx.round(1, state_only("s"));
    let sent = retry_text(&mut fx, 1, 10, "{}").unwrap();
    assert_written(&sent);
}

#[test]
fn a_clients_own_retry_matches_by_value_and_goes_out_with_the_registered_digits() {
    let mut fx = Fx::new();
    register_text(&mut fx, 1, &arguments_text(&WRITTEN)).unwrap();
    fx.round(1, state_only("s"));
    // The client writes the numbers again in the canonical layout: the same request.
    let canonical = canonical_layout();
    let canonical: Vec<&str> = canonical.iter().map(String::as_str).collect();
    let mut params: Value = serde_json::from_str(&arguments_text(&canonical)).unwrap();
    params["requestState"] = json!("s");
    let retry = fx
        .gate
        .retry_from_client(mrtr_gate_core::ClientRetry {
            server: server(),
            request_id: Some(RequestId::Number(1)),
            retry_id: RequestId::Number(2),
            user: USER.into(),
            tenant: TENANT.into(),
            method: "tools/call".into(),
            params_json: params.to_string(),
        })
        .unwrap();
    assert_written(&retry.request_json);
}

#[test]
fn digits_rewritten_in_a_stored_record_never_go_out() {
    use mrtr_gate_core::host::{Storage, Write};
    let mut fx = Fx::new();
    register_text(&mut fx, 1, &arguments_text(&WRITTEN)).unwrap();
    fx.round(1, state_only("s"));
    // Someone with the store's keys changes a number in what would be sent, leaving the
    // canonical params (and their digest) as registered.
    let key = {
        let digest = mrtr_gate_core::digest::sha256_hex(server().display().as_bytes());
        format!(
            "{}{}/1",
            mrtr_gate_core::ID_PREFIX,
            digest.get(..32).unwrap()
        )
    };
    let read = fx.storage.read(&[key.as_str().into()]).unwrap().remove(0);
    let version = read.version;
    let record = read.present().unwrap().value;
    let forged = record.replacen(
        r#""a1":1234567890123456789012"#,
        r#""a1":1234567890123456789013"#,
        1,
    );
    assert_ne!(forged, record, "the record holds the digits as written");
    let write = Write {
        key: &key,
        expected: version,
        value: Some(&forged),
        ttl_ms: 600_000,
    };
    assert_eq!(fx.storage.write(&[write]).unwrap().len(), 1);
    // Another instance (no cache of what was registered) reads the record.
    let mut other = fx.second_gate();
    let d = other
        .build_retry(retry_request(
            RequestId::Number(1),
            RequestId::Number(2),
            &json!({}),
        ))
        .unwrap_err();
    assert_eq!(code(&d), "mrtr_identity_or_argument_mismatch");
}
