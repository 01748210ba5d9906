//! `mrtr-gate proxy --policy FILE` over HTTP: a round a `forbid` holds for is refused before
//! the client sees it (`policy_denied`, the binding ended with that reason in the trail, the
//! upstream asked nothing more); a round a `permit` holds for is granted at its retry without
//! anyone asked (here `--consent tty` with no terminal, which would refuse), the trail's
//! `consented` event naming the policy; a file with a mistake is a usage error with its line.
//!
//! The policy file is reloaded on SIGHUP, and a file that does not validate leaves the policies
//! loaded before judging. Every example in examples/policies/ judges the rounds the project's
//! Python SDK test server sends (tests/peers/python_sdk/server.py), through the proxy.
//!
//! Raw JSON-RPC written by the test against tests/peers/recording_http_server.py (a `book` tool
//! with a `seat` form round) and the Python SDK server. Hang guards only.

#![cfg(test)]
#![cfg(unix)]

mod support;

use serde_json::{Value, json};
use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::Instant;
use support::raw::{HANG_GUARD, call, gate, recording_upstream, retry};
use support::{Running, post, proxy_listening, python_server_http, root, scratch};

fn events(trail: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(trail)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A proxy with `policy` (the file's text) and `extra` flags, in front of a recording server;
/// its URL, the folder, and the running children.
fn gated(
    name: &str,
    policy: &str,
    extra: &[&str],
) -> (String, std::path::PathBuf, Vec<support::Running>) {
    let dir = scratch(name);
    std::fs::write(dir.join("policy.cedar"), policy).unwrap();
    let (upstream_server, upstream) = recording_upstream(&dir);
    let mut proxy = gate(&dir);
    proxy
        .arg("--policy")
        .arg(dir.join("policy.cedar"))
        .args(extra);
    let (proxy, url) = proxy_listening(proxy, &upstream);
    (url, dir, vec![proxy, upstream_server])
}

#[test]
fn a_forbidden_round_is_refused_before_the_client_sees_it_and_ends_on_record() {
    let (url, dir, _running) = gated(
        "policy-deny",
        "@id(\"no-forms-for-book\")\nforbid (principal, action, resource == Mrtr::Tool::\"book\")\n  when { context.kinds.contains(\"form\") };\n",
        &[],
    );
    let answer = post(&url, &call(1, "book")).unwrap();
    let refused = &answer["error"]["data"]["mrtr_gate"];
    assert_eq!(refused["code"], "policy_denied", "{answer}");
    assert_eq!(refused["cause"], "peer", "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no-forms-for-book"),
        "{answer}"
    );
    assert!(
        answer.get("result").is_none(),
        "the round never reached the client"
    );
    // The trail: the round was received, then the binding ended with the policy's code and
    // the policy named.
    let events = events(&dir.join("audit.jsonl"));
    let ended: Vec<&Value> = events
        .iter()
        .filter(|e| e["reason"] == "policy_denied")
        .collect();
    assert_eq!(ended.len(), 1, "{events:#?}");
    assert_eq!(ended[0]["event"], "terminal", "{events:#?}");
    assert_eq!(ended[0]["consent_method"], "policy_hook", "{events:#?}");
    assert_eq!(
        ended[0]["consent_receipt_id"], "policy:no-forms-for-book",
        "{events:#?}"
    );
    // A retry of the refused round finds no round.
    let again = post(&url, &retry(&call(1, "book"), &Value::Null, 2)).unwrap();
    assert!(again.get("error").is_some(), "{again}");
    let received = std::fs::read_to_string(dir.join("received.jsonl")).unwrap();
    assert_eq!(
        received.lines().count(),
        1,
        "the upstream got the call only"
    );
}

#[test]
fn a_permitted_round_is_granted_by_its_policy_with_no_person_asked_and_the_trail_names_it() {
    // `--consent tty` with no terminal refuses every round it is asked about: only the policy
    // can grant this one.
    let (url, dir, _running) = gated(
        "policy-allow",
        "@id(\"alice-books\")\npermit (principal == Mrtr::User::\"alice\", action == Mrtr::Action::\"tools/call\", resource == Mrtr::Tool::\"book\");\n",
        &["--consent", "tty"],
    );
    let first = call(1, "book");
    let round = post(&url, &first).unwrap();
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");
    let done = post(&url, &retry(&first, &round, 2)).unwrap();
    assert_eq!(done["result"]["content"][0]["text"], "booked 12A", "{done}");
    let events = events(&dir.join("audit.jsonl"));
    let consented: Vec<&Value> = events
        .iter()
        .filter(|e| e["consent_method"].is_string())
        .collect();
    assert_eq!(consented.len(), 1, "{events:#?}");
    assert_eq!(consented[0]["consent_method"], "policy_hook");
    assert_eq!(consented[0]["consent_receipt_id"], "policy:alice-books");

    // Another tool's round: no policy decides, the terminal is asked, and there is none.
    let other = call(3, "hold");
    let round = post(&url, &other).unwrap();
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");
    let refused = post(&url, &retry(&other, &round, 4)).unwrap();
    assert_eq!(
        refused["error"]["data"]["mrtr_gate"]["code"], "consent_unavailable",
        "{refused}"
    );
}

#[test]
fn a_policy_file_with_a_mistake_is_a_usage_error_naming_its_line() {
    let dir = scratch("policy-usage");
    let file = dir.join("policy.cedar");
    std::fs::write(
        &file,
        "permit (principal, action, resource);\nforbid (principal, action, resource) when { context.nope };\n",
    )
    .unwrap();
    let out = gate(&dir)
        .arg("--policy")
        .arg(&file)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "http://127.0.0.1:9/mcp",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("{}:2:", file.display())) && stderr.contains("policy_invalid"),
        "{stderr}"
    );
}

/// A proxy whose stderr goes to `dir/proxy.log` (read while it runs), in front of `upstream`;
/// its URL once it says it listens.
fn logging_to_file(mut proxy: Command, upstream: &str, log: &std::path::Path) -> (Running, String) {
    let child = proxy
        .args(["--listen", "127.0.0.1:0", "--upstream", upstream])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let running = Running(child);
    let line = logged(log, "mrtr-gate proxy: listening on ", 1);
    let url = line
        .strip_prefix("mrtr-gate proxy: listening on ")
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .to_owned();
    (running, url)
}

/// The `n`th line of `log` that starts with `prefix`, once the proxy has written it.
fn logged(log: &std::path::Path, prefix: &str, n: usize) -> String {
    let started = Instant::now();
    loop {
        let lines: Vec<String> = BufReader::new(std::fs::File::open(log).unwrap())
            .lines()
            .map_while(Result::ok)
            .filter(|l| l.starts_with(prefix))
            .collect();
        if let Some(line) = lines.get(n - 1) {
            return line.clone();
        }
        assert!(
            started.elapsed() < HANG_GUARD,
            "the proxy never logged {prefix:?} {n} times:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn hang_up(proxy: &Running) {
    let status = Command::new("kill")
        .args(["-HUP", &proxy.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn sighup_reloads_the_policies_and_a_file_that_does_not_validate_changes_nothing() {
    let dir = scratch("policy-reload");
    let file = dir.join("policy.cedar");
    let log = dir.join("proxy.log");
    std::fs::write(
        &file,
        "@id(\"no-book\")\nforbid (principal, action, resource == Mrtr::Tool::\"book\");\n",
    )
    .unwrap();
    let (_upstream_server, upstream) = recording_upstream(&dir);
    let mut proxy = gate(&dir);
    proxy.arg("--policy").arg(&file);
    let (proxy, url) = logging_to_file(proxy, &upstream, &log);
    let refused_by =
        |answer: &Value| answer["error"]["data"]["mrtr_gate"]["code"] == "policy_denied";
    assert!(refused_by(&post(&url, &call(1, "book")).unwrap()));

    // A file that permits the round: from the SIGHUP on, the round reaches the client.
    std::fs::write(
        &file,
        "@id(\"book-ok\")\npermit (principal, action, resource == Mrtr::Tool::\"book\");\n",
    )
    .unwrap();
    hang_up(&proxy);
    let reloaded = logged(&log, "mrtr-gate proxy: SIGHUP: 1 policies judge", 1);
    assert!(reloaded.contains("book-ok"), "{reloaded}");
    let first = call(2, "book");
    let round = post(&url, &first).unwrap();
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");
    let done = post(&url, &retry(&first, &round, 3)).unwrap();
    assert_eq!(done["result"]["content"][0]["text"], "booked 12A", "{done}");

    // A file with a mistake: said, with its line, and the policies loaded before still judge.
    std::fs::write(
        &file,
        "@id(\"no-book\")\nforbid (principal, action, resource == Mrtr::Tool::\"book\");\npermit (principal, action, resource) when { context.nope };\n",
    )
    .unwrap();
    hang_up(&proxy);
    let refused = logged(
        &log,
        "mrtr-gate proxy: SIGHUP: the policy file is refused",
        1,
    );
    assert!(
        refused.contains("policy_invalid") && refused.contains(&format!("{}:3:", file.display())),
        "{refused}"
    );
    let round = post(&url, &call(4, "book")).unwrap();
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");
    let trail = events(&dir.join("audit.jsonl"));
    let granted: Vec<&Value> = trail
        .iter()
        .filter(|e| e["consent_receipt_id"] == "policy:book-ok")
        .collect();
    assert!(!granted.is_empty(), "{trail:#?}");
}

/// A 2026-07-28 `tools/call` of the Python SDK server's `name` with `arguments` under `id`,
/// declaring form and URL elicitation.
fn sdk_call(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": name, "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {
                "elicitation": {"form": {}, "url": {}}}}}})
}

/// The retry of `round` (the answer to `request`) under `id` with `responses`.
fn sdk_retry(request: &Value, round: &Value, id: u64, responses: Value) -> Value {
    let mut r = request.clone();
    r["id"] = json!(id);
    r["params"]["inputResponses"] = responses;
    if let Some(state) = round["result"].get("requestState") {
        r["params"]["requestState"] = state.clone();
    }
    r
}

/// A proxy in front of the Python SDK server with examples/policies/`example` and `extra`.
fn example_gate(
    name: &str,
    example: &str,
    extra: &[&str],
) -> (String, std::path::PathBuf, Vec<Running>) {
    let dir = scratch(name);
    let (server, upstream) = python_server_http();
    let mut proxy = gate(&dir);
    proxy
        .arg("--policy")
        .arg(root().join("examples/policies").join(example))
        .args(extra);
    let (proxy, url) = proxy_listening(proxy, &upstream);
    (url, dir, vec![proxy, server])
}

/// The refusal's code and the policy its trail's `terminal` event names.
fn denied_by(answer: &Value, dir: &std::path::Path) -> (String, String) {
    let code = answer["error"]["data"]["mrtr_gate"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("not a refusal: {answer}"))
        .to_owned();
    let trail = events(&dir.join("audit.jsonl"));
    let ended: Vec<&Value> = trail
        .iter()
        .filter(|e| e["event"] == "terminal" && e["reason"] == "policy_denied")
        .collect();
    assert_eq!(ended.len(), 1, "{trail:#?}");
    assert_eq!(ended[0]["consent_method"], "policy_hook", "{trail:#?}");
    (
        code,
        ended[0]["consent_receipt_id"].as_str().unwrap().to_owned(),
    )
}

const PASSENGER: &str = r#"{"passenger": {"action": "accept", "content": {"full_name": "Ada Lovelace", "seat": "window"}}}"#;

#[test]
fn the_url_example_refuses_a_round_sending_the_user_elsewhere_and_passes_the_payment_page() {
    let (url, dir, _running) = example_gate("example-url", "deny-url-outside-allowed.cedar", &[]);
    // `combined` sends the user to accounts.example.com: refused before the client sees it.
    let refused = post(&url, &sdk_call(1, "combined", json!({}))).unwrap();
    assert_eq!(
        denied_by(&refused, &dir),
        (
            "policy_denied".to_owned(),
            "policy:url-outside-allowed-domains".to_owned()
        )
    );
    // `pay` sends the user to pay.example.com: the round and its retry go through.
    let first = sdk_call(2, "pay", json!({"amount": 42}));
    let round = post(&url, &first).unwrap();
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");
    let done = post(
        &url,
        &sdk_retry(&first, &round, 3, json!({"pay": {"action": "accept"}})),
    )
    .unwrap();
    assert_eq!(
        done["result"]["content"][0]["text"], "paid 42: {\"pay\": {\"action\": \"accept\"}}",
        "{done}"
    );
}

#[test]
fn the_secrets_example_grants_a_form_and_sends_a_password_form_to_a_person() {
    // `--consent tty` with no terminal refuses every round it is asked about.
    let (url, dir, _running) = example_gate(
        "example-secrets",
        "person-for-secrets.cedar",
        &["--consent", "tty"],
    );
    let first = sdk_call(
        1,
        "book_flight",
        json!({"origin": "OSL", "destination": "SFO"}),
    );
    let round = post(&url, &first).unwrap();
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");
    let passenger: Value = serde_json::from_str(PASSENGER).unwrap();
    let done = post(&url, &sdk_retry(&first, &round, 2, passenger)).unwrap();
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("booked OSL-SFO")),
        "{done}"
    );
    let trail = events(&dir.join("audit.jsonl"));
    assert!(
        trail
            .iter()
            .any(|e| e["event"] == "consented" && e["consent_receipt_id"] == "policy:forms-granted"),
        "{trail:#?}"
    );
    // `sign_in` asks for a password: the `@ask` forbid sends it to the terminal, over the
    // permit, and there is none.
    let first = sdk_call(3, "sign_in", json!({}));
    let round = post(&url, &first).unwrap();
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");
    let credentials = json!({"credentials": {"action": "accept",
        "content": {"username": "ada", "password": "SECRET-pw"}}});
    let refused = post(&url, &sdk_retry(&first, &round, 4, credentials)).unwrap();
    assert_eq!(
        refused["error"]["data"]["mrtr_gate"]["code"], "consent_unavailable",
        "{refused}"
    );
}

#[test]
fn the_state_only_example_refuses_an_untrusted_servers_state_round_and_passes_forms() {
    let (url, dir, _running) = example_gate("example-state", "trusted-state-only.cedar", &[]);
    let refused = post(&url, &sdk_call(1, "continue_job", json!({}))).unwrap();
    assert_eq!(
        denied_by(&refused, &dir),
        (
            "policy_denied".to_owned(),
            "policy:state-only-from-trusted".to_owned()
        )
    );
    // A form round with state asks the user something: not the policy's.
    let round = post(
        &url,
        &sdk_call(
            2,
            "book_flight",
            json!({"origin": "OSL", "destination": "SFO"}),
        ),
    )
    .unwrap();
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");
}

#[test]
fn the_deprecated_example_refuses_the_servers_sampling_request() {
    // The proxy's gate approves no deprecated method, so it refuses a sampling request itself;
    // a host that approves them (the gate's policy) has the example refuse it instead. The
    // round is the Python SDK server's own answer, judged by the native gate under such a
    // policy, then by the example.
    use mrtr_gate_host::GateApi;
    use mrtr_gate_host::core::memory::{
        ManualClock, MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent,
    };
    use mrtr_gate_host::core::{
        ConsentView, DeprecatedMethod, Policy, Registration, RequestId, ResponseVerdict,
        ServerIdentity,
    };
    use mrtr_gate_policy::{Decision, Names, Policies};
    let (_server, upstream) = python_server_http();
    let mut request = sdk_call(1, "summarise", json!({"text": "a long text"}));
    request["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]["sampling"] =
        json!({});
    let answer = post(&upstream, &request).unwrap();
    assert_eq!(
        answer["result"]["inputRequests"]["summary"]["method"], "sampling/createMessage",
        "{answer}"
    );
    let clock = std::sync::Arc::new(ManualClock::new(1_700_000_000_000));
    let mut native = mrtr_gate_host::NativeGate::new(mrtr_gate_host::HostServices {
        clock: clock.clone(),
        storage: std::sync::Arc::new(MemoryStorage::new(clock)),
        consent: std::sync::Arc::new(ScriptedConsent::new(ScriptedAnswer::Refuse)),
        audit: std::sync::Arc::new(MemoryAudit::new()),
    });
    let server = ServerIdentity::endpoint(&upstream).unwrap();
    native
        .register(Registration {
            request_id: RequestId::Number(1),
            server: server.clone(),
            user: "alice".into(),
            tenant: "acme".into(),
            method: "tools/call".into(),
            params_json: request["params"].to_string(),
            policy: Policy {
                allowed_deprecated: vec![DeprecatedMethod::SamplingCreateMessage],
                ..Policy::default()
            },
        })
        .unwrap();
    let ResponseVerdict::InputRequired(round) = native
        .accept_response(&server, &answer.to_string())
        .unwrap()
    else {
        panic!("not a round: {answer}");
    };
    let text =
        std::fs::read_to_string(root().join("examples/policies/no-deprecated.cedar")).unwrap();
    let decision = Policies::parse(&text).unwrap().decide(
        Names {
            user: "alice",
            tenant: "acme",
        },
        &ConsentView::parse(&round.view_json).unwrap(),
    );
    assert_eq!(
        decision,
        Decision::Deny {
            policy: "no-deprecated-input".into()
        }
    );
}

#[test]
fn explain_shows_which_policy_decides_each_captured_round() {
    let dir = scratch("policy-explain");
    let (_server, upstream) = python_server_http();
    let capture = dir.join("capture.jsonl");
    let policy = root().join("examples/policies/deny-url-outside-allowed.cedar");
    let mut proxy = gate(&dir);
    proxy
        .arg("--policy")
        .arg(&policy)
        .arg("--capture")
        .arg(&capture);
    let (_proxy, url) = proxy_listening(proxy, &upstream);
    let refused = post(&url, &sdk_call(1, "combined", json!({}))).unwrap();
    assert_eq!(
        refused["error"]["data"]["mrtr_gate"]["code"], "policy_denied",
        "{refused}"
    );
    let round = post(&url, &sdk_call(2, "pay", json!({"amount": 42}))).unwrap();
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");
    // Each call's id as the trail (and the capture) knows it.
    let trail = events(&dir.join("audit.jsonl"));
    let id_of = |name: &str| {
        let e = trail
            .iter()
            .find(|e| e["event"] == "received" && e["name"] == name)
            .unwrap_or_else(|| panic!("{trail:#?}"));
        match &e["request_id"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    };
    let explain = |policy: &std::path::Path, id: &str| {
        let out = Command::new(support::bin())
            .args(["policy", "explain"])
            .arg(policy)
            .arg("--capture")
            .arg(&capture)
            .args([
                "--request-id",
                id,
                "--user",
                "alice",
                "--tenant",
                "acme",
                "--json",
            ])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["rounds"].clone()
    };
    let combined = explain(&policy, &id_of("combined"));
    assert_eq!(combined.as_array().unwrap().len(), 1, "{combined}");
    assert_eq!(
        combined[0]["decision"],
        json!({"kind": "deny", "policy": "url-outside-allowed-domains", "code": "policy_denied"})
    );
    assert_eq!(
        combined[0]["facts"]["url_hosts"],
        json!(["accounts.example.com"])
    );
    assert_eq!(combined[0]["facts"]["kinds"], json!(["form", "url"]));
    assert_eq!(
        combined[0]["held"],
        json!([{"policy": "url-outside-allowed-domains", "effect": "forbid", "ask": false}])
    );
    let pay = explain(&policy, &id_of("pay"));
    assert_eq!(
        pay[0]["decision"],
        json!({"kind": "ask", "policy": [], "code": null})
    );
    // The same rounds under another file: what it would have decided.
    let secrets = explain(
        &root().join("examples/policies/person-for-secrets.cedar"),
        &id_of("combined"),
    );
    assert_eq!(secrets[0]["decision"]["kind"], "ask", "{secrets}");
}
