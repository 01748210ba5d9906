//! The stdio transport. The client is given a server command line to spawn, whose process is
//! the relay ([`crate::relay`]): it connects to this listener on loopback TCP and copies its
//! stdin and stdout to the connection byte for byte. So each connection is one stdio server
//! the client started, and its bytes are the client's newline-delimited JSON-RPC messages.
//!
//! Each line is recorded whole before it is answered (invalid UTF-8 replaced; a line over
//! [`LINE_LIMIT`] is recorded as such, without its bytes, and skipped to its end), then
//! answered by the scenario ([`crate::serve`]), and the reply is framed here: one line per
//! message, and [`Reply::Close`] ends the connection, so the relay exits and the client sees
//! its server die. Hostile input never ends the connection: only its end does.
//!
//! A held call ([`crate::hold`]) gets its notification line and nothing else until it
//! settles: a `notifications/cancelled` line naming it, or this connection's end (the client
//! closed the server's stdin, or it died), cancels it; the fallback writes its plain result.
//! A request read after the call was held has its answer written once the hold has settled,
//! preceded by the late round if it is the first to get it; the reader goes on meanwhile (the
//! cancellation may be the next line). For the pacing check a line starts when the read that
//! brought its first byte returned, and is answered when its answer is about to be written.

use crate::hold::{HoldRecord, Phase};
use crate::listen::Listener;
use crate::record::Request;
use crate::respond::Reply;
use crate::scenario::{Answer, Scenario};
use crate::serve::Served;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;

/// A line longer than this (without its newline) is recorded as oversized, not kept: the
/// HTTP endpoint's body limit.
pub const LINE_LIMIT: usize = 16 << 20;

/// How a line is recorded (`http_method` of its [`Request`]).
pub const LINE: &str = "LINE";
/// How a line over [`LINE_LIMIT`] is recorded (its body empty).
pub const OVERSIZED_LINE: &str = "OVERSIZED_LINE";

/// Replies framed but not yet written, per connection: a client that does not read stops
/// being read (the backpressure a socket gives).
const QUEUED_FRAMES: usize = 64;

/// The running stdio endpoint.
pub struct Server {
    listener: Listener,
    shared: Arc<Served>,
}

impl Server {
    /// Starts serving `scenario`, whose URL placeholders name the canary at `canary`; a held
    /// call falls back after `fallback`.
    pub fn start(scenario: Arc<Scenario>, canary: u16, fallback: Duration) -> io::Result<Server> {
        let shared = Arc::new(Served::new(scenario, canary, fallback));
        let serving = shared.clone();
        let listener = Listener::start(move |stream| serve_connection(serving.clone(), stream))?;
        Ok(Server { listener, shared })
    }

    /// The address the relay connects to.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.listener.port())
    }

    /// The client's last word: the server command line (`relay` with the address appended,
    /// each word shell-quoted), itself quoted as one shell word.
    pub fn last_word(&self, relay: &[String]) -> io::Result<String> {
        let mut words: Vec<&str> = relay.iter().map(String::as_str).collect();
        let address = self.address();
        words.push(&address);
        let line = shlex::try_join(words).map_err(|e| io::Error::other(e.to_string()))?;
        shlex::try_quote(&line)
            .map(|q| q.into_owned())
            .map_err(|e| io::Error::other(e.to_string()))
    }

    /// Waits for every relay connection to end (the client has exited) and returns the
    /// requests, whether every connection ended within `guard`, and the held call's outcome.
    pub async fn finish(self, guard: Duration) -> (Vec<Request>, bool, Option<HoldRecord>) {
        let ended = self.listener.finish(guard).await;
        let (requests, hold) = self.shared.take();
        (requests, ended, hold)
    }
}

/// What is written on a connection for one reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// These messages, one line each, in order.
    Lines(Vec<String>),
    /// End the connection: the relay exits and the client sees its server die.
    Close,
}

/// stdio's framing of a reply: the one place a new kind of reply is written on stdio. A held
/// call's frame is its notification (the connection starts the hold).
pub fn frame(reply: Reply) -> Frame {
    match reply {
        Reply::Json(text) => Frame::Lines(vec![text]),
        Reply::Sse(events) => Frame::Lines(events),
        Reply::Hold { notify, .. } => Frame::Lines(vec![notify]),
        Reply::Close => Frame::Close,
    }
}

/// A frame queued for the writer.
struct Queued {
    frame: Frame,
    /// The request it answers (its answer time is noted as it is written).
    seq: Option<usize>,
    /// The request was read while a call was held: the late round may go first.
    after_hold: bool,
}

/// Why `scenario` cannot be served on stdio, if it cannot: a message written verbatim that
/// holds a line break would reach the client as two lines (a carriage return is a line end
/// to readers with universal newlines), so the scenario's bytes could not be its bytes.
pub fn inexpressible(scenario: &Scenario) -> Option<String> {
    fn breaks(answer: &Answer) -> bool {
        answer
            .raw
            .as_deref()
            .is_some_and(|raw| raw.contains(['\n', '\r']))
            || answer.sse.iter().flatten().any(breaks)
    }
    scenario.tools.iter().find_map(|tool| {
        tool.legs
            .iter()
            .chain(std::iter::once(&tool.then))
            .any(breaks)
            .then(|| {
                format!(
                    "tool `{}` answers a raw message holding a line break, which stdio's newline-delimited framing cannot carry",
                    tool.name
                )
            })
    })
}

/// One line read off a connection.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// A line, without its `\n` (the last one may lack it).
    Text(Vec<u8>),
    /// A line longer than the limit, skipped to its end.
    Oversized,
    /// The connection's end.
    End,
}

/// Reads one line of at most `limit` bytes (its `\n` not counted), never holding more, and
/// when its first byte came: `filled` is when the last read off the connection returned.
async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    limit: usize,
    filled: &mut Instant,
) -> io::Result<(Line, Instant)> {
    let mut line = Vec::new();
    let mut oversized = false;
    let mut started = None;
    loop {
        let fresh = reader.buffer().is_empty();
        let buffer = reader.fill_buf().await?;
        if fresh {
            *filled = Instant::now();
        }
        let started = *started.get_or_insert(*filled);
        if buffer.is_empty() {
            let line = if oversized {
                Line::Oversized
            } else if line.is_empty() {
                Line::End
            } else {
                Line::Text(line)
            };
            return Ok((line, started));
        }
        let newline = buffer.iter().position(|b| *b == b'\n');
        let content = buffer
            .get(..newline.unwrap_or(buffer.len()))
            .unwrap_or_default();
        if !oversized {
            if line.len() + content.len() > limit {
                oversized = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(content);
            }
        }
        let taken = newline.map_or(buffer.len(), |at| at + 1);
        reader.consume(taken);
        if newline.is_some() {
            let line = if oversized {
                Line::Oversized
            } else {
                Line::Text(line)
            };
            return Ok((line, started));
        }
    }
}

/// Serves one relay connection to its end.
async fn serve_connection(shared: Arc<Served>, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let path = format!("relay:{}", shared.connection());
    let (read, write) = stream.into_split();
    let (frames, queued) = mpsc::channel(QUEUED_FRAMES);
    let writer = tokio::spawn(write_frames(write, queued, shared.clone()));
    let mut reader = BufReader::new(read);
    let mut filled = Instant::now();
    let mut holding = false;
    // A read error ends the connection as its end does.
    while let Ok((line, started)) = read_line(&mut reader, LINE_LIMIT, &mut filled).await {
        let request = match line {
            Line::End => break,
            Line::Oversized => shared.arrive(OVERSIZED_LINE, &path, String::new(), started),
            Line::Text(bytes) => shared.arrive(
                LINE,
                &path,
                String::from_utf8_lossy(&bytes).into_owned(),
                started,
            ),
        };
        let after_hold = request.is_call() && shared.hold().phase() != Phase::Idle;
        let id = request.id.clone().unwrap_or_default();
        let reply = shared.answer(&request).reply;
        let seq = shared.record(request);
        let frame = match reply {
            None => continue,
            Some(Reply::Hold { notify, late }) => match shared.start_hold(&id, late) {
                Ok(()) => {
                    holding = true;
                    tokio::spawn(fall_back(shared.clone(), id, frames.clone()));
                    Frame::Lines(vec![notify])
                }
                Err(error) => Frame::Lines(vec![error]),
            },
            Some(reply) => frame(reply),
        };
        let close = frame == Frame::Close;
        // A writer that failed (the relay is gone) leaves the lines still to read recorded.
        let _ = frames
            .send(Queued {
                frame,
                seq: Some(seq),
                after_hold,
            })
            .await;
        if close {
            break;
        }
    }
    if holding {
        // The server's stdin closed or the client is gone: the held call cannot be answered.
        shared.hold().cancel("closed");
    }
    drop(frames);
    drop(reader);
    let _ = writer.await;
}

/// Writes the held call `id`'s plain result if the fallback answers it.
async fn fall_back(shared: Arc<Served>, id: String, frames: mpsc::Sender<Queued>) {
    if let Some(result) = shared.hold().held(&id).await {
        let _ = frames
            .send(Queued {
                frame: Frame::Lines(vec![result]),
                seq: None,
                after_hold: false,
            })
            .await;
    }
}

/// Writes frames in order until the connection is closed or every sender is gone.
async fn write_frames(
    mut write: OwnedWriteHalf,
    mut queued: mpsc::Receiver<Queued>,
    shared: Arc<Served>,
) {
    while let Some(Queued {
        frame,
        seq,
        after_hold,
    }) = queued.recv().await
    {
        let mut messages = match frame {
            Frame::Lines(messages) => messages,
            Frame::Close => {
                let _ = write.shutdown().await;
                return;
            }
        };
        if let Some(seq) = seq {
            if after_hold && let Some(round) = shared.hold().late_for(seq).await {
                messages.insert(0, round);
            }
            // Before its bytes are written: the client can read it only later, so a gap
            // measured from here is never shorter than the time the client waited.
            shared.answered(seq, Instant::now());
        }
        for message in messages {
            let mut bytes = message.into_bytes();
            bytes.push(b'\n');
            if write.write_all(&bytes).await.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded;
    use tokio::io::AsyncReadExt;

    const FALLBACK: Duration = Duration::from_secs(60);

    fn scenario(name: &str) -> Arc<Scenario> {
        let all = embedded::scenarios().expect("valid scenarios");
        Arc::new(
            all.into_iter()
                .find(|s| s.name == name)
                .expect("an embedded scenario"),
        )
    }

    /// Writes `input`, ends the writing side, and returns every line the server wrote.
    async fn exchange(server: &Server, input: &[u8]) -> Vec<String> {
        let mut stream = TcpStream::connect(server.address())
            .await
            .expect("connects");
        stream.write_all(input).await.expect("written");
        stream.shutdown().await.expect("half-closed");
        let mut out = Vec::new();
        stream.read_to_end(&mut out).await.expect("read to the end");
        String::from_utf8(out)
            .expect("UTF-8")
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[tokio::test]
    async fn lines_are_bounded_and_the_last_may_lack_its_newline() {
        let input: &[u8] = b"ab\n\ntoo-long\nxyz";
        let mut reader = BufReader::with_capacity(2, input);
        let mut filled = Instant::now();
        let mut lines = Vec::new();
        loop {
            let (line, _) = read_line(&mut reader, 4, &mut filled).await.expect("read");
            if line == Line::End {
                break;
            }
            lines.push(line);
        }
        assert_eq!(
            lines,
            vec![
                Line::Text(b"ab".to_vec()),
                Line::Text(Vec::new()),
                Line::Oversized,
                Line::Text(b"xyz".to_vec()),
            ]
        );
    }

    #[tokio::test]
    async fn hostile_lines_are_recorded_and_the_connection_goes_on() {
        let server =
            Server::start(scenario("mrtr-control-form-round"), 9, FALLBACK).expect("started");
        let mut input = Vec::new();
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n");
        input.extend_from_slice(b"\xff\xfe{\"id\":\x80}\n");
        input.extend_from_slice(b"not json at all\n");
        input.extend(std::iter::repeat_n(b'x', LINE_LIMIT + 1));
        input.push(b'\n');
        input.extend_from_slice(b"[1,2]\n\r\n");
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}\n");
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"book\"}}");
        let lines = exchange(&server, &input).await;
        let (requests, ended, _) = server.finish(Duration::from_secs(30)).await;
        assert!(ended);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].starts_with("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{"));
        assert!(lines[0].contains("probe_done"));
        assert_eq!(lines[1], "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"result\":{}}");
        assert!(lines[2].contains("\"id\":3,") && lines[2].contains("S-control"));
        let methods: Vec<&str> = requests.iter().map(|r| r.http_method.as_str()).collect();
        assert_eq!(
            methods,
            [LINE, LINE, LINE, OVERSIZED_LINE, LINE, LINE, LINE, LINE]
        );
        assert!(requests[1].body.starts_with("\u{fffd}\u{fffd}{"));
        assert!(requests[1].value.is_none() && requests[2].value.is_none());
        assert!(requests[3].body.is_empty());
        assert_eq!(requests[4].body, "[1,2]");
        assert_eq!(requests[5].body, "\r");
        assert_eq!(requests[7].leg, Some(0));
        assert!(requests.iter().all(|r| r.path == "relay:1"));
        assert_eq!(
            requests.iter().map(|r| r.seq).collect::<Vec<_>>(),
            (0..8).collect::<Vec<_>>()
        );
    }

    #[tokio::test]
    async fn an_sse_reply_is_one_line_per_message_in_order() {
        let server =
            Server::start(scenario("mrtr-foreign-id-round"), 9, FALLBACK).expect("started");
        let lines = exchange(
            &server,
            b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"lookup\"}}\n",
        )
        .await;
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].starts_with("{\"jsonrpc\":\"2.0\",\"id\":\"probe-ghost-1\","));
        assert!(lines[1].starts_with("{\"jsonrpc\":\"2.0\",\"id\":7,\"result\""));
        let _ = server.finish(Duration::from_secs(30)).await;
    }

    #[tokio::test]
    async fn close_ends_the_connection_and_legs_go_on_across_connections() {
        let server = Server::start(scenario("mrtr-retry-after-transport-error"), 9, FALLBACK)
            .expect("started");
        let call = |id: u32| {
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"once\",\"requestState\":\"S-once\"}}}}\n"
            )
        };
        let mut stream = TcpStream::connect(server.address())
            .await
            .expect("connects");
        stream.write_all(call(1).as_bytes()).await.expect("written");
        stream.write_all(call(2).as_bytes()).await.expect("written");
        let mut out = Vec::new();
        // The server closes after the second call's line, without an answer: the read ends
        // although this side never closed.
        let _ = stream.read_to_end(&mut out).await;
        let text = String::from_utf8(out).expect("UTF-8");
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(text.contains("\"id\":1,") && text.contains("S-once"));
        let again = exchange(&server, call(3).as_bytes()).await;
        assert_eq!(again.len(), 1);
        assert!(
            again[0].contains("\"resultType\":\"complete\""),
            "{again:?}"
        );
        let (requests, ended, _) = server.finish(Duration::from_secs(30)).await;
        assert!(ended);
        let legs: Vec<_> = requests.iter().map(|r| (r.path.as_str(), r.leg)).collect();
        assert_eq!(
            legs,
            [
                ("relay:1", Some(0)),
                ("relay:1", Some(1)),
                ("relay:2", Some(2))
            ]
        );
    }

    #[test]
    fn the_last_word_is_one_shell_word_holding_the_server_line() {
        let runtime = tokio::runtime::Runtime::new().expect("a runtime");
        let _guard = runtime.enter();
        let server =
            Server::start(scenario("mrtr-control-form-round"), 9, FALLBACK).expect("started");
        let relay = vec![
            "/tmp/it's here/mrtr-gate".to_owned(),
            "probe".into(),
            "--relay".into(),
        ];
        let word = server.last_word(&relay).expect("quoted");
        let outer = shlex::split(&word).expect("one word");
        assert_eq!(outer.len(), 1);
        let inner = shlex::split(&outer[0]).expect("a command line");
        let mut expected = relay.clone();
        expected.push(server.address());
        assert_eq!(inner, expected);
    }

    #[test]
    fn no_embedded_scenario_is_inexpressible_but_a_raw_line_break_is() {
        for s in embedded::scenarios().expect("valid") {
            assert_eq!(inexpressible(&s), None, "{}", s.name);
        }
        let mut s = (*scenario("mrtr-duplicate-input-key")).clone();
        if let Some(raw) = s.tools[0].legs[0].raw.as_mut() {
            *raw = raw.replacen(',', ",\r\n", 1);
        }
        let why = inexpressible(&s).expect("a line break");
        assert!(why.contains("`pay`"), "{why}");
    }
}
