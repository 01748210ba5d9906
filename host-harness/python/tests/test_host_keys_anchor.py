"""The keyed trail (mrtr_gate.host_keys.AnchoredAudit, verify_anchor) against the Rust host's,
byte for byte: the trail recorded from a Rust gate round under its AnchoredAudit
(tests/host_keys/trail.*, by tests/e2e/anchored_trail.rs) verifies Intact here, and this
package keys its lines to the very links and anchor Rust wrote (so the Rust verifier accepts
what this package writes). Then a round through this package's gate, and the tampering the
anchor answers: a cut tail, lines past the anchor, a line appended without the key."""

import hashlib
import json
from pathlib import Path

import mrtr_gate as m
from mrtr_gate import hosts
from mrtr_gate.host_keys import (
    AnchoredAudit,
    BadAnchor,
    BrokenChain,
    Diverged,
    Extended,
    HostKeys,
    Intact,
    Truncated,
    Unkeyed,
    verify_anchor,
)

FIXTURES = Path(__file__).resolve().parents[3] / "tests/host_keys"
# `k1` of vectors.json, which keyed the recorded trail.
KEYS = HostKeys("k1", bytes([7] * 32))


def sha(line):
    return hashlib.sha256(line.encode()).hexdigest()


def rekey(lines, tmp_path):
    """The links and anchor this package's AnchoredAudit writes for `lines`, appended in order."""
    links, anchor = tmp_path / "rekey.links", tmp_path / "rekey.anchor"
    audit = AnchoredAudit(hosts.MemoryAudit(), KEYS, anchor, links)
    prev = m.GENESIS_SHA256
    for seq, line in enumerate(lines, start=1):
        assert audit.append(m.AuditEntry(seq, prev, sha(line), line)).written
        prev = sha(line)
    return links.read_bytes(), anchor.read_bytes()


def test_the_rust_keyed_trail_is_intact_and_keyed_here_to_the_same_bytes(tmp_path):
    trail = (FIXTURES / "trail.jsonl").read_text("utf-8")
    links = (FIXTURES / "trail.jsonl.links").read_bytes()
    anchor = (FIXTURES / "trail.anchor").read_bytes()
    lines = trail.splitlines()
    assert len(lines) >= 2
    assert verify_anchor(trail, links.decode(), anchor.decode(), KEYS) == Intact(len(lines))
    assert rekey(lines, tmp_path) == (links, anchor)
    # The MAC in uppercase hex says the same bytes; every host refuses it alike.
    mac = json.loads(anchor)["mac"]
    assert verify_anchor(trail, links.decode(), anchor.decode().replace(mac, mac.upper()), KEYS) == BadAnchor()
    first = links.decode().splitlines()[0]
    upper = links.decode().replace(json.loads(first)["mac"], json.loads(first)["mac"].upper())
    assert verify_anchor(trail, upper, anchor.decode(), KEYS) == Unkeyed(1)


def test_a_round_under_anchored_audit_is_intact_and_each_tampering_is_found(tmp_path):
    from test_gate import ANSWERS, PARAMS, SERVER, form_round

    trail, links = tmp_path / "audit.jsonl", tmp_path / "audit.jsonl.links"
    first, second = tmp_path / "first.anchor", tmp_path / "second.anchor"

    def round_(anchor, rid):
        clock = hosts.ManualClock()
        sink = hosts.FileAudit(trail)
        try:
            gate = m.Gate(
                clock=clock,
                storage=hosts.MemoryStorage(clock),
                consent=hosts.CallbackConsent(lambda p: True),
                audit=AnchoredAudit(sink, KEYS, anchor, links),
            )
            gate.register(request_id=rid, server=SERVER, user="u", tenant="t", method="tools/call", params=PARAMS)
            assert isinstance(gate.accept_response(SERVER, form_round(rid)), m.InputRequired)
            gate.build_retry(server=SERVER, request_id=rid, retry_id=rid + 100, user="u", tenant="t", responses=ANSWERS)
        finally:
            sink.close()

    def check(text=None, anchor=first, keys=KEYS):
        return verify_anchor(trail.read_text() if text is None else text, links.read_text(), anchor.read_text(), keys)

    round_(first, 1)
    text = trail.read_text()
    n = len(text.splitlines())
    assert n >= 2
    assert check() == Intact(n)
    # What this package writes is what the Rust host writes for the same lines.
    assert rekey(text.splitlines(), tmp_path) == (links.read_bytes(), first.read_bytes())

    # The newest line cut off: the chain of what is left verifies, not against the anchor.
    assert check("".join(line + "\n" for line in text.splitlines()[:-1])) == Truncated(n - 1, n)
    assert check(keys=HostKeys("k1", bytes([8] * 32))) == BadAnchor()
    assert verify_anchor(text, links.read_text(), first.read_text().replace('"seq":', '"seq":1'), KEYS) == BadAnchor()
    assert verify_anchor(text, links.read_text(), "", KEYS) == BadAnchor()
    assert verify_anchor(text, "", first.read_text(), KEYS) == Unkeyed(1)
    assert check(text.replace('"seq":1,', '"seq":7,', 1)) == BrokenChain()

    # Another key holder goes on (its own anchor): the first anchor does not cover its lines.
    round_(second, 2)
    grown = trail.read_text()
    total = len(grown.splitlines())
    assert total > n
    assert check() == Extended(total, n)
    assert check(anchor=second) == Intact(total)

    # A line appended by whoever can write the trail, chained as the core would: no link.
    last = grown.splitlines()[-1]
    forged = dict(json.loads(last), event="consented", seq=total + 1, prev_sha256=sha(last))
    appended = grown + json.dumps(forged, sort_keys=True, separators=(",", ":")) + "\n"
    for anchor in (first, second):
        assert check(appended, anchor) == Unkeyed(total + 1)

    # The line at the anchored position is another keyed one: the Rust trail's anchor (the
    # same key) over this trail, every line of which is keyed.
    rust = (FIXTURES / "trail.anchor").read_text()
    assert json.loads(rust)["seq"] <= total
    assert verify_anchor(grown, links.read_text(), rust, KEYS) == Diverged()


def test_an_anchor_that_cannot_be_written_fails_the_append(tmp_path):
    audit = AnchoredAudit(hosts.MemoryAudit(), KEYS, tmp_path / "missing" / "audit.anchor", tmp_path / "links")
    line = '{"prev_sha256":"' + m.GENESIS_SHA256 + '","seq":1}'
    try:
        audit.append(m.AuditEntry(1, m.GENESIS_SHA256, sha(line), line))
    except m.HostError as e:
        assert "anchor" in str(e)
    else:
        raise AssertionError("an unwritten anchor must fail the append")
    # The link went first, so the line it covers is keyed.
    assert sha(line) in (tmp_path / "links").read_text()


def test_a_trail_this_package_keys_is_recorded_for_the_rust_verifier(tmp_path):
    """tests/host_keys/python_trail.*: a round through this package's gate under its
    AnchoredAudit (re-recorded with MRTR_GATE_BLESS=1), which tests/e2e/anchored_trail.rs
    verifies with the Rust host's verify_anchor."""
    import os

    from test_gate import ANSWERS, PARAMS, SERVER, form_round

    trail, links, anchor = tmp_path / "trail.jsonl", tmp_path / "trail.jsonl.links", tmp_path / "trail.anchor"
    clock = hosts.ManualClock()
    sink = hosts.FileAudit(trail)
    try:
        gate = m.Gate(
            clock=clock,
            storage=hosts.MemoryStorage(clock),
            consent=hosts.CallbackConsent(lambda p: True),
            audit=AnchoredAudit(sink, KEYS, anchor, links),
        )
        gate.register(request_id=1, server=SERVER, user="u", tenant="t", method="tools/call", params=PARAMS)
        assert isinstance(gate.accept_response(SERVER, form_round(1)), m.InputRequired)
        gate.build_retry(server=SERVER, request_id=1, retry_id=2, user="u", tenant="t", responses=ANSWERS)
    finally:
        sink.close()
    assert verify_anchor(trail.read_text(), links.read_text(), anchor.read_text(), KEYS) == Intact(3)
    recorded = [FIXTURES / "python_trail.jsonl", FIXTURES / "python_trail.jsonl.links", FIXTURES / "python_trail.anchor"]
    if os.environ.get("MRTR_GATE_BLESS"):
        for made, path in zip([trail, links, anchor], recorded):
            path.write_bytes(made.read_bytes())
    text, linked, anchored = (p.read_text("utf-8") for p in recorded)
    assert verify_anchor(text, linked, anchored, KEYS) == Intact(len(text.splitlines()))
