"""The bytes the gate judged are the bytes the application receives: the official Python SDK
client (`mcp==2.3.0`, through `mrtr_gate.sdk_client`) against differential_server.py, whose
answers hold a harmless result where one reader looks and the real one where another looks.
The application gets the harmless result or an error with the refusal's code, never
`REAL-UNJUDGED`; a refusal after a round is audited as the binding's terminal event."""

from __future__ import annotations

import asyncio
import json

import anyio
import httpx2
import pytest

import mrtr_gate as m
from mrtr_gate import hosts
from mrtr_gate.sdk_client import GatedSdkClient, SdkAdapterError, _GatedHttp
from mrtr_gate.sdk_framing import StreamRefused, read_answer, reframe
from differential_server import serve
from test_sdk_client import run

REFUSED = [
    ("typed", "typed_event"),
    ("second", "duplicate_response"),
    ("other_id", "foreign_response"),
    ("batch", "batch_message"),
    ("batch_body", "batch_message"),
    ("other_id_body", "foreign_response"),
]


@pytest.fixture(scope="module")
def differential():
    srv = serve()
    yield f"http://127.0.0.1:{srv.server_address[1]}/mcp"
    srv.shutdown()


def call(url: str, tool: str):
    async def body(g, c):
        try:
            return await g.call_tool(tool, {})
        except (SdkAdapterError, m.GateError) as e:
            return e

    return run(url, body, answer=lambda v: {})


@pytest.mark.parametrize("case,code", REFUSED)
def test_an_answer_another_reader_reads_differently_is_refused_on_the_first_response(differential, case, code):
    outcome, _, events, _ = call(differential, f"first:{case}")
    assert "REAL-UNJUDGED" not in repr(outcome)
    assert isinstance(outcome, SdkAdapterError) and outcome.code == code, outcome
    # Nothing says the call completed: the binding ended with the refusal's code on record.
    assert [(e["event"], e.get("outcome"), e.get("reason"), e.get("round")) for e in events] == [
        ("terminal", "error", code, 0)]


@pytest.mark.parametrize("case,code", REFUSED)
def test_an_answer_another_reader_reads_differently_is_refused_and_audited_after_a_round(differential, case, code):
    outcome, sent, events, _ = call(differential, f"retry:{case}")
    assert "REAL-UNJUDGED" not in repr(outcome)
    assert isinstance(outcome, SdkAdapterError) and outcome.code == code, outcome
    assert len([s for s in sent if s.get("method") == "tools/call"]) == 2
    assert [(e["event"], e.get("outcome"), e.get("reason")) for e in events] == [
        ("received", "accepted", None), ("submitted", "accepted", None), ("terminal", "error", code)]


def test_a_clean_stream_passes_its_notification_and_the_judged_response(differential):
    outcome, _, events, _ = call(differential, "retry:clean")
    assert outcome.content[0].text == "harmless"
    assert [e["event"] for e in events] == ["received", "submitted", "terminal"]
    assert events[-1]["outcome"] == "complete"


def test_a_retry_whose_connection_breaks_fails_typed_and_the_session_goes_on(differential):
    async def body(g, c):
        try:
            await g.call_tool("retry:close", {})
            broken = None
        except (SdkAdapterError, m.GateError) as e:
            broken = e
        # The SDK's session survived the broken exchange: the next call completes.
        return broken, await g.call_tool("first:clean", {})

    (broken, after), sent, events, _ = run(differential, body, answer=lambda v: {})
    assert isinstance(broken, SdkAdapterError) and broken.code == "transport_failed", repr(broken)
    assert after.content[0].text == "harmless"
    # The retry went out once and its binding ended: single use, nothing sent again.
    assert [s["params"]["name"] for s in sent if s.get("method") == "tools/call"] == ["retry:close", "retry:close", "first:clean"]
    first = [e for e in events if e["request_id"] == events[0]["request_id"]]
    assert [(e["event"], e.get("outcome"), e.get("reason")) for e in first] == [
        ("received", "accepted", None), ("submitted", "accepted", None), ("terminal", "error", "transport_failed")]


def test_a_call_the_app_cancels_in_flight_ends_cancelled_and_sends_nothing_more(differential):
    scope: list[anyio.CancelScope] = []

    def cancel_on_the_retrys_head(request: dict) -> None:
        # The user presses cancel once the server has begun answering the retry (held open).
        if "requestState" in (request.get("params") or {}):
            scope[0].cancel()

    async def body(g, c):
        with anyio.CancelScope() as s:
            scope.append(s)
            await g.call_tool("retry:hold", {})
        return s.cancelled_caught

    cancelled, sent, events, _ = run(differential, body, answer=lambda v: {}, on_head=cancel_on_the_retrys_head)
    assert cancelled
    assert len([s for s in sent if s.get("method") == "tools/call"]) == 2
    # Ended by the app: cancelled, not a transport failure.
    assert [(e["event"], e.get("outcome"), e.get("reason")) for e in events] == [
        ("received", "accepted", None), ("submitted", "accepted", None), ("terminal", "cancelled", None)]


def test_a_get_stream_is_never_opened(differential):
    clock = hosts.SystemClock()
    gate = m.Gate(clock=clock, storage=hosts.MemoryStorage(clock), consent=hosts.CallbackConsent(lambda p: True),
                  audit=hosts.MemoryAudit())
    gated = GatedSdkClient(gate, differential, user="alice", tenant="acme", answer=lambda v, r: {})

    async def get():
        # The HTTP client the SDK's transport gets (`GatedSdkClient.transport`), asked for the
        # GET stream an SDK opens to listen.
        async with httpx2.AsyncClient(transport=_GatedHttp(gated)) as http:
            return await http.get(differential, headers={"accept": "text/event-stream"})

    response = asyncio.run(get())
    assert response.status_code == 405 and b"REAL-UNJUDGED" not in response.content
    seen = json.loads(httpx2.get(differential.replace("/mcp", "/seen")).text)
    assert "GET" not in seen, "the adapter never asks the server for a GET stream"


def test_the_sdk_reads_the_adapters_framing():
    r7 = '{"jsonrpc":"2.0","id":7,\n"result":{}}'
    stream = ('\ufeffevent: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"p":1},"x":2}\n\n'
              'id: 1\ndata:\n\n: note\r\nevent: ping\r\ndata: not json\r\n\r\n'
              'data: {"jsonrpc":"2.0","id":7,\ndata: "result":{}}\n\nretry: 10\n')
    answer = read_answer(stream, "text/event-stream; charset=utf-8", 7)
    assert answer.response == r7
    content_type, body = reframe(answer)
    assert content_type == "text/event-stream"
    assert body.decode() == ('event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"p":1}}\n\n'
                             'event: message\ndata: {"jsonrpc":"2.0","id":7,\ndata: "result":{}}\n\n')
    assert read_answer('{"jsonrpc":"2.0","id":7,"result":{}}', "application/json", 7).response is not None
    assert read_answer("", "application/json", 7).response is None
    assert read_answer("<html>", "text/html", 7).response is None
    refusals = {
        'data: {"jsonrpc":"2.0","id":"7","result":{}}\n\n': "foreign_response",
        'data: {"jsonrpc":"2.0","id":7.0,"result":{}}\n\n': "foreign_response",
        'data: {"jsonrpc":"2.0","id":7,"result":{}}\n\ndata: {"jsonrpc":"2.0","id":7,"error":{}}\n\n': "duplicate_response",
        'event: Message\ndata: {"jsonrpc":"2.0","id":7,"result":{}}\n\n': "typed_event",
        'data: {"jsonrpc":"2.0","id":7,"method":"x","result":{}}\n\n': "malformed_message",
        'data: not json\n\n': "malformed_message",
        'data: {"jsonrpc":"2.0","method":"n","params":{"a":NaN}}\n\n': "malformed_message",
        # No blank line after the last event: a reader may still dispatch it.
        'data: {"jsonrpc":"2.0","id":7,"result":{}}\n\ndata: {"jsonrpc":"2.0","id":7,"result":{}}': "duplicate_response",
    }
    for text, code in refusals.items():
        with pytest.raises(StreamRefused) as e:
            read_answer(text, "text/event-stream", 7)
        assert e.value.code == code, text
