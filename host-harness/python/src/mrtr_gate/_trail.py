"""The audit trail without a key, as the core's `guest/core/src/audit.rs` (`verify_trail`,
`shard_ok`): one hash chain per shard, and the `root` shard's anchor lines holding every other
shard's head. Import it from `mrtr_gate.hosts`.

A trail verifies when the lines of each shard form one chain from genesis in the order they
come (the shards' lines may interleave in any way), the lines written before the sharded format
(`mrtr-gate/audit/v2`, `v3`: no `shard`) form one chain of their own (shard `""`), and every head
a root line anchors is in its shard's chain with the digest anchored. The answer is the Rust
core's for the same lines, break for break (tests/test_trail.py)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Optional

from ._types import GENESIS_SHA256, ChainHead

if TYPE_CHECKING:
    from ._types import AuditEntry

#: The shard of the root: the chain whose `anchor` lines record every other shard's head
#: (written by a host; never a server's key part, which is hex).
ROOT_SHARD = "root"

_U64 = 1 << 64
_SHARD_CHARS = frozenset("0123456789abcdefghijklmnopqrstuvwxyz")
# A `\u` escape of a UTF-16 surrogate: only then can a parsed string hold a lone one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class ChainBreak(ValueError):
    """Where a trail stops verifying: `kind` is one of the constants below, `index` the line's
    0-based position (the message counts from 1, for a person reading the file)."""

    #: The line does not parse, or lacks `seq`/`prev_sha256`; or a root line anchors a head
    #: that goes back, a `seq` 0, or the root itself.
    MALFORMED = "malformed"
    #: `seq` does not follow the shard's line before it.
    GAP = "gap"
    #: `prev_sha256` is not the digest of the shard's line before it.
    BROKEN = "broken"
    #: The root line anchors a shard head the shard's chain never reaches: its newest lines
    #: were cut away (or the whole shard).
    CUT = "cut"
    #: The root line anchors a line the shard holds with another digest: the shard was
    #: rewritten from there, and its chain rebuilt.
    REWRITTEN = "rewritten"

    _MESSAGES = {
        MALFORMED: "audit line {} is not a chained audit entry",
        GAP: "audit line {} does not follow the line before it (seq)",
        BROKEN: "audit line {} does not link to the line before it (prev_sha256)",
        CUT: "root line {} anchors a shard head its shard no longer reaches (lines cut away)",
        REWRITTEN: "root line {} anchors a line its shard holds with another digest (rewritten)",
    }

    def __init__(self, kind: str, index: int) -> None:
        super().__init__(self._MESSAGES[kind].format(index + 1))
        self.kind = kind
        self.index = index

    def __reduce__(self) -> tuple:
        # `args` holds the message, not what `__init__` takes: a copy or a pickle (another
        # process's worker) is made from the break itself.
        return (ChainBreak, (self.kind, self.index))


@dataclass(frozen=True)
class Verified:
    """What `verify_trail` found: how many lines, and each shard's head (the lines before the
    sharded format under `""`), by shard in order."""

    lines: int
    heads: dict[str, ChainHead]


def lines_of(text: str) -> list[str]:
    """The lines of `text` as the Rust hosts split them (`str::lines`): on `\\n`, a `\\r` before
    it dropped, no empty last line for a final newline."""
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    return [p[:-1] if p.endswith("\r") else p for p in parts]


def sha256_hex(line: str) -> str:
    return hashlib.sha256(line.encode("utf-8")).hexdigest()


def u64(v: object) -> Optional[int]:
    """`v` if it is a JSON integer in u64 range, never a bool or a float (serde_json's `as_u64`)."""
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < _U64:
        return v
    return None


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


class _NotU64:
    """A JSON number that is no u64 (a float, a negative integer, one past u64), kept as its
    text: serde_json with `arbitrary_precision`, as the core builds it, takes any number JSON
    can spell, `1e400` and a 5000-digit integer alike. Neither an `int` nor a `str`, so no
    field reads it as one."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _int(text: str) -> object:
    # serde_json reads a negative integer (and `-0`) as a signed value that is no u64; and one
    # past u64 (which `int` might refuse: Python limits the digits it converts) neither.
    if text.startswith("-") or len(text) > 20:
        return _NotU64(text)
    return int(text)


#: serde_json's recursion limit: this many arrays and objects nested, and no more.
_MAX_DEPTH = 127


def _too_deep(text: str) -> bool:
    """Whether `text` nests arrays and objects deeper than serde_json takes (checked before
    `json.loads`, whose own limit is Python's stack: a `RecursionError`, never a verdict)."""
    if text.count("[") + text.count("{") <= _MAX_DEPTH:
        return False
    depth, in_string, escaped = 0, False, False
    for c in text:
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            if depth > _MAX_DEPTH:
                return True
        elif c in "]}":
            depth -= 1
    return False


def _has_surrogate(v: object) -> bool:
    if isinstance(v, str):
        return any("\ud800" <= c <= "\udfff" for c in v)
    if isinstance(v, dict):
        return any(_has_surrogate(k) or _has_surrogate(x) for k, x in v.items())
    if isinstance(v, list):
        return any(_has_surrogate(x) for x in v)
    return False


def parse_json(text: str) -> object:
    """`text` parsed as the core's serde_json parses it: what it refuses (`NaN`, `Infinity`, a
    lone surrogate escape, nesting deeper than 127) raises `ValueError` here too, and a number
    that is no u64 comes back as neither an `int` nor a `str`, so that no line verifies in one
    host and breaks in another (tests/audit/trail_vectors.json)."""
    if _too_deep(text):
        raise ValueError("nested deeper than serde_json takes")
    value = json.loads(text, parse_constant=_refuse_constant, parse_float=_NotU64, parse_int=_int)
    if _SURROGATE_ESCAPE.search(text) and _has_surrogate(value):
        raise ValueError("a lone surrogate escape")
    return value


def shard_ok(entry: "AuditEntry") -> bool:
    """Whether a durable sink may take `entry` on its shard: the shard is a name a sink can key
    on (1 to 64 lowercase ASCII letters and digits: a server's key part, or `ROOT_SHARD`), and the
    line's top-level `shard`, the line parsed as `verify_trail` parses it, is that name. A sink
    that filed a line under another shard than the line names would hold a trail that no longer
    verifies."""
    name, line = entry.shard, entry.line
    if not isinstance(name, str) or not isinstance(line, str):
        return False
    if not 1 <= len(name) <= 64 or not set(name) <= _SHARD_CHARS:
        return False
    # Parsed, not searched: the verifier files a line by its top-level `shard` alone, and a
    # nested key of that name (a form input called `shard`, inside `input_kinds`) would pass a
    # search for `"shard":"` while the line is filed elsewhere. A line nested too deep for
    # Python's parser (RecursionError) is a line that does not parse: refused, never raised.
    try:
        v = parse_json(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(v, dict) and v.get("shard") == name


def verify_trail(lines: Iterable[str]) -> Verified:
    """Verify a whole trail (oldest first) from the start of the sink; raises `ChainBreak` at
    the first line that breaks it (a root line's anchors are checked once every line is in,
    wherever the root line stands among the others). A shard's newest lines cut away are found
    once a root line anchored them (`CUT`); lines cut after the last anchor leave a shorter
    chain that still verifies."""
    # Each shard's line digests by seq (index seq - 1): the anchors are checked at the end.
    shards: dict[str, list[str]] = {}
    # (root line position, shard, seq, digest), and each shard's last anchored seq.
    anchors: list[tuple[int, str, int, str]] = []
    anchored: dict[str, int] = {}
    count = 0
    for i, line in enumerate(lines):
        try:
            v = parse_json(line)
        except ValueError:
            raise ChainBreak(ChainBreak.MALFORMED, i) from None
        if not isinstance(v, dict):
            raise ChainBreak(ChainBreak.MALFORMED, i)
        seq, back = u64(v.get("seq")), v.get("prev_sha256")
        if seq is None or not isinstance(back, str):
            raise ChainBreak(ChainBreak.MALFORMED, i)
        shard = v.get("shard", "")
        if "shard" in v and (not isinstance(shard, str) or not shard):
            raise ChainBreak(ChainBreak.MALFORMED, i)
        chain = shards.setdefault(shard, [])
        if seq != len(chain) + 1:
            raise ChainBreak(ChainBreak.GAP, i)
        if back != (chain[-1] if chain else GENESIS_SHA256):
            raise ChainBreak(ChainBreak.BROKEN, i)
        chain.append(sha256_hex(line))
        if shard == ROOT_SHARD:
            heads = v.get("heads")
            if not isinstance(heads, dict):
                raise ChainBreak(ChainBreak.MALFORMED, i)
            for s, head in sorted(heads.items()):
                at = u64(head.get("seq")) if isinstance(head, dict) else None
                sha = head.get("sha256") if isinstance(head, dict) else None
                if at is None or not isinstance(sha, str):
                    raise ChainBreak(ChainBreak.MALFORMED, i)
                # An anchor never goes back: a root that does was not written by one host's
                # schedule from one sink's heads.
                if at < anchored.get(s, 0) or s == ROOT_SHARD or at == 0:
                    raise ChainBreak(ChainBreak.MALFORMED, i)
                anchored[s] = at
                anchors.append((i, s, at, sha))
        count += 1
    for i, s, at, sha in anchors:
        chain = shards.get(s, [])
        if at > len(chain):
            raise ChainBreak(ChainBreak.CUT, i)
        if chain[at - 1] != sha:
            raise ChainBreak(ChainBreak.REWRITTEN, i)
    heads = {s: ChainHead(len(chain), chain[-1]) for s, chain in sorted(shards.items())}
    return Verified(count, heads)


def verify_chain(lines: Iterable[str]) -> int:
    """`verify_trail`, counting the lines."""
    return verify_trail(lines).lines
