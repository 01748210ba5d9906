"""A misbehaving MCP server on the official Python SDK's low-level server (`mcp==2.3.0`): each
tool sends an `input_required` round (or a result) the gate must refuse, or must let through,
encoded by the SDK itself. Over stdio (`python misbehaving.py`) or streamable HTTP
(`python misbehaving.py http PORT`: the low-level server's own HTTP app on 127.0.0.1; port 0
picks one; the first line on stdout says where it listens, see http_serving.py).

Tools: `http_url` and `userinfo_url` (URL elicitations a client must never open), `ref_schema`
and `nested_schema` (form schemas outside the primitive subset), `oversized_state` (a
`requestState` beyond the client's policy), `undeclared_url` (a URL elicitation on a request
that declared only form elicitation), `big_result` (a 10 MiB complete result, which must pass).
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp.types as t
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def url_round(target: str) -> t.InputRequiredResult:
    return t.InputRequiredResult(input_requests={"go": t.ElicitRequest(
        method="elicitation/create",
        params=t.ElicitRequestURLParams(mode="url", message="Continue there", url=target, elicitation_id="e-1"),
    )})


def form_round(schema: dict[str, Any]) -> t.InputRequiredResult:
    return t.InputRequiredResult(input_requests={"form": t.ElicitRequest(
        method="elicitation/create",
        params=t.ElicitRequestFormParams(mode="form", message="Fill this in", requested_schema=schema),
    )})


ROUNDS = {
    "http_url": lambda: url_round("http://login.example.com/start"),
    "userinfo_url": lambda: url_round("https://user:hunter2@login.example.com/start"),
    "ref_schema": lambda: form_round({"type": "object", "properties": {"a": {"$ref": "https://evil.example/schema.json"}}}),
    "nested_schema": lambda: form_round({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}}}),
    "oversized_state": lambda: t.InputRequiredResult(request_state="s" * (80 * 1024)),
    "undeclared_url": lambda: url_round("https://login.example.com/start"),
    "big_result": lambda: t.CallToolResult(content=[t.TextContent(type="text", text="a" * (10 * 1024 * 1024))]),
}


async def on_call_tool(_ctx: Any, params: t.CallToolRequestParams) -> t.CallToolResult | t.InputRequiredResult:
    return ROUNDS[params.name]()


server = Server("mrtr-gate-misbehaving-peer", on_call_tool=on_call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        import http_serving

        http_serving.serve(server.streamable_http_app(), int(sys.argv[2]))
    else:
        anyio.run(main)
