//! The reference a round-trip benchmark prints beside its own rows (issue 40): the same form
//! round's two requests sent by a plain HTTP/1.1 client, a `TcpStream` with no MCP library
//! and no gate, over one kept-alive connection to the same server, in the same run. A ratio
//! of two slow rows can look fine (the gate's overhead read 1.007 while a test server stalled
//! every request by 40 ms); the reference's own figure shows the transport's floor, so a
//! regression there is seen as one.
//!
//! The two requests are the ones the MCP client sends: recorded from one round of
//! `mrtr-gate-client` with the gate off, then sent again with fresh ids and each round's own
//! `requestState`.

// serde_json's `value["key"]` yields `null` for anything missing; it never panics.
#![allow(clippy::indexing_slicing)]

use crate::bench_client::GateOff;
use crate::timed::Stopwatch;
use mrtr_gate_client::transport::{Outgoing, Transport, TransportError, Waiting};
use mrtr_gate_client::{AnswersFile, Client, ClientConfig, HttpTransport};
use mrtr_gate_host::core::ServerIdentity;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex, PoisonError};

/// One request as the MCP client sent it: its headers' values and its text.
#[derive(Clone, Debug)]
pub struct Recorded {
    method: String,
    name: Option<String>,
    protocol_version: String,
    json: String,
}

/// A transport that keeps what it sends.
struct Recording<T> {
    inner: T,
    sent: Arc<Mutex<Vec<Recorded>>>,
}

impl<T: Transport> Transport for Recording<T> {
    fn server(&self) -> &ServerIdentity {
        self.inner.server()
    }
    fn request(
        &mut self,
        request: Outgoing<'_>,
        waiting: &mut dyn Waiting,
    ) -> Result<String, TransportError> {
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Recorded {
                method: request.method.to_owned(),
                name: request.name.map(str::to_owned),
                protocol_version: request.protocol_version.to_owned(),
                json: request.json.to_owned(),
            });
        self.inner.request(request, waiting)
    }
    fn notify(&mut self, method: &str, json: &str) -> Result<(), TransportError> {
        self.inner.notify(method, json)
    }
}

/// The two requests of one form round of `tool`, as the MCP client (gate off) sends them to
/// `url`.
pub fn record_round(
    url: &str,
    tool: &str,
    arguments: &Value,
    answers: &str,
) -> Result<[Recorded; 2], String> {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let transport = Recording {
        inner: HttpTransport::connect(url).map_err(|e| e.to_string())?,
        sent: sent.clone(),
    };
    let answers = AnswersFile::parse(answers).map_err(|e| e.0)?;
    let mut client = Client::new(
        GateOff::default(),
        Box::new(transport),
        ClientConfig::new("alice", "acme"),
        Box::new(answers),
    );
    let done = client
        .call("tools/call", json!({"name": tool, "arguments": arguments}))
        .map_err(|e| e.to_string())?;
    if done.rounds != 1 {
        return Err(format!("the call took {} rounds, not one", done.rounds));
    }
    drop(client);
    let sent = sent.lock().unwrap_or_else(PoisonError::into_inner).clone();
    match <[Recorded; 2]>::try_from(sent) {
        Ok(both) => Ok(both),
        Err(sent) => Err(format!("a form round sent {} requests, not 2", sent.len())),
    }
}

/// A plain HTTP/1.1 client over one kept-alive connection, sending a recorded round again.
pub struct RawClient {
    connection: Connection,
    round: [Recorded; 2],
    next_id: u64,
    watch: Stopwatch,
}

impl RawClient {
    /// A client of `url` (`http://host:port/path`) that sends `round` again, each request
    /// timed on `watch`.
    pub fn new(url: &str, round: [Recorded; 2], watch: Stopwatch) -> Result<Self, String> {
        Ok(Self {
            connection: Connection::new(url)?,
            round,
            next_id: 1_000_000,
            watch,
        })
    }

    /// One form round: the call, then its retry with the round's `requestState`.
    pub fn round(&mut self) -> Result<(), String> {
        let [call, retry] = self.round.clone();
        let answer = self.send(&call, |_| {})?;
        let result = &answer["result"];
        if result["resultType"] != "input_required" {
            return Err(format!("the call did not ask for input: {answer}"));
        }
        let state = result.get("requestState").cloned();
        let done = self.send(&retry, |m| {
            if let Some(state) = state {
                m["params"]["requestState"] = state;
            }
        })?;
        if done.get("result").is_none() || done["result"]["resultType"] == "input_required" {
            return Err(format!("the retry did not complete: {done}"));
        }
        Ok(())
    }

    /// Sends `request` (a fresh id, then `edit`) and returns the response with its id.
    fn send(&mut self, request: &Recorded, edit: impl FnOnce(&mut Value)) -> Result<Value, String> {
        let mut message: Value = serde_json::from_str(&request.json).map_err(|e| e.to_string())?;
        self.next_id += 1;
        let id = self.next_id;
        message["id"] = json!(id);
        edit(&mut message);
        let body = message.to_string();
        let mut head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: {}\r\nMcp-Method: {}\r\n",
            self.connection.path(),
            self.connection.host(),
            request.protocol_version,
            request.method
        );
        if let Some(name) = &request.name {
            head.push_str(&format!("Mcp-Name: {name}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        let watch = self.watch.clone();
        let answer = watch.time(|| self.connection.exchange(&(head + &body)))?;
        answer.message(id)
    }
}

/// A response read whole off a [`Connection`].
#[derive(Clone, Debug)]
pub struct Answer {
    /// The body.
    pub body: String,
    /// Whether the body is an event stream.
    pub sse: bool,
    /// The `Mcp-Session-Id` header, if any.
    pub session: Option<String>,
}

impl Answer {
    /// The JSON-RPC response with `id` in the body (JSON, or an event stream's data).
    pub fn message(&self, id: u64) -> Result<Value, String> {
        let found = if self.sse {
            self.body
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|m| m["id"] == json!(id))
        } else {
            serde_json::from_str::<Value>(&self.body)
                .ok()
                .filter(|m| m["id"] == json!(id))
        };
        found.ok_or_else(|| format!("no response with id {id} in: {}", self.body))
    }
}

/// One kept-alive HTTP/1.1 connection (made on first use, again after the server closes it),
/// Nagle off: a request in one write, its response read whole.
pub struct Connection {
    host: String,
    path: String,
    stream: Option<BufReader<TcpStream>>,
}

impl Connection {
    /// A connection to `url` (`http://host:port/path`).
    pub fn new(url: &str) -> Result<Self, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("the reference client speaks http:// only: {url}"))?;
        let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
        Ok(Self {
            host: host.to_owned(),
            path: format!("/{path}"),
            stream: None,
        })
    }

    /// `host:port`.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The path requests go to.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Writes `request` (head and body) in one write and reads the whole response (a 2xx).
    pub fn exchange(&mut self, request: &str) -> Result<Answer, String> {
        let io = |e: std::io::Error| e.to_string();
        if self.stream.is_none() {
            let s = TcpStream::connect(&self.host).map_err(io)?;
            s.set_nodelay(true).map_err(io)?;
            // A server that stops answering fails the benchmark instead of hanging it.
            s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
                .map_err(io)?;
            self.stream = Some(BufReader::new(s));
        }
        let stream = self.stream.as_mut().ok_or("no connection")?;
        stream.get_mut().write_all(request.as_bytes()).map_err(io)?;
        let mut line = String::new();
        stream.read_line(&mut line).map_err(io)?;
        if !line.starts_with("HTTP/1.1 2") {
            return Err(format!("the server answered {}", line.trim()));
        }
        let (mut length, mut chunked, mut sse, mut close) = (None, false, false, false);
        let mut session = None;
        loop {
            line.clear();
            stream.read_line(&mut line).map_err(io)?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap_or((header, ""));
            let value = value.trim().to_ascii_lowercase();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.parse::<usize>().ok(),
                "transfer-encoding" => chunked = value.contains("chunked"),
                "content-type" => sse = value.starts_with("text/event-stream"),
                "connection" => close = value.contains("close"),
                "mcp-session-id" => {
                    let (_, original) = header.split_once(':').unwrap_or_default();
                    session = Some(original.trim().to_owned());
                }
                _ => {}
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                stream.read_line(&mut line).map_err(io)?;
                let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                    .map_err(|_| format!("a bad chunk size: {line:?}"))?;
                if size == 0 {
                    // The trailer, up to its empty line.
                    loop {
                        line.clear();
                        stream.read_line(&mut line).map_err(io)?;
                        if line.trim_end().is_empty() {
                            break;
                        }
                    }
                    break;
                }
                let at = body.len();
                body.resize(at + size, 0);
                stream.read_exact(&mut body[at..]).map_err(io)?;
                line.clear();
                stream.read_line(&mut line).map_err(io)?;
            }
        } else if let Some(n) = length {
            body.resize(n, 0);
            stream.read_exact(&mut body).map_err(io)?;
        } else {
            stream.read_to_end(&mut body).map_err(io)?;
            close = true;
        }
        if close {
            self.stream = None;
        }
        String::from_utf8(body)
            .map(|body| Answer { body, sse, session })
            .map_err(|e| e.to_string())
    }
}

/// An upstream at no cost: answers a recorded round's two requests with the real server's
/// own two answers (recorded once, each sent back under the request's id), as JSON, on a
/// thread per connection. In front of it a proxy's throughput is the proxy's own, which is
/// what comparing one engine with a pool needs: against the Python server the server is the
/// bottleneck.
pub struct FastUpstream {
    /// Its endpoint.
    pub url: String,
}

impl FastUpstream {
    /// Records a form round of `tool` at `real` (the two answers the real server gives), then
    /// serves them from a loopback port for as long as the process runs.
    pub fn start(real: &str, tool: &str, arguments: &Value, answers: &str) -> Result<Self, String> {
        let round = record_round(real, tool, arguments, answers)?;
        let mut raw = RawClient::new(real, round.clone(), Stopwatch::default())?;
        let [call, retry] = &round;
        let first = raw.send(call, |_| {})?;
        let state = first["result"].get("requestState").cloned();
        let second = raw.send(retry, |m| {
            if let Some(state) = state {
                m["params"]["requestState"] = state;
            }
        })?;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let url = format!(
            "http://{}/mcp",
            listener.local_addr().map_err(|e| e.to_string())?
        );
        let answers = Arc::new((first, second));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let answers = Arc::clone(&answers);
                std::thread::spawn(move || serve_replayed(stream, &answers));
            }
        });
        Ok(Self { url })
    }
}

/// One connection of [`FastUpstream`]: a request that carries `inputResponses` gets the
/// second answer, any other the first, each under the request's id; until the client goes.
fn serve_replayed(stream: TcpStream, (first, second): &(Value, Value)) {
    let _ = stream.set_nodelay(true);
    let mut reader = BufReader::new(stream);
    loop {
        let mut length = 0;
        let mut line = String::new();
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let Ok(request) = serde_json::from_slice::<Value>(&body) else {
            return;
        };
        let mut answer = if request["params"].get("inputResponses").is_some() {
            second.clone()
        } else {
            first.clone()
        };
        answer["id"] = request["id"].clone();
        let text = answer.to_string();
        let out = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{text}",
            text.len()
        );
        if reader.get_mut().write_all(out.as_bytes()).is_err() {
            return;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn recorded(json: &str) -> Recorded {
        Recorded {
            method: "tools/call".into(),
            name: Some("book".into()),
            protocol_version: "2026-07-28".into(),
            json: json.into(),
        }
    }

    /// A server that answers each request read on one connection with the next of `answers`
    /// (`{id}` replaced by the request's id), then closes.
    fn serve(answers: Vec<String>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream);
            for answer in answers {
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap() == 0 {
                        return;
                    }
                    if let Some(n) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = n.trim().parse().unwrap();
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                let request: Value = serde_json::from_slice(&body).unwrap();
                let answer = frame(&answer.replace("{id}", &request["id"].to_string()));
                reader.get_mut().write_all(answer.as_bytes()).unwrap();
            }
        });
        url
    }

    /// `JSON <body>` and `SSE <body>` framed as a whole HTTP answer (once the id is in the
    /// body, so the lengths are right); anything else sent as it is.
    fn frame(answer: &str) -> String {
        if let Some(body) = answer.strip_prefix("JSON ") {
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
        } else if let Some(body) = answer.strip_prefix("SSE ") {
            let event = format!("event: message\r\ndata: {body}\r\n\r\n");
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{event}\r\n0\r\n\r\n",
                event.len()
            )
        } else {
            answer.to_owned()
        }
    }

    fn json_answer(body: &str) -> String {
        format!("JSON {body}")
    }

    fn sse_answer(body: &str) -> String {
        format!("SSE {body}")
    }

    fn client(url: &str) -> RawClient {
        let round = [
            recorded(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#),
            recorded(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}}"#),
        ];
        RawClient::new(url, round, Stopwatch::default()).unwrap()
    }

    const ROUND: &str = r#"{"jsonrpc":"2.0","id":{id},"result":{"resultType":"input_required","requestState":"s"}}"#;
    const DONE: &str = r#"{"jsonrpc":"2.0","id":{id},"result":{"content":[]}}"#;

    #[test]
    fn a_round_over_json_and_over_a_chunked_event_stream_completes() {
        let url = serve(vec![json_answer(ROUND), sse_answer(DONE)]);
        let mut c = client(&url);
        c.round().unwrap();
        assert_eq!(c.watch.laps_us().len(), 2);
    }

    #[test]
    fn hostile_answers_are_errors_never_panics() {
        for answers in [
            vec!["HTTP/1.1 500 Oops\r\ncontent-length: 0\r\n\r\n".to_owned()],
            vec!["HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n".to_owned()],
            vec![json_answer(r#"{"jsonrpc":"2.0","id":999,"result":{}}"#)],
            vec![json_answer("not json")],
            vec![json_answer(DONE)],
            vec![json_answer(ROUND), json_answer(ROUND)],
            vec![sse_answer("{broken")],
            vec!["HTTP/1.1 200 OK\r\ncontent-length: 99\r\n\r\n{}".to_owned()],
            vec![],
        ] {
            let url = serve(answers.clone());
            assert!(client(&url).round().is_err(), "{answers:?}");
        }
        assert!(
            RawClient::new(
                "https://x/",
                client("http://x/").round.clone(),
                Stopwatch::default()
            )
            .is_err()
        );
    }
}
