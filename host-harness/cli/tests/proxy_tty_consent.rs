//! `mrtr-gate proxy --consent tty`: the official TypeScript SDK client (automatic MRTR mode)
//! runs in a real terminal (tmux) and spawns the proxy as its stdio server; the proxy shows
//! the gate's consent screen on its controlling terminal, never on the protocol streams, and
//! the person's `y` or `n` there decides. `y`: the round completes, recorded `user_at_screen`;
//! `n`: the client gets −31001 `consent_refused`.
//!
//! (The Python SDK client starts its servers in a new session, without a terminal: there
//! `--consent tty` has nobody to ask, and every form or URL round is `consent_unavailable`.)
//!
//! Needs tmux (scripts/setup installs it), node and the SDK packages.

#![cfg(test)]
#![cfg(unix)]

mod support;
use support::tmux;

use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};
use support::{Proxy, node, python_server, root};
use tmux::{Tmux, quoted};

/// Wait for `done`; the bound is a backstop against a hang, never a pace.
fn wait_for<T>(what: &str, mut done: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(t) = done() {
            return t;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "waited for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One call of `book_flight` by the TypeScript client in a terminal, the person typing `key`
/// at the proxy's consent screen; the client's report of the call, the screen when asked.
fn book_at_the_terminal(proxy: &Proxy, key: &str) -> (Value, String) {
    let out = proxy.dir.join("client.jsonl");
    let argv = proxy.argv(&["--consent", "tty"], &python_server());
    let proxy_line: Vec<String> = argv.iter().map(|a| quoted(a)).collect();
    let command = format!(
        "{} {} {} -- {} > {} 2> {}; sleep 600",
        quoted(&node().display().to_string()),
        quoted(
            &root()
                .join("host-harness/node/test/proxy-stdio-client.mjs")
                .display()
                .to_string()
        ),
        quoted(r#"[["book_flight",{"origin":"OSL","destination":"SFO"}]]"#),
        proxy_line.join(" "),
        quoted(&out.display().to_string()),
        quoted(&proxy.dir.join("client.err").display().to_string()),
    );
    let socket = format!(
        "mrtr-gate-proxy-tty-{}",
        proxy.dir.file_name().unwrap().to_string_lossy()
    );
    let tmux = Tmux::start(&socket, 120, 60, &command);
    let prompt = "Send these answers? [y/N]";
    let screen = tmux.wait_for("the consent prompt", |s| s.contains(prompt));
    tmux.type_line(key);
    let report = wait_for("the client's report", || {
        std::fs::read_to_string(&out)
            .ok()
            .filter(|t| t.ends_with('\n'))
    });
    let call = serde_json::from_str(report.lines().next().unwrap()).unwrap();
    (call, screen)
}

fn consent_methods(trail: &Path) -> Vec<String> {
    std::fs::read_to_string(trail)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "consented")
        .map(|e| e["consent_method"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_person_at_the_proxys_terminal_grants_and_the_trail_says_user_at_screen() {
    let proxy = Proxy::new("tty-yes");
    let (call, screen) = book_at_the_terminal(&proxy, "y");
    assert!(screen.contains("Who is flying?"), "{screen}");
    assert_eq!(call["ok"], true, "{call}");
    assert!(
        call["text"].as_str().unwrap().contains("Ada Lovelace"),
        "{call}"
    );
    proxy.verify();
    assert_eq!(consent_methods(&proxy.trail), ["user_at_screen"]);
}

#[test]
fn a_person_who_says_no_at_the_proxys_terminal_refuses_the_round() {
    let proxy = Proxy::new("tty-no");
    let (call, _) = book_at_the_terminal(&proxy, "n");
    assert_eq!(call["ok"], false, "{call}");
    assert_eq!(call["code"], -31001, "{call}");
    assert_eq!(
        call["data"]["mrtr_gate"]["code"], "consent_refused",
        "{call}"
    );
    proxy.verify();
    assert!(consent_methods(&proxy.trail).is_empty());
}
