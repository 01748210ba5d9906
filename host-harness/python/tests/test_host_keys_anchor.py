"""The keyed trail (mrtr_gate.host_keys.AnchoredAudit, verify_anchor) against the Rust host's,
byte for byte: the trail recorded from a Rust gate round under its AnchoredAudit
(tests/host_keys/trail.*, by tests/e2e/anchored_trail.rs) verifies Intact here, and this
package keys its lines to the very links and anchor Rust wrote (so the Rust verifier accepts
what this package writes); a trail keyed before shards (legacy_trail.*) still verifies. Then a
round through this package's gate, and the tampering the anchor answers: a cut tail, lines past
the anchor, a line appended without the key; and each of them in one shard of several."""

import hashlib
import json
from pathlib import Path

import pytest

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


def entry_of(line):
    """The entry the gate appended for `line` (which names its shard, seq and the line before)."""
    v = json.loads(line)
    return m.AuditEntry(v["shard"], v["seq"], v["prev_sha256"], sha(line), line)


def rekey(lines, tmp_path):
    """The links and anchor this package's AnchoredAudit writes for `lines`, appended in order."""
    links, anchor = tmp_path / "rekey.links", tmp_path / "rekey.anchor"
    # Fresh files: an AnchoredAudit keeps the anchors of a checkpoint it finds.
    for stale in (links, anchor):
        stale.unlink(missing_ok=True)
    audit = AnchoredAudit(hosts.MemoryAudit(), KEYS, anchor, links)
    for line in lines:
        assert audit.append(entry_of(line)).written
    return links.read_bytes(), anchor.read_bytes()


def shard_of(text):
    return json.loads(text.splitlines()[0])["shard"]


def test_the_rust_keyed_trail_is_intact_and_keyed_here_to_the_same_bytes(tmp_path):
    trail = (FIXTURES / "trail.jsonl").read_text("utf-8")
    links = (FIXTURES / "trail.jsonl.links").read_bytes()
    anchor = (FIXTURES / "trail.anchor").read_bytes()
    lines = trail.splitlines()
    assert len(lines) >= 2
    assert verify_anchor(trail, links.decode(), anchor.decode(), KEYS) == Intact(len(lines))
    assert rekey(lines, tmp_path) == (links, anchor)
    assert all('"shard":"' in text for text in (trail, links.decode(), anchor.decode()))
    # The MAC in uppercase hex says the same bytes; every host refuses it alike.
    mac = json.loads(anchor)["mac"]
    assert verify_anchor(trail, links.decode(), anchor.decode().replace(mac, mac.upper()), KEYS) == BadAnchor()
    first = links.decode().splitlines()[0]
    upper = links.decode().replace(json.loads(first)["mac"], json.loads(first)["mac"].upper())
    assert verify_anchor(trail, upper, anchor.decode(), KEYS) == Unkeyed(shard_of(trail), 1)


def test_a_trail_keyed_before_shards_still_verifies():
    """tests/host_keys/legacy_trail.*: audit `v3` lines, `v1` links and anchor (no `shard`),
    recorded by the Rust host before shards. Its lines are the shard `""`."""
    trail, links, anchor = (
        (FIXTURES / name).read_text("utf-8") for name in ("legacy_trail.jsonl", "legacy_trail.jsonl.links", "legacy_trail.anchor")
    )
    assert '"shard"' not in trail + links + anchor
    n = len(trail.splitlines())
    assert n >= 2
    assert verify_anchor(trail, links, anchor, KEYS) == Intact(n)
    cut = "".join(line + "\n" for line in trail.splitlines()[:-1])
    assert verify_anchor(cut, links, anchor, KEYS) == Truncated("", n - 1, n)
    assert verify_anchor(trail, links.split("\n", 1)[1], anchor, KEYS) == Unkeyed("", 1)
    # A `v1` MAC does not pass for the `v2` context: the same head named with a shard fails.
    sharded = anchor.rstrip("\n")[:-1] + ',"shard":""}\n'
    assert verify_anchor(trail, links, sharded, KEYS) == BadAnchor()


def test_a_trail_keyed_before_shards_still_verifies_once_continued(tmp_path):
    """The legacy trail (tests/host_keys/legacy_trail.*, copied) opened with this package's
    FileAudit under AnchoredAudit, and one line of a new shard appended: the checkpoint keeps the
    `v1` anchor line first and byte for byte, so the legacy chain still ends at its anchored head.
    A sink that dropped the `v1` line on its first rewrite left the chain `""` unanchored
    (`Extended("", n, 0)`)."""
    import shutil

    trail, links, anchor = (tmp_path / name for name in ("legacy_trail.jsonl", "legacy_trail.jsonl.links", "legacy_trail.anchor"))
    for path in (trail, links, anchor):
        shutil.copyfile(FIXTURES / path.name, path)
    legacy_anchor = anchor.read_bytes()
    # One `v1` anchor line (no `shard`): the line the checkpoint must keep as it is.
    assert legacy_anchor.endswith(b"\n") and legacy_anchor.count(b"\n") == 1 and b'"shard"' not in legacy_anchor
    n = len(trail.read_text("utf-8").splitlines())
    assert n >= 2
    sink = hosts.FileAudit(trail)
    try:
        t0 = line_in("t0", None, 1)
        assert '"shard":"t0"' in t0.line
        assert AnchoredAudit(sink, KEYS, anchor, links).append(t0).written
    finally:
        sink.close()
    assert verify_anchor(trail.read_text("utf-8"), links.read_text("utf-8"), anchor.read_text("utf-8"), KEYS) == Intact(n + 1)
    checkpoint = anchor.read_bytes().splitlines(keepends=True)
    # The legacy line first (the shard `""` sorts before every name), then the new shard's.
    assert checkpoint[0] == legacy_anchor
    assert [json.loads(line).get("shard") for line in checkpoint] == [None, "t0"]


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
    shard = shard_of(text)
    assert check() == Intact(n)
    # What this package writes is what the Rust host writes for the same lines.
    assert rekey(text.splitlines(), tmp_path) == (links.read_bytes(), first.read_bytes())

    # The newest line cut off: the chain of what is left verifies, not against the anchor.
    assert check("".join(line + "\n" for line in text.splitlines()[:-1])) == Truncated(shard, n - 1, n)
    assert check(keys=HostKeys("k1", bytes([8] * 32))) == BadAnchor()
    assert verify_anchor(text, links.read_text(), first.read_text().replace('"seq":', '"seq":1'), KEYS) == BadAnchor()
    assert verify_anchor(text, links.read_text(), "", KEYS) == BadAnchor()
    assert verify_anchor(text, "", first.read_text(), KEYS) == Unkeyed(shard, 1)
    assert check(text.replace('"seq":1,', '"seq":7,', 1)) == BrokenChain()

    # Another key holder goes on (its own anchor): the first anchor does not cover its lines.
    round_(second, 2)
    grown = trail.read_text()
    total = len(grown.splitlines())
    assert total > n
    assert check() == Extended(shard, total, n)
    assert check(anchor=second) == Intact(total)

    # A line appended by whoever can write the trail, chained as the core would: no link.
    last = grown.splitlines()[-1]
    forged = dict(json.loads(last), event="consented", seq=total + 1, prev_sha256=sha(last))
    appended = grown + json.dumps(forged, sort_keys=True, separators=(",", ":")) + "\n"
    for anchor in (first, second):
        assert check(appended, anchor) == Unkeyed(shard, total + 1)

    # The line at the anchored position is another keyed one: an anchor (the same key) of
    # another first line of the shard, over this trail, every line of which is keyed.
    other = json.loads(text.splitlines()[0])
    other["at_ms"] += 1
    other = json.dumps(other, sort_keys=True, separators=(",", ":"))
    foreign = tmp_path / "foreign.anchor"
    assert AnchoredAudit(hosts.MemoryAudit(), KEYS, foreign, tmp_path / "foreign.links").append(entry_of(other)).written
    assert check(anchor=foreign) == Diverged(shard)


def line_in(shard, prev, n):
    """A small chained line of `shard` after `prev` (None: genesis), as support::entry_in."""
    seq, back = (prev.seq, prev.event_sha256) if prev else (0, m.GENESIS_SHA256)
    return entry_of(f'{{"body":"{n}","prev_sha256":"{back}","seq":{seq + 1},"shard":"{shard}"}}')


def test_an_anchor_that_cannot_be_written_fails_the_append_and_anchors_nothing(tmp_path):
    anchor, links = tmp_path / "audit.anchor", tmp_path / "links"
    audit = AnchoredAudit(hosts.MemoryAudit(), KEYS, anchor, links)
    a1 = line_in("aa", None, 1)
    assert audit.append(a1).written
    # The checkpoint's place taken by a folder: the next anchor cannot be written.
    anchor.unlink()
    anchor.mkdir()
    b1 = line_in("bb", None, 2)
    with pytest.raises(m.HostError, match="anchor"):
        audit.append(b1)
    # The link went first, so the line it covers is keyed.
    assert sha(b1.line) in links.read_text()
    # `bb` was not anchored: the next anchor written holds `aa` alone, at its new head.
    anchor.rmdir()
    a2 = line_in("aa", a1, 3)
    assert audit.append(a2).written
    assert [(v["shard"], v["seq"]) for v in map(json.loads, anchor.read_text().splitlines())] == [("aa", 2)]
    trail = "".join(e.line + "\n" for e in (a1, b1, a2))
    assert verify_anchor(trail, links.read_text(), anchor.read_text(), KEYS) == Extended("bb", 1, 0)


def test_each_shard_is_anchored_apart_and_a_cut_or_a_growth_is_found_in_its_shard(tmp_path):
    trail_path, links, anchor = tmp_path / "audit.jsonl", tmp_path / "audit.jsonl.links", tmp_path / "audit.anchor"
    sink = hosts.FileAudit(trail_path)
    audit = AnchoredAudit(sink, KEYS, anchor, links)
    a1 = line_in("aa", None, 1)
    b1 = line_in("bb", None, 2)
    a2 = line_in("aa", a1, 3)
    b2 = line_in("bb", b1, 4)
    for e in (a1, b1, a2, b2):
        assert audit.append(e).written
    text = trail_path.read_text()

    def check(trail=None, anchor_text=None):
        return verify_anchor(text if trail is None else trail, links.read_text(),
                             anchor.read_text() if anchor_text is None else anchor_text, KEYS)

    # One anchor line per shard, in shard order, each at its shard's head.
    assert [(v["shard"], v["seq"]) for v in map(json.loads, anchor.read_text().splitlines())] == [("aa", 2), ("bb", 2)]
    assert check() == Intact(4)
    # `aa`'s newest line cut from the middle of the file: the rest chains, `aa` is short.
    assert check(text.replace(a2.line + "\n", "")) == Truncated("aa", 1, 2)
    # `aa` gone whole.
    assert check(b1.line + "\n" + b2.line + "\n") == Truncated("aa", 0, 2)
    # `bb` goes on, keyed, past its anchor (another key holder's AnchoredAudit).
    b3 = line_in("bb", b2, 5)
    elsewhere = hosts.MemoryAudit()
    for e in (b1, b2):
        assert elsewhere.append(e).written
    assert AnchoredAudit(elsewhere, KEYS, tmp_path / "other.anchor", links).append(b3).written
    assert check(text + b3.line + "\n") == Extended("bb", 3, 2)
    # An anchor that names a shard twice, or covers one shard only.
    lines = anchor.read_text().splitlines()
    assert check(anchor_text=lines[0] + "\n" + lines[0] + "\n") == BadAnchor()
    assert check(anchor_text=lines[0] + "\n") == Extended("bb", 2, 0)
    assert check(anchor_text=lines[1] + "\n") == Extended("aa", 2, 0)
    sink.close()


def test_a_sink_started_again_keeps_the_anchors_of_shards_it_has_not_written(tmp_path):
    links, anchor = tmp_path / "links", tmp_path / "audit.anchor"
    inner = hosts.MemoryAudit()
    a1, b1 = line_in("aa", None, 1), line_in("bb", None, 2)
    first = AnchoredAudit(inner, KEYS, anchor, links)
    assert first.append(a1).written and first.append(b1).written
    kept = anchor.read_text().splitlines()[0]
    # A new process (the same sink behind it) writes to `bb` only: `aa`'s anchor stays, byte
    # for byte, and a line of the checkpoint that does not verify is not kept.
    anchor.write_text(anchor.read_text() + kept.replace('"aa"', '"cc"') + "\n")
    again = AnchoredAudit(inner, KEYS, anchor, links)
    b2 = line_in("bb", b1, 3)
    assert again.append(b2).written
    lines = anchor.read_text().splitlines()
    assert lines[0] == kept
    assert [(v["shard"], v["seq"]) for v in map(json.loads, lines)] == [("aa", 1), ("bb", 2)]
    trail = "".join(e.line + "\n" for e in (a1, b1, b2))
    assert verify_anchor(trail, links.read_text(), anchor.read_text(), KEYS) == Intact(3)


def test_an_entry_behind_its_shards_head_is_refused_before_its_link(tmp_path):
    links = tmp_path / "links"
    audit = AnchoredAudit(hosts.MemoryAudit(), KEYS, tmp_path / "audit.anchor", links)
    a1 = line_in("aa", None, 1)
    assert audit.append(a1).written
    linked = links.read_bytes()
    # A guess of `aa`'s head that is behind: refused with the head, and no link synced for it.
    o = audit.append(line_in("aa", None, 9))
    assert (o.written, o.head_seq, o.head_sha256) == (False, 1, a1.event_sha256)
    assert links.read_bytes() == linked
    # Another shard's first line is no guess behind `aa`'s.
    assert audit.append(line_in("bb", None, 2)).written


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
