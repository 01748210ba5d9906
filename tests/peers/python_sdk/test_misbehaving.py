"""A misbehaving server on the Python SDK's low-level server (misbehaving.py beside this file)
over stdio: each round the SDK itself encodes and the gate must refuse, with the code it must
give, or (a 10 MiB result) let through. A refused round ends its binding, audited, with no
secret in the trail."""

from __future__ import annotations

import json

import pytest

import mrtr_gate as m
from test_sdk_server import META, Client, Peer

FORM_ONLY = {**META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}


@pytest.fixture
def peer():
    p = Peer("misbehaving.py")
    yield p
    p.close()


@pytest.mark.parametrize(
    "tool,code,meta",
    [
        ("http_url", "unsafe_url_elicitation", META),
        ("userinfo_url", "unsafe_url_elicitation", META),
        ("ref_schema", "invalid_form_requestedSchema", META),
        ("nested_schema", "invalid_form_requestedSchema", META),
        ("oversized_state", "invalid_requestState", META),
        ("undeclared_url", "undeclared_capability", FORM_ONLY),
    ],
)
def test_a_round_the_sdk_sends_and_the_gate_refuses(peer, tool, code, meta):
    c = Client(peer, lambda view: pytest.fail("no round may reach the user"))
    with pytest.raises(m.GateError) as e:
        c.call(tool, {}, meta=meta)
    assert (e.value.code, e.value.cause, e.value.audited) == (code, m.ErrorCause.PEER, True)
    events = c.events()
    assert [(x["event"], x.get("outcome")) for x in events] == [("rejected", "denied"), ("terminal", "error")]
    assert events[0]["reason"] == code
    c.check_trail()
    assert c.shown == []


def test_a_ten_mib_result_passes(peer):
    c = Client(peer, lambda view: {})
    verdict, reply = c.call("big_result", {})
    assert verdict == m.Complete()
    assert len(reply["result"]["content"][0]["text"]) == 10 * 1024 * 1024
    assert c.events() == [], "a plain request leaves no trail"


@pytest.fixture
def raw_peer():
    p = Peer("raw_server.py")
    yield p
    p.close()


@pytest.mark.parametrize(
    "tool,code",
    [("duplicate_result_type", "duplicate_json_key"), ("unknown_result_type", "invalid_result_type")],
)
def test_what_no_sdk_sends_is_refused_too(raw_peer, tool, code):
    c = Client(raw_peer, lambda view: pytest.fail("no round may reach the user"))
    with pytest.raises(m.GateError) as e:
        c.call(tool, {})
    assert (e.value.code, e.value.cause) == (code, m.ErrorCause.PEER)
    c.check_trail()
    assert c.shown == []
