"""The host-key wrappers (mrtr_gate.host_keys) against the Rust host's formats, byte for byte
(tests/host_keys/vectors.json, recorded by tests/e2e/host_key_vectors.rs), their key rules and
rollback marks, and one round through the gate with them on."""

import json
from pathlib import Path

import pytest

import mrtr_gate as m
from mrtr_gate import hosts
from mrtr_gate.host_keys import AuthenticatedStorage, HostKeyError, HostKeys, Pseudonyms

VECTORS = json.loads((Path(__file__).resolve().parents[3] / "tests/host_keys/vectors.json").read_text("utf-8"))


def keys_of(entries, current=None):
    first, *rest = entries
    keys = HostKeys(first["id"], bytes.fromhex(first["secret_hex"]))
    for k in rest:
        keys.add(k["id"], bytes.fromhex(k["secret_hex"]))
    if current is not None:
        keys.rotate_to(current)
    return keys


class OneValue:
    """A store that keeps what it is given and answers one value to every read."""

    def __init__(self, stored=None):
        self.stored = stored
        self.written = []

    def read(self, keys):
        return [self.stored for _ in keys]

    def write(self, writes):
        self.written.extend(w.value for w in writes if w.value is not None)
        return [w.expected + 1 for w in writes]

    def list_due(self, due_by_ms, cursor, limit):
        raise m.HostError("not listed")


def open_with(keys, key, stored, version):
    return AuthenticatedStorage(OneValue(m.Entry(version, stored)), keys).read([m.ReadKey(key, 0)])[0].value


def test_pseudonyms_are_the_rust_hosts_byte_for_byte():
    assert len(VECTORS["pseudonyms"]) >= 3
    for v in VECTORS["pseudonyms"]:
        names = Pseudonyms(keys_of(VECTORS["keys"], v["key_id"]))
        assert names.user(v["user"]) == v["user_pseudonym"]
        assert names.tenant(v["tenant"]) == v["tenant_pseudonym"]


def test_sealed_values_are_the_rust_hosts_byte_for_byte_and_open_back():
    assert len(VECTORS["sealed"]) >= 3
    for v in VECTORS["sealed"]:
        store = OneValue()
        prev = int(v["prev"])
        AuthenticatedStorage(store, keys_of(VECTORS["keys"], v["key_id"])).write([m.WriteOp(v["key"], prev, v["text"], 60_000)])
        assert store.written == [v["sealed"]]
        assert open_with(keys_of(VECTORS["keys"]), v["key"], v["sealed"], prev + 1) == v["text"]


@pytest.mark.parametrize("v", VECTORS["refused"], ids=[v["why"] for v in VECTORS["refused"]])
def test_every_value_the_rust_host_refuses_is_refused(v):
    with pytest.raises(m.HostError):
        open_with(keys_of(VECTORS["keys"]), v["key"], v["stored"], 1)


def test_key_ids_secrets_and_rotation_follow_the_rust_rules():
    secret = bytes(32)
    for bad in ["", "a" * 33, "k.1", "k 1", "é"]:
        with pytest.raises(HostKeyError):
            HostKeys(bad, secret)
    with pytest.raises(HostKeyError):
        HostKeys("k1", bytes(31))
    keys = HostKeys("a" * 32, secret)
    with pytest.raises(HostKeyError):
        keys.rotate_to("k2")
    keys.add("k2", bytes(range(32)))
    keys.rotate_to("k2")
    keys.retire("k2")
    assert keys.current_id == "k2"
    assert "k2" in repr(keys) and secret.hex() not in repr(keys)
    # A value sealed under a retired key no longer opens.
    old = HostKeys("k1", bytes([7] * 32))
    store = OneValue()
    AuthenticatedStorage(store, old).write([m.WriteOp("a", 0, "{}", 1)])
    both = HostKeys("k2", bytes(32))
    both.add("k1", bytes([7] * 32))
    assert open_with(both, "a", store.written[0], 1) == "{}"
    both.retire("k1")
    with pytest.raises(m.HostError):
        open_with(both, "a", store.written[0], 1)


def test_a_value_written_back_after_a_newer_one_was_seen_is_refused_as_a_rollback():
    inner = hosts.MemoryStorage(hosts.ManualClock())
    store = AuthenticatedStorage(inner, HostKeys("k1", bytes([7] * 32)))
    versions, sealed = [0], []
    for text in ["round open", "round answered", "round used"]:
        versions += store.write([m.WriteOp("r", versions[-1], text, 60_000)])
        sealed.append(inner.read([m.ReadKey("r", 0)])[0].value)
    assert store.read([m.ReadKey("r", 0)])[0].value == "round used"
    # The store's writer puts the sealed "round answered" back: its MAC holds, its prev is old.
    assert inner.write([m.WriteOp("r", versions[-1], sealed[1], 60_000)])
    with pytest.raises(m.HostError, match="rollback"):
        store.read([m.ReadKey("r", 0)])
    # A wrapper that never saw the key has no mark to hold it to (docs/host-keys.md).
    assert AuthenticatedStorage(inner, HostKeys("k1", bytes([7] * 32))).read([m.ReadKey("r", 0)])[0].value == "round answered"


def test_the_gate_runs_a_round_over_authenticated_storage_and_pseudonyms_and_refuses_a_rewritten_value():
    from test_gate import ANSWERS, PARAMS, SERVER, complete, form_round

    keys = HostKeys("k1", bytes([7] * 32))
    names = Pseudonyms(keys)
    clock = hosts.ManualClock()
    inner = hosts.MemoryStorage(clock)
    audit = hosts.MemoryAudit()
    gate = m.Gate(clock=clock, storage=AuthenticatedStorage(inner, keys), consent=hosts.CallbackConsent(lambda p: True), audit=audit)
    user, tenant = names.user("ada@example.com"), names.tenant("acme")

    def run(rid, retry_id):
        gate.register(request_id=rid, server=SERVER, user=user, tenant=tenant, method="tools/call", params=PARAMS)
        assert isinstance(gate.accept_response(SERVER, form_round(rid)), m.InputRequired)
        assert all(inner.read([m.ReadKey(k, 0)])[0].value.startswith("mac2.k1.") for k in inner.live_keys())
        return lambda: gate.build_retry(server=SERVER, request_id=rid, retry_id=retry_id, user=user, tenant=tenant, responses=ANSWERS)

    run(1, 2)()
    assert gate.accept_response(SERVER, complete(2)) == m.Complete()
    assert len(inner) == 0
    assert not any("ada@example.com" in line or '"acme"' in line for line in audit.lines)

    retry = run(3, 4)
    rewritten = 0
    for k in inner.live_keys():
        found = inner.read([m.ReadKey(k, 0)])[0]
        forged = found.value.replace('"party":4', '"party":40')
        if forged != found.value:
            rewritten += len(inner.write([m.WriteOp(k, found.version, forged, 60_000)]))
    assert rewritten
    with pytest.raises(m.GateError) as e:
        retry()
    assert e.value.code == "storage_failed"
