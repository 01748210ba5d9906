//! The consent modes, each against a real round of the native gate: what each grants, what
//! the trail records, and every way a hook can fail to say yes.

use super::*;
use mrtr_gate_host::core::digest::sha256_hex;
use mrtr_gate_host::core::host::ConsentDecision;
use mrtr_gate_host::core::memory::{ManualClock, MemoryAudit, MemoryStorage};
use mrtr_gate_host::core::{
    Policy, Registration, RequestId, ResponseVerdict, RetryRequest, ServerIdentity,
};
#[cfg(unix)]
use mrtr_gate_host::reference_hosts::PseudoTerminal;
use mrtr_gate_host::{GateApi, GateDenial, HostServices, NativeGate};
use serde_json::Value;

const ANSWERS: &str = r#"{"seat":{"action":"accept","content":{"seat":"12A"}}}"#;

fn server() -> ServerIdentity {
    ServerIdentity::endpoint("stdio:consent-test").unwrap()
}

/// A gate over `consent` with a form round open on request 1; its view.
fn open_round(consent: SharedConsent) -> (NativeGate, MemoryAudit, String) {
    let clock = Arc::new(ManualClock::new(1_000_000));
    let audit = MemoryAudit::new();
    let mut gate = NativeGate::new(HostServices {
        clock: clock.clone(),
        storage: Arc::new(MemoryStorage::new(clock)),
        consent,
        audit: Arc::new(audit.clone()),
    });
    gate.register(Registration {
        request_id: RequestId::Number(1),
        server: server(),
        user: "alice".into(),
        tenant: "acme".into(),
        method: "tools/call".into(),
        params_json: r#"{"name":"book","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}"#.into(),
        policy: Policy::default(),
    })
    .unwrap();
    let round = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"seat":{"method":"elicitation/create","params":{"message":"Pick a seat","requestedSchema":{"type":"object","properties":{"seat":{"type":"string","maxLength":4}},"required":["seat"]}}}}}}"#;
    let ResponseVerdict::InputRequired(accepted) = gate.accept_response(&server(), round).unwrap()
    else {
        panic!("not a round");
    };
    (gate, audit, accepted.view_json)
}

fn retry(gate: &mut NativeGate) -> Result<(), GateDenial> {
    gate.build_retry(RetryRequest {
        server: server(),
        request_id: RequestId::Number(1),
        retry_id: RequestId::Number(2),
        user: "alice".into(),
        tenant: "acme".into(),
        responses_json: ANSWERS.into(),
    })
    .map(|_| ())
}

fn consented(audit: &MemoryAudit) -> Vec<Value> {
    audit
        .events()
        .into_iter()
        .filter(|e| e["event"] == "consented")
        .collect()
}

fn prompt(view_json: &str) -> ConsentPrompt {
    ConsentPrompt {
        view_json: view_json.into(),
        view_sha256: sha256_hex(view_json.as_bytes()),
        responses_json: ANSWERS.into(),
        responses_sha256: sha256_hex(ANSWERS.as_bytes()),
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mrtr-gate-consent-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn sh(script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.into()]
}

/// A hook's decision on a real round's prompt (the guard is far above what any machine
/// needs for these hooks, save the one that sleeps past it).
fn hook_decides(argv: Vec<String>, timeout: Duration) -> ConsentDecision {
    let (_, _, view) = open_round(Arc::new(DelegatedConsent::default()));
    let receipt = CommandConsent::new(argv, timeout)
        .request_consent(&prompt(&view))
        .unwrap();
    assert_eq!(receipt.method, ConsentMethod::PolicyHook);
    receipt.decision
}

const GUARD: Duration = Duration::from_secs(60);

#[test]
fn client_mode_grants_exactly_the_view_and_answers_and_the_trail_says_delegated() {
    let (mut gate, audit, view) = open_round(consent_for(&ConsentMode::Client));
    let receipt = DelegatedConsent::default()
        .request_consent(&prompt(&view))
        .unwrap();
    assert_eq!(receipt.decision, ConsentDecision::Granted);
    assert_eq!(receipt.view_sha256, sha256_hex(view.as_bytes()));
    assert_eq!(receipt.responses_sha256, sha256_hex(ANSWERS.as_bytes()));
    retry(&mut gate).unwrap();
    let events = consented(&audit);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["consent_method"], "delegated_to_client");
    assert_eq!(events[0]["outcome"], "granted");
}

#[test]
fn a_hook_that_says_exactly_yes_grants_and_reads_the_view_and_answers_on_stdin() {
    let dir = scratch("stdin");
    let seen = dir.join("seen.json");
    let script = format!("cat > '{}'; echo yes", seen.display());
    let mode = ConsentMode::Command {
        argv: sh(&script),
        timeout: GUARD,
    };
    let (mut gate, audit, view) = open_round(consent_for(&mode));
    retry(&mut gate).unwrap();
    let events = consented(&audit);
    assert_eq!(events[0]["consent_method"], "policy_hook");
    let input: Value = serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(input["view"], serde_json::from_str::<Value>(&view).unwrap());
    assert_eq!(input["view_sha256"], sha256_hex(view.as_bytes()));
    assert_eq!(input["answers"]["seat"]["content"]["seat"], "12A");
    assert!(input["screen"].as_str().unwrap().contains("Pick a seat"));
    // A bare `yes`, no newline, is as good.
    assert_eq!(
        hook_decides(sh("printf yes"), GUARD),
        ConsentDecision::Granted
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_hook_that_says_no_is_a_refusal_the_client_is_told_as_consent_refused() {
    let mode = ConsentMode::Command {
        argv: sh("cat >/dev/null; echo no"),
        timeout: GUARD,
    };
    let (mut gate, _, _) = open_round(consent_for(&mode));
    let denial = retry(&mut gate).unwrap_err();
    assert_eq!(denial.code.as_str(), "consent_refused");
    let refusal = crate::errors::Refusal::from_denial(&denial);
    assert_eq!(refusal.rpc_code, crate::errors::CALLER_REFUSED);
}

#[test]
fn anything_but_exactly_yes_and_a_clean_exit_is_a_refusal() {
    for script in [
        "printf 'yes\\nno\\n'",
        "echo YES",
        "echo ' yes'",
        "printf 'yes\\r\\n'",
        "printf 'yes\\n\\n'",
        "true",
        "echo yes; exit 3",
        "echo yes; kill -9 $$",
        // More than a hook may say, and it never stops saying it.
        "while :; do echo yes; done",
        "head -c 10000000 /dev/zero",
    ] {
        assert_eq!(
            hook_decides(sh(script), GUARD),
            ConsentDecision::Refused,
            "{script}"
        );
    }
}

#[test]
fn a_hook_that_outlives_its_time_is_refused_and_killed() {
    let dir = scratch("slow");
    let pid_file = dir.join("pid");
    for script in [
        // Says nothing and sleeps.
        format!("echo $$ > '{}'; exec sleep 600", pid_file.display()),
        // Says yes, closes its output, and does not exit.
        format!(
            "echo $$ > '{}'; echo yes; exec >&-; exec sleep 600",
            pid_file.display()
        ),
    ] {
        let decision = hook_decides(sh(&script), Duration::from_millis(300));
        assert_eq!(decision, ConsentDecision::Refused, "{script}");
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        // Killed and reaped: the process is gone.
        let alive = std::path::Path::new(&format!("/proc/{}", pid.trim())).exists();
        assert!(!alive, "the hook {} still runs", pid.trim());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_hook_that_never_reads_its_input_still_gets_its_say() {
    // The input is bigger than a pipe holds when the view is; here it is small, but the
    // writer is never what the decision waits on.
    assert_eq!(
        hook_decides(sh("exec 0<&-; echo yes"), GUARD),
        ConsentDecision::Granted
    );
}

#[test]
fn a_hook_that_cannot_start_is_consent_unavailable() {
    let mode = ConsentMode::Command {
        argv: vec!["/nonexistent/mrtr-gate-hook".into()],
        timeout: GUARD,
    };
    let (mut gate, audit, _) = open_round(consent_for(&mode));
    let denial = retry(&mut gate).unwrap_err();
    assert_eq!(denial.code.as_str(), "consent_unavailable");
    assert!(consented(&audit).is_empty());
}

#[test]
fn tty_mode_asks_on_the_terminal_it_names_and_never_without_one() {
    let (mut gate, audit, _) = open_round(Arc::new(TtyConsent::at(
        PathBuf::from("/nonexistent/tty"),
        GUARD,
    )));
    assert_eq!(
        retry(&mut gate).unwrap_err().code.as_str(),
        "consent_unavailable"
    );
    assert!(consented(&audit).is_empty());
    // A file standing in for the terminal: the person typed `y`, the screen is appended.
    let dir = scratch("tty");
    let tty = dir.join("tty");
    std::fs::write(&tty, "y\n").unwrap();
    let (mut gate, audit, _) = open_round(Arc::new(TtyConsent::at(tty.clone(), GUARD)));
    retry(&mut gate).unwrap();
    assert_eq!(consented(&audit)[0]["consent_method"], "user_at_screen");
    let shown = std::fs::read_to_string(&tty).unwrap();
    assert!(
        shown.contains("Pick a seat") && shown.contains("Send these answers? [y/N]"),
        "{shown}"
    );
    // Anything but yes (here: the end of the input) is no.
    std::fs::write(&tty, "").unwrap();
    let (mut gate, _, _) = open_round(Arc::new(TtyConsent::at(tty, GUARD)));
    assert_eq!(
        retry(&mut gate).unwrap_err().code.as_str(),
        "consent_refused"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(unix)]
#[test]
fn a_yes_typed_before_the_prompt_is_not_consent_and_nobody_answering_ends_in_a_denial() {
    let pty = PseudoTerminal::new().unwrap();
    // Typed ahead, before any screen: for an earlier prompt, or by whoever can write to
    // the terminal.
    pty.type_keys("y\n").unwrap();
    let (mut gate, audit, _) = open_round(Arc::new(TtyConsent::at(
        pty.path().to_owned(),
        Duration::from_secs(1),
    )));
    let denied = retry(&mut gate).unwrap_err();
    assert_eq!(denied.code.as_str(), "consent_unavailable", "{denied:?}");
    assert!(consented(&audit).is_empty());
    assert!(pty.shown().contains("Pick a seat"), "the screen was drawn");
}

#[cfg(unix)]
#[test]
fn only_what_is_typed_after_a_prompt_is_drawn_answers_it() {
    let pty = PseudoTerminal::new().unwrap();
    let consent = TtyConsent::at(pty.path().to_owned(), GUARD);
    let (_, _, view) = open_round(Arc::new(DelegatedConsent::default()));
    // The person answers the `n`th prompt with `keys` once it is on the screen.
    let answer = |n: usize, keys: &str| {
        std::thread::scope(|s| {
            s.spawn(|| {
                assert!(pty.wait_for("[y/N]", n, GUARD), "prompt {n} never came");
                pty.type_keys(keys).unwrap();
            });
            consent.request_consent(&prompt(&view)).unwrap().decision
        })
    };
    // Two lines at once: the first answers this prompt.
    assert_eq!(answer(1, "y\ny\n"), ConsentDecision::Granted);
    // The `y` left over is not an answer to the next prompt: dropped before it is drawn.
    assert_eq!(answer(2, "n\n"), ConsentDecision::Refused);
}

/// Counts the prompts it is asked, granting the ones whose answers carry `yes`.
#[derive(Default)]
struct Counting(std::sync::atomic::AtomicUsize);

impl Consent for Counting {
    fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError> {
        let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if prompt.responses_json.contains("fail") {
            return Err(HostError::new("no terminal"));
        }
        Ok(ConsentReceipt::for_prompt(
            prompt,
            format!("counted-{n}"),
            prompt.responses_json.contains("yes"),
            ConsentMethod::UserAtScreen,
        ))
    }
}

fn prompt_for(answers: &str) -> ConsentPrompt {
    ConsentPrompt {
        view_json: "{}".into(),
        view_sha256: sha256_hex(b"{}"),
        responses_json: answers.into(),
        responses_sha256: sha256_hex(answers.as_bytes()),
    }
}

#[test]
fn a_deferred_decision_is_taken_once_and_a_prompt_nobody_asked_is_asked_inline() {
    let inner = Arc::new(Counting::default());
    let deferred = DeferredConsent::new(inner.clone());
    let yes = prompt_for(r#"{"a":"yes"}"#);
    assert!(!deferred.decided(&yes));
    deferred.ask(&yes);
    assert!(deferred.decided(&yes));
    let r = deferred.request_consent(&yes).unwrap();
    assert_eq!(
        (r.receipt_id.as_str(), r.decision),
        ("counted-0", ConsentDecision::Granted)
    );
    assert!(!deferred.decided(&yes), "taken once");
    // Asked again only because nobody asked it off the thread this time.
    let r = deferred.request_consent(&yes).unwrap();
    assert_eq!(r.receipt_id, "counted-1");
    // A failure off the thread is recorded as one: the gate denies, nobody is asked again.
    let fail = prompt_for(r#"{"a":"fail"}"#);
    deferred.ask(&fail);
    assert!(deferred.request_consent(&fail).is_err());
    assert_eq!(inner.0.load(std::sync::atomic::Ordering::SeqCst), 3);
}

#[test]
fn decisions_whose_retry_never_comes_are_let_go() {
    let deferred = DeferredConsent::new(Arc::new(Counting::default()));
    let prompts: Vec<ConsentPrompt> = (0..=MAX_DECIDED)
        .map(|n| prompt_for(&format!(r#"{{"n":{n}}}"#)))
        .collect();
    for p in &prompts {
        deferred.ask(p);
    }
    // The oldest went first; the newest wait.
    assert!(!deferred.decided(&prompts[0]));
    assert!(prompts[1..].iter().all(|p| deferred.decided(p)));
}
