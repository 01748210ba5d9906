//! The policies in examples/policies/ decide rounds the gate itself accepted (the native core,
//! the rounds as the project's Python SDK test server encodes them), and hostile policy files
//! are each a typed error naming the line, never a crash, never an allow.

#![cfg(test)]

use mrtr_gate_host::GateApi;
use mrtr_gate_host::core::memory::{
    ManualClock, MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent,
};
use mrtr_gate_host::core::{
    ConsentView, DeprecatedMethod, Policy, Registration, RequestId, ResponseVerdict, ServerIdentity,
};
use mrtr_gate_policy::{Decision, Names, Policies, PolicyError};
use serde_json::{Value, json};
use std::sync::Arc;

const ALICE: Names<'static> = Names {
    user: "alice",
    tenant: "acme",
};

fn example(name: &str) -> Policies {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/policies/");
    let text = std::fs::read_to_string(format!("{path}{name}")).unwrap();
    Policies::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The consent view the gate makes of `result` (an `input_required` result) answering a
/// `method` call of `name` at `server`.
fn round(server: &str, method: &str, name: &str, result: Value) -> ConsentView {
    ConsentView::parse(&round_text(server, method, name, result)).unwrap()
}

/// The same view as the gate wrote it.
fn round_text(server: &str, method: &str, name: &str, result: Value) -> String {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let mut gate = mrtr_gate_host::NativeGate::new(mrtr_gate_host::HostServices {
        clock: clock.clone(),
        storage: Arc::new(MemoryStorage::new(clock)),
        consent: Arc::new(ScriptedConsent::new(ScriptedAnswer::Refuse)),
        audit: Arc::new(MemoryAudit::new()),
    });
    let server = ServerIdentity::endpoint(server).unwrap();
    let params = match method {
        "resources/read" => json!({"uri": name}),
        _ => json!({"name": name, "arguments": {"n": 1}}),
    };
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}});
    let policy = Policy {
        allowed_deprecated: vec![
            DeprecatedMethod::SamplingCreateMessage,
            DeprecatedMethod::RootsList,
        ],
        ..Policy::default()
    };
    gate.register(Registration {
        request_id: RequestId::Text("r1".into()),
        server: server.clone(),
        user: "alice".into(),
        tenant: "acme".into(),
        method: method.into(),
        params_json: params.to_string(),
        policy,
    })
    .unwrap();
    let answer = json!({"jsonrpc": "2.0", "id": "r1", "result": result});
    match gate.accept_response(&server, &answer.to_string()).unwrap() {
        ResponseVerdict::InputRequired(round) => round.view_json,
        other => panic!("not a round: {other:?}"),
    }
}

fn form(fields: Value, required: &[&str]) -> Value {
    json!({"method": "elicitation/create", "params": {"mode": "form", "message": "Fill in",
        "requestedSchema": {"type": "object", "properties": fields, "required": required}}})
}

fn url(target: &str) -> Value {
    json!({"method": "elicitation/create", "params": {"mode": "url", "message": "Pay",
        "url": target, "elicitationId": "e1"}})
}

fn asking(inputs: Value) -> Value {
    json!({"resultType": "input_required", "inputRequests": inputs})
}

const SERVER: &str = "https://mcp.example/mcp";

fn seat_form() -> ConsentView {
    round(
        SERVER,
        "tools/call",
        "book_flight",
        asking(json!({"passenger": form(
            json!({"full_name": {"type": "string"}, "seat": {"type": "string", "enum": ["window", "aisle"]}}),
            &["full_name"])})),
    )
}

#[test]
fn a_url_outside_the_allowed_domains_or_a_deceptive_host_is_denied_by_its_policy() {
    let p = example("deny-url-outside-allowed.cedar");
    let pay = |target: &str| {
        round(
            SERVER,
            "tools/call",
            "pay",
            asking(json!({"payment": url(target)})),
        )
    };
    assert_eq!(
        p.decide(ALICE, &pay("https://pay.example.com/session/1")),
        Decision::Ask { policies: vec![] }
    );
    assert_eq!(
        p.decide(ALICE, &pay("https://evil.example.net/session/1")),
        Decision::Deny {
            policy: "url-outside-allowed-domains".into()
        }
    );
    let d = p.decide(ALICE, &pay("https://xn--pay-exmple-9db.com/"));
    assert_eq!(d.code(), Some("policy_denied"), "{d:?}");
    // Two URLs, one allowed and one not: the round is denied.
    let both = round(
        SERVER,
        "tools/call",
        "pay",
        asking(
            json!({"a": url("https://pay.example.com/x"), "b": url("https://evil.example.net/y")}),
        ),
    );
    assert_eq!(
        p.decide(ALICE, &both),
        Decision::Deny {
            policy: "url-outside-allowed-domains".into()
        }
    );
    // A form round is none of these policies' business.
    assert_eq!(
        p.decide(ALICE, &seat_form()),
        Decision::Ask { policies: vec![] }
    );
}

#[test]
fn a_form_asking_for_a_secret_goes_to_a_person_even_where_a_permit_holds() {
    let p = example("person-for-secrets.cedar");
    let granted = p.decide(ALICE, &seat_form());
    assert_eq!(
        granted,
        Decision::Allow {
            policy: "forms-granted".into()
        }
    );
    assert_eq!(
        granted.receipt_id().as_deref(),
        Some("policy:forms-granted")
    );
    let secret = round(
        SERVER,
        "tools/call",
        "book_flight",
        asking(
            json!({"login": form(json!({"user": {"type": "string"}, "password": {"type": "string"}}), &["password"])}),
        ),
    );
    assert_eq!(
        p.decide(ALICE, &secret),
        Decision::Ask {
            policies: vec!["secrets-need-a-person".into()]
        }
    );
    // A round that sends the user to a URL: no policy decides.
    let other = round(
        SERVER,
        "tools/call",
        "pay",
        asking(
            json!({"pay": {"method": "elicitation/create", "params": {"mode": "url",
            "message": "Pay", "url": "https://pay.example.com/s/1", "elicitationId": "e1"}}}),
        ),
    );
    assert_eq!(p.decide(ALICE, &other), Decision::Ask { policies: vec![] });
}

#[test]
fn state_only_rounds_pass_only_from_the_trusted_server_and_under_the_size() {
    let p = example("trusted-state-only.cedar");
    let state = |server: &str, state: &str| {
        round(
            server,
            "tools/call",
            "continue_job",
            json!({"resultType": "input_required", "requestState": state}),
        )
    };
    assert_eq!(
        p.decide(ALICE, &state("https://trusted.example/mcp", "step-2")),
        Decision::Ask { policies: vec![] }
    );
    assert_eq!(
        p.decide(ALICE, &state(SERVER, "step-2")),
        Decision::Deny {
            policy: "state-only-from-trusted".into()
        }
    );
}

#[test]
fn deprecated_sampling_and_roots_are_denied_everywhere() {
    let p = example("no-deprecated.cedar");
    let sampling = round(
        SERVER,
        "prompts/get",
        "summarise",
        asking(
            json!({"llm": {"method": "sampling/createMessage", "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
            "maxTokens": 10}}}),
        ),
    );
    assert_eq!(
        p.decide(ALICE, &sampling),
        Decision::Deny {
            policy: "no-deprecated-input".into()
        }
    );
    let roots = round(
        SERVER,
        "resources/read",
        "file:///notes.txt",
        asking(json!({"r": {"method": "roots/list"}})),
    );
    assert_eq!(
        p.decide(ALICE, &roots),
        Decision::Deny {
            policy: "no-deprecated-input".into()
        }
    );
    assert_eq!(
        p.decide(ALICE, &seat_form()),
        Decision::Ask { policies: vec![] }
    );
}

#[test]
fn principals_servers_and_names_are_the_hosts_own() {
    let p = Policies::parse(
        r#"
        @id("acme-bookings")
        permit (
          principal in Mrtr::Tenant::"acme",
          action == Mrtr::Action::"tools/call",
          resource in Mrtr::Server::"endpoint:https://mcp.example/mcp"
        ) when { context.round == 1 && context.form_required == ["full_name"] };
        "#,
    )
    .unwrap();
    let view = seat_form();
    assert!(matches!(p.decide(ALICE, &view), Decision::Allow { .. }));
    let bob = Names {
        user: "bob",
        tenant: "globex",
    };
    assert_eq!(p.decide(bob, &view), Decision::Ask { policies: vec![] });
}

/// Each hostile file: refused with its code, never a policy set.
fn refused(text: &str) -> PolicyError {
    match Policies::parse(text) {
        Ok(p) => panic!("accepted {} policies: {:?}", p.ids().len(), p.ids()),
        Err(e) => e,
    }
}

#[test]
fn hostile_policy_files_are_typed_errors_with_their_line_never_an_allow() {
    let e =
        refused("permit (principal, action, resource);\n\npermit (principal, action resource);");
    assert_eq!(e.code(), "policy_unparsable");
    assert_eq!(e.problems()[0].line, 3, "{e}");

    let e = refused(
        "permit (principal, action, resource);\nforbid (principal, action, resource)\n  when { context.no_such == 1 };",
    );
    assert_eq!(e.code(), "policy_invalid");
    assert!(e.problems().iter().all(|p| p.line == 3), "{e}");

    let e = refused("permit (principal == Mrtr::Nobody::\"x\", action, resource);");
    assert_eq!(e.code(), "policy_invalid");

    let e = refused(&"a".repeat(mrtr_gate_policy::MAX_POLICY_BYTES + 1));
    assert_eq!(e.code(), "policy_too_large");

    let deep = format!(
        "permit (principal, action, resource)\nwhen {{ {}true{} }};",
        "(".repeat(10_000),
        ")".repeat(10_000)
    );
    let e = refused(&deep);
    assert_eq!(e.code(), "policy_too_deep");
    assert_eq!(e.problems()[0].line, 2);

    // Brackets inside strings and comments are not nesting.
    let quoted = format!(
        "// {}\npermit (principal, action, resource) when {{ context.server == \"{}\" }};",
        "(".repeat(200),
        "[".repeat(200)
    );
    assert!(Policies::parse(&quoted).is_ok());

    // A long chain of operators (no brackets): refused, or parsed and decided as written
    // (here: no permit holds), never a crash, never an allow.
    let chain = format!(
        "permit (principal, action, resource) when {{ {} context.deprecated }};",
        "context.deprecated || ".repeat(100_000)
    );
    if let Ok(p) = Policies::parse(&chain) {
        let d = p.decide(ALICE, &seat_form());
        assert!(
            matches!(d, Decision::Ask { .. } | Decision::Failed { .. }),
            "{d:?}"
        );
    }

    let e = refused("@id(\"a b\")\npermit (principal, action, resource);");
    assert_eq!(e.code(), "policy_bad_id");
    let e = refused(
        "@id(\"x\") permit (principal, action, resource);\n@id(\"x\") forbid (principal, action, resource);",
    );
    assert_eq!(e.code(), "policy_bad_id");
    assert_eq!(e.problems()[0].line, 2);
    let e = refused("@ask\npermit (principal, action, resource);");
    assert_eq!(e.code(), "policy_unsupported");
    let e = refused("permit (principal == ?principal, action, resource);");
    assert!(
        matches!(e.code(), "policy_unparsable" | "policy_unsupported"),
        "{e}"
    );
    for garbage in ["\u{0}", "permit", ";;;", "\"", "// only a comment\nforbid"] {
        let e = refused(garbage);
        assert_eq!(e.code(), "policy_unparsable", "{garbage:?}: {e}");
    }
}

#[test]
fn no_policy_file_is_no_decision_and_ids_follow_the_file() {
    let p = Policies::parse("// nothing yet\n").unwrap();
    assert!(p.ids().is_empty());
    assert_eq!(
        p.decide(ALICE, &seat_form()),
        Decision::Ask { policies: vec![] }
    );
    let p = Policies::parse(
        "forbid (principal, action, resource) when { context.deprecated };\n@id(\"named\") permit (principal, action, resource);",
    )
    .unwrap();
    assert_eq!(p.ids(), ["policy1", "named"]);
}

/// docs/policy.md publishes the schema the policies are validated against, exactly.
#[test]
fn docs_policy_md_publishes_the_schema_exactly() {
    let doc = include_str!("../../../docs/policy.md");
    let start = "<!-- schema: host-harness/policy/src/mrtr.cedarschema -->\n```cedarschema\n";
    let at = doc
        .find(start)
        .expect("the schema's block in docs/policy.md")
        + start.len();
    let end = doc[at..]
        .find("```\n<!-- schema: end -->")
        .expect("its end")
        + at;
    assert_eq!(&doc[at..end], mrtr_gate_policy::SCHEMA);
}

/// A round the policies allow is granted at its retry with the policy's receipt; one they
/// leave is asked of the configured consent; a principal with no names fails closed.
#[test]
fn the_decider_remembers_an_allow_for_the_rounds_consent_and_asks_the_rest() {
    use mrtr_gate_host::Principal;
    use mrtr_gate_host::core::host::{Consent, ConsentMethod, ConsentPrompt};
    use mrtr_gate_policy::Decider;
    let decider = Arc::new(Decider::new(
        example("person-for-secrets.cedar"),
        std::time::Duration::from_secs(600),
    ));
    let bound = Principal {
        user: "pseudonym-u".into(),
        tenant: "pseudonym-t".into(),
    };
    let view_json = round_text(
        SERVER,
        "tools/call",
        "book_flight",
        asking(json!({"passenger": form(json!({"seat": {"type": "string"}}), &[])})),
    );
    let sha = "v".repeat(64);
    assert!(matches!(
        decider.judge(&bound, &view_json, &sha),
        Decision::Failed { .. }
    ));
    decider.know(&bound, "alice", "acme");
    assert_eq!(
        decider.judge(&bound, &view_json, &sha),
        Decision::Allow {
            policy: "forms-granted".into()
        }
    );
    let consent = decider.consent(ScriptedConsent::new(ScriptedAnswer::Refuse));
    let prompt = |view_sha256: &str| ConsentPrompt {
        view_json: view_json.clone(),
        view_sha256: view_sha256.into(),
        responses_json: "{}".into(),
        responses_sha256: "r".repeat(64),
    };
    let receipt = consent.request_consent(&prompt(&sha)).unwrap();
    assert_eq!(receipt.receipt_id, "policy:forms-granted");
    assert_eq!(receipt.method, ConsentMethod::PolicyHook);
    assert_eq!(receipt.view_sha256, sha);
    // Another round: the configured consent (here it refuses).
    let other = consent.request_consent(&prompt(&"w".repeat(64))).unwrap();
    assert_ne!(other.method, ConsentMethod::PolicyHook);
    assert!(matches!(
        decider.judge(&bound, "{not a view", &sha),
        Decision::Failed { .. }
    ));
}

/// Rounds of every kind the schema describes: each form field type and format, URLs with each
/// mark, state only, the deprecated methods, and each action.
fn every_kind_of_round() -> Vec<ConsentView> {
    let sampling = json!({"method": "sampling/createMessage", "params": {"messages": [
        {"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 10}});
    let roots = json!({"method": "roots/list"});
    vec![
        seat_form(),
        round(
            SERVER,
            "tools/call",
            "sign_in",
            asking(json!({"c": form(json!({
                "user": {"type": "string", "format": "email"},
                "when": {"type": "string", "format": "date-time"},
                "n": {"type": "integer", "minimum": 0}, "x": {"type": "number"},
                "ok": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
                "password": {"type": "string"}}), &["user"])})),
        ),
        round(
            SERVER,
            "tools/call",
            "pay",
            asking(json!({"a": url("https://xn--pay-exmple-9db.com/x?y=1"),
                "b": url("https://127.0.0.1:8443/p"), "c": url("https://pay.example.com/")})),
        ),
        round(
            SERVER,
            "tools/call",
            "continue_job",
            json!({"resultType": "input_required", "requestState": "step-2"}),
        ),
        round(
            SERVER,
            "tools/call",
            "summarise",
            asking(json!({"s": sampling})),
        ),
        round(SERVER, "prompts/get", "greet", asking(json!({"r": roots}))),
        round(
            "https://trusted.example/mcp",
            "resources/read",
            "file:///notes.txt",
            json!({"resultType": "input_required", "requestState": "s".repeat(60_000)}),
        ),
    ]
}

/// The request a round makes is built to the schema's shape: deciding does not check it, so
/// this does, for every kind of round.
#[test]
fn every_kind_of_round_makes_a_request_the_schema_accepts() {
    let p = example("no-deprecated.cedar");
    for view in every_kind_of_round() {
        p.check_request(ALICE, &view)
            .unwrap_or_else(|e| panic!("{}: {e}", view.request.name));
    }
}

/// Policies with guards (their first test of the round's facts, answered without Cedar) of
/// every form taken, and policies whose first test is none: an operator a guard does not
/// take, a failing test first, an extension function.
const GUARDS: &str = r#"
    @id("g01-url") forbid (principal, action, resource) when { context.kinds.contains("url") && !["pay.example.com"].containsAll(context.url_hosts) };
    @id("g02-state-only") forbid (principal, action, resource) when { context.inputs == 0 && context.state } unless { context.state_bytes <= 100 };
    @id("g03-deprecated") forbid (principal, action, resource) when { context.deprecated };
    @id("g04-unless") permit (principal, action, resource) unless { context.state };
    @id("g05-set-eq") permit (principal, action, resource) when { context.kinds == ["form"] };
    @id("g06-reversed") @ask forbid (principal, action, resource) when { 3 == context.inputs };
    @id("g07-or") forbid (principal, action, resource) when { context.round >= 2 || context.max_rounds < 3 };
    @id("g08-attributes") permit (principal, action, resource) when { context.form_fields.containsAny(context.form_required) && context.form_formats.contains("email") };
    @id("g09-server") forbid (principal, action == Mrtr::Action::"resources/read", resource) when { context.server != "https://trusted.example/mcp" };
    @id("g10-bool-eq") @ask forbid (principal, action, resource) when { context.state == true && context.state_bytes > 10 };
    @id("g11-and") permit (principal, action, resource) when { (context.kinds.contains("form") && context.form_types.containsAll(["string"])) && context.keys.contains("passenger") };
    @id("g12-fails-behind") forbid (principal, action, resource) when { context.kinds.contains("sampling") && context.round + 9223372036854775807 > 0 };
    @id("g13-two-clauses") forbid (principal, action, resource) when { context.kinds.contains("url") } when { context.inputs + 9223372036854775807 > 0 };
    @id("g14-scoped") forbid (principal, action == Mrtr::Action::"tools/call", resource == Mrtr::Tool::"pay") when { context.url_marks.containsAny(["punycode", "ip_literal"]) };
    @id("g15-not") permit (principal in Mrtr::Tenant::"acme", action, resource) when { !context.kinds.contains("roots") && context.round <= context.max_rounds };
    @id("g16-fails-first") forbid (principal, action, resource) when { context.round + 9223372036854775807 > 0 && context.kinds.contains("url") };
    @id("g17-empty") forbid (principal, action, resource) when { context.url_marks.isEmpty() && context.kinds.contains("url") };
    @id("g18-extension") permit (principal, action, resource) when { ip("127.0.0.1").isLoopback() && context.inputs == 1 };
    @id("g19-like") forbid (principal, action, resource) when { context.server like "*.evil/*" };
    @id("g20-scope-in") forbid (principal, action, resource in Mrtr::Server::"https://trusted.example/mcp") when { context.state };
    @id("g21-in-server") @ask forbid (principal, action, resource) when { resource in Mrtr::Server::"endpoint:https://trusted.example/mcp" && context.state_bytes > 50000 };
    @id("g22-principal") permit (principal == Mrtr::User::"alice", action, resource) when { context.kinds.contains("form") };
    @id("g23-no-condition") permit (principal, action == Mrtr::Action::"prompts/get", resource);
"#;

/// Judging a round by the policies its action and resource can meet decides as Cedar does
/// with every policy evaluated: for the examples, for scopes of every kind (an action, a list
/// of actions, a resource by `==`, `in` and `is`, a principal), for guards of every form, and
/// for policies that fail to evaluate, behind a guard and before one.
#[test]
fn the_scope_index_decides_as_every_policy_evaluated_does() {
    let scoped = r#"
        @id("a-tools") permit (principal, action == Mrtr::Action::"tools/call", resource);
        @id("b-prompts") forbid (principal, action == Mrtr::Action::"prompts/get", resource);
        @id("c-two") permit (principal, action in [Mrtr::Action::"prompts/get", Mrtr::Action::"resources/read"], resource) when { context.state };
        @id("d-pay") forbid (principal, action == Mrtr::Action::"tools/call", resource == Mrtr::Tool::"pay") when { context.url_marks.contains("punycode") };
        @id("e-sign") @ask forbid (principal, action, resource == Mrtr::Tool::"sign_in");
        @id("f-in-server") forbid (principal, action, resource in Mrtr::Server::"https://trusted.example/mcp") when { context.state_bytes > 50000 };
        @id("g-is") permit (principal, action, resource is Mrtr::Resource);
        @id("h-tenant") forbid (principal in Mrtr::Tenant::"other", action, resource);
        @id("i-fails") forbid (principal, action == Mrtr::Action::"tools/call", resource == Mrtr::Tool::"summarise") when { context.round + 9223372036854775807 > 0 };
        @id("j-other") forbid (principal, action, resource == Mrtr::Tool::"nothing-calls-this");
    "#;
    let mut files: Vec<(String, Policies)> = [
        "deny-url-outside-allowed.cedar",
        "person-for-secrets.cedar",
        "trusted-state-only.cedar",
        "no-deprecated.cedar",
    ]
    .iter()
    .map(|name| ((*name).to_owned(), example(name)))
    .collect();
    files.push(("scoped".into(), Policies::parse(scoped).unwrap()));
    let guards = Policies::parse(GUARDS).unwrap();
    assert_eq!(
        guards.decided(),
        [
            "g01-url",
            "g02-state-only",
            "g03-deprecated",
            "g04-unless",
            "g05-set-eq",
            "g06-reversed",
            "g07-or",
            "g08-attributes",
            "g09-server",
            "g10-bool-eq",
            "g11-and",
            "g14-scoped",
            "g21-in-server",
            "g23-no-condition",
        ],
        "the policies decided from the facts alone"
    );
    assert_eq!(
        guards.guarded(),
        [
            "g12-fails-behind",
            "g13-two-clauses",
            "g15-not",
            "g20-scope-in",
            "g22-principal",
        ],
        "the policies Cedar evaluates behind a guard"
    );
    files.push(("guards".into(), guards));
    let mut failed = 0;
    for (name, p) in &files {
        for view in every_kind_of_round() {
            for names in [
                ALICE,
                Names {
                    user: "bob",
                    tenant: "other",
                },
            ] {
                let scoped = p.decide(names, &view);
                assert_eq!(
                    scoped,
                    p.decide_unscoped(names, &view),
                    "{name}: {} of {}",
                    view.request.method,
                    view.request.name
                );
                if matches!(scoped, Decision::Failed { .. }) {
                    failed += 1;
                }
            }
        }
    }
    // The overflowing policies failed their rounds, for both principals: `i-fails` the
    // summarise round (2); `g16-fails-first` every round (7 rounds, 14), where
    // `g12-fails-behind` fails the summarise round and `g13-two-clauses` the pay round too.
    assert_eq!(failed, 2 + 14);
}

/// A small generator of policies (xorshift: the same files on every run).
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[(self.next() % from.len() as u64) as usize]
    }

    /// A test of the round: one a guard can take, or one it cannot (a failing sum, `like`,
    /// `isEmpty`), or `!`, `&&`, `||` of smaller ones.
    fn test(&mut self, depth: u32) -> String {
        if depth > 0 && self.next().is_multiple_of(3) {
            let (a, b) = (self.test(depth - 1), self.test(depth - 1));
            return match self.next() % 3 {
                0 => format!("!({a})"),
                1 => format!("({a} && {b})"),
                _ => format!("({a} || {b})"),
            };
        }
        let n = self.next() % 4;
        let op = self.pick(&["==", "!=", "<", "<=", ">", ">="]);
        match self.next() % 15 {
            0 => format!(
                "context.kinds.contains(\"{}\")",
                self.pick(&["form", "url", "sampling", "roots"])
            ),
            1 => format!("context.inputs {op} {n}"),
            2 => format!("{n} {op} context.round"),
            3 => self
                .pick(&["context.state", "context.deprecated"])
                .to_owned(),
            4 => format!("context.state == {}", self.next().is_multiple_of(2)),
            5 => format!(
                "context.form_fields.containsAny([\"{}\", \"nothing\"])",
                self.pick(&["password", "full_name", "seat", "user"])
            ),
            6 => format!(
                "[\"pay.example.com\", \"{}\"].containsAll(context.url_hosts)",
                self.pick(&["127.0.0.1", "xn--pay-exmple-9db.com", "other"])
            ),
            7 => format!(
                "context.kinds == [{}]",
                self.pick(&["\"form\"", "\"url\"", "\"sampling\"", "\"form\", \"url\""])
            ),
            8 => format!(
                "context.server {} \"{}\"",
                self.pick(&["==", "!="]),
                self.pick(&[
                    "endpoint:https://mcp.example/mcp",
                    "https://trusted.example/mcp"
                ])
            ),
            9 => "context.round + 9223372036854775807 > 0".to_owned(),
            14 => format!(
                "resource in Mrtr::Server::\"{}\"",
                self.pick(&[
                    "endpoint:https://mcp.example/mcp",
                    "endpoint:https://trusted.example/mcp",
                    "https://mcp.example/mcp"
                ])
            ),
            10 => "context.url_marks.isEmpty()".to_owned(),
            11 => "context.server like \"*trusted*\"".to_owned(),
            _ => format!("context.state_bytes {op} {}", n * 20_000),
        }
    }

    fn policy(&mut self, i: usize) -> String {
        let effect = self.pick(&["permit", "forbid", "@ask forbid"]);
        let scope = self.pick(&[
            "principal, action, resource",
            "principal, action == Mrtr::Action::\"tools/call\", resource",
            "principal, action, resource == Mrtr::Tool::\"pay\"",
            "principal in Mrtr::Tenant::\"acme\", action, resource",
            "principal, action, resource in Mrtr::Server::\"endpoint:https://mcp.example/mcp\"",
            "principal, action in [Mrtr::Action::\"prompts/get\", Mrtr::Action::\"resources/read\"], resource",
        ]);
        let mut text = format!("@id(\"p{i:02}\") {effect} ({scope})");
        for _ in 0..=(self.next() % 2) {
            let kind = self.pick(&["when", "when", "unless"]);
            text.push_str(&format!(" {kind} {{ {} }}", self.test(2)));
        }
        text.push_str(";\n");
        text
    }
}

/// Guards of generated policies decide as Cedar does with every policy evaluated: 150 files
/// of 6 policies each, every kind of round, two principals.
#[test]
fn generated_guards_decide_as_every_policy_evaluated_does() {
    let mut generator = Gen(0x9e37_79b9_7f4a_7c15);
    let rounds = every_kind_of_round();
    let (mut guarded, mut decided, mut decisions) = (0, 0, std::collections::BTreeMap::new());
    for _ in 0..150 {
        let text: String = (0..6).map(|i| generator.policy(i)).collect();
        let p = Policies::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        guarded += p.guarded().len();
        decided += p.decided().len();
        for view in &rounds {
            for names in [
                ALICE,
                Names {
                    user: "bob",
                    tenant: "other",
                },
            ] {
                let decision = p.decide(names, view);
                assert_eq!(
                    decision,
                    p.decide_unscoped(names, view),
                    "{text}: {} of {}",
                    view.request.method,
                    view.request.name
                );
                let kind = format!("{decision:?}");
                *decisions
                    .entry(kind.split(' ').next().unwrap_or("").to_owned())
                    .or_insert(0) += 1;
            }
        }
    }
    // The files exercise what they are for: guards taken, policies decided from the facts,
    // and every decision.
    assert!(guarded > 100, "{guarded} guarded policies");
    assert!(decided > 100, "{decided} policies decided from the facts");
    for kind in ["Allow", "Deny", "Ask", "Failed"] {
        assert!(
            decisions.get(kind).copied().unwrap_or(0) > 50,
            "{decisions:?}"
        );
    }
}
