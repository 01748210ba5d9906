//! The stdio transport: spawn the server as a child process (no shell) and exchange one
//! JSON-RPC message per line on its stdin and stdout.

use super::{
    MAX_MESSAGE_BYTES, Outgoing, Routed, TICK, Transport, TransportError, Waiting,
    answer_server_request, route,
};
use mrtr_gate_host::core::ServerIdentity;
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Instant;

/// What the reader thread saw on the server's stdout.
enum Incoming {
    Line(String),
    Closed(TransportError),
}

/// A server spawned as a child process.
pub struct StdioTransport {
    server: ServerIdentity,
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

impl StdioTransport {
    /// Spawn `command`, split into words as a POSIX shell would (quotes, backslashes) but
    /// run without one: no expansion, no pipes, no `;`.
    pub fn spawn(command: &str) -> Result<Self, TransportError> {
        let argv = shlex::split(command)
            .filter(|argv| !argv.is_empty())
            .ok_or_else(|| {
                TransportError::new(
                    "invalid_command",
                    "the server command is empty or its quotes do not close",
                )
            })?;
        Self::spawn_argv(&argv)
    }

    /// Spawn `argv[0]` with the rest as its arguments. The server's stderr is the client's.
    pub fn spawn_argv(argv: &[String]) -> Result<Self, TransportError> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| TransportError::new("invalid_command", "the server command is empty"))?;
        let server = ServerIdentity::endpoint(&endpoint_id(argv))
            .map_err(|e| TransportError::new("invalid_command", e.to_string()))?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| TransportError::new("spawn_failed", format!("`{program}`: {e}")))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| TransportError::new("spawn_failed", "no stdout"))?;
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
                        "server_closed",
                        "the server closed its output",
                    )),
                    Err(e) => Incoming::Closed(TransportError::new(
                        "transport_failed",
                        format!("reading the server's output: {e}"),
                    )),
                    Ok(_) if line.len() > MAX_MESSAGE_BYTES => {
                        Incoming::Closed(TransportError::new(
                            "message_too_large",
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
                                "invalid_utf8",
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
            child,
            stdin,
            lines,
            closed: None,
        })
    }

    fn write_line(&mut self, json: &str) -> Result<(), TransportError> {
        if json.contains('\n') {
            // The gate writes requests on one line; anything else would split a message.
            return Err(TransportError::new(
                "invalid_message",
                "a message to send contains a newline",
            ));
        }
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| TransportError::new("server_closed", "the server's input is closed"))?;
        stdin
            .write_all(json.as_bytes())
            .and_then(|()| stdin.write_all(b"\n"))
            .and_then(|()| stdin.flush())
            .map_err(|e| {
                TransportError::new("server_closed", format!("writing to the server: {e}"))
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
                    Routed::Other => {}
                },
                Ok(Incoming::Closed(e)) => {
                    self.closed = Some(e.clone());
                    return Err(e);
                }
                Err(RecvTimeoutError::Timeout) => {
                    if !waiting.tick(started.elapsed()) {
                        return Err(TransportError::new("cancelled", "the wait was cancelled"));
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let e = TransportError::new("server_closed", "the server's output ended");
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

impl Drop for StdioTransport {
    fn drop(&mut self) {
        // Closing stdin is how a stdio server is told to stop; then give it a moment.
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
        assert_eq!(e.map(|e| e.code), Some("spawn_failed"));
    }
}
