//! What a person sees: `mrtr-gate call --stdio` in a real terminal (tmux) against a server
//! that writes ANSI and OSC sequences, a fake consent screen and bidi overrides in every
//! string it picks and on its stderr (tests/peers/hostile_screen.py). The screen captured
//! at the consent prompt still shows the real server, request and arguments lines, each
//! once, the server's text escaped, and its stderr only in the log named on the screen.
//!
//! Needs tmux and python3 (scripts/test installs tmux where it is missing).

#![cfg(test)]

mod support;
use support::tmux;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use tmux::{Tmux, quoted};

/// `path` quoted for `sh`.
fn quoted_path(path: &Path) -> String {
    quoted(&path.display().to_string())
}

#[test]
fn a_hostile_server_cannot_repaint_the_consent_screen_or_reach_the_terminal() {
    let dir = std::env::temp_dir().join(format!("mrtr-gate-hostile-screen-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let server =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers/hostile_screen.py");
    let done = dir.join("late-stderr-written");
    let log = dir.join("server.log");
    let answers = dir.join("answers.json");
    std::fs::write(
        &answers,
        r#"{"confirm":{"action":"accept","content":{"ok":true,"choice":"b"}},"wrap":{"action":"decline"}}"#,
    )
    .unwrap();
    let stdio = format!("python3 {} {}", quoted_path(&server), quoted_path(&done));
    let command = format!(
        "{} call --stdio {} --server-log {} --answers {} tools/call transfer '{{\"amount\":100,\"to\":\"savings\"}}'; sleep 600",
        quoted(env!("CARGO_BIN_EXE_mrtr-gate")),
        quoted(&stdio),
        quoted_path(&log),
        quoted_path(&answers),
    );
    let tmux = Tmux::start("mrtr-gate-hostile-screen", 80, 60, &command);
    let prompt = "Send these answers? [y/N]";
    tmux.wait_for("the consent prompt", |s| s.contains(prompt));
    // The server writes to its stderr once more after its answer; then the screen is final.
    let started = Instant::now();
    while !done.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "the server never finished"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(300));
    let screen = tmux.screen();
    let lines: Vec<&str> = screen.lines().collect();
    let count = |prefix: &str| lines.iter().filter(|l| l.starts_with(prefix)).count();
    // Joined again, the server line names the command that was run.
    // The lines the consent screen broke itself (the rest after a dashed bar) joined too.
    let joined = tmux.joined().replace("\n  ┆     ", "");
    let endpoint = joined
        .lines()
        .find(|l| l.starts_with("  │ server   "))
        .unwrap_or_default();
    // The endpoint the gate binds: the command's readable start (cut where a long checkout
    // path makes it long) and the digest of all of it.
    let argv = mrtr_gate_client::transport::stdio::split_command(&stdio).unwrap();
    let bound = mrtr_gate_client::transport::stdio::endpoint_id(&argv);
    assert!(bound.starts_with("stdio:python3/"), "{bound}");
    assert_eq!(
        endpoint,
        format!("  │ server   endpoint:{bound}"),
        "the real server line is shown:\n{screen}"
    );
    // The consent screen breaks its long lines itself: no row of it is left to the
    // terminal's wrap, where a server's padding would decide what starts the next row.
    let boxed = lines
        .iter()
        .skip_while(|l| !l.starts_with("  ┌─ consent"))
        .take_while(|l| !l.starts_with("  └"));
    for line in boxed {
        assert!(
            line.chars().count() < 80,
            "a row the terminal wrapped: {line}"
        );
    }
    assert_eq!(count("  │ server "), 1, "one server line:\n{screen}");
    assert_eq!(
        count("  │ request  tools/call `transfer` (round 1 of at most 10)"),
        1,
        "{screen}"
    );
    assert_eq!(count("  │ request "), 1, "one request line:\n{screen}");
    assert_eq!(
        count(r#"  │ arguments {"amount":100,"to":"savings"}"#),
        1,
        "the real arguments:\n{screen}"
    );
    assert_eq!(count("  │ arguments"), 1, "one arguments line:\n{screen}");
    assert_eq!(count("  ┌─ consent"), 1, "one consent box:\n{screen}");
    assert!(
        !lines
            .iter()
            .any(|l| l.trim_start().starts_with("│ server   https://bank")),
        "{screen}"
    );
    assert!(
        joined.contains("Answers to send:\n    \"confirm\": {\"action\":\"accept\",\"content\":{\"choice\":\"b\",\"ok\":true}}\n    \"wrap\": {\"action\":\"decline\"}\nSend these answers?"),
        "{screen}"
    );
    assert!(
        screen.contains(prompt),
        "the prompt is still there:\n{screen}"
    );
    // The server's text is on the screen, marked: its escape sequences and bidi controls
    // written out, not acted on.
    for marked in [
        "\\u{001b}[2J\\u{001b}[H",
        "\\u{001b}]8;;https://evil.example/\\u{0007}",
        "pay \\u{202e}redro\\u{202c}",
    ] {
        assert!(joined.contains(marked), "`{marked}` shown:\n{screen}");
    }
    // Its stderr: only in the log the screen names.
    assert!(
        joined.contains(&format!(
            "the server's stderr is logged to {}",
            log.display()
        )),
        "{screen}"
    );
    assert!(
        !screen.contains("early stderr") && !screen.contains("late stderr"),
        "{screen}"
    );
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        logged.contains("server: early stderr") && logged.contains("server: late stderr"),
        "{logged:?}"
    );

    // Refuse; the result text is never shown (nothing was sent).
    tmux.type_line("n");
    let after = tmux.wait_for("the refusal", |s| s.contains("refused: consent_refused"));
    assert!(!after.contains("done "), "{after}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_hostile_result_and_list_are_shown_escaped() {
    // With --yes the result text comes back; each line of it is shown escaped.
    let dir = std::env::temp_dir().join(format!("mrtr-gate-hostile-result-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let server =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers/hostile_screen.py");
    let answers = dir.join("answers.json");
    std::fs::write(
        &answers,
        r#"{"confirm":{"action":"accept","content":{"ok":true,"choice":"b"}},"wrap":{"action":"decline"}}"#,
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mrtr-gate"))
        .args(["call", "--stdio"])
        .arg(format!("python3 {}", quoted_path(&server)))
        .arg("--answers")
        .arg(&answers)
        .args(["--yes", "tools/call", "transfer", r#"{"amount":1}"#])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    for text in [&stdout, &stderr] {
        assert!(
            !text.contains('\u{1b}')
                && !text.contains('\u{7}')
                && !text.contains('\u{202e}')
                && !text.contains('\r'),
            "{text:?}"
        );
    }
    assert!(stdout.contains("\\u{001b}[2J\\u{001b}[H"), "{stdout}");
    assert!(
        stdout.contains("pay \\u{202e}redro\\u{202c} now \\u{2066}x\\u{2069} zero\\u{200b}width"),
        "{stdout}"
    );
    assert!(
        stderr.contains("the server's stderr is logged to "),
        "{stderr}"
    );
    assert!(!stderr.contains("early stderr"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
