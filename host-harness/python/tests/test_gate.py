"""The Python package's own behaviour: the API, hostile services, the wasmtime-py workarounds
(docs in the package's README), traps and fresh instances, the reference hosts."""

import json
from pathlib import Path

import pytest

import mrtr_gate as m
from mrtr_gate import hosts

SERVER = m.Origin("https://mcp.example.com/mcp")
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}},
}
PARAMS = {"name": "book", "arguments": {"party": 4}, "_meta": META}
SCHEMA = {"type": "object", "properties": {"email": {"type": "string", "format": "email"}}, "required": ["email"]}


def form_round(rid):
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"resultType": "input_required", "inputRequests": {
        "contact": {"method": "elicitation/create", "params": {"message": "Email?", "requestedSchema": SCHEMA}}}}})


def complete(rid):
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"resultType": "complete", "content": []}})


ANSWERS = {"contact": {"action": "accept", "content": {"email": "ada@example.com"}}}


class Fx:
    def __init__(self, **services):
        self.clock = hosts.ManualClock()
        self.storage = hosts.MemoryStorage(self.clock)
        self.shown = []
        self.consent = hosts.CallbackConsent(lambda p: self.shown.append(p) is None)
        self.audit = hosts.MemoryAudit()
        kw = dict(clock=self.clock, storage=self.storage, consent=self.consent, audit=self.audit)
        kw.update(services)
        self.gate = m.Gate(**kw)

    def register(self, rid=1):
        return self.gate.register(request_id=rid, server=SERVER, user="alice", tenant="acme", method="tools/call", params=PARAMS)

    def retry(self, rid=1, retry_id=2, answers=ANSWERS):
        return self.gate.build_retry(server=SERVER, request_id=rid, retry_id=retry_id, user="alice", tenant="acme", responses=answers)


def denied(code, call):
    with pytest.raises(m.GateError) as e:
        call()
    assert e.value.code == code, e.value
    return e.value


def test_a_form_round_end_to_end():
    fx = Fx()
    sent = fx.register()
    assert json.loads(sent.request_json)["params"]["arguments"] == {"party": 4}
    v = fx.gate.accept_response(SERVER, form_round(1))
    assert isinstance(v, m.InputRequired) and v.input_keys == ("contact",) and v.round == 1
    assert v.view["request"]["name"] == "book"
    assert v.view is v.view, "the view is parsed once, every reader gets that parse"
    r = fx.retry()
    params = json.loads(r.request_json)["params"]
    assert params["inputResponses"] == ANSWERS and r.consent_receipt_id == "consent-1"
    assert fx.shown[0].view_sha256 == v.view_sha256
    assert fx.gate.accept_response(SERVER, complete(2)) == m.Complete()
    assert len(fx.storage) == 0
    events = [json.loads(x)["event"] for x in fx.audit.lines]
    assert events == ["received", "consented", "submitted", "terminal"]


def test_another_user_cannot_retry_and_the_denial_is_audited():
    fx = Fx()
    fx.register()
    fx.gate.accept_response(SERVER, form_round(1))
    e = denied("mrtr_identity_or_argument_mismatch", lambda: fx.gate.build_retry(
        server=SERVER, request_id=1, retry_id=2, user="mallory", tenant="acme", responses=ANSWERS))
    assert e.cause is m.ErrorCause.CALLER and e.audited
    assert fx.shown == [], "nobody was asked"


def test_a_clients_own_retry_is_held_to_its_round_and_goes_out_as_the_gates():
    fx = Fx()
    fx.register()
    fx.gate.accept_response(SERVER, form_round(1))
    mine = {"name": "book", "arguments": {"party": 4}, "_meta": {"progressToken": 3}, "inputResponses": ANSWERS}
    kw = dict(server=SERVER, retry_id="c-2", user="alice", tenant="acme", method="tools/call")
    e = denied("inactive_mrtr_round", lambda: fx.gate.retry_from_client(request_id=None, params=mine, **kw))
    assert e.audited and json.loads(fx.audit.lines[-1])["retry_id"] == "c-2"
    changed = dict(mine, arguments={"party": 40})
    e = denied("mrtr_identity_or_argument_mismatch", lambda: fx.gate.retry_from_client(request_id=1, params=changed, **kw))
    assert e.audited and fx.shown == []
    r = fx.gate.retry_from_client(request_id=1, params=json.dumps(mine), **kw)
    sent = json.loads(r.request_json)
    assert sent["id"] == "c-2" and sent["params"]["_meta"] == META and sent["params"]["inputResponses"] == ANSWERS
    assert r.consent_receipt_id == "consent-1"


def test_a_servers_request_outside_a_round_is_refused_and_audited():
    fx = Fx()
    e = fx.gate.refuse_unbound(
        server=SERVER, user="alice", tenant="acme", refusal=m.Unbound.SERVER_REQUEST, method="sampling/createMessage"
    )
    assert isinstance(e, m.GateError) and e.code == "legacy_server_request" and e.cause is m.ErrorCause.PEER
    assert e.audited and json.loads(fx.audit.lines[-1])["method"] == "sampling/createMessage"


def test_each_input_channel_outside_a_round_is_refused_and_audited():
    fx = Fx()
    for refusal, code, cause in [
        (m.Unbound.INPUT_REQUIRED, "input_required_not_allowed", m.ErrorCause.PEER),
        (m.Unbound.INPUT_REQUESTS_NOTIFIED, "input_requests_not_bound", m.ErrorCause.PEER),
        (m.Unbound.INPUT_RESPONSES, "input_responses_not_bound", m.ErrorCause.CALLER),
    ]:
        e = fx.gate.refuse_unbound(server=SERVER, user="alice", tenant="acme", refusal=refusal)
        assert (e.code, e.cause, e.audited) == (code, cause, True)
        line = json.loads(fx.audit.lines[-1])
        assert (line["event"], line["reason"], line["method"]) == ("rejected", code, None)


def test_refuse_unbound_takes_a_method_with_a_server_request_and_only_then():
    fx = Fx()
    for kw in [
        dict(refusal=m.Unbound.SERVER_REQUEST),
        dict(refusal=m.Unbound.INPUT_REQUIRED, method="roots/list"),
        dict(refusal="input-required"),
        dict(refusal=m.Unbound.SERVER_REQUEST, method=b"roots/list"),
    ]:
        e = denied("invalid_argument", lambda: fx.gate.refuse_unbound(server=SERVER, user="alice", tenant="acme", **kw))
        assert e.cause is m.ErrorCause.CALLER and not e.audited
    assert fx.audit.lines == []


def test_finish_and_expire_stale():
    fx = Fx()
    fx.register(1)
    assert fx.gate.finish(server=SERVER, request_id=1, user="alice", tenant="acme") is m.TerminalOutcome.CANCELLED
    fx.register(2)
    fx.clock.advance(5 * 60 * 1000)
    assert fx.gate.expire_stale() == 1, "a binding that audited nothing ends too (without a trail)"
    denied("unknown_request", lambda: fx.gate.finish(server=SERVER, request_id=2, user="alice", tenant="acme", error="transport_closed"))


@pytest.mark.parametrize("bad", [-1, 1.5, "now", None, 1 << 64])
def test_a_clock_out_of_range_denies_and_never_traps(bad):
    class Bad:
        def now_ms(self):
            return bad

    fx = Fx(clock=Bad())
    e = denied("clock_out_of_range", fx.register)
    assert e.cause is m.ErrorCause.HOST and not e.audited
    assert fx.gate.traps == 0


def test_a_clock_that_raises_denies():
    class Raises:
        def now_ms(self):
            raise RuntimeError("no time")

    denied("clock_out_of_range", Fx(clock=Raises()).register)


class Flaky(hosts.MemoryStorage):
    """Storage that fails in a chosen way on reads."""

    def __init__(self, clock, how):
        super().__init__(clock)
        self.how = how

    def read(self, keys):
        if self.how == "raise":
            raise RuntimeError("boom")
        if self.how == "host_error":
            raise m.HostError("store down")
        if self.how == "short":
            return super().read(keys)[:-1]
        if self.how == "bad_version":
            return [m.Entry(-1, "x") for _ in keys]
        if self.how == "not_a_list":
            return None
        return super().read(keys)


@pytest.mark.parametrize("how", ["raise", "host_error", "short", "bad_version", "not_a_list"])
def test_a_store_that_fails_or_lies_denies_audited_and_the_instance_survives(how):
    clock = hosts.ManualClock()
    storage = Flaky(clock, None)
    fx = Fx(clock=clock, storage=storage)
    fx.register()
    storage.how = how
    e = denied("storage_failed", lambda: fx.gate.accept_response(SERVER, form_round(1)))
    assert e.audited and fx.gate.traps == 0
    storage.how = None
    assert isinstance(fx.gate.accept_response(SERVER, form_round(1)), m.InputRequired)


def test_a_store_that_returns_out_of_range_versions_on_write_denies():
    class BadWrites(hosts.MemoryStorage):
        def write(self, writes):
            return [-5 for _ in writes]

    clock = hosts.ManualClock()
    fx = Fx(clock=clock, storage=BadWrites(clock))
    denied("storage_failed", fx.register)


@pytest.mark.parametrize("answer", [None, "yes", RuntimeError("ui gone")])
def test_a_consent_provider_that_fails_or_answers_nonsense_denies(answer):
    class Odd:
        def request_consent(self, prompt):
            if isinstance(answer, Exception):
                raise answer
            return answer

    fx = Fx(consent=Odd())
    fx.register()
    fx.gate.accept_response(SERVER, form_round(1))
    e = denied("consent_unavailable", fx.retry)
    assert e.audited and fx.gate.traps == 0
    # The round stays open.
    fx.gate._services.consent = hosts.CallbackConsent(lambda p: True)
    fx.retry()


@pytest.mark.parametrize(
    "method, recorded",
    [
        (None, "user_at_screen"),
        (m.ConsentMethod.PRESET_ANSWERS, "preset_answers"),
        ("delegated-to-client", "delegated_to_client"),
        (m.ConsentMethod.POLICY_HOOK, "policy_hook"),
    ],
)
def test_the_consented_event_names_how_the_decision_was_made(method, recorded):
    fx = Fx(consent=hosts.CallbackConsent(lambda p: True, method))
    fx.register()
    fx.gate.accept_response(SERVER, form_round(1))
    fx.retry()
    assert [json.loads(x)["consent_method"] for x in fx.audit.lines] == [None, recorded, None]


@pytest.mark.parametrize("method", [None, "user_at_screen", "USER-AT-SCREEN", 1])
def test_a_receipt_with_no_method_or_an_unknown_one_denies(method):
    class Odd:
        def request_consent(self, prompt):
            return m.ConsentReceipt("r-1", m.ConsentDecision.GRANTED, method, prompt.view_sha256, prompt.responses_sha256)

    fx = Fx(consent=Odd())
    fx.register()
    fx.gate.accept_response(SERVER, form_round(1))
    denied("consent_unavailable", fx.retry)
    assert fx.gate.traps == 0
    with pytest.raises(ValueError):
        hosts.CallbackConsent(lambda p: True, "a-person-probably")


def test_an_audit_sink_that_fails_or_lies_denies():
    fx = Fx()
    fx.register()
    fx.audit.fault = "lose_writes"
    denied("audit_readback_mismatch", lambda: fx.gate.accept_response(SERVER, form_round(1)))

    class Nonsense:
        def append(self, entry):
            return m.AppendOutcome("yes", None, -1, "")

    fx2 = Fx(audit=Nonsense())
    fx2.register()
    denied("audit_write_failed", lambda: fx2.gate.accept_response(SERVER, form_round(1)))


def test_a_trap_denies_as_guest_trapped_and_the_next_call_gets_a_fresh_instance():
    fx = Fx(max_memory_bytes=16 << 20)
    fx.register()
    huge = '{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":"' + "a" * (48 << 20) + '"}}'
    e = denied("guest_trapped", lambda: fx.gate.accept_response(SERVER, huge))
    assert e.cause is m.ErrorCause.HOST and not e.audited and fx.gate.traps == 1
    # Nothing was lost: the binding lives in storage.
    assert isinstance(fx.gate.accept_response(SERVER, form_round(1)), m.InputRequired)
    fx.retry()


@pytest.mark.parametrize(
    "kw,code",
    [
        (dict(request_id=1 << 63), "invalid_jsonrpc_request_id"),
        (dict(request_id=True), "invalid_jsonrpc_request_id"),
        (dict(request_id=1.0), "invalid_jsonrpc_request_id"),
        (dict(request_id=(1 << 53)), "invalid_jsonrpc_request_id"),
        (dict(server="https://mcp.example.com/mcp"), "invalid_server_identity"),
        (dict(user=None), "invalid_argument"),
        (dict(params=["not", "an", "object"]), "invalid_argument"),
    ],
)
def test_arguments_the_wit_cannot_carry_are_refused_before_the_call(kw, code):
    fx = Fx()
    args = dict(request_id=1, server=SERVER, user="alice", tenant="acme", method="tools/call", params=PARAMS)
    args.update(kw)
    denied(code, lambda: fx.gate.register(**args))
    assert fx.gate.traps == 0


def test_params_given_as_text_are_sent_byte_for_byte():
    fx = Fx()
    text = '{"name":"book","arguments":{"n":9007199254740993},"_meta":' + json.dumps(META) + "}"
    sent = fx.gate.register(request_id=1, server=SERVER, user="alice", tenant="acme", method="tools/call", params=text)
    assert '"n":9007199254740993' in sent.request_json


def test_the_file_audit_sink_fsyncs_reads_back_and_refuses_a_tampered_file(tmp_path):
    path = tmp_path / "audit.jsonl"
    sink = hosts.FileAudit(path)
    fx = Fx(audit=sink)
    fx.register()
    fx.gate.accept_response(SERVER, form_round(1))
    fx.retry()
    fx.gate.accept_response(SERVER, complete(2))
    sink.close()
    lines = path.read_text().splitlines()
    assert [json.loads(x)["event"] for x in lines] == ["received", "consented", "submitted", "terminal"]
    # Reopened, it extends the chain: a second gate instance appends after the head it learns.
    again = hosts.FileAudit(path)
    fx2 = Fx(audit=again)
    fx2.register(7)
    fx2.gate.accept_response(SERVER, form_round(7))
    again.close()
    assert json.loads(path.read_text().splitlines()[-1])["seq"] == 5
    path.write_text(path.read_text().replace("received", "receivad", 1))
    with pytest.raises(ValueError):
        hosts.FileAudit(path)


def test_each_engine_is_the_one_asked_for(engine):
    assert Fx().gate.engine == engine


def test_a_schema_mismatch_names_the_field_and_the_rule_escaped_and_keeps_it_out_of_the_trail():
    fx = Fx()
    fx.register()
    fx.gate.accept_response(SERVER, form_round(1))
    e = denied("input_response_schema_mismatch", lambda: fx.retry(
        answers={"contact": {"action": "accept", "content": {"email": "not an address"}}}))
    assert e.message == "the content for `contact` does not match its requested schema: `email`: must be a valid email"
    assert e.message in str(e)
    # A name from outside is escaped where a person reads it (the error's text), kept as is in
    # `message` (data).
    hostile = "em\u202eail"
    e = denied("input_response_schema_mismatch", lambda: fx.retry(
        answers={"contact": {"action": "accept", "content": {"email": "ada@example.com", hostile: "x"}}}))
    assert f"`{hostile}`: not in the schema" in e.message
    assert "\u202e" not in str(e) and m.shown_text(hostile) in str(e)
    # The trail keeps the code, never the field or the rule.
    assert fx.audit.lines
    for line in fx.audit.lines:
        for text in ("must be a valid", "not in the schema", "\\u202e", "em\u202eail"):
            assert text not in line, line


VECTORS = json.loads((Path(__file__).parents[3] / "tests/canonical/responses_vectors.json").read_text())


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v["sha256"][:8])
def test_the_answers_are_digested_exactly_as_the_gate_digests_them(vector):
    from mrtr_gate._canonical import canonical, responses_sha256

    assert canonical(json.loads(vector["responses_json"])) == vector["canonical"]
    assert responses_sha256(vector["responses_json"]) == vector["sha256"]


def test_a_decision_recorded_for_the_verdict_and_the_answers_is_the_consent_the_gate_finds():
    consent = hosts.DecidedConsent()
    fx = Fx(consent=consent)
    fx.register()
    v = fx.gate.accept_response(SERVER, form_round(1))
    # Nothing decided yet: no consent.
    denied("consent_unavailable", fx.retry)
    # Decided on other answers: still none for these.
    consent.decide_for(v, {"contact": {"action": "decline"}}, True)
    denied("consent_unavailable", fx.retry)
    # Decided on these answers (as text, keys in another order): the retry goes out.
    text = '{"contact": {"content": {"email": "ada@example.com"}, "action": "accept"}}'
    receipt = consent.decide_for(v, text, True)
    r = fx.retry()
    assert r.consent_receipt_id == receipt
    consented = [json.loads(x) for x in fx.audit.lines if json.loads(x)["event"] == "consented"]
    assert [e["consent_method"] for e in consented] == ["user_at_screen"]


def test_a_refusal_recorded_is_consent_refused_and_bad_answers_are_refused_when_recorded():
    consent = hosts.DecidedConsent()
    fx = Fx(consent=consent)
    fx.register()
    v = fx.gate.accept_response(SERVER, form_round(1))
    consent.decide_for(v, ANSWERS, False, m.ConsentMethod.PRESET_ANSWERS)
    denied("consent_refused", fx.retry)
    for bad in ["[]", '{"a": 1, "a": 2}', "{", '"text"']:
        with pytest.raises(ValueError):
            consent.decide_for(v, bad, True)


def test_a_pinned_host_loads_only_the_component_whose_digest_it_expects():
    import hashlib

    wasm = m.bundled_component()
    digest = hashlib.sha256(wasm).hexdigest()
    fx = Fx()
    m.Gate(clock=fx.clock, storage=fx.storage, consent=fx.consent, audit=fx.audit, expected_sha256=digest.upper())
    with pytest.raises(m.UnexpectedComponent) as e:
        m.Gate(clock=fx.clock, storage=fx.storage, consent=fx.consent, audit=fx.audit, expected_sha256="0" * 64)
    assert e.value.actual == digest
    with pytest.raises(m.UnexpectedComponent):
        m.Gate(clock=fx.clock, storage=fx.storage, consent=fx.consent, audit=fx.audit,
               component=wasm + b"\x00\x04xxx\x00", expected_sha256=digest)


def _round_trail(fx):
    fx.register()
    fx.gate.accept_response(SERVER, form_round(1))
    fx.retry()
    fx.gate.accept_response(SERVER, complete(2))
    return list(fx.audit.lines)


@pytest.mark.parametrize(
    "answer",
    [None, "", "XYZ", "A" * 64, "0" * 63, "0" * 65, " " + "0" * 63, "g" * 64, "\u00e9" * 32],
    ids=["none", "empty", "short", "uppercase", "63", "65", "space", "not-hex", "multibyte"],
)
def test_a_host_with_no_sha256_or_a_malformed_one_is_asked_once_and_the_trail_is_the_same(monkeypatch, answer):
    import hashlib

    from mrtr_gate import _component

    baseline = _round_trail(Fx())
    asked = []
    monkeypatch.setattr(_component, "sha256", lambda store, text: asked.append(text) or answer)
    assert _round_trail(Fx()) == baseline
    assert len(asked) == 1, "an answer that is not 64 lowercase hex digits stops the asking"
    asked.clear()
    hashed = lambda text: hashlib.sha256(text.encode()).hexdigest()  # noqa: E731
    monkeypatch.setattr(_component, "sha256", lambda store, text: asked.append(text) or hashed(text))
    assert _round_trail(Fx()) == baseline
    assert len(asked) > 1 and all(len(t.encode()) >= 128 for t in asked), "only texts worth a call are sent"
