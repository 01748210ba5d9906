//! Schemas and inputs the 2026-07-28 spec allows pass: any visible input key, counts written
//! as `3.0`, email domains in IDNA A-label form, enums of a time-zone picker's size, long
//! OAuth URLs, and the schemas the MCP Python SDK renders for optional fields. Each test
//! also holds the bound that still refuses.

use crate::common::*;
use crate::flows::support::*;
use mrtr_gate_core::canonical::to_canonical;
use mrtr_gate_core::{Policy, limits};
use serde_json::{Value, json};

fn schema_of(props: Value) -> Value {
    json!({"type": "object", "properties": props})
}

/// Every audit line is the canonical JSON of what it says.
fn assert_trail_is_canonical(fx: &Fx) {
    for entry in fx.audit.entries() {
        assert_eq!(to_canonical(&parse(&entry.line)), entry.line);
    }
}

#[test]
fn input_keys_take_any_visible_string() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    // `a～` (U+FF5E) sorts before `a😀` by UTF-8 bytes, after it by UTF-16 code units (the
    // canonical order): the audit line must take the canonical one.
    let keys = [
        "github:login",
        "name with spaces",
        "名前",
        "a\u{FF5E}",
        "a\u{1F600}",
        "quote\"and\\backslash",
        "`]fake: [x`",
    ];
    let long = "k".repeat(limits::MAX_KEY_BYTES);
    let mut requests = serde_json::Map::new();
    for k in keys.iter().copied().chain([long.as_str()]) {
        requests.insert(k.to_owned(), form("Who?"));
    }
    let view = fx.round(1, input_required(Value::Object(requests)));
    assert_view_is_canonical(&view);
    assert_eq!(view.input_keys.len(), keys.len() + 1);
    let shown = parse(&view.view_json);
    let shown_keys: Vec<&str> = shown["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["key"].as_str().unwrap())
        .collect();
    for k in keys {
        assert!(shown_keys.contains(&k), "{k}");
    }
    let received = fx.last_event();
    assert_eq!(received["event"], "received");
    let kinds = received["input_kinds"].as_object().unwrap();
    assert_eq!(kinds["github:login"], "form");
    assert_eq!(kinds["a\u{1F600}"], "form");
    assert_trail_is_canonical(&fx);

    let mut answers = serde_json::Map::new();
    for k in keys.iter().copied().chain([long.as_str()]) {
        answers.insert(k.to_owned(), accept_with(form_content()));
    }
    let answers = Value::Object(answers);
    let retry = fx.retry_ok(n(1), n(2), &answers);
    assert_eq!(params_of(&retry.request_json)["inputResponses"], answers);
    assert_eq!(
        kinds_of_last(&fx),
        ["received", "consented", "submitted"].map(str::to_owned)
    );
    assert_trail_is_canonical(&fx);
}

fn kinds_of_last(fx: &Fx) -> Vec<String> {
    kinds(&fx.events_of(1))
}

#[test]
fn input_keys_with_control_or_invisible_characters_are_refused() {
    let mut fx = Fx::new();
    let too_long = "k".repeat(limits::MAX_KEY_BYTES + 1);
    let bad: Vec<String> = [
        "",
        "a\nb",
        "a\u{7F}",
        "a\u{85}",
        "a\u{2028}b",
        "a\u{202E}nigol",
        "a\u{2066}b\u{2069}",
        "a\u{061C}",
        "a\u{200E}",
        "a\u{200F}",
        "zero\u{200B}width",
        "zw\u{200D}j",
        "w\u{2060}j",
        "\u{FEFF}bom",
        "tag\u{E0041}",
        "soft\u{AD}hyphen",
        "vs\u{FE0F}",
    ]
    .into_iter()
    .map(str::to_owned)
    .chain([too_long])
    .collect();
    for (i, key) in bad.iter().enumerate() {
        let id = i as i64 + 1;
        fx.register_tool(id);
        let d = assert_code(
            fx.accept(id, input_required(json!({key.clone(): form("A")}))),
            "invalid_named_input_request",
        );
        // The message shows a refused key escaped, never raw.
        assert!(!d.error.to_string().contains(key.as_str()) || key.is_empty() || key.len() > 64);
    }
    // Property names follow the same rule: a field name is shown on the same screen.
    for (i, name) in ["a\u{202E}b", "a\u{200B}b", "a\u{2028}b"]
        .iter()
        .enumerate()
    {
        let id = 100 + i as i64;
        fx.register_tool(id);
        let schema = schema_of(json!({*name: {"type": "string"}}));
        assert_code(
            fx.accept(
                id,
                input_required(json!({"k": form_request(None, "m", schema)})),
            ),
            "invalid_form_requestedSchema",
        );
    }
}

#[test]
fn counts_written_with_a_zero_fraction_are_integers() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    // As Python's `json` writes float-typed counts.
    let schema = json!({
        "type": "object",
        "properties": {
            "login": {"type": "string", "minLength": 1.0, "maxLength": 3.0},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "minItems": 1.0, "maxItems": 2.0},
            "guests": {"type": "integer", "default": 2.0}
        },
        "required": ["login"]
    });
    let view = fx.round(
        1,
        input_required(json!({"k": form_request(None, "m", schema)})),
    );
    let fields = &parse(&view.view_json)["inputs"][0]["fields"];
    assert_eq!(fields[1]["max_length"], 3);
    assert_eq!(fields[2]["max_items"], 2);
    for content in [
        json!({"login": ""}),
        json!({"login": "abcd"}),
        json!({"login": "ab", "tags": []}),
        json!({"login": "ab", "tags": ["a", "b", "c"]}),
    ] {
        assert_code(
            fx.retry(n(1), n(2), &json!({"k": accept_with(content)})),
            "input_response_schema_mismatch",
        );
    }
    fx.retry_ok(
        n(1),
        n(2),
        &json!({"k": accept_with(json!({"login": "abc", "tags": ["a", "b"], "guests": 3}))}),
    );

    // Still refused: a fraction, a negative, a count beyond 2^53, a non-number.
    for (i, bound) in [
        json!(3.5),
        json!(-1.0),
        json!(-1),
        json!(1e300),
        json!(9007199254740994.0),
        json!("3"),
    ]
    .into_iter()
    .enumerate()
    {
        for keyword in ["minLength", "maxLength"] {
            let id = 10 + 2 * i as i64 + i64::from(keyword == "maxLength");
            fx.register_tool(id);
            let schema = schema_of(json!({"s": {"type": "string", keyword: bound.clone()}}));
            assert_code(
                fx.accept(
                    id,
                    input_required(json!({"k": form_request(None, "m", schema)})),
                ),
                "invalid_form_requestedSchema",
            );
        }
    }
    fx.register_tool(40);
    let schema = schema_of(json!({"i": {"type": "integer", "default": 2.5}}));
    assert_code(
        fx.accept(
            40,
            input_required(json!({"k": form_request(None, "m", schema)})),
        ),
        "invalid_form_requestedSchema",
    );
}

#[test]
fn sampling_max_tokens_written_as_a_float_is_an_integer() {
    let mut fx = Fx::new();
    let policy = Policy {
        allowed_deprecated: vec![mrtr_gate_core::DeprecatedMethod::SamplingCreateMessage],
        ..Policy::default()
    };
    let params = tool_params_caps("t", json!({}), all_caps());
    fx.register(n(1), &params, policy.clone()).unwrap();
    let mut request = sampling_request(false);
    request["params"]["maxTokens"] = json!(100.0);
    let view = fx.round(1, input_required(json!({"s": request})));
    assert_eq!(parse(&view.view_json)["inputs"][0]["max_tokens"], 100);
    fx.register(n(2), &params, policy).unwrap();
    let mut request = sampling_request(false);
    request["params"]["maxTokens"] = json!(100.5);
    assert_code(
        fx.accept(2, input_required(json!({"s": request}))),
        "invalid_named_input_request",
    );
}

#[test]
fn email_domains_in_idna_a_label_form_pass() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    let schema = schema_of(json!({"mail": {"type": "string", "format": "email"}}));
    fx.round(
        1,
        input_required(json!({"k": form_request(None, "m", schema)})),
    );
    for refused in [
        // A Unicode domain is `idn-email`, not `email`.
        "user@bücher.example",
        // Reserved `??--` labels, broken Punycode, an A-label of plain ASCII, uppercase.
        "user@ab--c.example",
        "user@xn--.example",
        "user@xn--a.example",
        "user@xn--abc-.example",
        "user@XN--BCHER-KVA.example",
    ] {
        assert_code(
            fx.retry(
                n(1),
                n(2),
                &json!({"k": accept_with(json!({"mail": refused}))}),
            ),
            "input_response_schema_mismatch",
        );
    }
    fx.retry_ok(
        n(1),
        n(2),
        &json!({"k": accept_with(json!({"mail": "user@xn--bcher-kva.example"}))}),
    );
}

#[test]
fn enums_of_a_time_zone_pickers_size_pass() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    let option = |i: usize| json!({"const": format!("Zone/{i:04}"), "title": format!("{i:04} {}", "t".repeat(59))});
    let options: Vec<Value> = (0..limits::MAX_ENUM_OPTIONS).map(option).collect();
    assert_eq!(options[0]["title"].as_str().unwrap().len(), 64);
    let values: Vec<String> = (0..limits::MAX_ENUM_OPTIONS)
        .map(|i| format!("Zone/{i:04}"))
        .collect();
    let schema = schema_of(json!({
        "zone": {"type": "string", "oneOf": options},
        "plain": {"type": "string", "enum": values},
        "many": {"type": "array", "items": {"anyOf": options}},
    }));
    let view = fx.round(
        1,
        input_required(json!({"k": form_request(None, "m", schema)})),
    );
    let last = format!("Zone/{:04}", limits::MAX_ENUM_OPTIONS - 1);
    let answers = json!({"k": accept_with(json!({"zone": last, "plain": last, "many": values}))});
    let retry = fx.retry_ok(n(1), n(2), &answers);
    assert!(view.view_json.len() < limits::RESPONSE.max_bytes);
    assert_eq!(params_of(&retry.request_json)["inputResponses"], answers);

    let mut too_many = options.clone();
    too_many.push(option(limits::MAX_ENUM_OPTIONS));
    fx.register_tool(3);
    let schema = schema_of(json!({"zone": {"type": "string", "oneOf": too_many}}));
    assert_code(
        fx.accept(
            3,
            input_required(json!({"k": form_request(None, "m", schema)})),
        ),
        "invalid_form_requestedSchema",
    );
}

/// An OAuth authorization URL carrying a signed request object (a JWT), as authorization
/// servers with PAR-less JAR flows receive them: several KiB.
pub fn oauth_url(payload_bytes: usize) -> String {
    let segment = |n: usize| "eyJhbGciOiJSUzI1NiJ9".repeat(n / 20 + 1)[..n].to_owned();
    format!(
        "https://auth.example.com/oauth2/authorize?response_type=code&client_id=mcp-client&redirect_uri=https%3A%2F%2Fclient.example%2Fcb&state=af0ifjsldkj&request={}.{}.{}",
        segment(36),
        segment(payload_bytes),
        segment(342)
    )
}

#[test]
fn long_oauth_urls_with_a_jwt_pass() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    let url = oauth_url(6000);
    assert!(url.len() > 6000);
    let view = fx.round(1, input_required(json!({"auth": url_request(&url)})));
    assert_eq!(parse(&view.view_json)["inputs"][0]["url"]["full"], url);
    fx.retry_ok(n(1), n(2), &json!({"auth": {"action": "accept"}}));

    // At the bound it passes; one byte beyond, refused.
    let head = oauth_url(0);
    let at_bound = format!("{head}{}", "A".repeat(limits::MAX_URL_BYTES - head.len()));
    fx.register_tool(3);
    fx.round(3, input_required(json!({"auth": url_request(&at_bound)})));
    fx.register_tool(4);
    assert_code(
        fx.accept(
            4,
            input_required(json!({"auth": url_request(&format!("{at_bound}A"))})),
        ),
        "unsafe_url_elicitation",
    );
}

/// The exact `requestedSchema` the MCP Python SDK (`mcp==2.3.0`,
/// `mcp.server.elicitation.render_elicitation_schema`) renders for a pydantic model with
/// `Optional[str] = None`, `int | None = None`, defaults, a `Literal`, `EmailStr`,
/// `Optional[EmailStr]` and booleans: optional fields are flattened to their type and left
/// out of `required`, `None` defaults dropped.
pub fn python_sdk_schema() -> Value {
    parse(
        r#"{"properties":{"name":{"title":"Name","type":"string"},"nickname":{"title":"Nickname","type":"string"},"age":{"title":"Age","type":"integer"},"guests":{"default":2,"title":"Guests","type":"integer"},"ratio":{"default":1.5,"title":"Ratio","type":"number"},"size":{"default":"m","enum":["s","m","l"],"title":"Size","type":"string"},"email":{"format":"email","title":"Email","type":"string"},"backup_email":{"format":"email","title":"Backup Email","type":"string"},"subscribe":{"default":false,"title":"Subscribe","type":"boolean"},"confirm":{"title":"Confirm","type":"boolean"},"note":{"default":"","description":"A note","maxLength":200,"minLength":0,"title":"Note","type":"string"}},"required":["name","email","confirm"],"title":"Booking","type":"object"}"#,
    )
}

/// What plain pydantic (`Booking.model_json_schema()`, without the SDK's renderer) writes for
/// `nickname: Optional[str] = None`: outside the spec's primitive subset.
pub fn plain_pydantic_optional() -> Value {
    parse(
        r#"{"properties":{"name":{"title":"Name","type":"string"},"nickname":{"anyOf":[{"type":"string"},{"type":"null"}],"default":null,"title":"Nickname"}},"required":["name"],"title":"Booking","type":"object"}"#,
    )
}

#[test]
fn the_python_sdks_optional_fields_pass_and_nullable_unions_are_refused() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    let view = fx.round(
        1,
        input_required(json!({"booking": form_request(None, "Book", python_sdk_schema())})),
    );
    let fields = parse(&view.view_json)["inputs"][0]["fields"].clone();
    let optional: Vec<&str> = fields
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["required"] == false)
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(optional.contains(&"nickname") && optional.contains(&"age"));
    // Optional fields left out, the required ones given (the IDNA domain too).
    fx.retry_ok(
        n(1),
        n(2),
        &json!({"booking": accept_with(json!({"name": "Ada", "email": "ada@xn--bcher-kva.example", "confirm": true}))}),
    );

    fx.register_tool(3);
    let d = assert_code(
        fx.accept(
            3,
            input_required(
                json!({"booking": form_request(None, "Book", plain_pydantic_optional())}),
            ),
        ),
        "invalid_form_requestedSchema",
    );
    assert!(d.error.to_string().contains("required"), "{d}");
}
