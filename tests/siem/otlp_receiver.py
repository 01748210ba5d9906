"""An OTLP/HTTP trace receiver for host-harness/cli/tests/proxy_traces.rs: it takes what
`mrtr-gate proxy --otlp URL` exports (POST /v1/traces, http/protobuf), decodes each body with
the OpenTelemetry protocol's own message classes (opentelemetry-proto), and writes one JSON line
per span to OUT (and every body as it came, hex, one line each, to OUT.raw, for the test to
search for what must never be there). A body that is not an ExportTraceServiceRequest, or not
sent as protobuf, is answered 400 and written down as such.

Usage: otlp_receiver.py OUT (in target/siem-venv, which scripts/siem makes). The first line on
stdout says where it listens, after it listens.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

out_path = sys.argv[1]
out = open(out_path, "a", encoding="utf-8")
raw = open(out_path + ".raw", "a", encoding="utf-8")
lock = threading.Lock()


def value(any_value):
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    if kind in ("array_value", "kvlist_value", "bytes_value"):
        return {"unexpected": kind}
    return getattr(any_value, kind)


def spans(request):
    for resource_spans in request.resource_spans:
        resource = {a.key: value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield {
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "name": span.name,
                    "kind": span.kind,
                    "start": span.start_time_unix_nano,
                    "end": span.end_time_unix_nano,
                    "attributes": {a.key: value(a.value) for a in span.attributes},
                    "status": {"code": span.status.code, "message": span.status.message},
                    "scope": scope_spans.scope.name,
                    "resource": resource,
                }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body, content_type):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with lock:
            raw.write(body.hex() + "\n")
            raw.flush()
        try:
            if self.path != "/v1/traces":
                raise ValueError(f"posted to {self.path}")
            if self.headers.get("Content-Type") != "application/x-protobuf":
                raise ValueError(f"content type {self.headers.get('Content-Type')}")
            request = ExportTraceServiceRequest.FromString(body)
        except (DecodeError, ValueError) as e:
            with lock:
                out.write(json.dumps({"refused": str(e)}) + "\n")
                out.flush()
            self.answer(400, str(e).encode(), "text/plain")
            return
        with lock:
            for span in spans(request):
                out.write(json.dumps(span) + "\n")
            out.flush()
        self.answer(
            200, ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf"
        )


httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"listening on http://127.0.0.1:{httpd.server_address[1]}", flush=True)
httpd.serve_forever()
