"""MCP servers written with the official Python SDK (`mcp==2.3.0`), for the gate's tests: the
rounds real servers send, encoded the way that SDK encodes them. One server, one tool per
behaviour; run over stdio (`python server.py`) or streamable HTTP (`python server.py http PORT`;
port 0 picks one; the first line on stdout says where it listens, see http_serving.py).

Tools:
- `book_flight`: a form (three fields), then `complete`.
- `pay`: a URL elicitation, then `complete`.
- `continue_job`: a requestState-only round (no inputs), then `complete`.
- `combined`: a form and a URL in one round, with state.
- `survey`: three rounds, the state growing each round.
- `forever`: a state-only round, every time (a client must stop at its round limit).
- `sealed`: state sealed with an HMAC; a retry whose state was changed is refused.
- `numbers`: a state-only round, then what the tool received of `values` each time (each
  value's Python type and repr, and the number as written in the request the server read):
  whether a number reached it as the client wrote it.
- `echo`: `complete` at once with the text it was given (a call with no round: what a relay
  costs, in bench-proxy's side by side with another proxy).
- `sign_in`: a form asking for a username and a password, then `complete` (a round that asks
  for a secret: examples/policies/person-for-secrets.cedar).
- `summarise`: a deprecated `sampling/createMessage` input request, then `complete` with the
  model's text (examples/policies/no-deprecated.cedar).

Every request the server reads is kept as the text it read (`REQUESTS`): a Python float cannot
tell `3.14159265358979323846264338327` from the double nearest to it, nor an int `-0` from `0`,
so what `numbers` shows of the digits on the wire is read from the text the SDK parsed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import json
import os
import sys
from typing import Any

import mcp.types as t
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("mrtr-gate-test-peer")
KEY = b"test-peer-sealing-key"


def form(message: str, properties: dict[str, Any], required: list[str]) -> t.ElicitRequest:
    return t.ElicitRequest(
        method="elicitation/create",
        params=t.ElicitRequestFormParams(
            mode="form", message=message, requested_schema={"type": "object", "properties": properties, "required": required}
        ),
    )


def url(message: str, target: str, elicitation_id: str) -> t.ElicitRequest:
    return t.ElicitRequest(
        method="elicitation/create",
        params=t.ElicitRequestURLParams(mode="url", message=message, url=target, elicitation_id=elicitation_id),
    )


def done(text: str) -> t.CallToolResult:
    return t.CallToolResult(content=[t.TextContent(type="text", text=text)])


def answers(ctx: Context) -> dict[str, Any]:
    """The input responses as plain JSON values."""
    out = {}
    for k, v in (ctx.input_responses or {}).items():
        out[k] = v.model_dump(mode="json", by_alias=True, exclude_none=True) if hasattr(v, "model_dump") else v
    return out


@server.tool()
async def book_flight(origin: str, destination: str, ctx: Context) -> t.CallToolResult | t.InputRequiredResult:
    """Book a flight; asks who is flying."""
    if not ctx.input_responses:
        return t.InputRequiredResult(
            input_requests={
                "passenger": form(
                    "Who is flying?",
                    {
                        "full_name": {"type": "string", "title": "Full name", "minLength": 1, "maxLength": 100},
                        "seat": {"type": "string", "title": "Seat", "enum": ["aisle", "window"]},
                        "bags": {"type": "integer", "title": "Checked bags", "minimum": 0, "maximum": 3},
                    },
                    ["full_name", "seat"],
                )
            },
            request_state=base64.urlsafe_b64encode(json.dumps({"from": origin, "to": destination}).encode()).decode(),
        )
    return done(f"booked {origin}-{destination}: {json.dumps(answers(ctx), sort_keys=True)}")


@server.tool()
async def pay(amount: int, ctx: Context) -> t.CallToolResult | t.InputRequiredResult:
    """Pay; sends the user to the payment page."""
    if not ctx.input_responses:
        return t.InputRequiredResult(
            input_requests={"pay": url("Authorise the payment", "https://pay.example.com/authorize?session=SECRET-SESSION", "e-1")}
        )
    return done(f"paid {amount}: {json.dumps(answers(ctx), sort_keys=True)}")


@server.tool()
async def continue_job(ctx: Context) -> t.CallToolResult | t.InputRequiredResult:
    """A long job the server pauses once (state only)."""
    if ctx.request_state is None:
        return t.InputRequiredResult(request_state="step-1")
    return done(f"job done after {ctx.request_state}")


@server.tool()
async def combined(ctx: Context) -> t.CallToolResult | t.InputRequiredResult:
    """A form and a URL in one round, with state."""
    if not ctx.input_responses:
        return t.InputRequiredResult(
            input_requests={
                "contact": form("How can we reach you?", {"email": {"type": "string", "format": "email"}}, ["email"]),
                "verify": url("Verify your account", "https://accounts.example.com/verify?t=SECRET-TOKEN", "e-2"),
            },
            request_state="combined-state",
        )
    return done(f"combined: {json.dumps(answers(ctx), sort_keys=True)} state={ctx.request_state}")


@server.tool()
async def survey(ctx: Context) -> t.CallToolResult | t.InputRequiredResult:
    """Three rounds; the state carries every earlier answer."""
    state = json.loads(ctx.request_state) if ctx.request_state else []
    if ctx.input_responses:
        state.append(answers(ctx))
    if len(state) < 3:
        q = f"q{len(state) + 1}"
        return t.InputRequiredResult(
            input_requests={q: form(f"Question {len(state) + 1}", {"answer": {"type": "string", "maxLength": 50}}, ["answer"])},
            request_state=json.dumps(state, sort_keys=True),
        )
    return done(f"survey: {json.dumps(state, sort_keys=True)}")


@server.tool()
async def forever(ctx: Context) -> t.CallToolResult | t.InputRequiredResult:
    """Never finishes: always another state-only round."""
    n = int(ctx.request_state or "0")
    return t.InputRequiredResult(request_state=str(n + 1))


def seal(value: str) -> str:
    mac = hmac.new(KEY, value.encode(), hashlib.sha256).hexdigest()
    return f"{value}.{mac}"


@server.tool()
async def sealed(ctx: Context) -> t.CallToolResult | t.InputRequiredResult:
    """State sealed with an HMAC: a tampered state is refused."""
    if ctx.request_state is None:
        return t.InputRequiredResult(request_state=seal("balance=100"))
    value, _, mac = ctx.request_state.rpartition(".")
    if not hmac.compare_digest(mac, hmac.new(KEY, value.encode(), hashlib.sha256).hexdigest()):
        return t.CallToolResult(content=[t.TextContent(type="text", text="tampered state")], is_error=True)
    return done(f"sealed ok: {value}")


# Every request the server read, as the text it read, under its JSON-RPC id (the last one under
# an id: the tests send each request after the answer to the one before).
REQUESTS: dict[str, str] = {}


def read(text: str) -> None:
    try:
        message = json.loads(text)
    except ValueError:
        return
    if isinstance(message, dict) and "id" in message:
        REQUESTS[json.dumps(message["id"])] = text


class ReadFirst(io.RawIOBase):
    """Standard input, each line kept (`read`) before the SDK reads it. Installed as
    `sys.stdin`'s buffer, which the SDK's stdio transport serves in place of fd 0 when
    `sys.stdin` is not backed by it."""

    def __init__(self) -> None:
        self._partial = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = os.read(0, len(b))
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            read(line.decode("utf-8", "replace"))
        b[: len(data)] = data
        return len(data)


def reading_bodies(app: Any) -> Any:
    """The ASGI `app`, each request's body kept (`read`) before the app reads it."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        body = bytearray()

        async def receive_and_keep() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                body.extend(message.get("body", b""))
                if not message.get("more_body"):
                    read(body.decode("utf-8", "replace"))
            return message

        await app(scope, receive_and_keep, send)

    return wrapped


def received(values: dict[str, Any], request_id: Any) -> dict[str, list[Any]]:
    """Each value's type and repr as the tool got it, and the number as written in the request."""
    text = REQUESTS.get(json.dumps(request_id))
    written = json.loads(text, parse_int=str, parse_float=str)["params"]["arguments"]["values"] if text else {}
    return {k: [type(v).__name__, repr(v), written.get(k)] for k, v in sorted(values.items())}


@server.tool()
async def numbers(values: dict[str, Any], ctx: Context) -> t.CallToolResult | t.InputRequiredResult:
    """Echoes the numbers it was given, on the call and on its retry."""
    report = received(values, ctx.request_context.request_id)
    if ctx.request_state is None:
        return t.InputRequiredResult(request_state=base64.urlsafe_b64encode(json.dumps(report).encode()).decode())
    first = json.loads(base64.urlsafe_b64decode(ctx.request_state))
    return done(json.dumps({"call": first, "retry": report}, sort_keys=True))


# Listed last: the other tools keep their order (tests/peers/python_sdk/test_cli.py lists them).
@server.tool()
async def echo(text: str) -> t.CallToolResult:
    return done(text)


@server.tool()
async def sign_in(ctx: Context) -> t.CallToolResult | t.InputRequiredResult:
    """Signs in; asks for a username and a password."""
    if not ctx.input_responses:
        return t.InputRequiredResult(
            input_requests={
                "credentials": form(
                    "Sign in to continue",
                    {"username": {"type": "string", "title": "Username"}, "password": {"type": "string", "title": "Password"}},
                    ["username", "password"],
                )
            }
        )
    content = answers(ctx).get("credentials", {}).get("content", {})
    return done(f"signed in as {content.get('username')}")


@server.tool()
async def summarise(text: str, ctx: Context) -> t.CallToolResult | t.InputRequiredResult:
    """Summarises `text` with the client's model (deprecated sampling)."""
    if not ctx.input_responses:
        return t.InputRequiredResult(
            input_requests={
                "summary": t.CreateMessageRequest(
                    method="sampling/createMessage",
                    params=t.CreateMessageRequestParams(
                        messages=[t.SamplingMessage(role="user", content=t.TextContent(type="text", text=f"Summarise: {text}"))],
                        max_tokens=100,
                    ),
                )
            }
        )
    return done(f"summary: {json.dumps(answers(ctx), sort_keys=True)}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        import http_serving

        http_serving.serve(reading_bodies(server.streamable_http_app(host="127.0.0.1")), int(sys.argv[2]))
    else:
        sys.stdin = io.TextIOWrapper(io.BufferedReader(ReadFirst()), encoding="utf-8")
        server.run("stdio")
