"""The shared scenario corpus (`tests/corpus/*.json`, format in docs/corpus.md) run through the
Python package, step for step as the Rust runner (`host-harness/testkit/src/corpus.rs`) runs it,
over the same reference hosts. Numbers are read and written exactly (as text), and messages
are written as serde_json writes them (keys in byte order), so every host sends the gate the
same bytes."""

from __future__ import annotations

import hashlib
import json
import os
from collections import deque
from pathlib import Path
from typing import Any, Optional

import mrtr_gate as m
from mrtr_gate import hosts

CORPUS = Path(os.environ.get("MRTR_GATE_CORPUS", Path(__file__).resolve().parents[3] / "tests" / "corpus"))
DEFAULT_SERVER = "https://server.example/mcp"
T0 = 1_700_000_000_000
U64_MAX = (1 << 64) - 1


class Num:
    """A JSON number, kept as the text it was written with (`2` is not `2.0`)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Num) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return self.text

    def as_u64(self) -> Optional[int]:
        t = self.text
        if t.isdigit() and t.isascii():
            v = int(t)
            return v if v <= U64_MAX else None
        return None

    def as_i64(self) -> Optional[int]:
        t = self.text[1:] if self.text.startswith("-") else self.text
        if t.isdigit() and t.isascii():
            v = int(self.text)
            return v if -(1 << 63) <= v < (1 << 63) else None
        return None


def loads(text: str) -> Any:
    return json.loads(text, parse_int=Num, parse_float=Num)


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _string(s: str) -> str:
    out = ['"']
    for ch in s:
        e = _ESCAPES.get(ch)
        if e is not None:
            out.append(e)
        elif ch < " ":
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def dumps(v: Any) -> str:
    """Compact JSON as serde_json (without `preserve_order`) writes it: object keys in byte
    order, numbers as written, only `"`, `\\` and control characters escaped."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, Num):
        return v.text
    if type(v) is int:
        return str(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, list):
        return "[" + ",".join(dumps(x) for x in v) + "]"
    if isinstance(v, dict):
        keys = sorted(v, key=lambda k: k.encode("utf-8", "surrogatepass"))
        return "{" + ",".join(_string(k) + ":" + dumps(v[k]) for k in keys) + "}"
    raise TypeError(f"not JSON: {v!r}")


def pointer(doc: Any, ptr: str) -> tuple[bool, Any]:
    """RFC 6901: (found, value)."""
    if ptr == "":
        return True, doc
    if not ptr.startswith("/"):
        return False, None
    cur = doc
    for raw in ptr[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(cur, dict):
            if token not in cur:
                return False, None
            cur = cur[token]
        elif isinstance(cur, list):
            if not (token.isdigit() and token.isascii()) or (len(token) > 1 and token[0] == "0"):
                return False, None
            i = int(token)
            if i >= len(cur):
                return False, None
            cur = cur[i]
        else:
            return False, None
    return True, cur


class AuthoringError(Exception):
    """The scenario itself is malformed."""


# ---- the reference hosts of docs/corpus.md ---------------------------------------------


class GateClock:
    """The clock the gate sees: the test clock, or 2**64 - 1 under the `wrapped_negative`
    fault (the store keeps the test clock)."""

    def __init__(self, clock: hosts.ManualClock) -> None:
        self.clock = clock
        self.wrapped = False

    def now_ms(self) -> int:
        return U64_MAX if self.wrapped else self.clock.now_ms()


class ScriptedConsent:
    def __init__(self) -> None:
        self.queue: deque[str] = deque()
        self.calls = 0

    def request_consent(self, prompt: m.ConsentPrompt) -> m.ConsentReceipt:
        answer = self.queue.popleft() if self.queue else "grant"
        self.calls += 1
        view, answers = prompt.view_sha256, prompt.responses_sha256
        decision = m.ConsentDecision.GRANTED
        if answer == "refuse":
            decision = m.ConsentDecision.REFUSED
        elif answer == "other_view":
            view = "0" * 64
        elif answer == "other_answers":
            answers = "0" * 64
        elif answer == "fail":
            raise m.HostError("consent ui unavailable (injected)")
        return m.ConsentReceipt(f"consent-{self.calls}", decision, m.ConsentMethod.PRESET_ANSWERS, view, answers)


class ScenarioHosts:
    def __init__(self) -> None:
        self.clock = hosts.ManualClock(T0)
        self.gate_clock = GateClock(self.clock)
        self.storage = hosts.MemoryStorage(self.clock)
        self.consent = ScriptedConsent()
        self.audit = hosts.MemoryAudit()

    def gate(self, component: Optional[bytes] = None) -> m.Gate:
        return m.Gate(
            clock=self.gate_clock, storage=self.storage, consent=self.consent, audit=self.audit, component=component
        )


# ---- steps -------------------------------------------------------------------------------


def _meta() -> dict:
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}},
    }


def default_params(method: str) -> dict:
    if method == "resources/read":
        return {"uri": "file:///project/README.md", "_meta": _meta()}
    return {"name": "tool", "arguments": {}, "_meta": _meta()}


def text_or(step: dict, key: str, default: str) -> str:
    v = step.get(key)
    return v if isinstance(v, str) else default


def id_of(v: Any) -> m.RequestId:
    if isinstance(v, Num):
        i = v.as_i64()
        if i is None:
            raise AuthoringError(f"id `{v}` is not an integer")
        return i
    if isinstance(v, str):
        return v
    raise AuthoringError(f"id `{dumps(v)}` must be a number or a string")


def server_of(step: dict) -> m.ServerIdentity:
    v = step.get("server")
    if v is None:
        return m.Origin(DEFAULT_SERVER)
    if isinstance(v, str):
        return m.Origin(v)
    if isinstance(v, dict):
        o, e = v.get("origin"), v.get("endpoint")
        if isinstance(o, str) and e is None:
            return m.Origin(o)
        if isinstance(e, str) and o is None:
            return m.Endpoint(e)
    raise AuthoringError(f"bad server `{dumps(v)}`")


def policy_of(step: dict) -> m.Policy:
    v = step.get("policy")
    p = m.Policy()
    if not isinstance(v, dict):
        return p

    def u64(key: str) -> Optional[int]:
        x = v.get(key)
        return x.as_u64() if isinstance(x, Num) else None

    kw: dict[str, Any] = {}
    if (x := u64("lifetime_ms")) is not None:
        kw["round_trip_lifetime_ms"] = x
    for key, name in (("max_state_bytes", "max_request_state_bytes"), ("max_rounds", "max_rounds")):
        if (x := u64(key)) is not None:
            if x >= 1 << 32:
                raise AuthoringError(f"`{key}` is beyond u32")
            kw[name] = x
    if isinstance(v.get("version"), str):
        kw["policy_version"] = v["version"]
    allow = v.get("allow")
    if isinstance(allow, list):
        names = {"roots/list": m.DeprecatedMethod.ROOTS_LIST, "sampling/createMessage": m.DeprecatedMethod.SAMPLING_CREATE_MESSAGE}
        try:
            kw["allowed_deprecated"] = tuple(names[x] for x in allow)
        except (KeyError, TypeError) as e:
            raise AuthoringError(f"unknown deprecated method in {dumps(allow)}") from e
    return m.Policy(**{**p.__dict__, **kw})


GENERATED = "\u0000mrtr-generated"


def generated(text: str, g: Any) -> str:
    placeholder = dumps(GENERATED)
    if placeholder not in text:
        raise AuthoringError(f"`generate` needs the placeholder {placeholder} in the message")

    def size(k: str) -> Optional[int]:
        x = g.get(k) if isinstance(g, dict) else None
        return x.as_u64() if isinstance(x, Num) else None

    if (n := size("string_bytes")) is not None:
        made = '"' + "a" * n + '"'
    elif (d := size("depth")) is not None:
        made = "[" * d + "1" + "]" * d
    elif (k := size("values")) is not None:
        made = "[" + ",".join(["1"] * k) + "]"
    else:
        raise AuthoringError(f"unknown `generate` {dumps(g)}")
    return text.replace(placeholder, made, 1)


def _outcome(call) -> dict:
    try:
        return {"ok": call()}
    except m.GateError as e:
        return {"error": e.code, "cause": e.cause.value}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _canonical(v: Any) -> str:
    """RFC 8785 key order (UTF-16 code units) over the text as parsed; numbers as written."""
    if isinstance(v, dict):
        keys = sorted(v, key=lambda k: k.encode("utf-16-be", "surrogatepass"))
        return "{" + ",".join(_string(k) + ":" + _canonical(v[k]) for k in keys) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_canonical(x) for x in v) + "]"
    return dumps(v)


def _verdict(v: m.Verdict) -> dict:
    if isinstance(v, m.InputRequired):
        shown = loads(v.view_json)
        return {
            "verdict": "input_required",
            "round": v.round,
            "input_keys": list(v.input_keys),
            "request_state_sha256": v.request_state_sha256,
            "view": shown,
            "view_sha256": v.view_sha256,
            "view_is_canonical": _canonical(shown) == v.view_json and _sha(v.view_json) == v.view_sha256,
        }
    if isinstance(v, m.Complete):
        return {"verdict": "complete"}
    return {"verdict": "error", "code": v.code}


def _normalise(v: Any) -> Any:
    """Python ints as JSON numbers (the gate's outputs), for comparison with what is written."""
    return loads(dumps(v))


def check(expect: dict, got: dict, at: str) -> None:
    def fail(why: str) -> None:
        raise AssertionError(f"{at}: {why}; got {dumps(got)}")

    if "error" in expect:
        if got.get("error") != expect["error"]:
            fail(f"expected error {dumps(expect['error'])}")
        if "cause" in expect and got.get("cause") != expect["cause"]:
            fail(f"expected cause {dumps(expect['cause'])}")
        return
    if "ok" not in got:
        fail("expected success")
    ok = got["ok"]
    fields = expect.get("ok")
    if isinstance(fields, dict):
        for ptr, want in fields.items():
            found, value = pointer(ok, ptr)
            if not found or value != want:
                fail(f"expected {ptr} = {dumps(want)}")
    for ptr in expect.get("absent") or []:
        if isinstance(ptr, str) and pointer(ok, ptr)[0]:
            fail(f"expected {ptr} absent")


def queue_consent(step: dict, h: ScenarioHosts, at: str) -> None:
    answer = step.get("consent")
    if isinstance(answer, str):
        if answer not in ("grant", "refuse", "other_view", "other_answers", "fail"):
            raise AuthoringError(f"{at}: unknown consent `{answer}`")
        h.consent.queue.append(answer)


def run_steps(scenario: dict, gate: m.Gate, h: ScenarioHosts, transcript: Optional[list] = None) -> None:
    steps = scenario.get("steps")
    if not isinstance(steps, list):
        raise AuthoringError("a scenario needs `steps`")
    for i, step in enumerate(steps):
        op = step.get("op") if isinstance(step.get("op"), str) else "?"
        at = f"step {i} ({op})"
        if op == "register":
            method = text_or(step, "method", "tools/call")
            if isinstance(step.get("params_text"), str):
                params = step["params_text"]
            elif "params" in step:
                params = dumps(step["params"])
            else:
                params = dumps(default_params(method))
            kw = dict(
                request_id=id_of(step.get("id")),
                server=server_of(step),
                user=text_or(step, "user", "alice"),
                tenant=text_or(step, "tenant", "acme"),
                method=method,
                params=params,
                policy=policy_of(step),
            )

            def call():
                r = gate.register(**kw)
                return {"request": loads(r.request_json), "params_sha256": r.params_sha256}

        elif op == "respond":
            if isinstance(step.get("raw"), str):
                text = step["raw"]
            elif "result" in step:
                text = dumps({"jsonrpc": "2.0", "id": step.get("id"), "result": step["result"]})
            elif "error" in step:
                text = dumps({"jsonrpc": "2.0", "id": step.get("id"), "error": step["error"]})
            else:
                raise AuthoringError(f"{at}: `respond` needs `raw`, `result` or `error`")
            if "generate" in step:
                text = generated(text, step["generate"])
            server = server_of(step)

            def call():
                return _verdict(gate.accept_response(server, text))

        elif op == "retry":
            queue_consent(step, h, at)
            if isinstance(step.get("responses_text"), str):
                responses = step["responses_text"]
            elif "responses" in step:
                responses = dumps(step["responses"])
            else:
                responses = "{}"
            kw = dict(
                server=server_of(step),
                request_id=id_of(step.get("id")),
                retry_id=id_of(step.get("retry_id")),
                user=text_or(step, "user", "alice"),
                tenant=text_or(step, "tenant", "acme"),
                responses=responses,
            )

            def call():
                r = gate.build_retry(**kw)
                return {"request": loads(r.request_json), "round": r.round, "consent_receipt_id": r.consent_receipt_id}

        elif op == "retry_from_client":
            queue_consent(step, h, at)
            if isinstance(step.get("params_text"), str):
                params = step["params_text"]
            elif "params" in step:
                params = dumps(step["params"])
            else:
                raise AuthoringError(f"{at}: `retry_from_client` needs `params`")
            kw = dict(
                server=server_of(step),
                request_id=None if step.get("id") is None else id_of(step.get("id")),
                retry_id=id_of(step.get("retry_id")),
                user=text_or(step, "user", "alice"),
                tenant=text_or(step, "tenant", "acme"),
                method=text_or(step, "method", "tools/call"),
                params=params,
            )

            def call():
                r = gate.retry_from_client(**kw)
                return {"request": loads(r.request_json), "round": r.round, "consent_receipt_id": r.consent_receipt_id}

        elif op == "refuse_unbound":
            kinds = {
                "server_request": m.Unbound.SERVER_REQUEST,
                "input_required": m.Unbound.INPUT_REQUIRED,
                "input_requests_notified": m.Unbound.INPUT_REQUESTS_NOTIFIED,
                "input_responses": m.Unbound.INPUT_RESPONSES,
            }
            kind = kinds.get(step.get("refusal"))
            if kind is None:
                raise AuthoringError(f"{at}: `refuse_unbound` needs a known `refusal`")
            if (kind is m.Unbound.SERVER_REQUEST) != isinstance(step.get("method"), str):
                raise AuthoringError(f"{at}: a `server_request` refusal needs `method`, and only it")
            kw = dict(
                server=server_of(step),
                user=text_or(step, "user", "alice"),
                tenant=text_or(step, "tenant", "acme"),
                refusal=kind,
                method=step.get("method"),
            )

            def call():
                raise gate.refuse_unbound(**kw)

        elif op == "finish":
            outcome = step.get("outcome")
            kw = dict(
                server=server_of(step),
                request_id=id_of(step.get("id")),
                user=text_or(step, "user", "alice"),
                tenant=text_or(step, "tenant", "acme"),
                error=None if outcome in (None, "cancelled") or not isinstance(outcome, str) else outcome,
                policy=step.get("policy_denied") if isinstance(step.get("policy_denied"), str) else None,
            )

            def call():
                return {"outcome": gate.finish(**kw).value}

        elif op == "expire_stale":

            def call():
                return {"ended": gate.expire_stale()}

        elif op == "advance_clock":
            ms = step.get("ms")
            h.clock.advance((ms.as_u64() or 0) if isinstance(ms, Num) else 0)
            continue
        elif op == "fault":
            audit = step.get("audit")
            if isinstance(audit, str):
                if audit not in ("none", "fail_append", "corrupt_readback", "lose_writes", "fail_readback"):
                    raise AuthoringError(f"{at}: unknown audit fault `{audit}`")
                h.audit.fault = None if audit == "none" else audit
            storage = step.get("storage")
            if isinstance(storage, str):
                h.storage.fault = storage if storage in ("fail", "lose_cas", "fail_deletes") else None
            clock = step.get("clock")
            if isinstance(clock, str):
                if clock not in ("none", "wrapped_negative"):
                    raise AuthoringError(f"{at}: unknown clock fault `{clock}`")
                h.gate_clock.wrapped = clock == "wrapped_negative"
            if "lose_cas_after" in step:
                n = step["lose_cas_after"]
                count = n.as_u64() if isinstance(n, Num) else None
                if count is None:
                    raise AuthoringError(f"{at}: `lose_cas_after` takes a count")
                h.storage.lose_cas_after = count
            continue
        else:
            raise AuthoringError(f"{at}: unknown op `{op}`")
        got = _normalise(_outcome(call))
        if transcript is not None:
            transcript.append(_canonical(got))
        expect = step.get("expect", {"ok": {}})
        found, canonical = pointer(got, "/ok/view_is_canonical")
        if found and canonical is False:
            raise AssertionError(f"{at}: the consent view is not canonical json with its digest")
        check(expect, got, at)


def check_trail(scenario: dict, lines: list[str]) -> None:
    """Every line names its shard and each shard's chain verifies (the shards' lines
    interleaved), no secret reached the trail, and the counts in `audit` match."""
    heads: dict[str, tuple[int, str]] = {}
    for n, line in enumerate(lines, start=1):
        event = json.loads(line)
        shard = event.get("shard")
        if not isinstance(shard, str) or not shard:
            raise AssertionError(f"audit line {n} names no shard: {line}")
        seq, prev = heads.get(shard, (0, "0" * 64))
        if event.get("seq") != seq + 1 or event.get("prev_sha256") != prev:
            raise AssertionError(f"the audit chain of shard {shard} is broken at line {n}")
        if _canonical(loads(line)) != line:
            raise AssertionError(f"an audit line is not canonical JSON: {line}")
        heads[shard] = (seq + 1, _sha(line))
    for secret in scenario.get("secrets") or []:
        for line in lines:
            if isinstance(secret, str) and secret in line:
                raise AssertionError(f"the secret `{secret}` reached the audit trail: {line}")
    counts = scenario.get("audit")
    if isinstance(counts, dict):
        events = [json.loads(x) for x in lines]
        for kind, want in counts.items():
            got = sum(
                1
                for e in events
                if kind == e.get("event") or kind == f"{e.get('event')}:{e.get('outcome')}"
            )
            if not isinstance(want, Num) or want.as_u64() != got:
                raise AssertionError(f"expected {dumps(want)} `{kind}` audit events, found {got}")


def scenarios() -> list[tuple[str, dict]]:
    files = sorted(p for p in CORPUS.glob("*.json"))
    return [(p.name, loads(p.read_text(encoding="utf-8"))) for p in files]


def recorded(kind: str, file: str) -> str:
    """The recorded `trails` or `transcripts` file of a scenario."""
    return (CORPUS / kind / (file.removesuffix(".json") + ".jsonl")).read_text(encoding="utf-8")


def run(scenario: dict, component: Optional[bytes] = None) -> tuple[Optional[Exception], list[str], list[str]]:
    """Run a scenario over fresh hosts: (the first failure or None, the audit lines, the
    transcript: the canonical JSON of each call's outcome)."""
    h = ScenarioHosts()
    gate = h.gate(component)
    transcript: list[str] = []
    try:
        run_steps(scenario, gate, h, transcript)
        check_trail(scenario, h.audit.lines)
        return None, h.audit.lines, transcript
    except (AssertionError, AuthoringError) as e:
        return e, h.audit.lines, transcript
