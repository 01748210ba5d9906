"""`MemoryStorage.list_due`, held to the storage contract's list-due cases (the same as
host-harness/redis/tests/storage_contract.rs runs against the Rust stores): only due keys,
deadline order, paging at any limit visits every due key once, deletes and rewrites move
keys in the index, keys past their TTL are gone, hostile cursors and limits are errors."""

from __future__ import annotations

import pytest

from mrtr_gate import DuePage, HostError, WriteOp, hosts

A = "mrtr-gate/v3/id/0123456789abcdef0123456789abcdef/"


def fresh() -> tuple[hosts.ManualClock, hosts.MemoryStorage]:
    clock = hosts.ManualClock(1_700_000_000_000)
    return clock, hosts.MemoryStorage(clock)


def put(s: hosts.MemoryStorage, key: str, ttl: int, expected: int = 0) -> int:
    (v,) = s.write([WriteOp(key, expected, "v", ttl)])
    return v


def due(s: hosts.MemoryStorage, due_by: int, limit: int) -> list[str]:
    out: list[str] = []
    cursor = None
    for _ in range(10_000):
        page = s.list_due(due_by, cursor, limit)
        assert isinstance(page, DuePage)
        assert len(page.keys) <= limit
        out.extend(page.keys)
        if page.next is None:
            return out
        assert page.next != cursor
        cursor = page.next
    raise AssertionError("list_due never finished")


def test_an_empty_store_has_nothing_due() -> None:
    _, s = fresh()
    assert s.list_due(2**64 - 1, None, 64) == DuePage([], None)


def test_only_due_keys_in_deadline_order() -> None:
    clock, s = fresh()
    now = clock.now_ms()
    for i, ttl in enumerate([3_000, 1_000, 2_000, 10_000, 3_001]):
        put(s, f"{A}{i}", ttl)
    assert due(s, now + 3_000, 64) == [f"{A}1", f"{A}2", f"{A}0"]
    assert due(s, now, 64) == []
    assert len(due(s, 2**64 - 1, 64)) == 5


def test_paging_visits_every_due_key_exactly_once() -> None:
    clock, s = fresh()
    now = clock.now_ms()
    want = []
    for i in range(36):
        ttl = 1_000 + (i % 4) * 1_000
        put(s, f"{A}{i}", ttl)
        if ttl <= 3_500:
            want.append(f"{A}{i}")
    for limit in (1, 2, 3, 5, 64):
        got = due(s, now + 3_500, limit)
        assert sorted(got) == sorted(want) and len(got) == len(set(got)), limit


def test_deletes_leave_the_index_and_rewrites_move() -> None:
    clock, s = fresh()
    now = clock.now_ms()
    va, vb, vc = put(s, f"{A}a", 1_000), put(s, f"{A}b", 1_000), put(s, f"{A}c", 60_000)
    assert due(s, now + 1_000, 64) == [f"{A}a", f"{A}b"]
    s.write([WriteOp(f"{A}a", va, None, 60_000)])
    s.write([WriteOp(f"{A}b", vb, "b2", 60_000)])
    s.write([WriteOp(f"{A}c", vc, "c2", 500)])
    assert due(s, now + 1_000, 64) == [f"{A}c"]
    assert due(s, now + 60_000, 64) == [f"{A}c", f"{A}b"]


def test_keys_past_their_ttl_are_gone() -> None:
    clock, s = fresh()
    put(s, f"{A}1", 1_000)
    put(s, f"{A}2", 5_000)
    clock.advance(1_000)
    assert due(s, 2**64 - 1, 1) == [f"{A}2"]
    clock.advance(4_000)
    assert due(s, 2**64 - 1, 1) == []
    assert len(s) == 0


@pytest.mark.parametrize("bad", ["", "garbage", "x:y z", "\0", "-1 -1 ", "١:k"])
def test_a_cursor_the_store_did_not_make_is_an_error(bad: str) -> None:
    _, s = fresh()
    put(s, f"{A}1", 1_000)
    with pytest.raises(HostError):
        s.list_due(2**64 - 1, bad, 64)
    with pytest.raises(HostError):
        s.list_due(2**64 - 1, None, 0)
    assert due(s, 2**64 - 1, 1) == [f"{A}1"]
