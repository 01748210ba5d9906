"""The gate inside the official Python SDK client (`mrtr_gate.sdk_client` over `mcp==2.3.0`'s
`Client` on its manual path), against the Python SDK's server over streamable HTTP
(server.py beside this file) and against a raw HTTP server that sends what no SDK sends. Each
case asserts what the app ends up with, what went on the wire (the gate's text, never the
SDK's re-encoding) and the audit trail."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading

import httpx2
import pytest
from mcp import Client

import mrtr_gate as m
from mrtr_gate import hosts
from mrtr_gate.sdk_client import GatedSdkClient, SdkAdapterError
from test_sdk_server import SECRETS, HttpPeer


@pytest.fixture(scope="module")
def http_peer():
    p = HttpPeer()
    yield p
    p.close()


class Recording(httpx2.AsyncBaseTransport):
    """The real HTTP transport, noting each request body as sent."""

    def __init__(self, on_head=None) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.sent: list[dict] = []
        self.on_head = on_head

    async def handle_async_request(self, request):
        body = await request.aread()
        if body:
            self.sent.append(json.loads(body))
        response = await self.inner.handle_async_request(request)
        if self.on_head is not None and body:
            self.on_head(json.loads(body))
        return response


def run(url: str, body, *, answer, consent=lambda p: True, opened=None, on_head=None):
    clock = hosts.SystemClock()
    audit = hosts.MemoryAudit()
    gate = m.Gate(clock=clock, storage=hosts.MemoryStorage(clock), consent=hosts.CallbackConsent(consent), audit=audit)
    wire = Recording(on_head)
    shown: list[dict] = []

    def ask(view, _verdict):
        shown.append(view)
        return answer(view)

    gated = GatedSdkClient(gate, url, user="alice", tenant="acme", answer=ask, inner=wire,
                           open_url=(opened.append if opened is not None else (lambda u: None)))

    async def main():
        async with Client(gated.transport(), **GatedSdkClient.client_options()) as client:
            gated.attach(client)
            return await body(gated, client)

    outcome = asyncio.run(main())
    events = [json.loads(line) for line in audit.lines]
    for original in {e["request_id"] for e in events if e["event"] == "received"}:
        assert len([e for e in events if e["event"] == "terminal" and e["request_id"] == original]) == 1
    for line in audit.lines:
        for secret in SECRETS:
            assert secret not in line
    return outcome, wire.sent, events, shown


def text(result) -> str:
    return result.content[0].text


def test_a_form_round_with_the_gates_retry_on_the_wire(http_peer):
    passenger = {"passenger": {"action": "accept", "content": {"full_name": "Ada Lovelace", "seat": "window"}}}
    result, sent, events, shown = run(http_peer.url, lambda g, c: g.call_tool("book_flight", {"origin": "OSL", "destination": "SFO"}),
                                      answer=lambda v: passenger)
    assert text(result) == 'booked OSL-SFO: {"passenger": {"action": "accept", "content": {"full_name": "Ada Lovelace", "seat": "window"}}}'
    calls = [s for s in sent if s.get("method") == "tools/call"]
    assert len(calls) == 2 and calls[0]["id"] != calls[1]["id"]
    assert "inputResponses" not in calls[0]["params"]
    assert calls[1]["params"]["inputResponses"] == passenger
    assert all("mrtr-gate/call" not in c["params"]["_meta"] for c in calls), "the adapter's mark never reaches the server"
    assert shown[0]["inputs"][0]["key"] == "passenger"
    assert [e["event"] for e in events] == ["received", "consented", "submitted", "terminal"]


def test_a_url_is_opened_only_after_consent(http_peer):
    opened: list[str] = []
    result, _, _, _ = run(http_peer.url, lambda g, c: g.call_tool("pay", {"amount": 42}),
                          answer=lambda v: {"pay": {"action": "accept"}}, opened=opened)
    assert text(result) == 'paid 42: {"pay": {"action": "accept"}}'
    assert opened == ["https://pay.example.com/authorize?session=SECRET-SESSION"]


def test_a_refused_consent_sends_nothing(http_peer):
    opened: list[str] = []

    async def body(g, c):
        with pytest.raises(m.GateError) as e:
            await g.call_tool("pay", {"amount": 42})
        return e.value.code

    code, sent, events, _ = run(http_peer.url, body, answer=lambda v: {"pay": {"action": "accept"}},
                                consent=lambda p: False, opened=opened)
    assert code == "consent_refused" and opened == []
    assert len([s for s in sent if s.get("method") == "tools/call"]) == 1
    assert [(e["event"], e.get("outcome")) for e in events] == [("received", "accepted"), ("rejected", "denied"), ("terminal", "cancelled")]


def test_state_only_and_three_rounds(http_peer):
    async def body(g, c):
        first = await g.call_tool("continue_job", {})
        second = await g.call_tool("survey", {})
        return text(first), text(second)

    (job, survey), _, _, shown = run(http_peer.url, body,
                                     answer=lambda v: {i["key"]: {"action": "accept", "content": {"answer": "yes " + i["key"]}} for i in v["inputs"]})
    assert job == "job done after step-1"
    assert "yes q3" in survey and [v["round"] for v in shown] == [1, 2, 3]


def test_a_gated_method_around_the_adapter_is_refused(http_peer):
    async def body(g, c):
        with pytest.raises(Exception) as e:
            await c.session.call_tool("continue_job", {}, allow_input_required=True)
        return e.value

    error, sent, _, _ = run(http_peer.url, body, answer=lambda v: {})
    assert "not_gated" in str(error)
    assert not [s for s in sent if s.get("method") == "tools/call"], "nothing went out"


class RawHandler(http.server.BaseHTTPRequestHandler):
    """Raw JSON-RPC over HTTP: discover is answered, then what no SDK sends."""

    answers: dict = {}

    def do_POST(self):  # noqa: N802
        m_ = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if "id" not in m_:
            self.send_response(202)
            self.end_headers()
            return
        if m_["method"] == "server/discover":
            out = json.dumps({"jsonrpc": "2.0", "id": m_["id"], "result": {"resultType": "complete", "supportedVersions": ["2026-07-28"],
                              "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "1"}, "ttlMs": 0, "cacheScope": "private"}})
        else:
            out = self.answers[m_["method"]].format(id=json.dumps(m_["id"]))
        data = out.encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def raw_http():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RawHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/mcp"
    srv.shutdown()


def test_a_duplicate_key_the_sdk_would_drop_is_refused(raw_http):
    RawHandler.answers = {"tools/call": '{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"input_required","requestState":"s","resultType":"complete","content":[]}}}}'}

    async def body(g, c):
        with pytest.raises(m.GateError) as e:
            await g.call_tool("x", {})
        return e.value.code

    code, _, events, _ = run(raw_http, body, answer=lambda v: {})
    assert code == "duplicate_json_key"
    # Refused before any binding is looked at (docs/errors.md); the adapter then ends the
    # binding with an error, which is on record even though no round was received.
    assert [(e["event"], e.get("reason")) for e in events] == [
        ("rejected", "duplicate_json_key"), ("terminal", "gate_refused")]


def test_input_required_on_tools_list_is_refused(raw_http):
    RawHandler.answers = {"tools/list": '{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"input_required","requestState":"list-state"}}}}'}

    async def body(g, c):
        with pytest.raises(Exception) as e:
            await c.list_tools()
        return e.value

    error, _, _, _ = run(raw_http, body, answer=lambda v: {})
    assert "refused by mrtr-gate (input_required_not_allowed)" in str(error)
