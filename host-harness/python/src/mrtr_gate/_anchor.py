"""The audit trail under a host key (docs/host-keys.md, "The keyed trail"), as the Rust host's
`host-harness/host/src/host_keys/anchor.rs`, byte for byte (tests/host_keys/trail.* pins it). Import
it from `mrtr_gate.host_keys`.

- A **link** is one JSON line in the links file, written (and synced) before the line it covers
  is appended: `{"event_sha256":H,"key_id":K,"mac":M,"seq":N,"shard":S}`, M = HMAC-SHA256(key;
  "mrtr-gate/audit-link/v2", S, N, H). H names the line before it in its shard (`prev_sha256`),
  so a link covers the shard's chain up to its line: a line appended without the key has no
  link that verifies.
- The **anchor** (checkpoint) is one line per shard, in shard order, the same shape over
  "mrtr-gate/audit-anchor/v2", the whole file rewritten after every append that was written:
  each shard's head when the gate last wrote to it.
- A trail written before shards (audit `v2`/`v3` lines, no `shard`) was keyed without one:
  `{"event_sha256":H,"key_id":K,"mac":M,"seq":N}` over "mrtr-gate/audit-link/v1" and
  "mrtr-gate/audit-anchor/v1" with (N, H). Those lines and that anchor still verify, as the
  shard `""` (tests/host_keys/legacy_trail.*).

Every MAC input is length-prefixed (8 bytes, big-endian): the context, S in ASCII, N as 8 bytes
big-endian, H as its 64 hex digits in ASCII."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Optional, Union

from ._trail import ChainBreak, lines_of, parse_json, sha256_hex, shard_ok, u64, verify_trail
from ._types import GENESIS_SHA256, AppendOutcome, AuditEntry, ChainHead, HostError

if TYPE_CHECKING:
    from .host_keys import HostKeys
    from .hosts import Audit

_ANCHOR_CONTEXT = b"mrtr-gate/audit-anchor/v2"
_LINK_CONTEXT = b"mrtr-gate/audit-link/v2"
# The contexts of a trail keyed before shards (no `shard` in the link or the anchor).
_ANCHOR_CONTEXT_V1 = b"mrtr-gate/audit-anchor/v1"
_LINK_CONTEXT_V1 = b"mrtr-gate/audit-link/v1"
_LOWER_HEX = frozenset("0123456789abcdef")
_GENESIS = ChainHead(0, GENESIS_SHA256)


class _KeyedHead(NamedTuple):
    """A link or an anchor line, as read."""

    shard: Optional[str]  # None: keyed before shards (`v1`)
    seq: int
    event_sha256: str
    key_id: str
    mac: bytes


def _mac_parts(link: bool, shard: Optional[str], seq: int, event_sha256: str) -> list[bytes]:
    """The MAC input of a keyed head: (S, N, H) in the `v2` context, or (N, H) in the `v1` one
    for a head keyed before shards."""
    n, h = seq.to_bytes(8, "big"), event_sha256.encode()
    if shard is None:
        return [_LINK_CONTEXT_V1 if link else _ANCHOR_CONTEXT_V1, n, h]
    return [_LINK_CONTEXT if link else _ANCHOR_CONTEXT, shard.encode(), n, h]


def _keyed_head(keys: "HostKeys", link: bool, shard: str, seq: int, event_sha256: str) -> str:
    """`{"event_sha256":H,"key_id":K,"mac":M,"seq":N,"shard":S}` (keys in canonical order),
    MAC'd with the current key. `shard` passed `shard_ok`: nothing in it to escape."""
    key_id = keys.current_id
    mac = keys._mac(key_id, _mac_parts(link, shard, seq, event_sha256))
    if mac is None:
        raise HostError("the current host key is missing")
    return (
        f'{{"event_sha256":"{event_sha256}","key_id":"{key_id}","mac":"{mac.hex()}",'
        f'"seq":{seq},"shard":"{shard}"}}'
    )


def _parse_keyed_head(text: str) -> Optional[_KeyedHead]:
    try:
        v = parse_json(text)
    except ValueError:
        return None
    if not isinstance(v, dict):
        return None
    shard = v.get("shard")
    if "shard" in v and not isinstance(shard, str):
        return None
    seq, digest, key_id, mac = u64(v.get("seq")), v.get("event_sha256"), v.get("key_id"), v.get("mac")
    if seq is None or not isinstance(digest, str) or not isinstance(key_id, str) or not isinstance(mac, str):
        return None
    # Only the spelling a host writes: lowercase hex, an even number of digits.
    if len(mac) % 2 or not set(mac) <= _LOWER_HEX:
        return None
    return _KeyedHead(shard, seq, digest, key_id, bytes.fromhex(mac))


def _verifies(keys: "HostKeys", link: bool, head: _KeyedHead) -> bool:
    return keys._verify(head.key_id, _mac_parts(link, head.shard, head.seq, head.event_sha256), head.mac)


class AnchoredAudit:
    """An audit sink under a host key: each line keyed by a link written beside the trail (in
    `links`), each shard's head anchored apart from it (in `checkpoint`, kept where the trail's
    writer cannot reach), with `keys`' current key. Wraps any audit sink of this package
    (`hosts.MemoryAudit`, `hosts.FileAudit`, or yours). The checkpoint's lines that verify are
    kept, byte for byte, for the shards this sink has not written to yet, a `v1` anchor (a trail
    keyed before shards) among them as the shard `""`. An entry `hosts.shard_ok` refuses
    raises `HostError`: its shard goes into the link and the anchor as it is."""

    def __init__(
        self,
        inner: "Audit",
        keys: "HostKeys",
        checkpoint: Union[str, "os.PathLike[str]"],
        links: Union[str, "os.PathLike[str]"],
    ) -> None:
        self._inner = inner
        self._keys = keys
        self._checkpoint = os.fspath(checkpoint)
        self._links = os.fspath(links)
        # Held across link, append and anchor: within a process each shard's anchor only moves
        # forward.
        self._order = threading.Lock()
        # Each shard's anchor line as last written (the file is these lines in shard order).
        # Starts from the checkpoint's lines that verify, so a process started again keeps the
        # anchors of the shards it has not written to yet. A `v1` line (a trail keyed before
        # shards) is kept too, under the shard `""`, which sorts first: dropped, the legacy
        # chain would lose its anchor at the first sharded append and verify as `Extended`.
        # Each line is kept as its original text: a `v1` MAC covers (N, H) without a shard,
        # and no line this sink writes could stand in for it.
        self._anchored: dict[str, tuple[int, str]] = {}
        try:
            with open(self._checkpoint, "rb") as f:
                text = f.read().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            text = ""
        for line in lines_of(text):
            head = _parse_keyed_head(line)
            if head is not None and _verifies(keys, False, head):
                self._anchored["" if head.shard is None else head.shard] = (head.seq, line)
        # Each shard's head the inner sink named last (in a write or a refusal), used when it
        # has no `head_hint`. An entry at or below it cannot extend the shard (a chain only
        # grows), so it is refused here without a link: a gate's first guess of a shard's head
        # is often behind, and its link would be written and synced for nothing.
        self._newest: dict[str, ChainHead] = {}

    def _link(self, entry: AuditEntry) -> None:
        line = (_keyed_head(self._keys, True, entry.shard, entry.seq, entry.event_sha256) + "\n").encode()
        # One write of one line, synced: the line it covers is never in the trail without it.
        try:
            with open(self._links, "ab") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            raise HostError("the audit link could not be written") from None

    def _anchor(self, entry: AuditEntry) -> None:
        before = self._anchored.get(entry.shard)
        if before is not None and entry.seq <= before[0]:
            # A later line of the shard is anchored already (the checkpoint this sink started
            # from): an anchor never goes back, so lines lost below it stay found.
            return
        line = _keyed_head(self._keys, False, entry.shard, entry.seq, entry.event_sha256)
        self._anchored[entry.shard] = (entry.seq, line)
        data = "".join(held + "\n" for _, (_, held) in sorted(self._anchored.items())).encode()
        # Rewritten in place from offset 0, as the Rust host does (a rename per append was most
        # of its proxy's time, docs/performance.md): seqs only grow and shards are only added,
        # so the new text is never shorter than the old unless the key id changed, and then the
        # rest is cut. A reader racing the write, or a crash tearing it, sees a line whose MAC
        # fails (`BadAnchor`), never a wrong anchor that verifies.
        try:
            fd = os.open(self._checkpoint, os.O_WRONLY | os.O_CREAT, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                if os.fstat(f.fileno()).st_size > len(data):
                    f.truncate(len(data))
        except OSError:
            # Not anchored: the shard's next append writes it again.
            if before is None:
                del self._anchored[entry.shard]
            else:
                self._anchored[entry.shard] = before
            raise HostError("the audit anchor could not be written") from None

    def append(self, entry: AuditEntry) -> AppendOutcome:
        if not shard_ok(entry):
            raise HostError("audit anchor: the entry's shard is not a shard name its line carries")
        with self._order:
            # The inner sink's own word when it gives one; else the head it last named.
            hint = getattr(self._inner, "head_hint", None)
            newest = hint(entry.shard) if callable(hint) else None
            if newest is None:
                newest = self._newest.get(entry.shard, _GENESIS)
            if entry.seq <= newest.seq:
                return AppendOutcome(False, None, newest.seq, newest.event_sha256)
            # The link first: an append the sink then refuses (its head moved) leaves a link
            # to a line that is nowhere in the trail, which matches nothing and is ignored.
            self._link(entry)
            outcome = self._inner.append(entry)
            # Whatever the inner sink named, lower too: a sink that lost lines names a head
            # below the one remembered, and an entry on that head must reach it (so that the
            # gate sees the loss, or writes on), not be refused here for ever.
            self._newest[entry.shard] = (
                ChainHead(entry.seq, entry.event_sha256)
                if outcome.written
                else ChainHead(outcome.head_seq, outcome.head_sha256)
            )
            if outcome.written and outcome.stored is not None:
                # An anchor that cannot be written is a failed append (the gate then denies).
                self._anchor(entry)
            return outcome


class AnchorCheck:
    """What checking a trail against its links and anchor found (one of the subclasses)."""


@dataclass(frozen=True)
class Intact(AnchorCheck):
    """Every line is keyed and every shard ends exactly at its anchored head."""

    events: int


@dataclass(frozen=True)
class BadAnchor(AnchorCheck):
    """The anchor is missing or empty, a line of it fails its MAC, or names a shard twice."""


@dataclass(frozen=True)
class BrokenChain(AnchorCheck):
    """The trail's chains themselves do not verify (`hosts.verify_trail`)."""


@dataclass(frozen=True)
class Unkeyed(AnchorCheck):
    """The line at `seq` of `shard` (the first such in the trail; `""`: a line from before
    shards) has no link that verifies: written without the key (or its link removed)."""

    shard: str
    seq: int


@dataclass(frozen=True)
class Truncated(AnchorCheck):
    """A shard ends before its anchored head: lines were removed from its end (or the whole
    shard)."""

    shard: str
    events: int
    anchored: int


@dataclass(frozen=True)
class Diverged(AnchorCheck):
    """A shard's event at its anchored position is not the anchored one."""

    shard: str


@dataclass(frozen=True)
class Extended(AnchorCheck):
    """A shard goes on past its anchored head (or has none). Its lines are keyed, so a key
    holder wrote them: another process sharing the trail, or an anchor put back to an older
    one."""

    shard: str
    events: int
    anchored: int


def verify_anchor(trail: str, links: str, checkpoint: str, keys: "HostKeys") -> AnchorCheck:
    """Check `trail` (JSON lines) against its `links` and the `checkpoint` text with `keys`. In
    order: every anchor line's MAC, the chains (`hosts.verify_trail`), a verifying link for every
    line, then where each shard ends against its anchored head (shards in shard order); the
    first that fails is the answer."""
    anchors: dict[str, tuple[int, str]] = {}
    for text in lines_of(checkpoint):
        anchor = _parse_keyed_head(text)
        if anchor is None or not _verifies(keys, False, anchor):
            return BadAnchor()
        shard = anchor.shard or ""
        if shard in anchors:
            return BadAnchor()
        anchors[shard] = (anchor.seq, anchor.event_sha256)
    if not anchors:
        return BadAnchor()
    lines = lines_of(trail)
    try:
        verified = verify_trail(lines)
    except ChainBreak:
        return BrokenChain()
    keyed = set()
    for text in lines_of(links):
        link = _parse_keyed_head(text)
        if link is not None and _verifies(keys, True, link):
            keyed.add((link.shard or "", link.seq, link.event_sha256))
    # Each shard's line digests, by seq (the chains verified above: seq is the position).
    digests: dict[str, list[str]] = {}
    for line in lines:
        v = parse_json(line)
        if not isinstance(v, dict):  # verify_trail took every line: never so
            return BrokenChain()
        shard, seq, digest = v.get("shard", ""), v["seq"], sha256_hex(line)
        if (shard, seq, digest) not in keyed:
            return Unkeyed(shard, seq)
        digests.setdefault(shard, []).append(digest)
    for shard in sorted(anchors.keys() | verified.heads.keys()):
        head = verified.heads.get(shard)
        events = head.seq if head is not None else 0
        anchored, anchored_sha = anchors.get(shard, (0, ""))
        if events < anchored:
            return Truncated(shard, events, anchored)
        if anchored > 0 and digests[shard][anchored - 1] != anchored_sha:
            return Diverged(shard)
        if events > anchored:
            return Extended(shard, events, anchored)
    return Intact(verified.lines)
