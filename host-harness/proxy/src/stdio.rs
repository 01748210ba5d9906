//! The stdio wrapper: `mrtr-gate proxy -- COMMAND ARGS` spawns the server without a shell,
//! relays JSON-RPC lines both ways through the [`crate::engine`], and ends every binding
//! when either side goes away (the client: `cancelled`; the server: an error to every call
//! in flight). The server's stderr goes where the caller says (a private log file), never
//! to the client's protocol stream.
//! A client's `notifications/cancelled` for a gated call is the engine's to map
//! ([`Engine::on_client`]).

use crate::engine::{Action, Engine};
use crate::errors::Refusal;
use crate::ids::MAX_MESSAGE_BYTES;
use mrtr_gate_host::GateApi;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader,
};
use tokio::sync::mpsc;

/// How long a server is given to exit once the client has gone and its stdin is closed.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// What a server's line the relay refuses to read counts as: no message at all (with one
/// gated call waiting the gate names it unreadable and the call ends; else it is dropped).
const UNREADABLE: &str = "";

/// Lines queued for one side before the reader of the other side waits.
const QUEUE: usize = 256;

/// What is done to the server's command before it is spawned (its isolation); an error
/// means it is not spawned.
pub type Prepare = Box<dyn FnOnce(&mut std::process::Command) -> Result<(), String> + Send>;

/// What a writer task is told.
enum Out {
    Line(String),
    Close,
}

/// What the engine's thread is told.
enum Event {
    Client(String),
    Server(String),
    ClientGone,
    ServerGone,
    /// The proxy was told to stop: nothing more comes from the client; the calls in flight
    /// may finish until this instant, then every call and open round ends `cancelled`.
    Stop(std::time::Instant),
}

/// When a relay is told to stop, and how long it then drains.
#[derive(Debug)]
pub struct Stop<S> {
    /// Completes when the proxy is told to stop (SIGINT, SIGTERM).
    pub signal: S,
    /// How long the calls in flight then have to finish.
    pub drain_timeout: Duration,
}

/// How a relay ended.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ended {
    /// The server exited: its status (a code, or the signal that ended it); none when it did
    /// not exit within a moment of its client's going and was killed.
    Server(Option<std::process::ExitStatus>),
    /// The proxy was told to stop and drained: every binding it held ended in the trail.
    Stopped,
}

/// Spawn `argv` (no shell) with its stderr to `stderr`, made ready by `prepare` (the caller's
/// isolation of the server: a session of its own, Landlock), and relay `client_in`/`client_out`
/// through the engine `make_engine` builds until the server's output ends, or until `stop`'s
/// signal completes: then the client is read no more, the calls in flight get its drain
/// timeout to finish, and every call and open round left ends `cancelled` before both sides
/// are closed.
///
/// The engine lives on a thread of its own: gate calls are synchronous (and the component's
/// deadline reads the calling thread's CPU clock), so they never hold up the relay's tasks,
/// and a gate need not be `Send`.
pub async fn relay<G, F, R, W>(
    make_engine: F,
    argv: &[String],
    stderr: Stdio,
    prepare: Prepare,
    client_in: R,
    client_out: W,
    stop: Stop<impl std::future::Future<Output = ()>>,
) -> Result<Ended, String>
where
    G: GateApi + 'static,
    F: FnOnce() -> Engine<G> + Send + 'static,
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (program, args) = argv.split_first().ok_or("no server command to run")?;
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(true);
    prepare(command.as_std_mut())?;
    let mut child = command
        .spawn()
        .map_err(|e| format!("could not start the server `{program}`: {e}"))?;
    let server_in = child.stdin.take().ok_or("the server has no stdin")?;
    let server_out = child.stdout.take().ok_or("the server has no stdout")?;
    let (to_server, server_queue) = mpsc::channel(QUEUE);
    let (to_client, client_queue) = mpsc::channel(QUEUE);
    let server_writer = tokio::spawn(write_lines(server_in, server_queue));
    let client_writer = tokio::spawn(write_lines(client_out, client_queue));
    let (events, inbox) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("mrtr-gate-engine".into())
        .spawn(move || run_engine(make_engine, &inbox, &to_server, &to_client))
        .map_err(|e| format!("could not start the gate's thread: {e}"))?;
    let mut from_client = {
        let events = events.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(client_in);
            while let Ok(Some(line)) = read_line(&mut lines).await {
                let _ = events.send(Event::Client(line));
            }
            let _ = events.send(Event::ClientGone);
        })
    };
    let stopping = events.clone();
    let mut from_server = tokio::spawn(async move {
        let mut lines = BufReader::new(server_out);
        while let Ok(Some(line)) = read_line(&mut lines).await {
            let _ = events.send(Event::Server(line));
        }
        let _ = events.send(Event::ServerGone);
    });
    let Stop {
        signal: stop,
        drain_timeout,
    } = stop;
    tokio::pin!(stop);
    let mut stopped = false;
    tokio::select! {
        _ = &mut from_server => {}
        _ = &mut from_client => {
            // The client is gone and the server's stdin closed: it has a moment to exit.
            if tokio::time::timeout(EXIT_GRACE, &mut from_server).await.is_err() {
                let _ = child.start_kill();
                let _ = from_server.await;
            }
        }
        () = &mut stop => {
            stopped = true;
            from_client.abort();
            let _ = stopping.send(Event::Stop(std::time::Instant::now() + drain_timeout));
            // The engine closes the server's stdin once the drain is over: it then has a
            // moment to exit.
            if tokio::time::timeout(drain_timeout + EXIT_GRACE, &mut from_server).await.is_err() {
                let _ = child.start_kill();
                let _ = from_server.await;
            }
        }
    }
    from_client.abort();
    // The engine closes the client's stream once it has told the client everything.
    let _ = tokio::time::timeout(EXIT_GRACE, client_writer).await;
    server_writer.abort();
    let status = match tokio::time::timeout(EXIT_GRACE, child.wait()).await {
        Ok(Ok(status)) => Some(status),
        _ => {
            let _ = child.start_kill();
            None
        }
    };
    Ok(if stopped {
        Ended::Stopped
    } else {
        Ended::Server(status)
    })
}

/// The engine's thread: one event at a time, in the order the readers saw them.
fn run_engine<G: GateApi>(
    make_engine: impl FnOnce() -> Engine<G>,
    inbox: &std::sync::mpsc::Receiver<Event>,
    to_server: &mpsc::Sender<Out>,
    to_client: &mpsc::Sender<Out>,
) {
    let mut engine = make_engine();
    // A writer that is gone has nobody left to tell.
    let send = |queue: &mpsc::Sender<Out>, out: Out| {
        let _ = queue.blocking_send(out);
    };
    let mut swept = std::time::Instant::now();
    // While stopping: when the calls in flight stop being waited for.
    let mut draining: Option<std::time::Instant> = None;
    loop {
        if let Some(until) = draining
            && (engine.in_flight() == 0 || std::time::Instant::now() >= until)
        {
            engine.on_client_gone();
            send(to_server, Out::Close);
            send(to_client, Out::Close);
            draining = None;
        }
        let wait = draining.map_or(engine.sweep_every(), |until| {
            until
                .saturating_duration_since(std::time::Instant::now())
                .min(engine.sweep_every())
        });
        let event = match inbox.recv_timeout(wait) {
            Ok(event) => Some(event),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => None,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        };
        if swept.elapsed() >= engine.sweep_every() {
            engine.sweep();
            swept = std::time::Instant::now();
        }
        let Some(event) = event else {
            continue;
        };
        let action = match event {
            // A carriage return inside a line is JSON whitespace to the proxy but a line end
            // to readers that take `\r` as one (Python's universal newlines, Node's readline):
            // the other side would read messages the gate never saw. Such a line is refused,
            // never relayed.
            Event::Client(line) if line.contains('\r') => Action::ToClient(
                Refusal::message(
                    "invalid_message",
                    "a carriage return inside a line: one message per line, ended by \\n",
                )
                .response("null"),
            ),
            Event::Server(line) if line.contains('\r') => engine.on_server(UNREADABLE),
            Event::Client(line) => engine.on_client(&line),
            Event::Server(line) => engine.on_server(&line),
            Event::ClientGone => {
                engine.on_client_gone();
                send(to_server, Out::Close);
                continue;
            }
            Event::ServerGone => {
                for reply in engine.on_server_gone() {
                    send(to_client, Out::Line(reply));
                }
                send(to_client, Out::Close);
                continue;
            }
            Event::Stop(until) => {
                draining = Some(until);
                continue;
            }
        };
        match action {
            Action::ToServer(text) | Action::Gated { text, .. } => send(to_server, Out::Line(text)),
            Action::ToClient(text) => send(to_client, Out::Line(text)),
            Action::Drop(why) => {
                crate::log::info("dropped", &format!("dropped {why}"), &[("why", why)]);
            }
            // One client: its consent is asked inline (no engine here defers it).
            Action::AskConsent(..) => {
                crate::log::info(
                    "dropped",
                    "dropped a retry: consent deferred over stdio",
                    &[],
                );
            }
        }
    }
}

async fn write_lines<W: AsyncWrite + Unpin>(mut out: W, mut queue: mpsc::Receiver<Out>) {
    while let Some(Out::Line(mut line)) = queue.recv().await {
        line.push('\n');
        if out.write_all(line.as_bytes()).await.is_err() || out.flush().await.is_err() {
            break;
        }
    }
    let _ = out.shutdown().await;
}

/// The next line without its end (`\n`, or `\r\n`), empty lines skipped; `None` at the end
/// of input. A line over [`MAX_MESSAGE_BYTES`] or not UTF-8 ends the stream: nothing after
/// it can be framed with certainty.
async fn read_line<R: AsyncBufRead + Unpin>(input: &mut R) -> std::io::Result<Option<String>> {
    loop {
        let mut bytes = Vec::new();
        let n = (&mut *input)
            .take(MAX_MESSAGE_BYTES as u64 + 2)
            .read_until(b'\n', &mut bytes)
            .await?;
        if n == 0 {
            return Ok(None);
        }
        if bytes.last() != Some(&b'\n') && n > MAX_MESSAGE_BYTES {
            return Err(std::io::Error::other("a line over the message cap"));
        }
        while matches!(bytes.last(), Some(b'\n' | b'\r')) {
            bytes.pop();
        }
        if bytes.is_empty() {
            continue;
        }
        return String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| std::io::Error::other("a line that is not utf-8"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineConfig;
    use crate::ids::IdMinter;
    use mrtr_gate_host::core::memory::{
        ManualClock, MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent,
    };
    use mrtr_gate_host::core::{Policy, ServerIdentity};
    use mrtr_gate_host::{HostServices, NativeGate};
    use std::sync::Arc;

    /// Answers every request with a tool result under its id (Python's own JSON spacing),
    /// and says something on stderr first.
    const SERVER: &str = r#"
import json, sys
sys.stderr.write("server noise\n"); sys.stderr.flush()
for line in sys.stdin:
    m = json.loads(line)
    if "id" in m and "method" in m:
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {"content": [{"type": "text", "text": m["method"]}]}}), flush=True)
"#;

    fn engine() -> Engine<NativeGate> {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let storage = Arc::new(MemoryStorage::new(clock.clone()));
        let services = HostServices {
            clock,
            storage: storage.clone(),
            consent: Arc::new(ScriptedConsent::new(ScriptedAnswer::Grant)),
            audit: Arc::new(MemoryAudit::new()),
        };
        let policy = Policy::default();
        Engine::new(
            NativeGate::new(services),
            EngineConfig {
                server: ServerIdentity::endpoint("stdio:python3").unwrap(),
                principal: crate::engine::Principal {
                    user: "alice".into(),
                    tenant: "acme".into(),
                },
                rounds: crate::rounds::RoundIndex::new(
                    storage,
                    policy.round_trip_lifetime_ms + 60_000,
                ),
                policy,
                allow_legacy_server_requests: false,
                allow_ungated_input: false,
                deferred_consent: None,
                policies: None,
            },
            IdMinter::with_nonce(1),
        )
    }

    type Relay = tokio::task::JoinHandle<Result<Ended, String>>;
    type ClientIn = BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>;
    type ClientOut = tokio::io::WriteHalf<tokio::io::DuplexStream>;

    /// The relay over `argv` with a fresh engine and no isolation, on a duplex pipe: its task,
    /// and the client's reading and writing ends.
    fn started(argv: Vec<String>) -> (Relay, ClientIn, ClientOut) {
        let (client, proxy_end) = tokio::io::duplex(1 << 16);
        let (proxy_in, proxy_out) = tokio::io::split(proxy_end);
        let proxy = tokio::spawn(async move {
            relay(
                engine,
                &argv,
                Stdio::null(),
                Box::new(|_| Ok(())),
                proxy_in,
                proxy_out,
                Stop {
                    signal: std::future::pending(),
                    drain_timeout: Duration::from_secs(1),
                },
            )
            .await
        });
        let (client_in, client_out) = tokio::io::split(client);
        (proxy, BufReader::new(client_in), client_out)
    }

    fn answer(id: &str, text: &str) -> String {
        format!(
            r#"{{"jsonrpc": "2.0", "id": {id}, "result": {{"content": [{{"type": "text", "text": "{text}"}}]}}}}"#
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_gated_call_and_an_ungated_one_go_through_a_real_child_and_back() {
        let argv = vec!["python3".to_owned(), "-c".to_owned(), SERVER.to_owned()];
        let (proxy, mut client_in, mut client_out) = started(argv);
        let call = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        client_out
            .write_all(format!("{call}\n").as_bytes())
            .await
            .unwrap();
        let back = read_line(&mut client_in).await.unwrap().unwrap();
        assert_eq!(back, answer("7", "tools/call"), "byte-exact but for the id");
        let list = r#"{"jsonrpc":"2.0","id":"x","method":"tools/list"}"#;
        client_out
            .write_all(format!("\n{list}\r\n").as_bytes())
            .await
            .unwrap();
        let back = read_line(&mut client_in).await.unwrap().unwrap();
        assert_eq!(back, answer(r#""x""#, "tools/list"));
        // A carriage return inside a line would be a line end to the server's reader (Python's
        // universal newlines): the line is refused, and the server never sees it.
        let smuggled = format!("{{\"a\":\r{list}\r}}\n");
        client_out.write_all(smuggled.as_bytes()).await.unwrap();
        let back = read_line(&mut client_in).await.unwrap().unwrap();
        assert!(
            back.contains("-31004") && back.contains("carriage return"),
            "{back}"
        );
        // A batch never reaches the server.
        client_out
            .write_all(format!("[{call}]\n").as_bytes())
            .await
            .unwrap();
        let back = read_line(&mut client_in).await.unwrap().unwrap();
        assert!(
            back.contains("-31004") && back.contains("batch_message"),
            "{back}"
        );
        // The client leaves: the server's stdin closes, it exits, the relay ends.
        client_out.shutdown().await.unwrap();
        drop(client_out);
        let exit = tokio::time::timeout(Duration::from_secs(10), proxy).await;
        assert!(matches!(exit.unwrap().unwrap(), Ok(Ended::Server(Some(s))) if s.success()));
        assert_eq!(read_line(&mut client_in).await.unwrap(), None);
    }

    /// Echoes every line it reads back as a notification (never fails on what it cannot
    /// parse, so a smuggled fragment shows up instead of ending the run); answers a
    /// `tools/call` with a carriage return inside its line, and a `ping` as usual.
    const CR_SERVER: &str = r#"
import json, sys
for line in sys.stdin:
    print(json.dumps({"jsonrpc": "2.0", "method": "echo", "params": {"line": line}}), flush=True)
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("method") == "tools/call":
        sys.stdout.write('{"jsonrpc":"2.0","id":' + json.dumps(m["id"]) + ',\r"result":{"content":[]}}\n')
        sys.stdout.flush()
    elif m.get("method") == "ping":
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {}}), flush=True)
"#;

    /// The next line for the client that is not the server's echo of what it read, and the
    /// echoes before it.
    async fn next_answer<R: AsyncBufRead + Unpin>(input: &mut R) -> (String, Vec<String>) {
        let mut echoes = Vec::new();
        loop {
            let line = read_line(input).await.unwrap().expect("the relay ended");
            if line.contains(r#""method": "echo""#) {
                echoes.push(line);
            } else {
                return (line, echoes);
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_carriage_return_inside_a_line_is_refused_both_ways() {
        let argv = vec!["python3".to_owned(), "-c".to_owned(), CR_SERVER.to_owned()];
        let (proxy, mut client_in, mut client_out) = started(argv);
        // Client to server: JSON to the proxy, three lines to Python's universal newlines.
        let ping = r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#;
        let smuggled = format!("{{\"a\":\r{ping}\r}}\n{ping}\n");
        client_out.write_all(smuggled.as_bytes()).await.unwrap();
        let (back, echoes) = next_answer(&mut client_in).await;
        assert!(
            back.contains("-31004") && back.contains("carriage return"),
            "{back}"
        );
        let (back, echoes_after) = next_answer(&mut client_in).await;
        assert_eq!(back, r#"{"jsonrpc": "2.0", "id": "p", "result": {}}"#);
        let seen: Vec<String> = echoes.into_iter().chain(echoes_after).collect();
        assert_eq!(seen.len(), 1, "the server read only the ping: {seen:?}");
        // Server to client: a judged answer with a carriage return inside is unreadable, and
        // the client gets the gate's refusal, never the line.
        let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        client_out
            .write_all(format!("{call}\n").as_bytes())
            .await
            .unwrap();
        let (back, _) = next_answer(&mut client_in).await;
        assert!(
            back.contains("-31000") && !back.contains('\r'),
            "the gate refuses the line: {back:?}"
        );
        client_out.shutdown().await.unwrap();
        drop(client_out);
        let exit = tokio::time::timeout(Duration::from_secs(30), proxy).await;
        assert!(matches!(exit.unwrap().unwrap(), Ok(Ended::Server(Some(s))) if s.success()));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_server_that_dies_mid_call_gives_the_client_an_error() {
        // Reads one line and exits without answering.
        let argv = vec![
            "python3".to_owned(),
            "-c".to_owned(),
            "import sys; sys.stdin.readline()".to_owned(),
        ];
        let (proxy, mut client_in, mut client_out) = started(argv);
        let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{}}}"#;
        client_out
            .write_all(format!("{call}\n").as_bytes())
            .await
            .unwrap();
        let back = read_line(&mut client_in).await.unwrap().unwrap();
        assert!(
            back.contains("-31003") && back.contains("server_closed"),
            "{back}"
        );
        let exit = tokio::time::timeout(Duration::from_secs(10), proxy).await;
        assert!(matches!(exit.unwrap().unwrap(), Ok(Ended::Server(Some(s))) if s.success()));
    }
}
