"""Keys the host holds and the component never sees (docs/host-keys.md), in the formats of the
Rust host (`host-harness/host/src/host_keys.rs`), byte for byte: a store written by one host reads
in the others, and the same name gets the same pseudonym everywhere
(tests/host_keys/vectors.json pins them).

- `AuthenticatedStorage`: every stored value is `mac2.<key id>.<prev>.<HMAC-SHA256>.<text>`;
  a value that fails its MAC, was moved to another key, or is older than one this wrapper saw
  under its key (a rollback) is refused (`HostError`: the gate denies with `storage_failed`);
- `Pseudonyms`: `u1.<32 hex>` / `t1.<32 hex>` for the user and tenant passed to the gate;
- `AnchoredAudit` and `verify_anchor` (`mrtr_gate._anchor`): every trail line keyed by a link
  beside the trail, each shard's head anchored apart from it.

    keys = HostKeys("2026-12", secret)      # secret: bytes, at least 32
    storage = AuthenticatedStorage(hosts.MemoryStorage(), keys)
    names = Pseudonyms(keys)
    gate.register(..., user=names.user(email), tenant=names.tenant(org), ...)
    audit = AnchoredAudit(hosts.FileAudit("audit.jsonl"), keys, "/elsewhere/audit.anchor", "audit.jsonl.links")"""

from __future__ import annotations

import hashlib
import hmac
import re
import threading
from dataclasses import dataclass
from typing import Optional, Sequence

from ._types import DuePage, Entry, HostError, ReadKey, WriteOp
from .hosts import Storage

_ID = re.compile(r"[A-Za-z0-9_-]{1,32}", re.ASCII)
_LOWER_HEX = re.compile(r"[0-9a-f]*", re.ASCII)
_STORAGE_CONTEXT = b"mrtr-gate/storage/v2"
_PSEUDONYM_CONTEXT = b"mrtr-gate/pseudonym/v1"
_TAG = "mac2."
_U64 = 1 << 64
# How many keys the rollback check remembers: past it, it starts again (forgetting only
# weakens the check for the keys forgotten, it never refuses a good value).
_SEEN_KEYS = 65_536


class HostKeyError(ValueError):
    """A key the host cannot use (a bad id, a short secret, an unknown id)."""


class HostKeys:
    """A host's keys: the current one (used for new MACs) and older ones still accepted."""

    def __init__(self, key_id: str, secret: bytes) -> None:
        self._keys: dict[str, bytes] = {}
        self.add(key_id, secret)
        self._current = key_id

    def __repr__(self) -> str:
        # Never the key bytes.
        return f"HostKeys(current={self._current!r}, ids={sorted(self._keys)!r})"

    def add(self, key_id: str, secret: bytes) -> None:
        """Accept `key_id` too (an older key, during a rotation): 1 to 32 bytes of
        `[A-Za-z0-9_-]`, and a secret of at least 32 bytes."""
        if not isinstance(key_id, str) or not _ID.fullmatch(key_id):
            raise HostKeyError("a key id is 1 to 32 bytes of [A-Za-z0-9_-]")
        if not isinstance(secret, (bytes, bytearray)) or len(secret) < 32:
            raise HostKeyError("a host key is at least 32 bytes")
        self._keys[key_id] = bytes(secret)

    def rotate_to(self, key_id: str) -> None:
        """Make `key_id` (already added) the key new MACs use."""
        if key_id not in self._keys:
            raise HostKeyError(f"no key `{key_id}`")
        self._current = key_id

    def retire(self, key_id: str) -> None:
        """Stop accepting `key_id` (the end of a rotation); the current key cannot be dropped."""
        if key_id != self._current:
            self._keys.pop(key_id, None)

    @property
    def current_id(self) -> str:
        return self._current

    def _mac(self, key_id: str, parts: Sequence[bytes]) -> Optional[bytes]:
        key = self._keys.get(key_id)
        if key is None:
            return None
        mac = hmac.new(key, digestmod=hashlib.sha256)
        for part in parts:
            # Length-prefixed, so no two splits of the same bytes MAC alike.
            mac.update(len(part).to_bytes(8, "big"))
            mac.update(part)
        return mac.digest()

    def _verify(self, key_id: str, parts: Sequence[bytes], tag: bytes) -> bool:
        mac = self._mac(key_id, parts)
        return mac is not None and hmac.compare_digest(mac, tag)


@dataclass(frozen=True)
class _Seen:
    """The last version of a key this wrapper read or wrote, and the MAC of its value (None:
    it deleted the key at that version)."""

    version: int
    mac: Optional[bytes]

    def refuses(self, version: int, prev: int, mac: bytes) -> bool:
        """Whether a value at `version` that replaced `prev` and has `mac` is older than this
        one, or this one changed without a new version."""
        if version == self.version:
            # Only the very value seen passes at its version.
            return self.mac != mac
        if _same_life(version, self.version) and version < self.version:
            return True
        # A value written over a version older than the one seen was sealed before it (a
        # delete consumed the version it deleted: nothing is written over it).
        return (
            prev != 0
            and _same_life(prev, self.version)
            and (prev < self.version or (prev == self.version and self.mac is None))
        )


def _same_life(a: int, b: int) -> bool:
    """Two versions of one store life (the same epoch, the high 32 bits)."""
    return a >> 32 == b >> 32


class _Older(Exception):
    """A read met a value older than one this wrapper saw under its key."""


class AuthenticatedStorage:
    """A store whose every value is authenticated by a host key, as the Rust host's
    `AuthenticatedStorage` (docs/host-keys.md): what the gate writes is stored as
    `mac2.<key id>.<prev: 16 hex>.<HMAC-SHA256(key; "mrtr-gate/storage/v2", gate key, prev,
    text), 64 hex>.<text>`, each MAC'd part prefixed by its length (8 bytes, big-endian),
    `prev` the version the write replaced (0: the key was absent). A value read back must
    carry a valid MAC by a key still accepted, for that very key.

    Every read asks the inner store for the whole value and checks its MAC; the gate is
    spared the value it holds (`have`) only when this wrapper saw that very value. Per key it
    keeps the last version it read or wrote (in this process's memory) and refuses a value
    older than that within one store life (the epoch in the high 32 bits of a version): a
    value sealed earlier and written back. A read that meets one reads once more first
    (threads sharing the wrapper may cross a read with a newer write)."""

    def __init__(self, inner: Storage, keys: HostKeys) -> None:
        self._inner = inner
        self._keys = keys
        self._seen: dict[str, _Seen] = {}
        self._lock = threading.Lock()

    def _seal(self, key: str, prev: int, text: str) -> tuple[str, bytes]:
        key_id = self._keys.current_id
        mac = self._keys._mac(key_id, _parts(key, prev, text))
        if mac is None:
            raise HostError("the current host key is missing")
        return f"{_TAG}{key_id}.{prev:016x}.{mac.hex()}.{text}", mac

    def _open(self, key: str, stored: str) -> tuple[bytes, int, str]:
        """The MAC, the version replaced and the text of a stored value, or HostError."""
        refused = HostError("a stored value failed its authentication")
        if not stored.startswith(_TAG):
            raise refused
        parts = stored[len(_TAG) :].split(".", 3)
        if len(parts) != 4:
            raise refused
        key_id, prev_hex, tag, text = parts
        # Only the spelling a seal writes (lowercase hex, no sign), as every host reads it.
        if len(prev_hex) != 16 or not _LOWER_HEX.fullmatch(prev_hex):
            raise refused
        if len(tag) != 64 or not _LOWER_HEX.fullmatch(tag):
            raise refused
        prev, mac = int(prev_hex, 16), bytes.fromhex(tag)
        if not self._keys._verify(key_id, _parts(key, prev, text), mac):
            raise refused
        return mac, prev, text

    def _remember(self, key: str, now: _Seen) -> None:
        """Note `now` unless a newer version of the same life is noted already (threads note
        what they read and wrote in any order). Called with the lock held."""
        old = self._seen.get(key)
        if old is not None and _same_life(old.version, now.version) and now.version < old.version:
            return
        if len(self._seen) >= _SEEN_KEYS and key not in self._seen:
            self._seen.clear()
        self._seen[key] = now

    def _read_checked(self, keys: Sequence[ReadKey]) -> list[Optional[Entry]]:
        # Every value, even one the gate holds: its MAC is checked on every read.
        found = self._inner.read([ReadKey(k.key, 0) for k in keys])
        if len(found) != len(keys):
            raise HostError("the store answered another number of keys than asked")
        opened = [None if e is None else (e.version, self._open(k.key, e.value)) for k, e in zip(keys, found)]
        out: list[Optional[Entry]] = []
        with self._lock:
            for k, o in zip(keys, opened):
                seen = self._seen.get(k.key)
                if o is not None and seen is not None and seen.refuses(o[0], o[1][1], o[1][0]):
                    raise _Older()
            for k, o in zip(keys, opened):
                if o is None:
                    out.append(None)
                    continue
                version, (mac, _, text) = o
                now = _Seen(version, mac)
                before = self._seen.get(k.key)
                self._remember(k.key, now)
                # The gate is spared only the very value this wrapper saw at its version.
                spared = k.have != 0 and k.have == version and before == now
                out.append(Entry(version, "" if spared else text))
        return out

    def read(self, keys: Sequence[ReadKey]) -> list[Optional[Entry]]:
        try:
            return self._read_checked(keys)
        except _Older:
            pass
        # Read before a newer write another thread noted: read once more. A value still
        # older than one seen is a rollback.
        try:
            return self._read_checked(keys)
        except _Older:
            raise HostError("a stored value is older than one this host has seen (a rollback)") from None

    def write(self, writes: Sequence[WriteOp]) -> list[int]:
        sealed = [None if w.value is None else self._seal(w.key, w.expected, w.value) for w in writes]
        applied = self._inner.write(
            [WriteOp(w.key, w.expected, None if s is None else s[0], w.ttl_ms) for w, s in zip(writes, sealed)]
        )
        with self._lock:
            for w, s, version in zip(writes, sealed, applied):
                if s is not None:
                    self._remember(w.key, _Seen(version, s[1]))
                elif w.expected != 0:
                    self._remember(w.key, _Seen(w.expected, None))
        return applied

    def list_due(self, due_by_ms: int, cursor: Optional[str], limit: int) -> DuePage:
        # Keys are not sealed (only values are): the listing passes through.
        return self._inner.list_due(due_by_ms, cursor, limit)


def _parts(key: str, prev: int, text: str) -> list[bytes]:
    if not 0 <= prev < _U64:
        raise HostError("a version is not a u64")
    return [_STORAGE_CONTEXT, key.encode(), prev.to_bytes(8, "big"), text.encode()]


class Pseudonyms:
    """Keyed pseudonyms for the principals the gate binds: `u1.<32 hex>` for a user and
    `t1.<32 hex>` for a tenant (the first 128 bits of HMAC-SHA256 with the current host key
    over a context, the kind and the name, length-prefixed). The same name always maps to the
    same pseudonym under one key, in every host; a reader of the trail alone cannot map it
    back. Rotating the key starts new pseudonyms."""

    def __init__(self, keys: HostKeys) -> None:
        self._keys = keys

    def _of(self, kind: str, name: str) -> str:
        mac = self._keys._mac(self._keys.current_id, [_PSEUDONYM_CONTEXT, kind.encode(), name.encode()])
        return f"{kind}1.{'' if mac is None else mac[:16].hex()}"

    def user(self, user: str) -> str:
        """The pseudonym to pass the gate for `user`."""
        return self._of("u", user)

    def tenant(self, tenant: str) -> str:
        """The pseudonym to pass the gate for `tenant`."""
        return self._of("t", tenant)


# The keyed trail lives in its own module; it is part of this one's interface.
from ._anchor import (  # noqa: E402
    AnchorCheck,
    AnchoredAudit,
    BadAnchor,
    BrokenChain,
    Diverged,
    Extended,
    Intact,
    Truncated,
    Unkeyed,
    verify_anchor,
)

__all__ = [
    "AnchorCheck",
    "AnchoredAudit",
    "AuthenticatedStorage",
    "BadAnchor",
    "BrokenChain",
    "Diverged",
    "Extended",
    "HostKeys",
    "HostKeyError",
    "Intact",
    "Pseudonyms",
    "Truncated",
    "Unkeyed",
    "verify_anchor",
]
