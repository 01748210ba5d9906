"""The official Python SDK client (`mcp==2.3.0`), unchanged and in its automatic MRTR mode,
with the proxy as its stdio server: `proxy_client.py CALLS -- COMMAND [ARGS...]` spawns
COMMAND (the `mrtr-gate proxy ... -- server` line) the way a desktop client spawns a server
entry, runs each call of CALLS (a JSON list of `[tool, arguments]`) in turn, answering every
elicitation with its callback, and prints one JSON line per call on stdout:
`{"tool", "ok": true, "text", "elicited": [...]}` or `{"tool", "ok": false, "code", "message",
"data"}`. `proxy_client.py CALLS -- URL` talks to a proxy serving streamable HTTP instead. The elicitations the callback saw are what the client's user was shown."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import mcp.types as t
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

# What a user would type into each form field the peers ask for.
FILLED: dict[str, Any] = {
    "full_name": "Ada Lovelace",
    "seat": "window",
    "email": "ada@example.com",
    "answer": "yes",
}


def main() -> None:
    split = sys.argv.index("--")
    calls = json.loads(sys.argv[1])
    command = sys.argv[split + 1 :]
    elicited: list[dict[str, Any]] = []

    async def elicit(_ctx, params: t.ElicitRequestParams) -> t.ElicitResult:
        if isinstance(params, t.ElicitRequestURLParams):
            elicited.append({"mode": "url", "message": params.message, "url": params.url})
            return t.ElicitResult(action="accept")
        fields = params.requested_schema.get("properties", {})
        elicited.append({"mode": "form", "message": params.message})
        return t.ElicitResult(action="accept", content={k: FILLED[k] for k in fields if k in FILLED})

    async def run() -> None:
        # A URL: the proxy serves streamable HTTP; else the command that runs it over stdio.
        server = command[0] if command[0].startswith("http") else StdioServerParameters(command=command[0], args=command[1:])
        async with Client(server, elicitation_callback=elicit) as client:
            for tool, arguments in calls:
                elicited.clear()
                try:
                    result = await client.call_tool(tool, arguments)
                    text = "".join(c.text for c in result.content if isinstance(c, t.TextContent))
                    out = {"tool": tool, "ok": True, "text": text, "is_error": bool(result.is_error)}
                except MCPError as e:
                    out = {"tool": tool, "ok": False, "code": e.code, "message": e.message, "data": e.data}
                out["elicited"] = list(elicited)
                print(json.dumps(out), flush=True)

    asyncio.run(run())


if __name__ == "__main__":
    main()
