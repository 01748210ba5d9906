//! What the command says to the person running it: every subcommand's `--help` ends with its
//! exit statuses (the table docs/cli.md renders from the same declaration), and no command
//! panics when its reader goes away (`mrtr-gate probe --list | head -1`).

#![cfg(test)]
#![cfg(unix)]

use std::process::{Command, Stdio};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_mrtr-gate")
}

/// The subcommands `mrtr-gate --help` lists.
fn subcommands() -> Vec<String> {
    let out = Command::new(bin()).arg("--help").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let listed = text
        .split("Commands:\n")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .unwrap_or_else(|| panic!("no command list in\n{text}"));
    listed
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_subcommands_help_ends_with_its_exit_statuses() {
    let names = subcommands();
    assert!(names.len() >= 10, "{names:?}");
    let declared: Vec<&str> = mrtr_gate_cli::exits::COMMANDS
        .iter()
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(
        names, declared,
        "every subcommand declares its exits, in order"
    );
    for name in &names {
        let out = Command::new(bin()).args([name, "--help"]).output().unwrap();
        assert!(out.status.success(), "{name} --help");
        let help = String::from_utf8(out.stdout).unwrap();
        let (_, exits) = help
            .split_once("Exit status:\n")
            .unwrap_or_else(|| panic!("{name} --help names no exit status:\n{help}"));
        assert!(exits.contains("  2 "), "{name}: usage's exit\n{help}");
    }
}

/// `mrtr-gate ARGS` with a stdout nobody reads any more (the reader closed before the command
/// wrote, as `| head -0` does): its stderr and exit status.
fn into_a_closed_pipe(args: &[&str]) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_command_whose_reader_went_away_stops_quietly_with_141() {
    for args in [
        &["probe", "--list"][..],
        &["probe", "--list", "--json"],
        &["info"],
    ] {
        let (code, stderr) = into_a_closed_pipe(args);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(
            code,
            Some(mrtr_gate_cli::EXIT_CLOSED_PIPE),
            "{args:?}: {stderr}"
        );
    }
}
