"""A raw streamable-HTTP MCP server (one JSON response per POST) that writes every message it
receives to a file before it answers, so a test can count exactly what reached the server
through one or several proxies, and each POST's W3C trace headers (`traceparent`, `tracestate`)
to LOG.headers, one JSON line each. Usage: recording_http_server.py PORT LOG HOLD_FILE (port 0 picks
one; the first line on stdout says where it listens).

Tools, by name:
- `book`: a form round (`seat`, a string of at most 4 characters) with a `requestState` unique
  to the call; any retry with `inputResponses` completes with `booked <seat>`.
- `hold`: the same round, but the server sits on the retry (after writing it down) until
  HOLD_FILE exists, so a test can act while a retry is in flight upstream.
Anything else that is a request gets an empty result; notifications and answers get 202.
"""

import itertools
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port, log_path, hold_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
log = open(log_path, "a", encoding="utf-8")
headers_log = open(log_path + ".headers", "a", encoding="utf-8")
log_lock = threading.Lock()
calls = itertools.count(1)

SEAT_FORM = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Pick a seat",
        "requestedSchema": {
            "type": "object",
            "properties": {"seat": {"type": "string", "maxLength": 4}},
            "required": ["seat"],
        },
    },
}


def result_for(message):
    params = message.get("params") or {}
    if message["method"] != "tools/call":
        return {}
    responses = params.get("inputResponses")
    if responses is None:
        return {
            "resultType": "input_required",
            "inputRequests": {"seat": SEAT_FORM},
            "requestState": f"state-{next(calls)}",
        }
    if params.get("name") == "hold":
        while not os.path.exists(hold_file):
            time.sleep(0.02)
    seat = responses.get("seat", {}).get("content", {}).get("seat")
    return {"content": [{"type": "text", "text": f"booked {seat}"}]}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        message = json.loads(body)
        traced = {k: self.headers.get(k) for k in ("traceparent", "tracestate")}
        with log_lock:
            log.write(json.dumps(message) + "\n")
            log.flush()
            headers_log.write(json.dumps(dict(traced, id=message.get("id"))) + "\n")
            headers_log.flush()
        if "id" not in message or "method" not in message:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        answer = json.dumps(
            {"jsonrpc": "2.0", "id": message["id"], "result": result_for(message)}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


# The constructor binds and listens: the ready line comes after, so a test that reads it
# connects at once (see python_sdk/http_serving.py).
httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
print(f"listening on http://127.0.0.1:{httpd.server_address[1]}/mcp", flush=True)
httpd.serve_forever()
