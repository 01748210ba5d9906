//! `mrtr-gate proxy` refuses to start on wrong flags (exit 2) and says why on stderr, never
//! on stdout, which belongs to the client's protocol stream; a server that cannot be started
//! is a transport failure (exit 4); a run ends with the server's own exit status.

#![cfg(test)]
#![cfg(unix)]

mod support;

use std::io::Write;
use std::process::{Command, Stdio};
use support::{Proxy, bin};

fn run(args: &[String], stdin: &str) -> (Option<i32>, String, String) {
    let mut child = Command::new(&args[0])
        .args(&args[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn proxy(args: &[&str]) -> Vec<String> {
    std::iter::once(bin().display().to_string())
        .chain(std::iter::once("proxy".to_owned()))
        .chain(args.iter().map(|s| (*s).to_owned()))
        .collect()
}

#[test]
fn wrong_flags_are_usage_errors_on_stderr_and_nothing_on_stdout() {
    for (args, says) in [
        (&["--", "true"][..], "--audit FILE or --redis URL"),
        (&["--audit", "t.jsonl"], "-- COMMAND"),
        (
            &["--audit", "t.jsonl", "--consent", "maybe", "--", "true"],
            "one of client, tty, command CMD",
        ),
        (
            &["--audit", "t.jsonl", "--max-rounds", "0", "--", "true"],
            "--max-rounds",
        ),
        (
            &[
                "--audit",
                "t.jsonl",
                "--listen",
                "127.0.0.1:9",
                "--upstream",
                "http://127.0.0.1:1/mcp",
                "--trust-principal-headers",
                "x-user",
            ],
            "two different header names",
        ),
        (
            &[
                "--audit",
                "t.jsonl",
                "--listen",
                "127.0.0.1:9",
                "--upstream",
                "http://127.0.0.1:1/mcp",
                "--consent",
                "command",
                "true",
                "--engines",
                "2",
            ],
            "--engines 2 with --consent tty or command",
        ),
        (
            &["--audit", "t.jsonl", "--engines", "2", "--", "true"],
            "--listen",
        ),
        (
            &[
                "--audit",
                "t.jsonl",
                "--listen",
                "127.0.0.1:9",
                "--upstream",
                "http://127.0.0.1:1/mcp",
                "--engines",
                "0",
            ],
            "--engines",
        ),
    ] {
        let (code, stdout, stderr) = run(&proxy(args), "");
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    // clap's own refusals are usage errors too.
    let (code, stdout, _) = run(
        &proxy(&["--audit", "a", "--redis", "redis://x/", "--", "true"]),
        "",
    );
    assert_eq!((code, stdout.as_str()), (Some(2), ""));
}

#[test]
fn a_server_that_cannot_start_is_a_transport_failure() {
    let p = Proxy::new("no-server");
    let argv = p.argv(&[], &["/nonexistent/mcp-server".to_owned()]);
    let (code, stdout, stderr) = run(&argv, "");
    assert_eq!(code, Some(4), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("could not start the server"), "{stderr}");
}

#[test]
fn the_run_ends_with_the_servers_exit_status_and_ungated_lines_pass_as_they_came() {
    use std::io::BufRead;
    let p = Proxy::new("echo");
    // A server that answers one line with its own, then exits 7 once its input ends.
    let server = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        r#"read line; echo '{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}'; cat >/dev/null; exit 7"#
            .to_owned(),
    ];
    let argv = p.argv(&["--insecure-no-host-keys"], &server);
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n")
        .unwrap();
    let mut output = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    output.read_line(&mut line).unwrap();
    assert_eq!(
        line,
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[]}}\n"
    );
    // The client leaves: the server's input ends, it exits, and so does the proxy.
    drop(input);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut output, &mut rest).unwrap();
    assert_eq!(rest, "", "nothing but protocol lines on stdout");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(7));
    // Said on stderr, with where the server's own words are.
    let mut said = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut said).unwrap();
    assert!(
        said.contains(&format!(
            "the server exited (exit status: 7): what it said is in {}",
            p.log.display()
        )),
        "{said}"
    );
}

#[test]
fn a_server_a_signal_ended_is_reported_with_the_signal_and_the_shells_status() {
    let p = Proxy::new("killed");
    // A server that kills itself with SIGKILL as soon as it starts.
    let server = vec!["sh".to_owned(), "-c".to_owned(), "kill -9 $$".to_owned()];
    let argv = p.argv(&["--insecure-no-host-keys"], &server);
    let (code, stdout, stderr) = run(&argv, "");
    assert_eq!(code, Some(128 + 9), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("the server exited (signal: 9 (SIGKILL))"),
        "{stderr}"
    );
}

/// A proxy of a server that reads until its input ends, started and past its startup (it has
/// said what it gates on stderr, so its trail is open and locked); the rest of its stderr.
#[allow(clippy::zombie_processes)] // the caller waits for it
fn started(
    argv: &[String],
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStderr>,
) {
    use std::io::BufRead;
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap() == 0 {
            let status = child.wait();
            panic!("ended ({status:?}): {said}");
        }
        said.push_str(&line);
        if line.contains("mrtr-gate proxy: gating") {
            return (child, stderr);
        }
    }
}

fn waiting_server() -> Vec<String> {
    vec!["sh".into(), "-c".into(), "cat >/dev/null".into()]
}

#[test]
fn a_trail_has_one_writer_and_a_second_is_told_who_holds_it() {
    let p = Proxy::new("one-writer");
    let argv = p.argv(&[], &waiting_server());
    let (mut first, _) = started(&argv);
    let (code, stdout, stderr) = run(&argv, "");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    for says in [
        p.trail.display().to_string(),
        format!("pid {}", first.id()),
        "--redis URL".to_owned(),
    ] {
        assert!(stderr.contains(&says), "{says}: {stderr}");
    }
    // The first writer gone, the trail is free again.
    drop(first.stdin.take());
    assert_eq!(first.wait().unwrap().code(), Some(0));
    let (mut second, _) = started(&argv);
    drop(second.stdin.take());
    assert_eq!(second.wait().unwrap().code(), Some(0));
    p.verify();
}

#[test]
fn the_trail_its_links_and_anchor_are_the_owners_alone_in_folders_made_for_them() {
    use std::os::unix::fs::PermissionsExt;
    let p = Proxy::new("modes");
    // A fresh account's state folder does not exist yet.
    let trail = p.dir.join("state/mrtr-gate/flights.jsonl");
    let trail_text = trail.display().to_string();
    // One audited event: the server's own 2025-era elicitation, refused by the proxy.
    let server = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        r#"echo '{"jsonrpc":"2.0","id":"s1","method":"elicitation/create","params":{}}'; cat >/dev/null"#
            .to_owned(),
    ];
    let argv = p.argv_on(&["--audit", &trail_text], &[], &server);
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The refusal is written before the proxy reads on; the client leaving ends the run.
    let links = p.dir.join("state/mrtr-gate/flights.jsonl.links");
    while std::fs::read_to_string(&trail)
        .unwrap_or_default()
        .is_empty()
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    let anchors = p.dir.join("anchors");
    let anchor = std::fs::read_dir(&anchors)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    for (path, want) in [
        (p.dir.join("state"), 0o700),
        (p.dir.join("state/mrtr-gate"), 0o700),
        (trail.clone(), 0o600),
        (links, 0o600),
        (anchors, 0o700),
        (anchor, 0o600),
    ] {
        assert_eq!(mode(&path), want, "{}", path.display());
    }
}

#[test]
fn the_trail_must_be_a_regular_file() {
    let p = Proxy::new("not-a-file");
    let fifo = p.dir.join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    for trail in [
        "/dev/null".to_owned(),
        "/dev/full".to_owned(),
        fifo.display().to_string(),
        p.dir.display().to_string(),
    ] {
        let argv = p.argv_on(&["--audit", &trail], &[], &waiting_server());
        let (code, _, stderr) = run(&argv, "");
        assert_eq!(code, Some(2), "{trail}: {stderr}");
        assert!(stderr.contains("not a regular file"), "{trail}: {stderr}");
    }
}

#[test]
fn a_broken_trail_says_which_line_and_what_to_do() {
    let p = Proxy::new("broken");
    std::fs::write(&p.trail, "{\"seq\":1}\nnot a line\n").unwrap();
    let (code, _, stderr) = run(&p.argv(&[], &waiting_server()), "");
    assert_eq!(code, Some(2), "{stderr}");
    for says in ["line 1", "move it aside", "start a new trail"] {
        assert!(stderr.contains(says), "{says}: {stderr}");
    }
}
