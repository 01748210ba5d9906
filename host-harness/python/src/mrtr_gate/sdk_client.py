"""The gate inside the official Python SDK client (`mcp==2.3.0`) over streamable HTTP.

The SDK's own multi-round-trip driver fulfils `input_required` rounds with none of the gate's
checks. `GatedSdkClient` drives each round through the gate instead, on the SDK's manual path
(`client.session.call_tool(..., allow_input_required=True)`):

- the SDK keeps ids, the `_meta` envelope, headers, sessions and routing;
- the adapter sits in the HTTP client's transport (`httpx2.AsyncBaseTransport`), the one place
  the SDK lets a caller see the bytes: each gated request is registered before it goes out and
  the body sent is the gate's own text (a retry is built by the gate, never by the SDK);
- the SDK never reads the server's answer: the adapter reads it (`sdk_framing`), the gate
  judges the one response in it, and the SDK gets that response re-framed by the adapter, with
  the requests and notifications beside it and nothing else. An answer another reader could
  take a different response from (a second response, one under another id, a typed event
  carrying a message, a batch) is refused and the binding ended with the refusal's code; a GET
  stream, which no request of the adapter's is waiting on, is never opened. Every path is in
  docs/adapters.md.

Over stdio the SDK parses each line before any caller sees it, so this adapter takes HTTP
only (`attach` refuses a client it did not connect); for stdio, use `Gate` directly
(tests/peers/python_sdk/test_sdk_server.py) or `mrtr-gate call --stdio`.

    gated = GatedSdkClient(gate, url, user="alice", tenant="acme", answer=ask_the_user)
    async with Client(gated.transport(), **GatedSdkClient.client_options()) as client:
        gated.attach(client)
        result = await gated.call_tool("book_flight", {"origin": "OSL"})
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import anyio
import httpx2
from mcp.client.streamable_http import streamable_http_client

from ._types import Complete, ErrorResult, GateError, InputRequired, Origin, Policy, Unbound, Verdict
from .gate import Gate
from .sdk_framing import StreamRefused, read_answer, reframe

__all__ = ["GatedSdkClient", "SdkAdapterError"]

GATED = frozenset({"tools/call", "prompts/get", "resources/read"})
# Marks the SDK request a call of this adapter made; removed before the gate binds the params.
MARK = "mrtr-gate/call"

Answer = Callable[[dict, InputRequired], Union[Awaitable[Optional[Mapping[str, Any]]], Optional[Mapping[str, Any]]]]


class SdkAdapterError(Exception):
    """An error of the adapter itself (`cancelled`, `not_gated`, `no_response`, `transport_failed`,
    `invalid_result_type`, `malformed_response`, `usage`, and the
    answer refusals `duplicate_response`, `foreign_response`, `typed_event`, `batch_message`,
    `malformed_message`); the gate's refusals stay `GateError`s."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _pause(round_: int) -> float:
    return min(0.05 * 2 ** min(max(round_ - 1, 0), 6), 2.0)


def _accepted_urls(view: dict, responses: Mapping[str, Any]) -> list[str]:
    return [
        i["url"]["full"]
        for i in view.get("inputs", [])
        if i.get("kind") == "url" and isinstance(responses.get(i.get("key")), Mapping)
        and responses[i["key"]].get("action") == "accept"
    ]


@dataclass
class _Call:
    method: str
    live_id: Any = None
    responses: Optional[Mapping[str, Any]] = None
    view: Optional[dict] = None
    verdict: Optional[Verdict] = None
    error: Optional[BaseException] = None
    extra: dict = field(default_factory=dict)


class GatedSdkClient:
    """Drives the rounds of an SDK `Client`'s tools/call, prompts/get and resources/read
    through `gate`. `answer(view, verdict)` returns the `inputResponses` (or None to cancel);
    `open_url(url)` is called for an accepted URL input only once the gate built the retry on
    a granted receipt. Consent is the gate's own consent service (the app's prompt)."""

    def __init__(self, gate: Gate, url: str, *, user: str, tenant: str, answer: Answer,
                 policy: Policy = Policy(), open_url: Callable[[str], None] = lambda _u: None,
                 inner: Optional[httpx2.AsyncBaseTransport] = None) -> None:
        self._gate = gate
        self._url = url
        self._server = Origin(url)
        self._user = user
        self._tenant = tenant
        self._answer = answer
        self._policy = policy
        self._open_url = open_url
        self._inner = inner if inner is not None else httpx2.AsyncHTTPTransport()
        self._calls: dict[str, _Call] = {}
        self._next = 0
        self._client: Any = None
        # Whether an SDK transport was made over this adapter (the SDK connects lazily, so
        # `attach` cannot wait for the first request).
        self._carried = False

    def transport(self, **http_client_options: Any) -> Any:
        """The SDK transport to give `mcp.Client`: streamable HTTP over an HTTP client whose
        transport is this adapter's."""
        options = {"timeout": httpx2.Timeout(30.0, read=300.0), **http_client_options}
        http = httpx2.AsyncClient(transport=_GatedHttp(self), **options)
        self._carried = True
        return streamable_http_client(self._url, http_client=http)

    @staticmethod
    def client_options(**options: Any) -> dict[str, Any]:
        """`mcp.Client` keyword arguments: the 2026-07-28 era pinned, and an elicitation
        callback so the SDK declares elicitation (it then declares form and URL both). The
        callback only refuses: input reaches the user through the gate's rounds, never through
        a request of the server's own."""
        return {"mode": "2026-07-28", "elicitation_callback": _refuse_direct_requests, **options}

    def attach(self, client: Any) -> "GatedSdkClient":
        """Use the SDK `Client` connected over `transport()` (a client on any other transport
        would send the gated methods, and read their answers, around the gate)."""
        if not self._carried:
            raise SdkAdapterError("usage", "connect the SDK client over gated.transport(): the adapter gates only what it carries")
        self._client = client
        return self

    async def call_tool(self, name: str, arguments: Optional[Mapping[str, Any]] = None) -> Any:
        return await self._run("tools/call", lambda meta: self._client.session.call_tool(
            name, dict(arguments or {}), meta=meta, allow_input_required=True))

    async def get_prompt(self, name: str, arguments: Optional[Mapping[str, str]] = None) -> Any:
        return await self._run("prompts/get", lambda meta: self._client.session.get_prompt(
            name, dict(arguments or {}), meta=meta, allow_input_required=True))

    async def read_resource(self, uri: str) -> Any:
        return await self._run("resources/read", lambda meta: self._client.session.read_resource(
            uri, meta=meta, allow_input_required=True))

    async def _run(self, method: str, send: Callable[[dict], Awaitable[Any]]) -> Any:
        if self._client is None:
            raise SdkAdapterError("usage", "attach the SDK client first")
        self._next += 1
        token = f"c{self._next}"
        call = _Call(method)
        self._calls[token] = call
        try:
            while True:
                call.verdict = None
                try:
                    result = await send({MARK: token})
                except BaseException as e:
                    if call.error is not None:
                        raise call.error from None
                    if not isinstance(call.verdict, ErrorResult):
                        # The app's own cancellation ends the call as cancelled, as in
                        # JavaScript (an aborted signal); anything else is the transport's.
                        cancelled = isinstance(e, anyio.get_cancelled_exc_class())
                        self._end(call, None if cancelled else "transport_failed")
                    raise
                verdict = call.verdict
                if verdict is None:
                    raise SdkAdapterError("not_gated", "a response reached the SDK without passing the gate")
                if isinstance(verdict, Complete):
                    return result
                if isinstance(verdict, ErrorResult):
                    return result
                assert isinstance(verdict, InputRequired)
                if not verdict.input_keys:
                    await anyio.sleep(_pause(verdict.round))
                    responses: Optional[Mapping[str, Any]] = {}
                else:
                    answered = self._answer(verdict.view, verdict)
                    responses = await answered if isinstance(answered, Awaitable) else answered
                if responses is None:
                    self._end(call, None)
                    raise SdkAdapterError("cancelled", "cancelled; nothing more was sent")
                call.responses = responses
                call.view = verdict.view
        finally:
            self._calls.pop(token, None)

    def _end(self, call: _Call, error: Optional[str]) -> None:
        if call.live_id is None:
            return
        try:
            self._gate.finish(server=self._server, request_id=call.live_id, user=self._user,
                              tenant=self._tenant, error=error)
        except GateError:
            pass  # already ended by the gate (unknown_request): nothing left to end

    def _request_text(self, msg: dict) -> tuple[_Call, str]:
        meta = (msg.get("params") or {}).get("_meta") or {}
        call = self._calls.get(meta.get(MARK)) if isinstance(meta.get(MARK), str) else None
        if call is None:
            raise SdkAdapterError("not_gated", f"{msg['method']} must go through GatedSdkClient, which gates its rounds")
        params = dict(msg["params"])
        params["_meta"] = {k: v for k, v in meta.items() if k != MARK}
        try:
            if call.live_id is None:
                text = self._gate.register(request_id=msg["id"], server=self._server, user=self._user,
                                           tenant=self._tenant, method=msg["method"],
                                           params=json.dumps(params), policy=self._policy).request_json
            else:
                text = self._gate.build_retry(server=self._server, request_id=call.live_id, retry_id=msg["id"],
                                              user=self._user, tenant=self._tenant,
                                              responses=dict(call.responses or {})).request_json
                for url in _accepted_urls(call.view or {}, call.responses or {}):
                    self._open_url(url)
        except GateError as e:
            call.error = e
            # A refused retry leaves nothing to send: the call ends (a refused consent cancels it).
            self._end(call, None if e.code == "consent_refused" else "gate_refused")
            raise
        call.live_id = msg["id"]
        return call, text

    def _judge(self, call: _Call, raw: Optional[str], status: int) -> None:
        if not raw:
            call.error = SdkAdapterError("no_response", f"the server answered http {status} with no json-rpc message")
            self._end(call, "no_response")
            raise call.error
        try:
            call.verdict = self._gate.accept_response(self._server, raw)
        except GateError as e:
            call.error = e
            self._end(call, "gate_refused")
            raise


class _Refused(Exception):
    def __init__(self, request_id: Any, error: BaseException) -> None:
        super().__init__(str(error))
        self.request_id = request_id
        self.error = error


class _GatedHttp(httpx2.AsyncBaseTransport):
    def __init__(self, adapter: GatedSdkClient) -> None:
        self._a = adapter

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self._exchange(request)
        except _Refused as r:
            # An exception here would take the SDK's whole transport down; a JSON-RPC error for
            # the one request fails just that call (the adapter then raises the gate's error).
            error = r.error
            body = json.dumps({"jsonrpc": "2.0", "id": r.request_id, "error": {
                "code": -32600, "message": f"refused by mrtr-gate ({getattr(error, 'code', 'refused')}): {error}",
                "data": {"mrtr_gate_code": getattr(error, "code", "refused")}}})
            return httpx2.Response(200, headers={"content-type": "application/json"}, content=body.encode())

    async def _exchange(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "GET":
            # A GET stream answers no request the adapter sent, so a response on it could not be
            # judged: it is never opened (the SDK reads 405 as "no stream"; at 2026-07-28 it
            # opens none, and with no `id:` in the streams it gets it never resumes one).
            return httpx2.Response(405, request=request)
        body = await request.aread()
        try:
            msg = json.loads(body) if body else None
        except ValueError:
            msg = None
        if not isinstance(msg, dict) or not isinstance(msg.get("method"), str) or "id" not in msg:
            # Notifications and the SDK's answers to the server: the SDK reads no message from
            # what comes back.
            return await self._a._inner.handle_async_request(request)
        headers = [(k, v) for k, v in request.headers.multi_items() if k.lower() not in ("content-length", "accept-encoding")]
        # Identity encoding: the bytes judged are the bytes the server sent.
        headers.append(("accept-encoding", "identity"))
        call = None
        content = body
        if msg["method"] in GATED:
            try:
                call, text = self._a._request_text(msg)
            except (GateError, SdkAdapterError) as e:
                raise _Refused(msg["id"], e) from e
            content = text.encode()
        forwarded = httpx2.Request(request.method, request.url, headers=headers, content=content,
                                   extensions=request.extensions)
        try:
            response = await self._a._inner.handle_async_request(forwarded)
            raw = await response.aread()
            await response.aclose()
        except httpx2.TransportError as e:
            if call is None:
                raise
            # The exchange is spent (single use: the binding ends here, nothing is sent again).
            # Raised to the SDK, a transport error ends its whole session (mcp 2.3.0) and the
            # waiting call sees only a cancellation: a JSON-RPC error fails just this call, with
            # the typed error the adapter then raises.
            failed = SdkAdapterError("transport_failed", f"the exchange with the server failed: {type(e).__name__}: {e}")
            call.error = failed
            self._a._end(call, "transport_failed")
            raise _Refused(msg["id"], failed) from e
        text = raw.decode("utf-8", errors="replace")
        try:
            try:
                answer = read_answer(text, response.headers.get("content-type", ""), msg["id"])
            except StreamRefused as e:
                refusal = SdkAdapterError(e.code, str(e))
                if call is not None:
                    call.error = refusal
                    self._a._end(call, e.code)
                raise refusal from None
            if call is not None:
                self._a._judge(call, answer.response, response.status_code)
            elif _asks_for_input_outside_the_gate(msg["method"], answer.response):
                a = self._a
                raise a._gate.refuse_unbound(
                    server=a._server, user=a._user, tenant=a._tenant, refusal=Unbound.INPUT_REQUIRED
                )
        except (GateError, SdkAdapterError) as e:
            raise _Refused(msg["id"], e) from e
        # The SDK reads the adapter's framing of what was judged, never the server's bytes.
        kept = [(k, v) for k, v in response.headers.multi_items()
                if k.lower() not in ("content-length", "content-type", "content-encoding", "transfer-encoding")]
        content_type, framed = reframe(answer)
        if answer.response is not None or answer.sse:
            kept.append(("content-type", content_type))
        else:
            kept.extend((k, v) for k, v in response.headers.multi_items() if k.lower() == "content-type")
            framed = b""
        return httpx2.Response(response.status_code, headers=kept, content=framed, extensions=response.extensions)

    async def aclose(self) -> None:
        await self._a._inner.aclose()


async def _refuse_direct_requests(_context: Any, _params: Any) -> Any:
    from mcp.types import ErrorData

    return ErrorData(code=-32601, message="this client takes input only through input_required results")


def _asks_for_input_outside_the_gate(method: str, message: Optional[str]) -> bool:
    """Whether the answer to a method the gate does not bind is a round (only the gate's three
    methods may take one: the caller refuses it through the gate, on record); any other
    `resultType` than `complete`, or no JSON-RPC response, is refused here."""
    if message is None:
        return False  # no response: the SDK fails the request itself
    try:
        result = json.loads(message)
    except (ValueError, RecursionError):
        raise SdkAdapterError("malformed_response", f"the server's response to {method} is not JSON") from None
    if not isinstance(result, dict) or ("result" not in result and "error" not in result):
        raise SdkAdapterError("malformed_response", f"the server's response to {method} has neither result nor error")
    kind = result["result"].get("resultType") if isinstance(result.get("result"), dict) else None
    if kind == "input_required":
        return True
    if kind is not None and kind != "complete":
        raise SdkAdapterError("invalid_result_type", f"the server answered {method} with resultType {json.dumps(kind)}")
    return False
