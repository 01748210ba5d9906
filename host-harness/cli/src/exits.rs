//! Every subcommand's exit statuses, declared once: `mrtr-gate COMMAND --help` ends with its
//! table ([`with_exit_help`]) and docs/cli.md, "Exit status of every command", is rendered from
//! the same lines ([`markdown`]; a test holds the doc to it).

/// A command's exits: (status, meaning).
pub type Exits = &'static [(&'static str, &'static str)];

/// What every command that prints on stdout does when its reader goes away.
const CLOSED_PIPE: (&str, &str) = (
    "141",
    "stdout was closed under it (`| head`): the rest of the output was not written",
);

/// Each subcommand, by its name, with its exits.
pub const COMMANDS: &[(&str, Exits)] = &[
    (
        "call",
        &[
            ("0", "complete"),
            (
                "1",
                "the gate refused (any of its codes, `unreadable_consent_view`), a --policy refused the round (`policy_denied`, `policy_failed`), the server misbehaved outside the gate, or the trail's root could not be anchored as the call ended",
            ),
            ("2", "usage: a wrong flag or argument; nothing was sent"),
            (
                "3",
                "the server answered a JSON-RPC error, or supports no version this client speaks",
            ),
            (
                "4",
                "the transport failed: the server could not be started or reached, or went away",
            ),
            ("5", "cancelled (Ctrl-C, `q`), or no answer"),
            ("6", "complete, with `isError: true`"),
            (
                "130",
                "a second Ctrl-C: left at once, the binding left to expire",
            ),
            CLOSED_PIPE,
        ],
    ),
    (
        "list",
        &[
            ("0", "listed"),
            (
                "1",
                "refused: the server answered a listing with a round, or misbehaved",
            ),
            ("2", "usage"),
            ("3", "the server answered a JSON-RPC error"),
            ("4", "the transport failed"),
            ("5", "no answer"),
            CLOSED_PIPE,
        ],
    ),
    (
        "proxy",
        &[
            (
                "the server's",
                "stdio: the server exited by itself with this status (128 + the signal that ended it), said on stderr with its log",
            ),
            (
                "0",
                "told to stop (SIGINT, SIGTERM): drained, the calls and rounds left ended `cancelled`, the root anchored",
            ),
            (
                "2",
                "usage: a wrong flag, no trail, a key file not the user's alone, a trail that cannot be opened or is written by another proxy, an admin address that cannot be bound; nothing was started",
            ),
            (
                "4",
                "the server could not be started or did not exit by itself once the client had gone; HTTP: the address could not be bound",
            ),
        ],
    ),
    (
        "probe",
        &[
            ("0", "no check failed (each passed or was skipped)"),
            ("1", "a check failed"),
            (
                "2",
                "usage: a wrong flag, an unknown scenario, an invalid scenario file; no client ran",
            ),
            (
                "4",
                "the probe could not run (a listener, the client's shell, the output folder)",
            ),
            CLOSED_PIPE,
        ],
    ),
    (
        "conformance",
        &[
            ("0", "the scenario ran to its end"),
            ("1", "it did not: the refusal or failure is on stderr"),
            ("2", "usage"),
        ],
    ),
    (
        "demo",
        &[
            ("0", "every round ran as the demo expects"),
            ("1", "one did not, or the gate could not be loaded"),
            ("2", "usage"),
            CLOSED_PIPE,
        ],
    ),
    (
        "info",
        &[
            ("0", "printed"),
            ("1", "the component could not be loaded"),
            ("2", "usage"),
            CLOSED_PIPE,
        ],
    ),
    (
        "export-component",
        &[
            ("0", "written"),
            ("1", "the file could not be written"),
            ("2", "usage"),
            CLOSED_PIPE,
        ],
    ),
    (
        "reconcile",
        &[
            ("0", "clean: no violation, every binding ended"),
            ("1", "a violation"),
            ("2", "the trail cannot be read (or usage)"),
            (
                "3",
                "no violation, but bindings are open (live, or left by a host that crashed or was killed)",
            ),
            CLOSED_PIPE,
        ],
    ),
    (
        "verify-audit",
        &[
            (
                "0",
                "the chain is intact, every line is linked with the key, and the trail ends at its anchor",
            ),
            (
                "1",
                "it is not (the message names the line and what to do), or the trail, its links, anchor or key cannot be read",
            ),
            ("2", "usage"),
            CLOSED_PIPE,
        ],
    ),
    (
        "policy",
        &[
            (
                "0",
                "`check`: every policy is valid against the round schema; `explain`: every round was explained",
            ),
            (
                "1",
                "`check`: the file is refused, each problem on stderr with its line and code; `explain`: the capture holds no round of the request, or one the gate refuses",
            ),
            (
                "2",
                "usage, a file that cannot be read, or (`explain`) a policy file refused or a view that does not read",
            ),
            CLOSED_PIPE,
        ],
    ),
    (
        "export-audit",
        &[
            ("0", "exported: one line per event on stdout"),
            (
                "1",
                "the trail does not verify (its chain, links or anchor), or its key file is missing or refused: the message says which and what to do; nothing was exported",
            ),
            ("2", "usage, or the trail cannot be read"),
            CLOSED_PIPE,
        ],
    ),
];

/// `command` with each subcommand's exit statuses at the end of its `--help`.
pub fn with_exit_help(mut command: clap::Command) -> clap::Command {
    for (name, exits) in COMMANDS {
        command = command.mut_subcommand(*name, |sub| sub.after_help(help(exits)));
    }
    command
}

fn help(exits: Exits) -> String {
    let mut out = String::from("Exit status:");
    for (code, meaning) in exits {
        out.push_str(&format!("\n  {code:<12} {meaning}"));
    }
    out
}

/// docs/cli.md's "Exit status of every command": one table per command.
pub fn markdown() -> String {
    let mut out = String::new();
    for (name, exits) in COMMANDS {
        out.push_str(&format!(
            "### `mrtr-gate {name}`\n\n| Exit | Meaning |\n|---|---|\n"
        ));
        for (code, meaning) in *exits {
            out.push_str(&format!("| {code} | {meaning} |\n"));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: &str = "<!-- exits: rendered from host-harness/cli/src/exits.rs -->\n";
    const END: &str = "<!-- /exits -->\n";

    /// docs/cli.md holds exactly the declared tables (`MRTR_GATE_BLESS=1` writes them there).
    #[test]
    fn the_doc_has_every_commands_exits_as_declared() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let (before, rest) = doc
            .split_once(START)
            .expect("docs/cli.md has the exits marker");
        let (shown, after) = rest
            .split_once(END)
            .expect("docs/cli.md closes the exits marker");
        let expected = markdown();
        if std::env::var_os("MRTR_GATE_BLESS").is_some() {
            std::fs::write(&path, format!("{before}{START}{expected}{END}{after}")).unwrap();
            return;
        }
        assert_eq!(
            shown, expected,
            "docs/cli.md is stale: MRTR_GATE_BLESS=1 rewrites it"
        );
    }
}
