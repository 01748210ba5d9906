"""A raw streamable HTTP server whose answers different readers read differently: a harmless
result where one reader looks and the real one where another looks. The SDK adapters must hand
their SDK only the response the gate judged, and refuse an answer that holds another.

`python3 differential_server.py` listens on a free loopback port and prints it; the
Python tests import `serve`. The tool name picks the answer: `<where>:<case>`, `where` being
`first` (the answer to the call) or `retry` (the call gets a state-only round, and its retry
gets the answer). `GET /seen` lists the HTTP methods of every other request it got.

Cases (H: a harmless complete result under the request's id; R: the real one, text
`REAL-UNJUDGED`, which no test may ever see):
- `typed`: H in an event of type `mrtr`, then R in a `message` event. A reader that ignores
  `event:` takes H; both SDKs take only untyped or `message` events: R.
- `second`: H, then R, both under the request's id.
- `other_id`: R under another id, then H. mcp 2.3.0 takes the first response whatever its id.
- `batch`: `[R]` in one event, then H.
- `batch_body`, `other_id_body`: the same as one JSON body.
- `clean`: a notification, a comment, a priming event, a typed heartbeat, then H: nothing to
  refuse.
"""

from __future__ import annotations

import http.server
import json
import sys
import threading

OTHER_ID = 424242


def result(id_, text: str) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "result": {"resultType": "complete", "content": [{"type": "text", "text": text}]}})


def sse(*events: str) -> str:
    return "".join(e + "\n\n" for e in events)


def answer(case: str, id_) -> tuple[str, str]:
    h, r = result(id_, "harmless"), result(id_, "REAL-UNJUDGED")
    if case == "typed":
        return "text/event-stream", sse("event: mrtr\ndata: " + h, "data: " + r)
    if case == "second":
        return "text/event-stream", sse("data: " + h, "event: message\ndata: " + r)
    if case == "other_id":
        return "text/event-stream", sse("data: " + result(OTHER_ID, "REAL-UNJUDGED"), "data: " + h)
    if case == "batch":
        return "text/event-stream", sse("data: [" + r + "]", "data: " + h)
    if case == "batch_body":
        return "application/json", "[" + r + "]"
    if case == "other_id_body":
        return "application/json", result(OTHER_ID, "REAL-UNJUDGED")
    if case == "clean":
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "working"}})
        return "text/event-stream", sse("data: " + note, ": a comment", "id: 7\ndata:", "event: heartbeat\ndata: ping", "data: " + h)
    raise KeyError(case)


class Handler(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def _send(self, status: int, content_type: str, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802
        if self.path == "/seen":
            self._send(200, "application/json", json.dumps(Handler.seen))
            return
        Handler.seen.append("GET")
        # What a server may push on a GET stream: a response to a request it was never sent on.
        self._send(200, "text/event-stream", sse("data: " + result(1, "REAL-UNJUDGED")))

    def do_POST(self):  # noqa: N802
        Handler.seen.append("POST")
        m = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if "id" not in m:
            self.send_response(202)
            self.end_headers()
            return
        if m["method"] == "server/discover":
            self._send(200, "application/json", json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {
                "resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "differential", "version": "1"}, "ttlMs": 0, "cacheScope": "private"}}))
            return
        if m["method"] != "tools/call":
            # mcp 2.3.0 lists the tools to check a result's structured content.
            self._send(200, "application/json", json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {"resultType": "complete", "tools": [], "ttlMs": 0, "cacheScope": "private"}}))
            return
        where, _, case = m["params"]["name"].partition(":")
        if where == "retry" and "requestState" not in m["params"]:
            self._send(200, "application/json", json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {
                "resultType": "input_required", "requestState": "step-1"}}))
            return
        if case == "hold":
            # The answer's head and a notification, then nothing until the client goes (its
            # read ends; at most 60 s): a call the app can cancel while it is in flight.
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "working"}})
            self.wfile.write(sse("data: " + note).encode())
            self.wfile.flush()
            self.connection.settimeout(60)
            try:
                self.rfile.read(1)
            except OSError:
                pass
            self.close_connection = True
            return
        if case == "close":
            # The connection closed with no response (the handler sends nothing).
            self.close_connection = True
            return
        self._send(200, *answer(case, m["id"]))

    def log_message(self, *args):
        pass


def serve() -> http.server.ThreadingHTTPServer:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


if __name__ == "__main__":
    srv = serve()
    print(srv.server_address[1], flush=True)
    try:
        sys.stdin.read()  # until the parent closes stdin
    finally:
        srv.shutdown()
