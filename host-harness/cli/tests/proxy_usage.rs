//! `mrtr-gate proxy` refuses to start on wrong flags (exit 2) and says why on stderr, never
//! on stdout, which belongs to the client's protocol stream; a server that cannot be started
//! is a transport failure (exit 4); a run ends with the server's own exit status.

#![cfg(test)]
#![cfg(unix)]

#[path = "support/proxy.rs"]
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
}
