"""The four host services the gate imports (`clock`, `storage`, `consent`, `audit`), as
Protocols, with reference implementations: a wall clock and a manual one, storage in memory
(TTL, compare-and-swap, versions never reused), an audit sink in memory and one in a
JSON-lines file (fsynced, read back from the file), each keeping one chain per shard, and two
consent providers: one that asks a callback, one that finds the decision the host recorded
(`DecidedConsent.decide_for`). `verify_trail` checks a trail without a key, as every host does.

A service reports a failure by raising `HostError` (any other exception is treated the same
way: the gate denies). The in-memory services can inject the faults the shared corpus uses
(docs/corpus.md)."""

from __future__ import annotations

import bisect
import hashlib
import os
import threading
import time
from typing import Any, Callable, Mapping, Optional, Protocol, Sequence, Union

# The trail's format is part of the sinks' interface: a host verifies a trail, or keys a sink
# of its own on shards, with these.
from ._trail import (  # noqa: F401
    ROOT_SHARD,
    ChainBreak,
    Verified,
    lines_of,
    shard_ok,
    verify_chain,
    verify_trail,
)
from ._types import (
    GENESIS_SHA256,
    AppendOutcome,
    AuditEntry,
    ChainHead,
    ConsentPrompt,
    ConsentReceipt,
    DuePage,
    Entry,
    HostError,
    ReadKey,
    WriteOp,
)


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch, at most 2**53 - 1 (a later or negative time
        denies as `clock_out_of_range`)."""


class Storage(Protocol):
    def read(self, keys: Sequence[ReadKey]) -> list[Optional[Entry]]:
        """The live entry of each key, in order (`None`: absent or past its TTL). A key still
        at the version the reader holds (`have`, non-zero) comes back with an empty value."""

    def write(self, writes: Sequence[WriteOp]) -> list[int]:
        """The writes in order, each an atomic compare-and-swap, stopping at the first whose
        key is not at its expected version; the new version of each write applied (0 for a
        delete). Versions are never 0 and never reused for a key, not even after a delete."""

    def list_due(self, due_by_ms: int, cursor: Optional[str], limit: int) -> DuePage:
        """One page of the live keys whose TTL deadline (write time + `ttl_ms`, by this
        store's clock) is at or before `due_by_ms`: at most `limit` keys (a `limit` below 1
        is an error), in deadline order, and the cursor of the next page (`None`: done).
        `cursor` is `None` for the first page, then the `next` of the page before: opaque and
        the store's own (one it did not make is an error). Keys written or deleted during a
        listing may or may not appear; a page may be shorter than `limit` without being the
        last. The contract: `storage.list-due` in wit/gate.wit."""


class Consent(Protocol):
    def request_consent(self, prompt: ConsentPrompt) -> ConsentReceipt:
        """Show the prompt (or find the decision already made for it) and return the receipt."""


class Audit(Protocol):
    """An append-only audit sink keeping one hash chain per shard (`AuditEntry.shard`): `seq`,
    `prev_sha256` and the outcome's head are always those of the entry's shard, and writers on
    different shards never contend. A durable sink refuses (raises `HostError`) an entry
    `shard_ok` refuses: filed under a shard its line does not name, the trail would no longer
    verify. A sink may also define `head_hint(shard) -> Optional[ChainHead]`, the shard's head as
    it knows it without asking its medium: `host_keys.AnchoredAudit` then refuses an entry that
    cannot extend it before syncing a link for it."""

    def append(self, entry: AuditEntry) -> AppendOutcome:
        """Append if and only if `entry` extends the head of its shard, then read it back from
        the durable medium."""


class SystemClock:
    """The wall clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to (tests, the corpus)."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.now = start_ms

    def now_ms(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


class MemoryStorage:
    """Storage in one process's memory, with TTL and atomic compare-and-swap (a lock makes
    every call atomic, so gates on several threads may share it)."""

    def __init__(self, clock: Optional[Clock] = None) -> None:
        self._clock = clock or SystemClock()
        self._slots: dict[str, tuple[str, int, int]] = {}
        # Every key in _slots as (deadline, key), sorted: list_due visits only what is due.
        self._due: list[tuple[int, str]] = []
        self._next_version = 1
        self._lock = threading.Lock()
        #: Fault injection (docs/corpus.md): `"fail"`, `"lose_cas"`, `"fail_deletes"` or None.
        self.fault: Optional[str] = None
        #: Writes that would apply still let through before one loses (None: no such fault).
        self.lose_cas_after: Optional[int] = None

    def __len__(self) -> int:
        return len(self._slots)

    def _check(self) -> None:
        if self.fault == "fail":
            raise HostError("storage unavailable (injected)")

    def read(self, keys: Sequence[ReadKey]) -> list[Optional[Entry]]:
        self._check()
        now = self._clock.now_ms()
        out: list[Optional[Entry]] = []
        with self._lock:
            for k in keys:
                slot = self._slots.get(k.key)
                if slot is None or slot[2] <= now:
                    out.append(None)
                else:
                    # The reader holds this version already: the value stays here.
                    out.append(Entry(slot[1], "" if k.have == slot[1] else slot[0]))
        return out

    def write(self, writes: Sequence[WriteOp]) -> list[int]:
        self._check()
        now = self._clock.now_ms()
        applied: list[int] = []
        with self._lock:
            for w in writes:
                slot = self._slots.get(w.key)
                current = slot[1] if slot and slot[2] > now else 0
                if current != w.expected or self.fault == "lose_cas":
                    break
                if self.lose_cas_after is not None:
                    if self.lose_cas_after == 0:
                        self.lose_cas_after = None
                        break
                    self.lose_cas_after -= 1
                if w.value is None:
                    if self.fault == "fail_deletes":
                        raise HostError("storage delete failed (injected)")
                    self._unindex(w.key)
                    self._slots.pop(w.key, None)
                    applied.append(0)
                else:
                    version = self._next_version
                    self._next_version += 1
                    self._unindex(w.key)
                    self._slots[w.key] = (w.value, version, now + w.ttl_ms)
                    bisect.insort(self._due, (now + w.ttl_ms, w.key))
                    applied.append(version)
        return applied

    def _unindex(self, key: str) -> None:
        slot = self._slots.get(key)
        if slot is not None:
            i = bisect.bisect_left(self._due, (slot[2], key))
            if i < len(self._due) and self._due[i] == (slot[2], key):
                del self._due[i]

    def list_due(self, due_by_ms: int, cursor: Optional[str], limit: int) -> DuePage:
        self._check()
        if type(limit) is not int or limit < 1:
            raise HostError("list-due limit is below 1")
        after: Optional[tuple[int, str]] = None
        if cursor is not None:
            deadline, sep, key = cursor.partition(":")
            if not sep or not deadline.isdigit() or not deadline.isascii():
                raise HostError("list-due cursor not made by this store")
            after = (int(deadline), key)
        now = self._clock.now_ms()
        with self._lock:
            # What is past its TTL is gone: the front of the index, nothing else.
            dead = bisect.bisect_left(self._due, (now + 1, ""))
            for _, key in self._due[:dead]:
                self._slots.pop(key, None)
            del self._due[:dead]
            start = 0 if after is None else bisect.bisect_right(self._due, after)
            keys: list[str] = []
            i = start
            while i < len(self._due) and self._due[i][0] <= due_by_ms and len(keys) < limit:
                keys.append(self._due[i][1])
                i += 1
            more = i < len(self._due) and self._due[i][0] <= due_by_ms
            nxt = f"{self._due[i - 1][0]}:{self._due[i - 1][1]}" if more and keys else None
            return DuePage(keys, nxt)

    def live_keys(self, prefix: str = "") -> list[str]:
        """The live keys starting with `prefix` (for tests that look inside the store)."""
        now = self._clock.now_ms()
        with self._lock:
            return sorted(k for k, s in self._slots.items() if k.startswith(prefix) and s[2] > now)


class CallbackConsent:
    """Consent from a callback that shows the prompt to the user and returns True (granted)
    or False (refused); the receipt is bound to exactly the prompt shown. `method` says how
    the callback decides (a person at a screen by default); a callback that answers without
    showing anyone the prompt must say so (`ConsentMethod.PRESET_ANSWERS` or
    `ConsentMethod.POLICY_HOOK`), since the trail records it."""

    def __init__(self, ask: Callable[[ConsentPrompt], bool], method: "ConsentMethod | None" = None) -> None:
        from ._types import ConsentMethod

        self._ask = ask
        self._count = 0
        self._method = ConsentMethod(method) if method is not None else ConsentMethod.USER_AT_SCREEN

    def request_consent(self, prompt: ConsentPrompt) -> ConsentReceipt:
        from ._types import ConsentDecision

        granted = self._ask(prompt)
        self._count += 1
        return ConsentReceipt(
            receipt_id=f"consent-{self._count}",
            decision=ConsentDecision.GRANTED if granted is True else ConsentDecision.REFUSED,
            method=self._method,
            view_sha256=prompt.view_sha256,
            responses_sha256=prompt.responses_sha256,
        )


class DecidedConsent:
    """Consent from decisions the host recorded before the gate asks (a dialog the host
    showed and the user answered, then `build_retry`): `decide_for(verdict, responses,
    granted)` records the user's decision for the round `verdict` showed and the answers the
    host will send (the package digests them as the gate does: tests/canonical holds it to the
    gate's vectors). The gate's prompt then finds exactly that decision, once; a prompt nobody
    decided on raises `HostError`, which the gate denies as `consent_unavailable`. `method`
    says how the decision was made (a person at a screen by default)."""

    def __init__(self) -> None:
        self._decisions: dict = {}
        self._count = 0
        self._lock = threading.Lock()

    def decide_for(
        self,
        verdict: Any,
        responses: Union[str, Mapping[str, Any]],
        granted: bool,
        method: "ConsentMethod | None" = None,
    ) -> str:
        """Record the decision; returns the receipt id the trail will record. Answers the
        gate would refuse (not an object, a key twice) raise `ValueError`."""
        from ._canonical import responses_sha256
        from ._types import ConsentMethod

        how = ConsentMethod(method) if method is not None else ConsentMethod.USER_AT_SCREEN
        key = (verdict.view_sha256, responses_sha256(responses))
        with self._lock:
            self._count += 1
            receipt_id = f"consent-{self._count}"
            self._decisions[key] = (receipt_id, granted is True, how)
        return receipt_id

    def request_consent(self, prompt: ConsentPrompt) -> ConsentReceipt:
        from ._types import ConsentDecision

        with self._lock:
            found = self._decisions.pop((prompt.view_sha256, prompt.responses_sha256), None)
        if found is None:
            raise HostError("no decision was made for this view and these answers")
        receipt_id, granted, method = found
        return ConsentReceipt(
            receipt_id=receipt_id,
            decision=ConsentDecision.GRANTED if granted else ConsentDecision.REFUSED,
            method=method,
            view_sha256=prompt.view_sha256,
            responses_sha256=prompt.responses_sha256,
        )


_GENESIS = ChainHead(0, GENESIS_SHA256)


class MemoryAudit:
    """A hash-chained audit sink in memory, one chain per shard (as the core's `MemoryAudit`: it
    takes any shard, `shard_ok` is for durable sinks). `window` keeps only the newest lines
    (benchmarks); `fault` injects the corpus's audit faults: `"fail_append"`,
    `"corrupt_readback"`, `"lose_writes"`, `"fail_readback"` or None."""

    def __init__(self, window: Optional[int] = None) -> None:
        self._lines: list[str] = []
        self._window = window
        # Kept apart from the lines: a shard's head outlives its lines leaving the window.
        self._heads: dict[str, ChainHead] = {}
        self._lock = threading.Lock()
        self.fault: Optional[str] = None

    @property
    def lines(self) -> list[str]:
        """Every line held, in the order written (every shard)."""
        return list(self._lines)

    def heads(self) -> dict[str, ChainHead]:
        """Every shard's head, by shard in order."""
        with self._lock:
            return dict(sorted(self._heads.items()))

    def append(self, entry: AuditEntry) -> AppendOutcome:
        if self.fault == "fail_append":
            raise HostError("audit sink unavailable (injected)")
        with self._lock:
            head = self._heads.get(entry.shard, _GENESIS)
            if entry.seq != head.seq + 1 or entry.prev_sha256 != head.event_sha256:
                return AppendOutcome(False, None, head.seq, head.event_sha256)
            self._lines.append(entry.line)
            if self._window is not None and len(self._lines) > self._window:
                del self._lines[0]
            self._heads[entry.shard] = ChainHead(entry.seq, entry.event_sha256)
            stored: Optional[str] = self._lines[-1]
            if self.fault in ("lose_writes", "fail_readback"):
                stored = None
            elif self.fault == "corrupt_readback":
                stored = entry.line.replace('"event"', '"evnt"', 1)
            return AppendOutcome(True, stored, entry.seq, entry.event_sha256)


class FileAudit:
    """An append-only JSON-lines audit file, one chain per shard (their lines interleaved as
    written): every append is fsynced, then read back from the file through a second handle.
    Opening verifies the trail already there (`verify_trail`) and refuses one that breaks (a
    sink must never extend a tampered log), recovering each shard's head from it. An entry
    `shard_ok` refuses raises `HostError`."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = os.fspath(path)
        self._lock = threading.Lock()
        heads: dict[str, ChainHead] = {}
        offset = 0
        if os.path.exists(self._path):
            with open(self._path, "rb") as f:
                data = f.read()
            if data and not data.endswith(b"\n"):
                raise ValueError(f"{self._path}: the last line is torn")
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"{self._path}: the trail is not UTF-8") from None
            try:
                heads = verify_trail(lines_of(text)).heads
            except ChainBreak as e:
                raise ValueError(f"{self._path}: {e}") from e
            offset = len(data)
        self._heads = heads
        self._end = offset
        self._file = open(self._path, "ab")

    def close(self) -> None:
        self._file.close()

    def head(self, shard: str) -> ChainHead:
        """The last event of `shard` in the file (`0` and 64 zeros when it has none)."""
        with self._lock:
            return self._heads.get(shard, _GENESIS)

    def heads(self) -> dict[str, ChainHead]:
        """Every shard's head (lines before the sharded format under `""`), by shard in order."""
        with self._lock:
            return dict(sorted(self._heads.items()))

    def head_hint(self, shard: str) -> ChainHead:
        # The head its own append compares with: exact, and it costs no read of the file.
        return self.head(shard)

    def append(self, entry: AuditEntry) -> AppendOutcome:
        line = entry.line.encode("utf-8")
        if b"\n" in line or hashlib.sha256(line).hexdigest() != entry.event_sha256:
            raise HostError("audit file: the entry's digest does not match its line")
        if not shard_ok(entry):
            raise HostError("audit file: the entry's shard is not a shard name its line carries")
        with self._lock:
            head = self._heads.get(entry.shard, _GENESIS)
            if entry.seq != head.seq + 1 or entry.prev_sha256 != head.event_sha256:
                return AppendOutcome(False, None, head.seq, head.event_sha256)
            self._file.write(line + b"\n")
            self._file.flush()
            os.fsync(self._file.fileno())
            offset = self._end
            self._end += len(line) + 1
            self._heads[entry.shard] = ChainHead(entry.seq, entry.event_sha256)
            try:
                with open(self._path, "rb") as f:
                    f.seek(offset)
                    stored: Optional[str] = f.read(len(line)).decode("utf-8")
            except (OSError, UnicodeDecodeError):
                stored = None
            return AppendOutcome(True, stored, entry.seq, entry.event_sha256)
