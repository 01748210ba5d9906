//! # mrtr-gate-cli
//!
//! What the `mrtr-gate` command a user runs does over the wasmtime host ([`mrtr_gate_host`]),
//! kept out of the embedding crate's API: a call through the gate ([`call`]), the conformance
//! suite's client ([`conformance`]), the demo ([`demo`]), the host keys ([`keys`]), the flags and glue of `mrtr-gate proxy` ([`proxy`]) and of `mrtr-gate probe` ([`probe`]) and the host services a command's gates
//! run over ([`services`], shared with `mrtr-gate proxy`) and a consistent read of a trail
//! being written ([`trail`]). The
//! benchmarks, the corpus runner, the race worker and their fixtures are the test kit
//! (`mrtr-gate-testkit`), which depends on this crate and never the other way round.

pub mod call;
pub mod config;
pub mod conformance;
pub mod demo;
pub mod exits;
pub mod export;
pub mod keys;
pub mod policy;
pub mod probe;
pub mod proxy;
pub mod server_log;
pub mod services;
pub mod trail;

/// A line on stdout, as `println!` writes it, but a reader that went away (`mrtr-gate probe
/// --list | head`) ends the process quietly with status 141, as a shell reports a command a
/// closed pipe stopped (128 + SIGPIPE), instead of a panic. Any other write error is the same
/// exit: the output it was for cannot be delivered.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout_line(::std::format_args!($($arg)*))
    };
}

/// The exit status of a command whose stdout was closed under it ([`out!`]).
pub const EXIT_CLOSED_PIPE: i32 = 141;

#[doc(hidden)]
pub fn stdout_line(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    if writeln!(stdout, "{args}")
        .and_then(|()| stdout.flush())
        .is_err()
    {
        std::process::exit(EXIT_CLOSED_PIPE);
    }
}

pub use mrtr_gate_host::error_chain;
