"""The Python SDK's server (server.py beside this file, `mcp==2.3.0`) over stdio and over
streamable HTTP, every round through the gate (the `mrtr_gate` package): the rounds a real
SDK server sends, in its own encoding, byte for byte as it sent them (the client here reads
the raw line or body; nothing is re-encoded before the gate checks it). Each case asserts
what the user ends up with and the audit trail: every received round has one terminal event,
and no secret is in any line."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

import mrtr_gate as m
from mrtr_gate import hosts

HERE = Path(__file__).parent
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}},
}
SECRETS = ["SECRET-SESSION", "SECRET-TOKEN", "Ada Lovelace", "hunter2"]


class Peer:
    """The SDK server as a child process over stdio: one JSON-RPC message per line each way.
    The server the gate binds to is the command (an endpoint id), never `serverInfo`."""

    server = m.Endpoint("stdio:python-sdk-peer")

    def __init__(self, script: str = "server.py") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / script)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )

    def exchange(self, request_json: str) -> str:
        assert "\n" not in request_json
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(request_json.encode() + b"\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the server closed the stream"
        return line.decode("utf-8").rstrip("\n")

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=10)


def start_http(script: str, what: str) -> tuple[subprocess.Popen, str]:
    """`python SCRIPT http 0` (a server on http_serving.py): the process and the URL of its
    ready line. The server listens before it prints the line, so no port is picked and freed
    first and nothing polls. A server that exits first fails; the 300 s bound is a backstop
    against a hang, never a pace."""
    proc = subprocess.Popen([sys.executable, str(HERE / script), "http", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout
    stdout = proc.stdout
    first: queue.Queue[bytes] = queue.Queue()

    def read() -> None:
        first.put(stdout.readline())
        # Drained, never left to fill the pipe.
        for _ in stdout:
            pass

    threading.Thread(target=read, daemon=True).start()
    try:
        line = first.get(timeout=300).decode("utf-8").rstrip("\n")
    except queue.Empty:
        proc.kill()
        raise RuntimeError(f"{what} never said where it listens") from None
    if not line.startswith("listening on "):
        proc.kill()
        raise RuntimeError(f"{what} exited before it listened ({line!r})")
    return proc, line.removeprefix("listening on ")


class HttpPeer:
    """The SDK server over streamable HTTP on a loopback port it picks: each request a POST with
    the MCP headers; the answer is a JSON body, or an SSE stream whose last event carries it.
    The server the gate binds to is the URL the client connects to."""

    def __init__(self) -> None:
        self.proc, self.url = start_http("server.py", "the HTTP peer")
        self.server = m.Origin(self.url)

    def exchange(self, request_json: str) -> str:
        request = json.loads(request_json)
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": request["method"],
        }
        if "name" in request.get("params", {}):
            headers["mcp-name"] = request["params"]["name"]
        req = urllib.request.Request(self.url, data=request_json.encode(), method="POST", headers=headers)
        with urllib.request.urlopen(req, timeout=20) as r:
            body = r.read().decode("utf-8")
            if (r.headers.get("content-type") or "").startswith("text/event-stream"):
                data = [line[5:].lstrip() for line in body.splitlines() if line.startswith("data:")]
                return data[-1]
            return body

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture(params=["stdio", "http"])
def peer(request):
    p = Peer() if request.param == "stdio" else HttpPeer()
    yield p
    p.close()


class Client:
    """A client's round loop: register, send, gate the raw answer, ask, retry."""

    def __init__(self, peer: Peer, answer) -> None:
        self.peer = peer
        clock = hosts.SystemClock()
        self.audit = hosts.MemoryAudit()
        self.shown: list[dict] = []
        self.gate = m.Gate(clock=clock, storage=hosts.MemoryStorage(clock),
                           consent=hosts.CallbackConsent(lambda p: True), audit=self.audit)
        self.answer = answer
        self.next_id = 1

    def call(self, tool: str, arguments: dict | str, policy: m.Policy = m.Policy(), meta: dict = META):
        """`arguments` a dict, or a JSON text that the params carry as written."""
        rid = self.next_id
        self.next_id += 1
        params: dict | str = {"name": tool, "arguments": arguments, "_meta": meta}
        if isinstance(arguments, str):
            params = f'{{"name":{json.dumps(tool)},"arguments":{arguments},"_meta":{json.dumps(meta)}}}'
        server = self.peer.server
        sent = self.gate.register(request_id=rid, server=server, user="alice", tenant="acme",
                                  method="tools/call", params=params, policy=policy)
        raw = self.peer.exchange(sent.request_json)
        verdict = self.gate.accept_response(server, raw)
        while isinstance(verdict, m.InputRequired):
            self.shown.append(verdict.view)
            retry_id = self.next_id
            self.next_id += 1
            retry = self.gate.build_retry(server=server, request_id=rid, retry_id=retry_id, user="alice",
                                          tenant="acme", responses=self.answer(verdict.view))
            rid = retry_id
            raw = self.peer.exchange(retry.request_json)
            verdict = self.gate.accept_response(server, raw)
        return verdict, json.loads(raw)

    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.audit.lines]

    def check_trail(self) -> None:
        events = self.events()
        received = {e["request_id"] for e in events if e["event"] == "received"}
        for original in received:
            terminal = [e for e in events if e["event"] == "terminal" and e["request_id"] == original]
            assert len(terminal) == 1, f"binding {original}: {len(terminal)} terminal events"
        for line in self.audit.lines:
            for secret in SECRETS:
                assert secret not in line


def accept_all(content_for):
    def answer(view):
        out = {}
        for i in view["inputs"]:
            if i["kind"] == "form":
                out[i["key"]] = {"action": "accept", "content": content_for(i)}
            else:
                out[i["key"]] = {"action": "accept"}
        return out
    return answer


def text_of(reply: dict) -> str:
    return reply["result"]["content"][0]["text"]


def test_a_form_round_from_the_python_sdk(peer):
    c = Client(peer, accept_all(lambda i: {"full_name": "Ada Lovelace", "seat": "window", "bags": 1}))
    verdict, reply = c.call("book_flight", {"origin": "OSL", "destination": "SFO"})
    assert verdict == m.Complete()
    assert text_of(reply) == 'booked OSL-SFO: {"passenger": {"action": "accept", "content": {"bags": 1, "full_name": "Ada Lovelace", "seat": "window"}}}'
    fields = {f["name"]: f for f in c.shown[0]["inputs"][0]["fields"]}
    assert fields["full_name"]["max_length"] == 100 and fields["seat"]["type"] == "single_select"
    assert [e["event"] for e in c.events()] == ["received", "consented", "submitted", "terminal"]
    c.check_trail()


def test_a_url_round_from_the_python_sdk(peer):
    c = Client(peer, accept_all(lambda i: {}))
    verdict, reply = c.call("pay", {"amount": 42})
    assert verdict == m.Complete()
    assert c.shown[0]["inputs"][0]["url"]["full"] == "https://pay.example.com/authorize?session=SECRET-SESSION"
    assert text_of(reply) == 'paid 42: {"pay": {"action": "accept"}}'
    c.check_trail()


def test_a_state_only_round_needs_no_consent(peer):
    c = Client(peer, lambda view: {})
    verdict, reply = c.call("continue_job", {})
    assert verdict == m.Complete()
    assert text_of(reply) == "job done after step-1"
    assert [e["event"] for e in c.events()] == ["received", "submitted", "terminal"]
    c.check_trail()


def test_a_form_and_a_url_in_one_round(peer):
    c = Client(peer, accept_all(lambda i: {"email": "ada@example.com"}))
    verdict, reply = c.call("combined", {})
    assert verdict == m.Complete()
    assert '"contact": {"action": "accept", "content": {"email": "ada@example.com"}}' in text_of(reply)
    assert text_of(reply).endswith("state=combined-state")
    c.check_trail()


def test_three_rounds_with_evolving_state(peer):
    c = Client(peer, accept_all(lambda i: {"answer": f"for {i['key']}"}))
    verdict, reply = c.call("survey", {})
    assert verdict == m.Complete()
    assert [v["round"] for v in c.shown] == [1, 2, 3]
    assert "for q3" in text_of(reply)
    c.check_trail()


def test_a_server_that_never_finishes_meets_the_round_limit(peer):
    c = Client(peer, lambda view: {})
    with pytest.raises(m.GateError) as e:
        c.call("forever", {}, policy=m.Policy(max_rounds=3))
    assert e.value.code == "round_limit_exceeded" and e.value.cause is m.ErrorCause.PEER
    c.check_trail()


def test_sealed_state_comes_back_exactly(peer):
    c = Client(peer, lambda view: {})
    verdict, reply = c.call("sealed", {})
    assert verdict == m.Complete()
    assert text_of(reply) == "sealed ok: balance=100"
    c.check_trail()


# Numbers as a client may write them, and as each must reach the server: digit for digit, only
# an exponent's sign written out (`1e2` as `1e+2`, docs/audit.md), never in the canonical layout
# the gate compares them in (`1.0` as `1`, `-0` as `0`, `1e2` as `100`, an integer past 21 digits
# with an exponent). The same numbers as host-harness/cli/tests/exact_numbers.rs.
WRITTEN = [
    ("1234567890123456", "1234567890123456"),
    ("1234567890123456789012", "1234567890123456789012"),
    ("1234567890123456789012345678901234567890", "1234567890123456789012345678901234567890"),
    ("-0", "-0"),
    ("1.0", "1.0"),
    ("1e2", "1e+2"),
    ("3.14159265358979323846264338327", "3.14159265358979323846264338327"),
    ("0.1", "0.1"),
]
NUMBERS = '{"values":{' + ",".join(f'"v{i}":{n}' for i, (n, _) in enumerate(WRITTEN)) + "}}"


def numbers_direct(peer) -> dict:
    """The `numbers` tool called with no gate: the call, then its retry with the round's state,
    written here; the tool's report (per value: type and repr as the tool got it, and the
    number as written in the request the server read)."""
    def message(rid: int, state: str | None) -> str:
        extra = "" if state is None else f',"requestState":{json.dumps(state)}'
        return (f'{{"jsonrpc":"2.0","id":{rid},"method":"tools/call","params":{{"name":"numbers",'
                f'"arguments":{NUMBERS}{extra},"_meta":{json.dumps(META)}}}}}')
    round_ = json.loads(peer.exchange(message(101, None)))
    assert round_["result"]["resultType"] == "input_required", round_
    return json.loads(text_of(json.loads(peer.exchange(message(102, round_["result"]["requestState"])))))


def test_numbers_reach_the_tool_as_written_on_the_call_and_on_the_retry_the_gate_builds(peer):
    direct = numbers_direct(peer)
    c = Client(peer, lambda view: {})
    verdict, reply = c.call("numbers", NUMBERS)
    assert verdict == m.Complete()
    gated = json.loads(text_of(reply))
    for i, (written, sent) in enumerate(WRITTEN):
        for part in ("call", "retry"):
            assert direct[part][f"v{i}"][2] == written, (part, i, direct)
            assert gated[part][f"v{i}"][2] == sent, (part, i, gated)
    assert direct["retry"] == direct["call"]
    got = {k: v[:2] for k, v in direct["call"].items()}
    assert {k: v[:2] for k, v in gated["call"].items()} == got, "the call"
    assert {k: v[:2] for k, v in gated["retry"].items()} == got, "the retry the gate built"
    assert got["v1"] == ["int", WRITTEN[1][0]] and got["v2"] == ["int", WRITTEN[2][0]]
    assert [e["event"] for e in c.events()] == ["received", "submitted", "terminal"]
    c.check_trail()
