"""Serve an ASGI app (an SDK server's streamable-HTTP app) on 127.0.0.1 and say where.

The socket is bound and listening before the ready line is printed, so a test that reads the
line can connect at once: no port is picked and freed first (another process could take it in
between), and nobody polls a port (a poll can connect to itself, or give up under load).
Port 0 picks a free port. The ready line is the first line on stdout:
`listening on http://127.0.0.1:PORT/mcp`.
"""

from __future__ import annotations

import socket
import sys
from typing import Any


def serve(app: Any, port: int) -> None:
    import uvicorn

    # IPPROTO_TCP named, as uvicorn's own bind names it: asyncio sets TCP_NODELAY only on a
    # socket whose protocol says TCP, and without it a kept-alive connection waits out the
    # client's delayed ACK (about 40 ms) between the response's head and its body.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    sys.stdout.write(f"listening on http://127.0.0.1:{sock.getsockname()[1]}/mcp\n")
    sys.stdout.flush()
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
