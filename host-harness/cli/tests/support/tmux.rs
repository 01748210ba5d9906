//! A real terminal for the tests that look at what a person sees: a tmux server of the test's
//! own, one session `screen` running a command, its screen captured as tmux renders it.
//! Needs tmux (scripts/setup installs it).

#![allow(dead_code)]

use std::process::Command;
use std::time::{Duration, Instant};

/// A tmux server of this test's own, killed when dropped.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    /// A server on the socket `name` (unique to the test and process), its session `screen`
    /// `cols` by `rows`, running `command` under `sh`.
    pub fn start(name: &str, cols: u16, rows: u16, command: &str) -> Self {
        let tmux = Self {
            socket: format!("{name}-{}", std::process::id()),
        };
        let (cols, rows) = (cols.to_string(), rows.to_string());
        tmux.run(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "screen",
            "-x",
            &cols,
            "-y",
            &rows,
            command,
        ]);
        tmux
    }

    /// A tmux command against this server; its stdout.
    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs (apt-get install tmux)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The visible screen, as tmux renders it (escape sequences already acted on).
    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "screen"])
    }

    /// The same, with the rows the terminal wrapped joined (`-J`).
    pub fn joined(&self) -> String {
        self.run(&["capture-pane", "-p", "-J", "-t", "screen"])
    }

    /// Type `keys`, then Enter.
    pub fn type_line(&self, keys: &str) {
        self.run(&["send-keys", "-t", "screen", keys, "Enter"]);
    }

    /// Wait for `done` to hold of the screen (joined); the screen then. The bound is a
    /// backstop against a hang, far above what a loaded machine needs; the test never depends
    /// on how fast it is.
    pub fn wait_for(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let started = Instant::now();
        loop {
            let screen = self.joined();
            if done(&screen) {
                return screen;
            }
            assert!(
                started.elapsed() < Duration::from_secs(300),
                "waited for {what}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.run(&["kill-server"]);
    }
}

/// `text` quoted for `sh`.
pub fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}
