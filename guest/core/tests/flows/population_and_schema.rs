//! Input responses hold exactly the requested keys, and their content meets the requested schema.

use crate::common::*;
use crate::flows::support::*;
use serde_json::json;

#[test]
fn extra_and_missing_keys_are_refused() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(
        1,
        input_required(json!({"a": form("A"), "b": url_request("https://b.example.com/")})),
    );
    let a = accept_with(form_content());
    let b = json!({"action": "accept"});
    for answers in [
        json!({"a": a}),
        json!({"b": b}),
        json!({}),
        json!({"a": a, "b": b, "c": b}),
        json!({"a": a, "B": b}),
        json!({"a": a, "b ": b}),
    ] {
        let d = assert_code(
            fx.retry(n(1), n(2), &answers),
            "input_response_population_mismatch",
        );
        assert!(d.audited);
    }
    fx.retry_ok(n(1), n(2), &json!({"a": a, "b": b}));
}

#[test]
fn invalid_input_keys_and_embedded_jsonrpc_are_refused() {
    let mut fx = Fx::new();
    // Any visible key of 1 to 128 bytes passes (tests/flows/spec_legal.rs).
    let long = "k".repeat(129);
    for (i, requests) in [
        json!({"bad\u{202E}key": form("A")}),
        json!({"": form("A")}),
        json!({long.clone(): form("A")}),
        json!({"a": {"jsonrpc": "2.0", "id": 5, "method": "elicitation/create", "params": {"message": "m", "requestedSchema": form_schema()}}}),
        json!({"a": "elicitation/create"}),
        json!({"a": {"method": "elicitation/create"}}),
        json!({"a": {"method": "elicitation/create", "params": {"requestedSchema": form_schema()}}}),
    ]
    .into_iter()
    .enumerate()
    {
        let id = i as i64 + 1;
        fx.register_tool(id);
        assert_code(fx.accept(id, input_required(requests)), "invalid_named_input_request");
    }
    fx.register_tool(50);
    assert_code(
        fx.accept(
            50,
            json!({"resultType": "input_required", "inputRequests": []}),
        ),
        "invalid_named_input_request",
    );
}

#[test]
fn schema_references_are_refused() {
    let mut fx = Fx::new();
    for (i, schema) in [
        json!({"type": "object", "properties": {"a": {"$ref": "https://evil.example/schema.json"}}}),
        json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"type": "string"}}}),
        json!({"$ref": "#", "type": "object", "properties": {}}),
        json!({"type": "object", "properties": {"a": {"type": "string", "$ref": "#/x"}}}),
        json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string", "enum": ["x"], "$ref": "#"}}}}),
        json!({"type": "object", "properties": {"a": {"type": "object", "properties": {}}}}),
        json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^.*$"}}}),
        json!({"type": "object", "properties": {}, "additionalProperties": true}),
        json!({"type": "array", "items": {"type": "string"}}),
    ]
    .into_iter()
    .enumerate()
    {
        let id = i as i64 + 1;
        fx.register_tool(id);
        assert_code(
            fx.accept(id, input_required(json!({"a": form_request(None, "m", schema.clone())}))),
            "invalid_form_requestedSchema",
        );
        // The binding is ended.
        assert_code(fx.accept(id, complete()), "no_live_request");
    }
}

#[test]
fn schema_invalid_content_is_refused() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, input_required(json!({"f": form("F")})));
    for content in [
        json!({"count": 3}),                            // required `login` missing
        json!({"login": 42}),                           // wrong type
        json!({"login": ""}),                           // minLength
        json!({"login": "x".repeat(40)}),               // maxLength
        json!({"login": "octocat", "count": 0}),        // minimum
        json!({"login": "octocat", "count": 11}),       // maximum
        json!({"login": "octocat", "count": 2.5}),      // integer
        json!({"login": "octocat", "count": "3"}),      // no coercion
        json!({"login": "octocat", "confirm": "true"}), // no coercion
        json!({"login": "octocat", "admin": true}),     // a field the user never saw
        json!("octocat"),
        json!(null),
    ] {
        let d = assert_code(
            fx.retry(n(1), n(2), &json!({"f": accept_with(content.clone())})),
            "input_response_schema_mismatch",
        );
        assert!(d.audited, "{content}");
    }
    // accept without content against a schema with a required field.
    assert_code(
        fx.retry(n(1), n(2), &json!({"f": {"action": "accept"}})),
        "input_response_schema_mismatch",
    );
    assert!(
        fx.consent.prompts().is_empty(),
        "no consent is asked for invalid content"
    );
    fx.retry_ok(
        n(1),
        n(2),
        &json!({"f": accept_with(json!({"login": "octocat"}))}),
    );
}

#[test]
fn enum_and_format_fields_validate() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    let schema = json!({
        "type": "object",
        "properties": {
            "color": {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
            "tags": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]}, "maxItems": 2},
            "mail": {"type": "string", "format": "email"}
        },
        "required": ["color"]
    });
    fx.round(
        1,
        input_required(json!({"f": form_request(None, "m", schema)})),
    );
    for content in [
        json!({"color": "blue"}),
        json!({"color": "r", "tags": ["c"]}),
        json!({"color": "r", "tags": ["a", "a"]}),
        json!({"color": "r", "mail": "not an email"}),
    ] {
        assert_code(
            fx.retry(n(1), n(2), &json!({"f": accept_with(content)})),
            "input_response_schema_mismatch",
        );
    }
    fx.retry_ok(n(1), n(2), &json!({"f": accept_with(json!({"color": "g", "tags": ["a", "b"], "mail": "a@b.example"}))}));
}

#[test]
fn a_schema_mismatch_names_the_field_and_the_rule() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    let schema = json!({
        "type": "object",
        "properties": {
            "bags": {"type": "integer", "minimum": 0, "maximum": 3},
            "who": {"type": "string", "minLength": 2, "maxLength": 5},
            "mail": {"type": "string", "format": "email"},
            "ok": {"type": "boolean"},
            "seat": {"type": "string", "enum": ["aisle", "window"]},
            "meals": {"type": "array", "items": {"type": "string", "enum": ["veg", "fish"]}, "minItems": 1, "maxItems": 1},
            "weight": {"type": "number", "minimum": 0.5}
        },
        "required": ["who"]
    });
    fx.round(
        1,
        input_required(json!({"trip": form_request(None, "m", schema)})),
    );
    let long = "x".repeat(200);
    let cut = format!("{}…", "x".repeat(64));
    for (content, names) in [
        (json!({"who": "Ada", "bags": 4}), "`bags`: at most 3"),
        (json!({"who": "Ada", "bags": -1}), "`bags`: at least 0"),
        (
            json!({"who": "Ada", "bags": 1.5}),
            "`bags`: must be a whole number",
        ),
        (
            json!({"who": "Ada", "bags": "1"}),
            "`bags`: must be a whole number",
        ),
        (json!({"bags": 1}), "`who`: required"),
        (json!({"who": "A"}), "`who`: at least 2 characters"),
        (
            json!({"who": "Ada Lovelace"}),
            "`who`: at most 5 characters",
        ),
        (json!({"who": 7}), "`who`: must be text"),
        (
            json!({"who": "Ada", "mail": "no"}),
            "`mail`: must be a valid email",
        ),
        (
            json!({"who": "Ada", "ok": "yes"}),
            "`ok`: must be true or false",
        ),
        (
            json!({"who": "Ada", "seat": "roof"}),
            "`seat`: must be one of its options",
        ),
        (
            json!({"who": "Ada", "meals": []}),
            "`meals`: at least 1 choices",
        ),
        (
            json!({"who": "Ada", "meals": ["veg", "fish"]}),
            "`meals`: at most 1 choices",
        ),
        (
            json!({"who": "Ada", "meals": ["tea"]}),
            "`meals`: must be a list of its options",
        ),
        (
            json!({"who": "Ada", "meals": "veg"}),
            "`meals`: must be a list of its options",
        ),
        (
            json!({"who": "Ada", "weight": 0.25}),
            "`weight`: at least 0.5",
        ),
        (
            json!({"who": "Ada", "weight": true}),
            "`weight`: must be a number",
        ),
        (
            json!({"who": "Ada", "admin": true}),
            "`admin`: not in the schema",
        ),
        (json!("Ada"), "must be an object of fields"),
        // A caller's name, however long, is quoted cut to a bounded length.
        (
            json!({"who": "Ada", long.clone(): 1}),
            &*format!("`{cut}`: not in the schema"),
        ),
    ] {
        let d = assert_code(
            fx.retry(n(1), n(2), &json!({"trip": accept_with(content.clone())})),
            "input_response_schema_mismatch",
        );
        assert_eq!(
            d.error.to_string(),
            format!("the content for `trip` does not match its requested schema: {names}"),
            "{content}"
        );
    }
    // Neither the field nor the rule goes into the trail: codes only.
    for entry in fx.audit.entries() {
        for text in ["bags", "at most", "not in the schema", "xxxx"] {
            assert!(!entry.line.contains(text), "{text} in {}", entry.line);
        }
    }
}
