//! Random input never panics.

use super::*;

pub(crate) fn arb_key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "resultType", "inputRequests", "requestState", "method", "params", "mode", "message",
            "requestedSchema", "type", "properties", "required", "url", "jsonrpc", "id", "result",
            "error", "code", "_meta", "$ref", "enum", "oneOf", "items", "anyOf", "const", "title",
            "a", "f0", "roots", "messages", "maxTokens",
        ])
        .prop_map(str::to_owned),
        1 => "[a-zA-Z$_.-]{0,8}",
    ]
}

pub(crate) fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f)
            .map(Value::Number)),
        prop::sample::select(vec![
            "input_required",
            "complete",
            "elicitation/create",
            "roots/list",
            "sampling/createMessage",
            "form",
            "url",
            "https://auth.example.com/",
            "http://x/",
            "object",
            "string",
            "integer",
            "array",
            "boolean",
            "2.0",
            "",
            "#",
        ])
        .prop_map(|s| Value::String(s.into())),
        "\\PC{0,10}".prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(arb_key(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A result that is often a plausible round, mutated at random.
fn arb_result() -> impl Strategy<Value = Value> {
    let plausible = (
        prop::sample::select(vec!["input_required", "complete", "Input_required"]),
        prop::option::of(prop::collection::btree_map(
            "[a-z0-9]{1,3}",
            prop_oneof![
                Just(form("m")),
                Just(url_request("https://auth.example.com/p?q=1")),
                Just(json!({"method": "roots/list"})),
                arb_json(),
                arb_json().prop_map(|p| json!({"method": "elicitation/create", "params": p})),
                arb_json().prop_map(|s| json!({"method": "elicitation/create", "params": {"message": "m", "requestedSchema": s}})),
            ],
            0..4,
        )),
        prop::option::of(prop_oneof![arb_json(), "\\PC{0,20}".prop_map(Value::String)]),
        prop::option::of((arb_key(), arb_json())),
    )
        .prop_map(|(rt, requests, state, extra)| {
            let mut r = json!({"resultType": rt});
            if let Some(req) = requests {
                r["inputRequests"] = Value::Object(req.into_iter().collect());
            }
            if let Some(s) = state {
                r["requestState"] = s;
            }
            if let Some((k, v)) = extra {
                r[k.as_str()] = v;
            }
            r
        });
    prop_oneof![3 => plausible, 1 => arb_json()]
}

fn fresh() -> Fx {
    let mut fx = Fx::new();
    let caps = json!({"elicitation": {"form": {}, "url": {}}, "roots": {}, "sampling": {}});
    let policy = Policy {
        allowed_deprecated: vec![
            mrtr_gate_core::DeprecatedMethod::RootsList,
            mrtr_gate_core::DeprecatedMethod::SamplingCreateMessage,
        ],
        ..Policy::default()
    };
    fx.register(
        RequestId::Number(1),
        &tool_params_caps("t", json!({}), caps),
        policy,
    )
    .unwrap();
    fx
}

fn judged(r: &Result<ResponseVerdict, Denial>) {
    if let Err(d) = r {
        assert_known(d);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic_accept(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let mut fx = fresh();
        let text = String::from_utf8_lossy(&bytes);
        let r = fx.gate.accept_response(&server(), &text);
        judged(&r);
        // Garbage that is not a response for id 1 leaves the binding alone.
        if r.is_err() {
            let again = fx.accept(1, state_only("s"));
            prop_assert!(again.is_ok() || parse_id(&text) == Some(json!(1)), "{:?}", again);
        }
    }

    #[test]
    fn random_json_messages_never_panic_accept(msg in arb_json()) {
        let mut fx = fresh();
        judged(&fx.gate.accept_response(&server(), &msg.to_string()));
    }

    #[test]
    fn random_results_give_a_consistent_verdict(result in arb_result()) {
        let mut fx = fresh();
        let r = fx.accept(1, result.clone());
        judged(&r);
        let rt = result.get("resultType").cloned();
        match &r {
            Ok(ResponseVerdict::InputRequired(view)) => {
                prop_assert_eq!(rt, Some(json!("input_required")));
                let keys: Vec<String> = result
                    .get("inputRequests")
                    .and_then(Value::as_object)
                    .map(|m| m.keys().cloned().collect())
                    .unwrap_or_default();
                prop_assert_eq!(&view.input_keys, &keys);
                let has_state = result.get("requestState").and_then(Value::as_str).is_some_and(|s| !s.is_empty());
                prop_assert!(!keys.is_empty() || has_state);
            }
            Ok(ResponseVerdict::Complete) => {
                prop_assert!(rt.is_none() || rt == Some(json!("complete")), "{:?}", rt);
            }
            Ok(ResponseVerdict::Error(_)) => prop_assert!(false, "a result gave an error verdict"),
            Err(_) => {}
        }
        fx.assert_chain();
    }

    #[test]
    fn random_input_responses_never_panic_retry(answers in arb_json(), raw in "\\PC{0,40}") {
        let mut fx = fresh();
        fx.round(1, input_required_state(json!({
            "f": form("F"),
            "u": url_request("https://auth.example.com/"),
            "r": {"method": "roots/list"},
        }), "S"));
        let r = fx.retry(RequestId::Number(1), RequestId::Number(2), &answers);
        if let Err(d) = &r {
            assert_known(d);
        }
        let mut req = retry_request(RequestId::Number(1), RequestId::Number(3), &json!({}));
        req.responses_json = raw;
        if let Err(d) = fx.gate.build_retry(req) {
            assert_known(&d);
        }
        fx.assert_chain();
    }
}

/// A change to a client's retry of the round `fresh_round` opened: what a hostile client
/// may send in place of the request, its state or its answers.
#[derive(Clone, Debug)]
enum ClientEdit {
    Remove(String),
    Set(String, Value),
}

fn arb_client_edit() -> impl Strategy<Value = ClientEdit> {
    let member = prop::sample::select(vec![
        "name",
        "arguments",
        "_meta",
        "inputResponses",
        "requestState",
        "task",
    ])
    .prop_map(str::to_owned);
    prop_oneof![
        member.clone().prop_map(ClientEdit::Remove),
        (member, arb_json()).prop_map(|(k, v)| ClientEdit::Set(k, v)),
        (arb_key(), arb_json()).prop_map(|(k, v)| ClientEdit::Set(k, v)),
    ]
}

/// The client's params minus `_meta` and the MRTR fields, and its state.
fn request_and_state(params: &Value) -> (Value, Option<Value>) {
    let mut request = params.as_object().cloned().unwrap_or_default();
    let state = request.remove("requestState");
    request.remove("inputResponses");
    request.remove("_meta");
    (Value::Object(request), state)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A client's retry with random edits never panics, gets a known code when refused, and
    /// never passes unless its request (but `_meta`) and state are the round's: then the
    /// retry that goes out is the registered request's.
    #[test]
    fn edited_client_retries_never_pass_changed(edits in prop::collection::vec(arb_client_edit(), 0..3), raw in "\\PC{0,40}") {
        let mut fx = fresh();
        fx.round(1, state_only("S"));
        let registered = json!({"name": "t", "arguments": {}});
        let mut params = json!({"name": "t", "arguments": {}, "_meta": {"progressToken": 1}, "requestState": "S"});
        for edit in &edits {
            match edit {
                ClientEdit::Remove(k) => { params.as_object_mut().map(|o| o.remove(k)); }
                ClientEdit::Set(k, v) => { params[k.as_str()] = v.clone(); }
            }
        }
        let retry = |fx: &mut Fx, text: String, id: i64| fx.gate.retry_from_client(mrtr_gate_core::ClientRetry {
            server: server(),
            request_id: Some(RequestId::Number(1)),
            retry_id: RequestId::Number(id),
            user: USER.into(),
            tenant: TENANT.into(),
            method: "tools/call".into(),
            params_json: text,
        });
        if let Err(d) = retry(&mut fx, raw, 2) {
            assert_known(&d);
        }
        match retry(&mut fx, params.to_string(), 3) {
            Ok(r) => {
                let (request, state) = request_and_state(&params);
                prop_assert_eq!(request, registered);
                prop_assert_eq!(state, Some(json!("S")));
                let sent = parse(&r.request_json);
                prop_assert_eq!(&sent["params"]["_meta"], &meta_with(json!({"elicitation": {"form": {}, "url": {}}, "roots": {}, "sampling": {}})));
                prop_assert_eq!(&sent["params"]["requestState"], &json!("S"));
            }
            Err(d) => assert_known(&d),
        }
        fx.assert_chain();
    }
}

fn parse_id(text: &str) -> Option<Value> {
    serde_json::from_str::<Value>(text).ok()?.get("id").cloned()
}
