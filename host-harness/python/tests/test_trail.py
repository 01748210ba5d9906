"""The sharded trail without a key (mrtr_gate.hosts: verify_trail, shard_ok, the sinks): each
shard its own chain from genesis, the root's anchors checked at the end, the lines from before
shards one chain of their own; every sink keeps one head per shard, and a durable one refuses an
entry filed under a shard its line does not name. The verifier is held to the Rust core's
(`mrtr-gate verify-audit`, and the trails it recorded in tests/audit/trail_vectors.json) break
for break."""

import hashlib
import json
import os
import subprocess

import pytest

import mrtr_gate as m
from mrtr_gate import hosts
from mrtr_gate.host_keys import AnchoredAudit, HostKeys

from test_gate import ANSWERS, PARAMS, SERVER, form_round

SCHEMA = "mrtr-gate/audit/v4"
OTHER = m.Origin("https://other.example.com/mcp")
KEYS = HostKeys("k1", bytes([7] * 32))


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha(line):
    return hashlib.sha256(line.encode()).hexdigest()


def made(shard, seq, prev, line):
    return m.AuditEntry(shard, seq, prev, sha(line), line)


def nxt(shard, head, n):
    """A line of `shard` after `head` (None: genesis), built as the writer builds one."""
    seq, prev = (head.seq, head.event_sha256) if head else (0, m.GENESIS_SHA256)
    line = canonical({"event": "rejected", "prev_sha256": prev, "round": n, "schema": SCHEMA, "seq": seq + 1, "shard": shard})
    return made(shard, seq + 1, prev, line)


def root(prev, heads, n):
    """The root's next anchor line after `prev` (None: genesis), anchoring `heads` (shard: entry)."""
    seq, back = (prev.seq, prev.event_sha256) if prev else (0, m.GENESIS_SHA256)
    anchored = {s: {"seq": e.seq, "sha256": e.event_sha256} for s, e in heads.items()}
    line = canonical({"at_ms": n, "event": "anchor", "heads": anchored, "prev_sha256": back, "schema": SCHEMA,
                      "seq": seq + 1, "shard": hosts.ROOT_SHARD})
    return made(hosts.ROOT_SHARD, seq + 1, back, line)


def two_shards():
    """Two shards interleaved (a1 b1 a2 b2 a3) and a root anchoring both heads."""
    a1 = nxt("aa", None, 1)
    b1 = nxt("bb", None, 2)
    a2 = nxt("aa", a1, 3)
    b2 = nxt("bb", b1, 4)
    a3 = nxt("aa", a2, 5)
    return [a1, b1, a2, b2, a3, root(None, {"aa": a3, "bb": b2}, 6)]


def legacy(n):
    """`n` lines of the format before shards (`v3`, no `shard`): one chain."""
    out, prev = [], m.GENESIS_SHA256
    for seq in range(1, n + 1):
        line = canonical({"event": "received", "prev_sha256": prev, "schema": "mrtr-gate/audit/v3", "seq": seq})
        out.append(line)
        prev = sha(line)
    return out


def lines(entries):
    return [e.line for e in entries]


def broken(trail):
    """(kind, index) of the break `verify_trail` finds, or the number of lines it verified."""
    try:
        return hosts.verify_trail(trail).lines
    except hosts.ChainBreak as e:
        return e.kind, e.index


def test_each_shard_is_its_own_chain_and_the_root_anchors_their_heads():
    trail = two_shards()
    verified = hosts.verify_trail(lines(trail))
    assert verified.lines == 6
    assert verified.heads == {
        "aa": m.ChainHead(3, trail[4].event_sha256),
        "bb": m.ChainHead(2, trail[3].event_sha256),
        "root": m.ChainHead(1, trail[5].event_sha256),
    }
    # Shards may come one after the other (a sharded store read shard by shard).
    assert broken(lines(sorted(trail, key=lambda e: e.shard))) == 6
    assert hosts.verify_chain(lines(trail)) == 6


def test_a_shard_cut_below_its_anchor_or_rewritten_is_found():
    trail = two_shards()
    del trail[4]  # a3, the head of `aa` the root anchors
    assert broken(lines(trail)) == ("cut", 4)
    # The whole shard gone.
    assert broken([e.line for e in two_shards() if e.shard != "bb"]) == ("cut", 3)
    # `aa`'s last line replaced by another that links properly.
    trail = two_shards()
    trail[4] = nxt("aa", trail[2], 99)
    assert broken(lines(trail)) == ("rewritten", 5)
    # Cut after the last anchor: a shorter chain, which still verifies.
    assert broken(lines(two_shards()[:2])) == 2


def test_a_shard_reordered_or_a_line_moved_to_another_shard_breaks_its_chain():
    trail = two_shards()
    trail[0], trail[2] = trail[2], trail[0]
    assert broken(lines(trail)) == ("gap", 0)
    trail = lines(two_shards())
    trail[3] = canonical(dict(json.loads(trail[3]), shard="aa"))
    assert broken(trail) == ("gap", 3)
    trail = lines(two_shards())
    trail[2] = canonical(dict(json.loads(trail[2]), prev_sha256=sha(trail[1])))
    assert broken(trail) == ("broken", 2)


def test_a_root_that_goes_back_or_anchors_nothing_real_is_malformed():
    trail = two_shards()
    back = root(trail[5], {"aa": trail[2]}, 7)
    assert broken(lines(trail + [back])) == ("malformed", 6)
    zero = root(None, {"aa": m.AuditEntry("aa", 0, "", m.GENESIS_SHA256, "")}, 7)
    assert broken(lines(trail[:5] + [zero])) == ("malformed", 5)
    itself = root(trail[5], {"root": trail[5]}, 7)
    assert broken(lines(trail + [itself])) == ("malformed", 6)


def test_lines_before_the_sharded_format_are_one_chain_of_their_own():
    verified = hosts.verify_trail(legacy(2) + lines(two_shards()))
    assert verified.lines == 8
    assert verified.heads[""].seq == 2 and set(verified.heads) == {"", "aa", "bb", "root"}


@pytest.mark.parametrize(
    "line",
    [
        "not json",
        "[1]",
        '{"prev_sha256":"%s","seq":1.0,"shard":"aa"}',
        '{"prev_sha256":"%s","seq":-0,"shard":"aa"}',
        '{"prev_sha256":"%s","seq":1,"shard":""}',
        '{"prev_sha256":"%s","seq":1,"shard":null}',
        '{"prev_sha256":"%s","seq":1,"shard":7}',
        '{"prev_sha256":null,"seq":1,"shard":"aa"}',
        '{"prev_sha256":"%s","seq":1,"shard":"aa","x":NaN}',
        '{"prev_sha256":"%s","seq":1,"shard":"aa","x":"\\ud800"}',
        '{"heads":[],"prev_sha256":"%s","seq":1,"shard":"root"}',
        '{"heads":{"aa":{"seq":1}},"prev_sha256":"%s","seq":1,"shard":"root"}',
    ],
)
def test_what_serde_json_refuses_or_a_line_without_its_fields_is_malformed(line):
    assert broken([line.replace("%s", m.GENESIS_SHA256)]) == ("malformed", 0)


VECTORS = json.loads(
    (__import__("pathlib").Path(__file__).resolve().parents[3] / "tests/audit/trail_vectors.json").read_text("utf-8")
)


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_the_verifier_finds_in_every_recorded_trail_what_the_rust_core_finds(vector):
    expect = vector["expect"]
    found = broken(vector["lines"])
    if "break" in expect:
        assert found == (expect["break"], expect["at"])
    else:
        assert found == expect["lines"]
        heads = hosts.verify_trail(vector["lines"]).heads
        assert {s: {"seq": str(h.seq), "sha256": h.event_sha256} for s, h in heads.items()} == expect["heads"]
    if "shard_ok_as_aa" in vector:
        line = vector["lines"][0]
        entry = m.AuditEntry("aa", 1, m.GENESIS_SHA256, sha(line), line)
        assert hosts.shard_ok(entry) is vector["shard_ok_as_aa"]


# The same trails through the Rust core (`mrtr-gate verify-audit`): good and broken alike.
def _differential_trails():
    cut, rewritten, swapped = two_shards(), two_shards(), two_shards()
    del cut[4]
    rewritten[4] = nxt("aa", rewritten[2], 99)
    swapped[0], swapped[2] = swapped[2], swapped[0]
    trail = two_shards()
    return {
        "sharded": lines(trail),
        "legacy_then_sharded": legacy(2) + lines(trail),
        "cut": lines(cut),
        "shard_gone": [e.line for e in trail if e.shard != "bb"],
        "rewritten": lines(rewritten),
        "reordered": lines(swapped),
        "root_goes_back": lines(trail + [root(trail[5], {"aa": trail[2]}, 7)]),
        "seq_minus_zero": ['{"prev_sha256":"%s","seq":-0,"shard":"aa"}' % m.GENESIS_SHA256],
        "lone_surrogate": ['{"prev_sha256":"%s","seq":1,"shard":"aa","x":"\\udc00"}' % m.GENESIS_SHA256],
        "empty_shard": ['{"prev_sha256":"%s","seq":1,"shard":""}' % m.GENESIS_SHA256],
    }


@pytest.mark.parametrize("name", sorted(_differential_trails()))
def test_the_verifier_finds_what_the_rust_core_finds(name, tmp_path):
    bin = os.environ.get("MRTR_GATE_BIN")
    if not bin:
        pytest.skip("MRTR_GATE_BIN is set by scripts/python")
    trail = _differential_trails()[name]
    path = tmp_path / "trail.jsonl"
    path.write_text("".join(line + "\n" for line in trail), "utf-8")
    out = subprocess.run([bin, "verify-audit", "--insecure-no-host-keys", str(path)], capture_output=True, text=True)
    found = broken(trail)
    if isinstance(found, int):
        assert out.returncode == 0 and f": {found} events, chain intact" in out.stdout, out
    else:
        kind, index = found
        assert out.returncode != 0 and f"the chain is broken: {kind.capitalize()}({index})" in out.stderr, out


def test_a_sink_takes_only_a_shard_it_can_key_on_and_the_line_names():
    e = nxt("0123abcd", None, 1)
    assert hosts.shard_ok(e)
    for bad in ["", "AB", "a}b", "a:b", "a" * 65, "0123abc", "0123abcd\u00e9"]:
        assert not hosts.shard_ok(m.AuditEntry(bad, e.seq, e.prev_sha256, e.event_sha256, e.line)), bad
    # The name inside another field's string does not count.
    e = nxt("aa", None, 1)
    line = e.line.replace('"round":1', '"round":"\\"shard\\":\\"bb\\""')
    assert 'shard\\":\\"bb' in line
    assert not hosts.shard_ok(m.AuditEntry("bb", 1, e.prev_sha256, sha(line), line))
    # A nested key of that name (a form input called `shard`) is not the line's shard: the
    # verifier files the line under its top-level `shard`, `aa`.
    line = canonical(dict(json.loads(e.line), input_kinds={"shard": "form"}))
    assert '"input_kinds":{"shard":"form"}' in line and '"shard":"aa"' in line
    assert not hosts.shard_ok(m.AuditEntry("form", 1, e.prev_sha256, sha(line), line))
    assert hosts.shard_ok(m.AuditEntry("aa", 1, e.prev_sha256, sha(line), line))
    # A line that does not parse names no shard, though it holds the key and the name.
    torn = e.line[:-1]
    assert '"shard":"aa"' in torn
    assert not hosts.shard_ok(m.AuditEntry("aa", 1, e.prev_sha256, sha(torn), torn))
    assert hosts.shard_ok(nxt("f" * 64, None, 1)) and hosts.shard_ok(nxt(hosts.ROOT_SHARD, None, 1))


def _sink(kind, tmp_path):
    if kind == "memory":
        return hosts.MemoryAudit()
    if kind == "file":
        return hosts.FileAudit(tmp_path / "audit.jsonl")
    inner = hosts.MemoryAudit() if kind == "anchored_memory" else hosts.FileAudit(tmp_path / "audit.jsonl")
    return AnchoredAudit(inner, KEYS, tmp_path / "audit.anchor", tmp_path / "audit.jsonl.links")


def _close(sink):
    inner = getattr(sink, "_inner", sink)
    if isinstance(inner, hosts.FileAudit):
        inner.close()


@pytest.mark.parametrize("kind", ["memory", "file", "anchored_memory", "anchored_file"])
def test_two_shards_keep_independent_heads_in_each_sink(kind, tmp_path):
    sink = _sink(kind, tmp_path)
    a1, b1 = nxt("aa", None, 1), nxt("bb", None, 2)
    a2, b2 = nxt("aa", a1, 3), nxt("bb", b1, 4)
    for e in (a1, b1, a2):
        o = sink.append(e)
        # The head of the entry's own shard, whatever the other shard holds.
        assert (o.written, o.stored, o.head_seq, o.head_sha256) == (True, e.line, e.seq, e.event_sha256)
    # An entry on a head its shard left behind: refused with that shard's head, not the other's.
    stale = nxt("bb", None, 5)
    o = sink.append(stale)
    assert (o.written, o.head_seq, o.head_sha256) == (False, 1, b1.event_sha256)
    o = sink.append(nxt("aa", b1, 6))  # seq 2 of `aa` after a line of `bb`
    assert (o.written, o.head_seq, o.head_sha256) == (False, 2, a2.event_sha256)
    # A new shard starts at genesis, however long the others are.
    assert sink.append(nxt("cc", None, 7)).written
    assert sink.append(b2).written
    assert getattr(sink, "_inner", sink).heads() == {
        "aa": m.ChainHead(2, a2.event_sha256),
        "bb": m.ChainHead(2, b2.event_sha256),
        "cc": m.ChainHead(1, nxt("cc", None, 7).event_sha256),
    }
    _close(sink)


def test_a_file_sink_reopened_recovers_each_shards_head_and_refuses_a_broken_shard(tmp_path):
    path = tmp_path / "audit.jsonl"
    old = legacy(2)
    path.write_text("".join(line + "\n" for line in old))
    sink = hosts.FileAudit(path)
    trail = two_shards()
    for e in trail:
        assert sink.append(e).written
    sink.close()
    again = hosts.FileAudit(path)
    assert again.heads() == {
        "": m.ChainHead(2, sha(old[1])),
        "aa": m.ChainHead(3, trail[4].event_sha256),
        "bb": m.ChainHead(2, trail[3].event_sha256),
        "root": m.ChainHead(1, trail[5].event_sha256),
    }
    assert again.head("zz") == m.ChainHead(0, m.GENESIS_SHA256)
    assert again.append(nxt("bb", trail[3], 9)).written
    again.close()
    # `aa`'s anchored head cut away: the sink refuses the trail, naming the root line.
    text = path.read_text().splitlines()
    del text[2 + 4]
    path.write_text("".join(line + "\n" for line in text))
    with pytest.raises(ValueError, match=r"root line 7 anchors a shard head its shard no longer reaches"):
        hosts.FileAudit(path)


@pytest.mark.parametrize("kind", ["file", "anchored_memory", "anchored_file"])
def test_a_durable_sink_refuses_an_entry_filed_under_a_shard_its_line_does_not_name(kind, tmp_path):
    sink = _sink(kind, tmp_path)
    good = nxt("aa", None, 1)
    for shard in ("bb", "AA", "", "a" * 65, 'aa","x":"'):
        with pytest.raises(m.HostError, match="shard"):
            sink.append(m.AuditEntry(shard, good.seq, good.prev_sha256, good.event_sha256, good.line))
    # Nothing of them was written, linked or anchored; the good entry goes in.
    assert not any(p.stat().st_size for p in tmp_path.iterdir())
    assert sink.append(good).written
    _close(sink)


def test_a_gate_writes_each_servers_events_to_its_own_shard(tmp_path):
    path = tmp_path / "audit.jsonl"

    def rounds(rid):
        sink = hosts.FileAudit(path)
        clock = hosts.ManualClock()
        gate = m.Gate(clock=clock, storage=hosts.MemoryStorage(clock), consent=hosts.CallbackConsent(lambda p: True), audit=sink)
        try:
            for server in (SERVER, OTHER):
                gate.register(request_id=rid, server=server, user="u", tenant="t", method="tools/call", params=PARAMS)
            for server in (SERVER, OTHER):
                assert isinstance(gate.accept_response(server, form_round(rid)), m.InputRequired)
            gate.build_retry(server=OTHER, request_id=rid, retry_id=rid + 100, user="u", tenant="t", responses=ANSWERS)
        finally:
            sink.close()

    rounds(1)
    events = [json.loads(line) for line in path.read_text().splitlines()]
    shards = [e["shard"] for e in events]
    assert len(set(shards)) == 2 and all(len(s) == 32 for s in shards)
    assert shards[0] != shards[1], "the two servers' events interleave"
    for shard in set(shards):
        assert [e["seq"] for e in events if e["shard"] == shard] == list(range(1, shards.count(shard) + 1))
    assert {e["schema"] for e in events} == {SCHEMA}
    # A second gate over the reopened file goes on in both shards.
    rounds(2)
    verified = hosts.verify_trail(path.read_text().splitlines())
    assert {s: h.seq for s, h in verified.heads.items()} == {s: 2 * shards.count(s) for s in set(shards)}
