//! The probe graded against clients whose behaviour is known: the naive client (every mistake
//! on purpose) must FAIL every check but the control one, a client that does nothing or hangs
//! must FAIL every check, and hostile scenario files are refused with typed errors.

// Helpers that may panic are test code too: the module says so to clippy.
#[cfg(test)]
mod selftest {
    use mrtr_gate_probe::judge::Status;
    use mrtr_gate_probe::report::{EXIT_FAILURE, Report};
    use mrtr_gate_probe::scenario::{self, ScenarioError};
    use mrtr_gate_probe::{ProbeOptions, Transport, embedded, run, select};
    use std::path::PathBuf;
    use std::time::Duration;

    fn repo() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    fn probe(command: String, names: &[&str], timeout: Duration) -> Report {
        probe_lingering(command, names, timeout, timeout)
    }

    fn probe_lingering(
        command: String,
        names: &[&str],
        timeout: Duration,
        linger: Duration,
    ) -> Report {
        let all = embedded::scenarios().expect("the embedded scenarios are valid");
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let scenarios = select(all, &names).expect("known scenarios");
        run(ProbeOptions {
            command,
            transport: Transport::Http,
            scenarios,
            timeout,
            linger,
        })
        .expect("the probe runs")
    }

    #[test]
    fn the_naive_client_fails_every_check_but_the_control() {
        let naive = repo().join("tests/probe/clients/naive.py");
        let report = probe(
            format!("python3 '{}'", naive.display()),
            &[],
            mrtr_gate_probe::DEFAULT_TIMEOUT,
        );
        let human = report.human();
        println!("{human}");
        let mut vacuous = Vec::new();
        for run in &report.runs {
            for v in &run.verdicts {
                let expected = if v.id == "mrtr-control-completes" {
                    Status::Success
                } else {
                    Status::Failure
                };
                if v.status != expected {
                    vacuous.push(format!(
                        "{} {}: {:?} {:?}",
                        run.scenario.name, v.id, v.status, v.message
                    ));
                }
            }
        }
        assert!(
            vacuous.is_empty(),
            "checks the naive client did not get as expected:\n{}",
            vacuous.join("\n")
        );
        assert_eq!(report.exit_code(), EXIT_FAILURE);
        assert_eq!(report.runs.len(), embedded::FILES.len());
        let json = report.json();
        assert_eq!(json["summary"]["passed"], 1);
        assert_eq!(json["transport"], "http");
        assert!(
            human.contains("a safe client refuses the round and sends no retry"),
            "{human}"
        );
    }

    #[test]
    fn a_client_that_does_nothing_fails_every_check() {
        let report = probe("true".into(), &[], mrtr_gate_probe::DEFAULT_TIMEOUT);
        for run in &report.runs {
            for v in &run.verdicts {
                assert_eq!(v.status, Status::Failure, "{} {}", run.scenario.name, v.id);
                let message = v.message.as_deref().unwrap_or_default();
                assert!(message.contains("never called"), "{message}");
            }
        }
        assert!(
            report
                .human()
                .contains("did not complete a well-formed round")
        );
    }

    #[test]
    fn a_client_that_hangs_fails_and_its_process_group_is_ended() {
        // The hang guard's expiry is a FAILURE: a short guard cannot make a hanging client pass.
        let report = probe(
            "sleep 600 & sleep 600; :".into(),
            &["mrtr-duplicate-result-type"],
            Duration::from_millis(300),
        );
        let run = report.runs.first().expect("one run");
        assert!(run.recording.timed_out);
        for v in &run.verdicts {
            assert_eq!(v.status, Status::Failure);
            assert!(
                v.message
                    .as_deref()
                    .unwrap_or_default()
                    .contains("hang guard")
            );
        }
    }

    /// Forks a process that leaves the client's process group, connects to the probe and
    /// holds the connection; the parent exits once it is connected.
    const ESCAPER: &str = r#"
import os, socket, sys, time, urllib.parse
url = urllib.parse.urlsplit(sys.argv[-1])
ready_r, ready_w = os.pipe()
if os.fork() == 0:
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    held = socket.create_connection((url.hostname, url.port))
    with open(sys.argv[1], "w") as f:
        f.write(str(os.getpid()))
    os.write(ready_w, b"x")
    time.sleep(600)
else:
    os.read(ready_r, 1)
"#;

    #[test]
    fn a_connection_held_from_outside_the_clients_tree_fails_the_run() {
        let dir = std::env::temp_dir().join(format!("mrtr-probe-escaper-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temp folder");
        let script = dir.join("escaper.py");
        std::fs::write(&script, ESCAPER).expect("written");
        let pid_file = dir.join("pid");
        // The hang guard stays generous (a slow start under load is no hang); only the wait
        // for the held connection is short.
        let report = probe_lingering(
            format!("python3 '{}' '{}'", script.display(), pid_file.display()),
            &["mrtr-duplicate-result-type"],
            mrtr_gate_probe::DEFAULT_TIMEOUT,
            Duration::from_millis(300),
        );
        let pid = std::fs::read_to_string(&pid_file).expect("the escaper's pid");
        let _ = std::process::Command::new("kill")
            .args(["-KILL", pid.trim()])
            .status();
        std::fs::remove_dir_all(&dir).expect("removed");
        let run_ = report.runs.first().expect("one run");
        assert!(run_.recording.lingering);
        assert!(!run_.recording.timed_out);
        for v in &run_.verdicts {
            assert_eq!(v.status, Status::Failure);
            assert!(
                v.message
                    .as_deref()
                    .unwrap_or_default()
                    .contains("stayed open")
            );
        }
    }

    fn refused(stem: &str, text: &str) -> ScenarioError {
        scenario::parse(stem, text).expect_err("a hostile scenario is refused")
    }

    const GOOD: &str = r#"{"name": "x", "description": "d", "safe": "s",
      "clauses": [{"id": "c", "source": "s", "text": "t"}],
      "tools": [{"name": "t", "legs": [{"result": {"resultType": "complete"}}], "then": {"error": {"code": 1, "message": "m"}}}],
      "checks": [{"id": "mrtr-x", "kind": "no_request", "description": "d", "match": {"tool": "t"}, "says": "s"}]}"#;

    fn with_resources(resources: &str) -> String {
        GOOD.replace(
            r#""checks":"#,
            &format!(r#""resources": [{resources}], "checks":"#),
        )
    }

    fn with_methods(methods: &str) -> String {
        GOOD.replace(
            r#""checks":"#,
            &format!(r#""methods": [{methods}], "checks":"#),
        )
    }

    #[test]
    fn hostile_scenario_files_are_refused_with_typed_errors() {
        // A method the probe answers by leg, and a match by method, are well formed.
        let task = with_methods(
            r#"{"method": "tasks/get", "legs": [{"result": {}}], "then": {"result": {}}}"#,
        )
        .replace(
            r#""match": {"tool": "t"}"#,
            r#""match": {"method": "tasks/update"}"#,
        )
        .replace(
            r#""says": "s"}"#,
            r#""says": "s", "requires": "declared_tasks"}"#,
        );
        assert!(scenario::parse("x", &task).is_ok(), "{task}");
        let read = with_resources(
            r#"{"uri": "probe://a", "legs": [{"result": {}}], "then": {"result": {}}}"#,
        )
        .replace(r#""kind": "no_request""#, r#""kind": "at_least", "n": 2"#)
        .replace(
            r#""match": {"tool": "t"}"#,
            r#""match": {"method": "resources/read"}"#,
        );
        assert!(scenario::parse("x", &read).is_ok(), "{read}");
        assert!(scenario::parse("x", GOOD).is_ok());
        let cases = [
            (
                "unknown_field",
                GOOD.replace(r#""safe": "s""#, r#""safe": "s", "sfae": 1"#),
            ),
            (
                "unknown_field",
                GOOD.replace(
                    r#""match": {"tool": "t"}"#,
                    r#""match": {"tool": "t", "state_prefix": "S"}"#,
                ),
            ),
            (
                "unknown_field",
                GOOD.replace(
                    r#"{"resultType": "complete"}}"#,
                    r#"{"resultType": "complete"}, "delay_ms": 5}"#,
                ),
            ),
            (
                "unknown_check_kind",
                GOOD.replace("no_request", "never_fails"),
            ),
            (
                "unknown_placeholder",
                GOOD.replace(r#""complete"}"#, r#""{{port}}"}"#),
            ),
            (
                "unknown_placeholder",
                GOOD.replace(r#""complete"}"#, r#""{{id}}"}"#),
            ),
            (
                "unknown_placeholder",
                GOOD.replace(r#""complete"}"#, r#""{{canary"}"#),
            ),
            (
                "name_mismatch",
                GOOD.replace(r#""name": "x""#, r#""name": "y""#),
            ),
            (
                "invalid_check",
                GOOD.replace(r#""match": {"tool": "t"}"#, r#""match": {"tool": "other"}"#),
            ),
            (
                "invalid_check",
                GOOD.replace(r#""match": {"tool": "t"}"#, r#""match": {}"#),
            ),
            ("invalid_check", GOOD.replace(r#", "says": "s""#, "")),
            (
                "invalid_answer",
                GOOD.replace(
                    r#"{"result": {"resultType": "complete"}}"#,
                    r#"{"result": {}, "raw": "{}"}"#,
                ),
            ),
            (
                "invalid_answer",
                GOOD.replace(r#"{"result": {"resultType": "complete"}}"#, "{}"),
            ),
            (
                "invalid_answer",
                GOOD.replace(
                    r#"{"result": {"resultType": "complete"}}"#,
                    r#"{"result": {}, "close": true}"#,
                ),
            ),
            (
                "invalid_check",
                GOOD.replace(r#""kind": "no_request""#, r#""kind": "at_most""#),
            ),
            (
                "invalid_tool",
                GOOD.replace(r#""name": "t""#, r#""name": "probe_done""#),
            ),
            (
                "invalid_check",
                GOOD.replace(
                    r#""says": "s"}"#,
                    r#""says": "s", "requires": "declared_url"}"#,
                ),
            ),
            (
                "invalid_check",
                GOOD.replace(
                    r#""match": {"tool": "t"}"#,
                    r#""match": {"state": "S", "arguments_differ_from_first": true}"#,
                ),
            ),
            (
                "invalid_scenario",
                GOOD.replace(r#""checks""#, r#""checks": 1, "checks""#),
            ),
            (
                "invalid_check",
                GOOD.replace(r#""match": {"tool": "t"}"#, r#""match": {"tool": "t", "all_of": []}"#),
            ),
            (
                "invalid_check",
                GOOD.replace(
                    r#""match": {"tool": "t"}"#,
                    r#""match": {"all_of": [{"tool": "other"}]}"#,
                ),
            ),
            (
                "invalid_check",
                GOOD.replace(
                    r#""match": {"tool": "t"}"#,
                    r#""match": {"state": "S", "id_differs_from_first": true}"#,
                ),
            ),
            (
                "invalid_check",
                GOOD.replace(
                    r#""kind": "no_request", "description": "d", "match": {"tool": "t"}, "says": "s""#,
                    r#""kind": "no_canary", "description": "d", "says": "s""#,
                ),
            ),
            (
                "invalid_method",
                with_methods(r#"{"method": "tools/call", "legs": [{"result": {}}], "then": {"result": {}}}"#),
            ),
            (
                "invalid_method",
                with_methods(r#"{"method": "", "legs": [{"result": {}}], "then": {"result": {}}}"#),
            ),
            (
                "invalid_method",
                with_methods(
                    r#"{"method": "tasks/get", "legs": [{"result": {}}], "then": {"result": {}}}, {"method": "tasks/get", "legs": [{"result": {}}], "then": {"result": {}}}"#,
                ),
            ),
            (
                "missing_field",
                with_methods(r#"{"method": "tasks/get", "legs": [], "then": {"result": {}}}"#),
            ),
            (
                "invalid_answer",
                with_methods(r#"{"method": "tasks/get", "legs": [{"result": {}, "error": {}}], "then": {"result": {}}}"#),
            ),
            (
                "invalid_answer",
                with_methods(
                    r#"{"method": "tasks/get", "legs": [{"hold": {"notify": {"method": "n"}, "late": {"result": {}}}}], "then": {"result": {}}}"#,
                ),
            ),
            (
                "unknown_placeholder",
                with_methods(r#"{"method": "tasks/get", "legs": [{"result": {"u": "{{port}}"}}], "then": {"result": {}}}"#),
            ),
            (
                "unknown_field",
                with_methods(r#"{"method": "tasks/get", "legs": [{"result": {}}], "then": {"result": {}}, "tool": "t"}"#),
            ),
            (
                "invalid_check",
                GOOD.replace(
                    r#""says": "s"}"#,
                    r#""says": "s", "requires": "declared_task"}"#,
                ),
            ),
            (
                "invalid_resource",
                with_resources(
                    r#"{"uri": "probe://a", "legs": [{"result": {}}], "then": {"result": {}}}, {"uri": "probe://a", "legs": [{"result": {}}], "then": {"result": {}}}"#,
                ),
            ),
            (
                "invalid_resource",
                with_resources(r#"{"uri": "", "legs": [{"result": {}}], "then": {"result": {}}}"#),
            ),
            (
                "invalid_resource",
                with_resources(r#"{"uri": "probe://{{n}}", "legs": [{"result": {}}], "then": {"result": {}}}"#),
            ),
            (
                "missing_field",
                with_resources(r#"{"uri": "probe://a", "legs": [], "then": {"result": {}}}"#),
            ),
            (
                "invalid_answer",
                with_resources(r#"{"uri": "probe://a", "legs": [{"close": true, "result": {}}], "then": {"result": {}}}"#),
            ),
            (
                "invalid_method",
                with_methods(r#"{"method": "resources/read", "legs": [{"result": {}}], "then": {"result": {}}}"#),
            ),
            (
                "invalid_check",
                GOOD.replace(r#""kind": "no_request""#, r#""kind": "at_least", "n": 0"#),
            ),
            (
                "invalid_check",
                GOOD.replace(r#""kind": "no_request""#, r#""kind": "at_least""#),
            ),
            (
                "invalid_check",
                GOOD.replace(r#""kind": "no_request""#, r#""kind": "at_least", "n": 2"#)
                    .replace(r#", "says": "s""#, ""),
            ),
            ("duplicate_check_id", GOOD.replace(r#""mrtr-x""#, r#""sep-x-y""#)),
            ("duplicate_check_id", GOOD.replace(r#""mrtr-x""#, r#""sep-2322-""#)),
            ("duplicate_check_id", GOOD.replace(r#""mrtr-x""#, r#""x-mrtr""#)),
        ];
        for (code, text) in &cases {
            assert_eq!(refused("x", text).code, *code, "{text}");
        }
        let id_twice = GOOD.replace(
            r#""says": "s"}]"#,
            r#""says": "s"}, {"id": "mrtr-x", "kind": "no_canary", "description": "d"}]"#,
        );
        assert_eq!(refused("x", &id_twice).code, "duplicate_check_id");
        // A conformance suite id, and a control check that says what a failing client did.
        let suite = GOOD.replace(
            r#""id": "mrtr-x", "kind": "no_request""#,
            r#""id": "sep-2322-client-x", "kind": "control""#,
        );
        assert!(scenario::parse("x", &suite).is_ok(), "{suite}");
    }

    #[test]
    fn a_check_the_client_says_it_cannot_reach_is_skipped() {
        let text = GOOD.replace(
            r#""says": "s"}"#,
            r#""says": "s", "requires": "not_unsupported:forge"}"#,
        );
        let scenario = scenario::parse("x", &text).expect("valid");
        let report = run(ProbeOptions {
            command: "echo 'mrtr-probe: unsupported: forge' #".into(),
            transport: Transport::Http,
            scenarios: vec![scenario.clone()],
            timeout: mrtr_gate_probe::DEFAULT_TIMEOUT,
            linger: mrtr_gate_probe::DEFAULT_TIMEOUT,
        })
        .expect("the probe runs");
        let run_ = report.runs.first().expect("one run");
        assert_eq!(run_.recording.unsupported, vec!["forge".to_owned()]);
        assert_eq!(
            run_.verdicts.first().map(|v| v.status),
            Some(Status::Skipped)
        );
        assert_eq!(report.exit_code(), 0);
        assert!(report.human().contains("0 passed, 0 failed, 1 skipped"));
    }

    #[test]
    fn a_folder_with_a_hostile_file_is_refused_and_unknown_names_are_usage_errors() {
        let dir = std::env::temp_dir().join(format!("mrtr-probe-hostile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temp folder");
        let empty = scenario::load_dir(&dir).expect_err("an empty folder is refused");
        assert_eq!(empty.code, "no_scenarios");
        std::fs::write(dir.join("x.json"), GOOD).expect("written");
        assert_eq!(scenario::load_dir(&dir).expect("one good file").len(), 1);
        std::fs::write(
            dir.join("y.json"),
            GOOD.replace("\"x\"", "\"y\"").replace("{{", "{"),
        )
        .expect("written");
        std::fs::write(
            dir.join("z.json"),
            GOOD.replace(r#""name": "x""#, r#""name": "z", "extra": true"#),
        )
        .expect("written");
        let error = scenario::load_dir(&dir).expect_err("refused");
        assert_eq!(
            (error.code, error.scenario.as_str()),
            ("unknown_field", "z")
        );
        std::fs::remove_dir_all(&dir).expect("removed");

        let all = embedded::scenarios().expect("valid");
        let error = select(all, &["mrtr-no-such".into()]).expect_err("unknown");
        assert_eq!(error.code, "unknown_scenario");
    }
}
