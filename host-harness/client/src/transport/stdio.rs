//! The stdio transport: spawn the server as a child process (no shell) and exchange one
//! JSON-RPC message per line on its stdin and stdout. The server's stderr goes to a log file
//! (by default a new one in the temporary folder), never raw to the user's terminal unless
//! the caller asks for [`ServerStderr::InheritRaw`].

use super::{
    MAX_MESSAGE_BYTES, Outgoing, Routed, TICK, Transport, TransportCode, TransportError, Waiting,
    answer_server_request, route,
};
use mrtr_gate_host::core::ServerIdentity;
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Instant;

/// What the reader thread saw on the server's stdout.
enum Incoming {
    Line(String),
    Closed(TransportError),
}

/// Where a spawned server's stderr goes. Never the user's terminal unless asked for by
/// name: a server's stderr can hold escape sequences that clear the screen and paint a
/// consent screen of its own over the real one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerStderr {
    /// Appended to this file (created, owner-only, when missing).
    Log(PathBuf),
    /// A new owner-only file in the system's temporary folder, named
    /// `mrtr-gate-server-<pid>-<n>.log` ([`StdioTransport::stderr_log`] says which), removed
    /// when the transport is dropped if the server wrote nothing to it.
    TempLog,
    /// Thrown away.
    Discard,
    /// The client's own stderr, byte for byte: the server can then rewrite anything the
    /// terminal shows, the consent screen included. For debugging a server one trusts.
    InheritRaw,
}

/// Open `path` for appending, creating it readable by its owner only: a server's log can
/// hold what it was sent.
pub fn append_private(path: &Path, create_new: bool) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.append(true);
    if create_new {
        options.create_new(true);
    } else {
        options.create(true);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

/// A fresh log file in the temporary folder. `create_new` never follows a link planted at
/// the name, and a taken name moves on to the next.
pub fn temp_log() -> std::io::Result<(PathBuf, File)> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let mut last = None;
    for _ in 0..64 {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("mrtr-gate-server-{}-{n}.log", std::process::id()));
        match append_private(&path, true) {
            Ok(file) => return Ok((path, file)),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free log file name")))
}

/// A server spawned as a child process.
pub struct StdioTransport {
    server: ServerIdentity,
    stderr_log: Option<PathBuf>,
    /// A temporary log the server never wrote to is removed when the server is gone.
    remove_empty_log: bool,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Incoming>,
    closed: Option<TransportError>,
}

impl std::fmt::Debug for StdioTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioTransport")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// The endpoint id a spawned command is bound to: readable (`stdio:` and the argv, characters
/// an endpoint id cannot hold replaced by `_`) and exact (`@` and 128 bits of the SHA-256 of
/// the argv, NUL-separated), so two commands that read alike are still two servers.
pub fn endpoint_id(argv: &[String]) -> String {
    let mut hasher = Sha256::new();
    for arg in argv {
        hasher.update(arg.as_bytes());
        hasher.update([0]);
    }
    let digest: String = hasher
        .finalize()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect();
    let readable: String = argv
        .join("/")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._:/-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(88)
        .collect();
    format!("stdio:{readable}@{digest}")
}

/// A server command split into words as a POSIX shell would (quotes, backslashes), to be run
/// without one: no expansion, no pipes, no `;`.
pub fn split_command(command: &str) -> Result<Vec<String>, TransportError> {
    shlex::split(command)
        .filter(|argv| !argv.is_empty())
        .ok_or_else(|| {
            TransportError::new(
                TransportCode::InvalidCommand,
                "the server command is empty or its quotes do not close",
            )
        })
}

impl StdioTransport {
    /// Spawn `command`, split into words as a POSIX shell would (quotes, backslashes) but
    /// run without one: no expansion, no pipes, no `;`. Its stderr goes to a new file in the
    /// temporary folder ([`ServerStderr::TempLog`]).
    pub fn spawn(command: &str) -> Result<Self, TransportError> {
        Self::spawn_with(command, &ServerStderr::TempLog)
    }

    /// [`spawn`](Self::spawn), with the server's stderr sent where `stderr` says.
    pub fn spawn_with(command: &str, stderr: &ServerStderr) -> Result<Self, TransportError> {
        Self::spawn_argv_with(&split_command(command)?, stderr)
    }

    /// Spawn `argv[0]` with the rest as its arguments; its stderr goes to a new file in the
    /// temporary folder ([`ServerStderr::TempLog`]).
    pub fn spawn_argv(argv: &[String]) -> Result<Self, TransportError> {
        Self::spawn_argv_with(argv, &ServerStderr::TempLog)
    }

    /// [`spawn_argv`](Self::spawn_argv), with the server's stderr sent where `stderr` says.
    /// The server starts in a session of its own, with no controlling terminal
    /// ([`super::isolation`]).
    pub fn spawn_argv_with(argv: &[String], stderr: &ServerStderr) -> Result<Self, TransportError> {
        Self::spawn_isolated(argv, stderr, None, None)
    }

    /// [`spawn_argv_with`](Self::spawn_argv_with), and with `isolation` the server runs under
    /// it: kept from the gate's files, terminals and processes ([`super::isolation`]); with
    /// `run_as`, as that other user. An isolation this system cannot give is an error, never
    /// a server run without it.
    pub fn spawn_isolated(
        argv: &[String],
        stderr: &ServerStderr,
        isolation: Option<&super::isolation::Isolation>,
        run_as: Option<super::isolation::RunAs>,
    ) -> Result<Self, TransportError> {
        let (program, args) = argv.split_first().ok_or_else(|| {
            TransportError::new(TransportCode::InvalidCommand, "the server command is empty")
        })?;
        let server = ServerIdentity::endpoint(&endpoint_id(argv))
            .map_err(|e| TransportError::new(TransportCode::InvalidCommand, e.to_string()))?;
        let log_failed = |path: &Path, e: std::io::Error| {
            TransportError::new(
                TransportCode::SpawnFailed,
                format!("the server's stderr log {}: {e}", path.display()),
            )
        };
        let remove_empty_log = matches!(stderr, ServerStderr::TempLog);
        let (stderr_log, stderr) = match stderr {
            ServerStderr::Log(path) => (
                Some(path.clone()),
                Stdio::from(append_private(path, false).map_err(|e| log_failed(path, e))?),
            ),
            ServerStderr::TempLog => {
                let (path, file) = temp_log().map_err(|e| log_failed(&std::env::temp_dir(), e))?;
                (Some(path), Stdio::from(file))
            }
            ServerStderr::Discard => (None, Stdio::null()),
            ServerStderr::InheritRaw => (None, Stdio::inherit()),
        };
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        super::isolation::isolate(&mut command, isolation, run_as)
            .map_err(|e| TransportError::new(TransportCode::SpawnFailed, e.to_string()))?;
        let mut child = command.spawn().map_err(|e| {
            TransportError::new(TransportCode::SpawnFailed, format!("`{program}`: {e}"))
        })?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| TransportError::new(TransportCode::SpawnFailed, "no stdout"))?;
        let stdin = child.stdin.take();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                // One byte over the cap tells an oversized line from one exactly at it.
                let read = (&mut reader)
                    .take(MAX_MESSAGE_BYTES as u64 + 1)
                    .read_until(b'\n', &mut line);
                let event = match read {
                    Ok(0) => Incoming::Closed(TransportError::new(
                        TransportCode::ServerClosed,
                        "the server closed its output",
                    )),
                    Err(e) => Incoming::Closed(TransportError::new(
                        TransportCode::TransportFailed,
                        format!("reading the server's output: {e}"),
                    )),
                    Ok(_) if line.len() > MAX_MESSAGE_BYTES => {
                        Incoming::Closed(TransportError::new(
                            TransportCode::MessageTooLarge,
                            "the server sent a line over 64 MiB",
                        ))
                    }
                    Ok(_) => {
                        if line.last() == Some(&b'\n') {
                            line.pop();
                            if line.last() == Some(&b'\r') {
                                line.pop();
                            }
                        }
                        match String::from_utf8(line) {
                            Ok(text) => Incoming::Line(text),
                            Err(_) => Incoming::Closed(TransportError::new(
                                TransportCode::InvalidUtf8,
                                "the server sent a line that is not utf-8",
                            )),
                        }
                    }
                };
                let last = matches!(event, Incoming::Closed(_));
                if tx.send(event).is_err() || last {
                    return;
                }
            }
        });
        Ok(Self {
            server,
            remove_empty_log,
            stderr_log,
            child,
            stdin,
            lines,
            closed: None,
        })
    }

    /// The file the server's stderr goes to, when it goes to one.
    pub fn stderr_log(&self) -> Option<&Path> {
        self.stderr_log.as_deref()
    }

    fn write_line(&mut self, json: &str) -> Result<(), TransportError> {
        if json.contains('\n') {
            // The gate writes requests on one line; anything else would split a message.
            return Err(TransportError::new(
                TransportCode::InvalidMessage,
                "a message to send contains a newline",
            ));
        }
        let stdin = self.stdin.as_mut().ok_or_else(|| {
            TransportError::new(TransportCode::ServerClosed, "the server's input is closed")
        })?;
        stdin
            .write_all(json.as_bytes())
            .and_then(|()| stdin.write_all(b"\n"))
            .and_then(|()| stdin.flush())
            .map_err(|e| {
                TransportError::new(
                    TransportCode::ServerClosed,
                    format!("writing to the server: {e}"),
                )
            })
    }
}

impl Transport for StdioTransport {
    fn server(&self) -> &ServerIdentity {
        &self.server
    }

    fn request(
        &mut self,
        request: Outgoing<'_>,
        waiting: &mut dyn Waiting,
    ) -> Result<String, TransportError> {
        if let Some(closed) = &self.closed {
            return Err(closed.clone());
        }
        self.write_line(request.json)?;
        let started = Instant::now();
        loop {
            match self.lines.recv_timeout(TICK) {
                Ok(Incoming::Line(text)) => match route(&text, request.id) {
                    Routed::Response => return Ok(text),
                    Routed::ServerRequest(id, method) => {
                        self.write_line(&answer_server_request(&id, &method))?;
                    }
                    Routed::Other | Routed::OtherResponse => {}
                },
                Ok(Incoming::Closed(e)) => {
                    self.closed = Some(e.clone());
                    return Err(e);
                }
                Err(RecvTimeoutError::Timeout) => {
                    if !waiting.tick(started.elapsed()) {
                        return Err(TransportError::new(
                            TransportCode::Cancelled,
                            "the wait was cancelled",
                        ));
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let e = TransportError::new(
                        TransportCode::ServerClosed,
                        "the server's output ended",
                    );
                    self.closed = Some(e.clone());
                    return Err(e);
                }
            }
        }
    }

    fn notify(&mut self, _method: &str, json: &str) -> Result<(), TransportError> {
        self.write_line(json)
    }
}

impl StdioTransport {
    /// Stop the server: close its stdin (how a stdio server is told to stop), give it a
    /// moment, then kill it.
    fn stop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + std::time::Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        self.stop();
        if let (true, Some(path)) = (self.remove_empty_log, &self.stderr_log)
            && std::fs::metadata(path).is_ok_and(|m| m.len() == 0)
        {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_ids_are_readable_exact_and_valid() {
        let a = endpoint_id(&["python3".into(), "server.py".into()]);
        assert!(a.starts_with("stdio:python3/server.py@"), "{a}");
        let b = endpoint_id(&["python3 server.py".into()]);
        assert_ne!(a, b, "argv boundaries are part of the identity");
        let long = endpoint_id(&["x".repeat(500), "ü; rm -rf /".into()]);
        assert!(ServerIdentity::endpoint(&long).is_ok(), "{long}");
        assert!(ServerIdentity::endpoint(&a).is_ok());
    }

    #[test]
    fn a_command_is_split_without_a_shell() {
        assert!(StdioTransport::spawn("").is_err());
        assert!(StdioTransport::spawn("'unclosed").is_err());
        let e = StdioTransport::spawn("/nonexistent/server --flag").err();
        assert_eq!(e.map(|e| e.code), Some(TransportCode::SpawnFailed));
    }

    #[test]
    fn the_servers_stderr_goes_to_an_owner_only_log_by_default() {
        let script = "import sys; sys.stderr.write('\\x1b[2J\\x1b[Hserver: fake\\n'); sys.stderr.flush(); sys.stdin.readline()";
        let t = StdioTransport::spawn_argv(&["python3".into(), "-c".into(), script.into()]);
        let Ok(t) = t else {
            panic!("python3 did not start");
        };
        let Some(path) = t.stderr_log().map(Path::to_path_buf) else {
            panic!("no log file");
        };
        drop(t);
        let logged = std::fs::read(&path).unwrap_or_default();
        assert_eq!(logged, b"\x1b[2J\x1b[Hserver: fake\n");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).map(|m| m.permissions().mode() & 0o777);
            assert_eq!(mode.ok(), Some(0o600));
        }
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn an_empty_temporary_log_is_removed_with_the_server() {
        let argv = [
            "python3".into(),
            "-c".into(),
            "import sys; sys.stdin.readline()".into(),
        ];
        let Ok(t) = StdioTransport::spawn_argv(&argv) else {
            panic!("python3 did not start");
        };
        let path = t.stderr_log().map(Path::to_path_buf);
        assert!(path.as_ref().is_some_and(|p| p.exists()), "{path:?}");
        drop(t);
        assert!(path.is_some_and(|p| !p.exists()));
    }
}
