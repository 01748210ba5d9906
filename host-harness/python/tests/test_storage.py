"""`MemoryStorage` held to the storage contract's shared cases (tests/storage/contract.json,
the same the Rust stores, memory and Redis, are held to by
host-harness/redis/tests/storage_contract.rs): compare-and-swap batches that stop at the
first loser, versions never reused by a key, the reader's version elided, liveness by the
host's clock, opaque values, and `list_due` (only due keys, deadline order, paging at any
limit visits every due key once, hostile cursors and limits are errors)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import pytest

from mrtr_gate import DuePage, HostError, ReadKey, WriteOp, hosts

VECTORS = json.loads((Path(__file__).parents[3] / "tests" / "storage" / "contract.json").read_text(encoding="utf-8"))
MAX = 2**64 - 1


def due(s: hosts.MemoryStorage, due_by: int, limit: int) -> list[str]:
    """Every key listed by `due_by`, page after page, each within its limit, each cursor
    moving on."""
    out: list[str] = []
    cursor: Optional[str] = None
    for _ in range(10_000):
        page = s.list_due(due_by, cursor, limit)
        assert isinstance(page, DuePage)
        assert len(page.keys) <= limit, "a page over its limit"
        out.extend(page.keys)
        if page.next is None:
            return out
        assert page.next != cursor, "a cursor that does not move"
        cursor = page.next
    raise AssertionError("list_due never finished")


def version(bound: dict[str, int], v: Any) -> int:
    if isinstance(v, int):
        return v
    name, _, plus = v.partition("+")
    return bound[name] + int(plus or 0)


@pytest.mark.parametrize("case", VECTORS["cases"], ids=[c["name"] for c in VECTORS["cases"]])
def test_the_shared_contract(case: dict[str, Any]) -> None:
    t0 = VECTORS["t0_ms"]
    clock = hosts.ManualClock(t0)
    s = hosts.MemoryStorage(clock)
    bound: dict[str, int] = {}
    seen: set[tuple[str, int]] = set()
    for i, step in enumerate(case["steps"]):
        at = f"step {i}: {step}"
        if "write" in step:
            ops = [WriteOp(w["key"], version(bound, w["expected"]), w["value"], w["ttl_ms"]) for w in step["write"]]
            got = s.write(ops)
            assert len(got) == len(step["versions"]), f"{at}: {got}"
            for v, want, op in zip(got, step["versions"], ops):
                if isinstance(want, str) and want.startswith("new:"):
                    assert v != 0 and (op.key, v) not in seen, f"{at}: version {v} is 0 or came back"
                    seen.add((op.key, v))
                    bound[want[len("new:"):]] = v
                else:
                    assert v == want, at
        elif "read" in step:
            got = s.read([ReadKey(r["key"], version(bound, r["have"])) for r in step["read"]])
            want = [None if e is None else (version(bound, e["version"]), e["value"]) for e in step["expect"]]
            assert [None if e is None else (e.version, e.value) for e in got] == want, at
        elif "advance_ms" in step:
            clock.advance(step["advance_ms"])
        elif "due" in step:
            d = step["due"]
            by = MAX if d["by"] == "max" else t0 + d["by"]
            got = due(s, by, d["limit"])
            if "only" in d:
                got = [k for k in got if k.startswith(d["only"])]
            want = list(step["expect"])
            if step["order"] == "any":
                got, want = sorted(got), sorted(want)
            assert got == want, at
        elif "due_error" in step:
            d = step["due_error"]
            with pytest.raises(HostError):
                s.list_due(MAX, d["cursor"], d["limit"])
        else:
            raise AssertionError(f"{at}: an unknown step")
