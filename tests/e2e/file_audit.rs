//! The JSON-lines audit sink: fsynced appends, read-back from disk, chain verified on open,
//! and a gate over it denies when the file cannot be written.

use crate::support;

use mrtr_gate_host::core::host::{AppendOutcome, Audit};
use mrtr_gate_host::core::{Policy, Registration, RequestId, RetryRequest, ServerIdentity};
use mrtr_gate_host::reference_hosts::FileAudit;
use mrtr_gate_host::{GateApi, HostServices};
use mrtr_gate_testkit::fixture::ScenarioHosts;
use mrtr_gate_wasmtime::ComponentGate;
use serde_json::json;
use std::sync::Arc;

fn temp(name: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("mrtr-gate-{name}-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

#[test]
fn appends_read_back_from_disk_and_reopen_with_the_chain_intact() {
    let path = temp("reopen");
    let sink = FileAudit::open(&path).unwrap();
    let h0 = sink.head(support::SHARD);
    let e1 = support::entry_on(&h0, "one");
    // The append reads its line back from the file.
    assert_eq!(
        sink.append(&e1).unwrap(),
        AppendOutcome::written(&e1, Some(e1.line.clone()))
    );
    // A stale entry (does not extend the head) is not written.
    assert!(matches!(
        sink.append(&e1).unwrap(),
        AppendOutcome {
            written: false,
            head_seq: 1,
            ..
        }
    ));
    let e2 = support::entry_on(&sink.head(support::SHARD), "two");
    sink.append(&e2).unwrap();
    drop(sink);
    let again = FileAudit::open(&path).unwrap();
    assert_eq!(again.head(support::SHARD).seq, 2);
    assert_eq!(again.lines().unwrap(), vec![e1.line, e2.line.clone()]);
    // Reopened, it extends the chain it verified.
    let e3 = support::entry_on(&again.head(support::SHARD), "three");
    assert!(
        matches!(again.append(&e3).unwrap(), AppendOutcome { written: true, stored: Some(l), .. } if l == e3.line)
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_tampered_or_torn_file_refuses_to_open() {
    let path = temp("tamper");
    let sink = FileAudit::open(&path).unwrap();
    sink.append(&support::entry_on(&sink.head(support::SHARD), "one"))
        .unwrap();
    sink.append(&support::entry_on(&sink.head(support::SHARD), "two"))
        .unwrap();
    drop(sink);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("one", "0ne")).unwrap();
    assert!(FileAudit::open(&path).is_err());
    std::fs::write(&path, &text[..text.len() - 3]).unwrap();
    assert!(FileAudit::open(&path).is_err());
    let _ = std::fs::remove_file(&path);
}

#[test]
fn an_entry_whose_digest_does_not_match_its_line_is_refused() {
    let path = temp("digest");
    let sink = FileAudit::open(&path).unwrap();
    let mut e = support::entry_on(&sink.head(support::SHARD), "one");
    e.event_sha256 = "0".repeat(64);
    assert!(sink.append(&e).is_err());
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_gate_over_the_file_writes_a_verifiable_trail_and_denies_when_the_file_is_gone() {
    let path = temp("gate");
    let audit = Arc::new(FileAudit::open(&path).unwrap());
    let hosts = ScenarioHosts::new();
    let services = HostServices {
        audit: audit.clone(),
        ..hosts.services()
    };
    let mut gate = ComponentGate::new(support::runtime(), services);
    let server = ServerIdentity::origin("https://server.example/mcp").unwrap();
    let params = json!({"name": "t", "_meta": {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}});
    for id in [1, 3] {
        gate.register(Registration {
            request_id: RequestId::Number(id),
            server: server.clone(),
            user: "u".into(),
            tenant: "t".into(),
            method: "tools/call".into(),
            params_json: params.to_string(),
            policy: Policy::default(),
        })
        .unwrap();
        let round = json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "input_required", "requestState": "s"}});
        gate.accept_response(&server, &round.to_string()).unwrap();
    }
    let retry = |id: i64| RetryRequest {
        server: server.clone(),
        request_id: RequestId::Number(id),
        retry_id: RequestId::Number(id + 1),
        user: "u".into(),
        tenant: "t".into(),
        responses_json: "{}".into(),
    };
    gate.build_retry(retry(1)).unwrap();
    let lines = audit.lines().unwrap();
    assert_eq!(
        mrtr_gate_host::core::audit::verify_chain(lines.iter().map(String::as_str)),
        Ok(3)
    );
    // received 1, received 3, submitted 1 (a state-only round needs no consent event).
    // The file disappears under the sink: read-back fails, so the retry is denied.
    std::fs::remove_file(&path).unwrap();
    let denied = gate.build_retry(retry(3)).unwrap_err();
    assert!(
        denied.code == "audit_readback_mismatch" || denied.code == "audit_write_failed",
        "{denied:?}"
    );
}

#[test]
fn a_trail_has_one_writer_at_a_time() {
    use mrtr_gate_host::reference_hosts::FileAuditError;
    let path = temp("one-writer");
    let first = FileAudit::open(&path).unwrap();
    match FileAudit::open(&path) {
        Err(FileAuditError::Locked { holder }) => {
            #[cfg(target_os = "linux")]
            assert_eq!(holder, Some(std::process::id()));
            let said = FileAuditError::Locked { holder }.to_string();
            assert!(said.contains("--redis URL"), "{said}");
        }
        other => panic!("a second writer was let in: {other:?}"),
    }
    drop(first);
    FileAudit::open(&path).unwrap();
    let _ = std::fs::remove_file(&path);
}

#[cfg(unix)]
#[test]
fn a_new_trail_and_its_folders_are_the_owners_alone_and_only_a_regular_file_is_taken() {
    use mrtr_gate_host::reference_hosts::FileAuditError;
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("mrtr-gate-trail-modes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("state/mrtr-gate/trail.jsonl");
    drop(FileAudit::open(&path).unwrap());
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&dir.join("state/mrtr-gate")), 0o700);
    assert_eq!(mode(&dir.join("state")), 0o700);
    for not_a_file in ["/dev/null", "/dev/full"] {
        assert!(
            matches!(
                FileAudit::open(not_a_file),
                Err(FileAuditError::NotARegularFile)
            ),
            "{not_a_file}"
        );
    }
    assert!(matches!(
        FileAudit::open(&dir),
        Err(FileAuditError::NotARegularFile)
    ));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A trail opened again knows the root's newest line (where a root writer starts from), read
/// in the one pass that verifies it.
#[test]
fn a_trail_opened_again_names_the_roots_newest_line() {
    use mrtr_gate_host::core::host::ShardHeads;
    let dir = std::env::temp_dir().join(format!("mrtr-gate-last-root-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("t.jsonl");
    let sink = FileAudit::open(&path).unwrap();
    assert_eq!(sink.last_root().unwrap(), None);
    sink.append(&support::entry_on(&sink.head(support::SHARD), "one"))
        .unwrap();
    let mut last = std::collections::BTreeMap::new();
    mrtr_gate_host::core::audit::anchor_root(&sink, &mut last, 1).unwrap();
    let root = sink.last_root().unwrap().unwrap();
    sink.append(&support::entry_on(&sink.head(support::SHARD), "two"))
        .unwrap();
    drop(sink);
    let again = FileAudit::open(&path).unwrap();
    assert_eq!(again.last_root().unwrap(), Some(root));
    let _ = std::fs::remove_dir_all(&dir);
}
