"""Time requests on one kept-alive connection to the Python SDK test server (server.py over
streamable HTTP), with a raw `http.client`: no gate, no SDK client. The first request pays for
the connection; every later one should cost what the server's work costs. A server socket
without TCP_NODELAY shows here as about 40 ms a request (the client's delayed ACK), which
would sit under every round-trip figure measured against it (docs/performance.md).

    python3 keepalive_latency.py [REQUESTS]    # prints one line a request, then the median
"""

from __future__ import annotations

import http.client
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    here = Path(__file__).resolve().parent
    server = subprocess.Popen([sys.executable, str(here / "server.py"), "http", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = server.stdout.readline() if server.stdout else ""
        port = int(line.rsplit(":", 1)[1].split("/")[0])
        conn = http.client.HTTPConnection("127.0.0.1", port)
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                   "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}}).encode()
        times = []
        for i in range(n):
            start = time.perf_counter()
            conn.request("POST", "/mcp", body, headers)
            reply = conn.getresponse()
            reply.read()
            ms = (time.perf_counter() - start) * 1000
            times.append(ms)
            print(f"request {i}: http {reply.status}, {ms:.1f} ms")
        print(f"median of the kept-alive requests (all but the first): {statistics.median(times[1:]):.1f} ms")
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
