"""The audit trail under a host key (docs/host-keys.md, "The keyed trail"), as the Rust host's
`host-harness/host/src/host_keys/anchor.rs`, byte for byte (tests/host_keys/trail.* pins it). Import
it from `mrtr_gate.host_keys`.

- A **link** is one JSON line in the links file, written (and synced) before the line it covers
  is appended: `{"event_sha256":H,"key_id":K,"mac":M,"seq":N}`, M = HMAC-SHA256(key;
  "mrtr-gate/audit-link/v1", N, H). H names the line before it (`prev_sha256`), so a link
  covers the chain up to its line: a line appended without the key has no link that verifies.
- The **anchor** is the same shape over "mrtr-gate/audit-anchor/v1", the whole file, replaced
  after every append that was written: the head the trail had when the gate last wrote.

Every MAC input is length-prefixed (8 bytes, big-endian): the context, N as 8 bytes
big-endian, H as its 64 hex digits in ASCII."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Union

from ._types import GENESIS_SHA256, AppendOutcome, AuditEntry, HostError

if TYPE_CHECKING:
    from .host_keys import HostKeys
    from .hosts import Audit

_ANCHOR_CONTEXT = b"mrtr-gate/audit-anchor/v1"
_LINK_CONTEXT = b"mrtr-gate/audit-link/v1"
_U64 = 1 << 64
_LOWER_HEX = frozenset("0123456789abcdef")


def _keyed_head(keys: "HostKeys", context: bytes, seq: int, event_sha256: str) -> str:
    """`{"event_sha256":H,"key_id":K,"mac":M,"seq":N}` (keys in canonical order), MAC'd with the
    current key in `context`."""
    key_id = keys.current_id
    mac = keys._mac(key_id, [context, seq.to_bytes(8, "big"), event_sha256.encode()])
    if mac is None:
        raise HostError("the current host key is missing")
    return f'{{"event_sha256":"{event_sha256}","key_id":"{key_id}","mac":"{mac.hex()}","seq":{seq}}}'


class AnchoredAudit:
    """An audit sink under a host key: each line keyed by a link written beside the trail (in
    `links`), the head anchored apart from it (in `checkpoint`, kept where the trail's writer
    cannot reach), with `keys`' current key. Wraps any audit sink of this package
    (`hosts.MemoryAudit`, `hosts.FileAudit`, or yours)."""

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
        # Held across link, append and anchor: within a process the anchor only moves forward.
        self._order = threading.Lock()

    def _link(self, entry: AuditEntry) -> None:
        line = (_keyed_head(self._keys, _LINK_CONTEXT, entry.seq, entry.event_sha256) + "\n").encode()
        # One write of one line, synced: the line it covers is never in the trail without it.
        try:
            with open(self._links, "ab") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            raise HostError("the audit link could not be written") from None

    def _anchor(self, entry: AuditEntry) -> None:
        text = _keyed_head(self._keys, _ANCHOR_CONTEXT, entry.seq, entry.event_sha256) + "\n"
        # Written aside and renamed over: the checkpoint is never half there (the same aside
        # name as the Rust host's `with_extension("tmp")`).
        tmp = os.path.splitext(self._checkpoint)[0] + ".tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(text.encode())
            os.replace(tmp, self._checkpoint)
        except OSError:
            raise HostError("the audit anchor could not be written") from None

    def append(self, entry: AuditEntry) -> AppendOutcome:
        with self._order:
            # The link first: an append the sink then refuses (its head moved) leaves a link
            # to a line that is nowhere in the trail, which matches nothing and is ignored.
            self._link(entry)
            outcome = self._inner.append(entry)
            if outcome.written and outcome.stored is not None:
                # An anchor that cannot be written is a failed append (the gate then denies).
                self._anchor(entry)
            return outcome


class AnchorCheck:
    """What checking a trail against its links and anchor found (one of the subclasses)."""


@dataclass(frozen=True)
class Intact(AnchorCheck):
    """Every line is keyed and the trail ends exactly at the anchored head."""

    events: int


@dataclass(frozen=True)
class BadAnchor(AnchorCheck):
    """The anchor is missing, unreadable or its MAC fails."""


@dataclass(frozen=True)
class BrokenChain(AnchorCheck):
    """The trail's chain itself is broken."""


@dataclass(frozen=True)
class Unkeyed(AnchorCheck):
    """The line at `seq` (the first such) has no link that verifies: written without the key
    (or its link removed)."""

    seq: int


@dataclass(frozen=True)
class Truncated(AnchorCheck):
    """The trail ends before the anchored head: lines were removed from its end."""

    events: int
    anchored: int


@dataclass(frozen=True)
class Diverged(AnchorCheck):
    """The trail's event at the anchored position is not the anchored one."""


@dataclass(frozen=True)
class Extended(AnchorCheck):
    """The trail goes on past the anchored head. Its lines are keyed, so a key holder wrote
    them: another process sharing the trail, or an anchor put back to an older one."""

    events: int
    anchored: int


def _lines(text: str) -> list[str]:
    """The lines of `text` as the Rust host splits them (`str::lines`): on `\\n`, a `\\r` before
    it dropped, no empty last line for a final newline."""
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    return [p[:-1] if p.endswith("\r") else p for p in parts]


def _u64(v: object) -> Optional[int]:
    # A JSON integer in range, never a bool or a float (as serde_json's `as_u64`).
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < _U64:
        return v
    return None


def _parse_keyed_head(text: str) -> Optional[tuple[int, str, str, bytes]]:
    """`(seq, event_sha256, key id, mac)` of a link or anchor line."""
    try:
        v = json.loads(text)
    except ValueError:
        return None
    if not isinstance(v, dict):
        return None
    seq, digest, key_id, mac = _u64(v.get("seq")), v.get("event_sha256"), v.get("key_id"), v.get("mac")
    if seq is None or not isinstance(digest, str) or not isinstance(key_id, str) or not isinstance(mac, str):
        return None
    # Only the spelling a host writes: lowercase hex, an even number of digits.
    if len(mac) % 2 or not set(mac) <= _LOWER_HEX:
        return None
    return seq, digest, key_id, bytes.fromhex(mac)


def _verifies(keys: "HostKeys", context: bytes, head: tuple[int, str, str, bytes]) -> bool:
    seq, digest, key_id, mac = head
    return keys._verify(key_id, [context, seq.to_bytes(8, "big"), digest.encode()], mac)


def _verify_chain(lines: list[str]) -> Optional[int]:
    """The number of events of a chain that verifies without a key, or None (the core's
    `verify_chain`)."""
    prev_seq, prev_sha = 0, GENESIS_SHA256
    for line in lines:
        try:
            v = json.loads(line)
        except ValueError:
            return None
        if not isinstance(v, dict):
            return None
        seq, back = _u64(v.get("seq")), v.get("prev_sha256")
        if seq is None or not isinstance(back, str) or seq != prev_seq + 1 or back != prev_sha:
            return None
        prev_seq, prev_sha = seq, _sha256(line)
    return prev_seq


def _sha256(line: str) -> str:
    return hashlib.sha256(line.encode()).hexdigest()


def verify_anchor(trail: str, links: str, checkpoint: str, keys: "HostKeys") -> AnchorCheck:
    """Check `trail` (JSON lines) against its `links` and the `checkpoint` text with `keys`. In
    order: the anchor's MAC, the chain, a verifying link for every line, then where the trail
    ends against the anchored head; the first that fails is the answer."""
    anchor = _parse_keyed_head(checkpoint.rstrip())
    if anchor is None or not _verifies(keys, _ANCHOR_CONTEXT, anchor):
        return BadAnchor()
    lines = _lines(trail)
    events = _verify_chain(lines)
    if events is None:
        return BrokenChain()
    keyed = set()
    for text in _lines(links):
        link = _parse_keyed_head(text)
        if link is not None and _verifies(keys, _LINK_CONTEXT, link):
            keyed.add((link[0], link[1]))
    for seq, line in enumerate(lines, start=1):
        if (seq, _sha256(line)) not in keyed:
            return Unkeyed(seq)
    seq, head = anchor[0], anchor[1]
    if events < seq:
        return Truncated(events, seq)
    if seq > 0 and _sha256(lines[seq - 1]) != head:
        return Diverged()
    if events > seq:
        return Extended(events, seq)
    return Intact(events)
