"""The component through wasmtime-py's component API: compile once, link the five imports to
Python services, call the exports.

wasmtime-py (50.0.1) maps WIT values to bare Python values, and some of its mappings need
care; each is handled here, in one place, and tested in tests/test_wasmtime_py.py:

- records have no constructor and keep kebab-case field names: they are built with `setattr`;
- a `result` or `variant` whose cases hold different Python types is untagged: the value is
  the payload itself (an import's `result<list<entry>, string>` is returned as a `list` for
  `ok` and a `str` for `err`); cases of one Python type are tagged (`Variant(tag, payload)`);
- integers are not range-checked on the way in (a clock returning -1 would arrive as 2**64 - 1):
  every integer a service returns is checked here, and a bad one becomes a host error (or,
  for the clock, a time the gate refuses as `clock_out_of_range`);
- an exception escaping a host function traps the instance: every service call is wrapped,
  so a raised `HostError` (or any other `Exception`) becomes the import's `err` and the gate
  denies, auditing the denial, with the instance intact.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Optional

from wasmtime import Config, Engine, Store, WasmtimeError
from wasmtime.component import Component, Linker, Record, Variant

from . import _fast
from ._types import (
    AuditEntry,
    ConsentPrompt,
    ConsentReceipt,
    ConsentDecision,
    ConsentMethod,
    DuePage,
    ReadKey,
    WriteOp,
)

WIT_VERSION = "0.6.0"
U64_MAX = (1 << 64) - 1


def _iface(name: str) -> str:
    return f"mrtr:gate/{name}@{WIT_VERSION}"


def _record(**fields: Any) -> Record:
    r = Record()
    for k, v in fields.items():
        setattr(r, k.replace("_", "-"), v)
    return r


def _is_u64(x: object) -> bool:
    return type(x) is int and 0 <= x <= U64_MAX


def _failure(e: BaseException) -> str:
    """The `err` message of a service that raised: the message only, never a traceback."""
    text = str(e) or type(e).__name__
    return text if type(e).__name__ == "HostError" else f"{type(e).__name__}: {text}"


class Services:
    """The four services (and the `digest` import, `sha256` below), adapted to what wasmtime-py calls with and expects back."""

    def __init__(self, clock: Any, storage: Any, consent: Any, audit: Any) -> None:
        self.clock = clock
        self.storage = storage
        self.consent = consent
        self.audit = audit

    def now_ms(self, _store: Any) -> int:
        try:
            now = self.clock.now_ms()
        except Exception:  # noqa: BLE001 - a broken clock denies, it never traps
            return U64_MAX
        # Out of u64 (a negative time, a float): a time the gate refuses as out of range.
        return now if _is_u64(now) else U64_MAX

    def read(self, _store: Any, keys: list) -> object:
        try:
            found = self.storage.read([ReadKey(k.key, k.have) for k in keys])
            if len(found) != len(keys):
                return "the store returned fewer or more entries than keys"
            out = []
            for e in found:
                if e is None:
                    out.append(_record(version=0, value=""))
                elif _is_u64(e.version) and type(e.value) is str:
                    out.append(_record(version=e.version, value=e.value))
                else:
                    return "the store returned an entry that is not (u64, str)"
            return out
        except Exception as e:  # noqa: BLE001
            return _failure(e)

    def write(self, _store: Any, writes: list) -> object:
        try:
            ops = [WriteOp(w.key, w.expected, w.value, getattr(w, "ttl-ms")) for w in writes]
            versions = self.storage.write(ops)
            if len(versions) > len(ops) or not all(_is_u64(v) for v in versions):
                return "the store returned versions that are not u64, or too many"
            return list(versions)
        except Exception as e:  # noqa: BLE001
            return _failure(e)

    def list_due(self, _store: Any, due_by_ms: int, cursor: Optional[str], limit: int) -> object:
        try:
            page = self.storage.list_due(due_by_ms, cursor, limit)
            if not isinstance(page, DuePage):
                return "the store listed no DuePage"
            keys = list(page.keys)
            if not all(type(k) is str for k in keys) or not (page.next is None or type(page.next) is str):
                return "the store listed a key or cursor that is not a str"
            return _record(keys=keys, next=page.next)
        except Exception as e:  # noqa: BLE001
            return _failure(e)

    def request_consent(self, _store: Any, p: Record) -> object:
        try:
            prompt = ConsentPrompt(
                getattr(p, "view-json"),
                getattr(p, "view-sha256"),
                getattr(p, "responses-json"),
                getattr(p, "responses-sha256"),
            )
            r = self.consent.request_consent(prompt)
            if not isinstance(r, ConsentReceipt):
                return "the consent provider returned no ConsentReceipt"
            decision = ConsentDecision(r.decision).value
            method = ConsentMethod(r.method).value
            if not all(type(x) is str for x in (r.receipt_id, r.view_sha256, r.responses_sha256)):
                return "the consent receipt's fields must be str"
            return _record(
                receipt_id=r.receipt_id,
                decision=decision,
                method=method,
                view_sha256=r.view_sha256,
                responses_sha256=r.responses_sha256,
            )
        except Exception as e:  # noqa: BLE001
            return _failure(e)

    def append(self, _store: Any, e: Record) -> object:
        try:
            entry = AuditEntry(e.shard, e.seq, getattr(e, "prev-sha256"), getattr(e, "event-sha256"), e.line)
            o = self.audit.append(entry)
            ok = (
                type(o.written) is bool
                and (o.stored is None or type(o.stored) is str)
                and _is_u64(o.head_seq)
                and type(o.head_sha256) is str
            )
            if not ok:
                return "the audit sink returned an outcome that is not (bool, str?, u64, str)"
            return _record(written=o.written, stored=o.stored, head_seq=o.head_seq, head_sha256=o.head_sha256)
        except Exception as e:  # noqa: BLE001
            return _failure(e)

    # The `journal` import: the two calls it stands for, in order (wit/gate.wit `journal`).
    # Each step's answer is already checked (a `str` is its `err`).

    def append_then_write(self, store: Any, e: Record, writes: list) -> object:
        appended = self.append(store, e)
        if isinstance(appended, str):
            return appended
        confirmed = appended.written and appended.stored is not None and appended.stored == e.line
        applied = self.write(store, writes) if confirmed else []
        if isinstance(applied, str):
            return _record(applied=[], appended=appended, failed=applied)
        return _record(applied=applied, appended=appended, failed=None)

    def write_then_append(self, store: Any, writes: list, e: Record) -> object:
        applied = self.write(store, writes)
        if isinstance(applied, str):
            return applied
        if not applied:
            return _record(applied=applied, appended=None, failed=None)
        appended = self.append(store, e)
        if isinstance(appended, str):
            return _record(applied=applied, appended=None, failed=appended)
        return _record(applied=applied, appended=appended, failed=None)


def sha256(_store: Any, _text: str) -> Optional[str]:
    """The `digest` import: `none`, so the guest hashes in WebAssembly and does not ask again.
    Through wasmtime-py a crossing costs more than the guest's own SHA-256 of the texts it
    would send (docs/performance.md, "Instructions per round"); hashlib would be slower."""
    return None


class Compiled:
    """The component compiled for one engine (compiling takes about a second; do it once)."""

    _cache: dict[tuple[str, int], "Compiled"] = {}

    def __init__(self, wasm: bytes, max_wasm_stack: int) -> None:
        config = Config()
        config.max_wasm_stack = max_wasm_stack
        self.engine = Engine(config)
        self.component = Component(self.engine, wasm)

    @classmethod
    def of(cls, wasm: bytes, max_wasm_stack: int = 1 << 20) -> "Compiled":
        key = (hashlib.sha256(wasm).hexdigest(), max_wasm_stack)
        found = cls._cache.get(key)
        if found is None:
            found = cls._cache[key] = Compiled(wasm, max_wasm_stack)
        return found


EXPORTS = (
    "register",
    "accept-response",
    "build-retry",
    "retry-from-client",
    "refuse-unbound",
    "finish",
    "expire-stale",
)


def engine_name() -> str:
    """`fast` (the converters of `_fast`, made once per function) or `api` (wasmtime-py's
    public component API); `MRTR_GATE_PY_ENGINE=api` chooses the latter."""
    wanted = os.environ.get("MRTR_GATE_PY_ENGINE", "fast")
    return "fast" if wanted != "api" and _fast.available() else "api"


class Instance:
    """One instance of the component in its own store. A trap poisons it: the caller drops it
    and makes another (the gate keeps nothing that matters in it)."""

    def __init__(self, compiled: Compiled, services: Services, max_memory_bytes: int, engine: str = "fast") -> None:
        fast = engine == "fast"
        imports = compiled.component.type.imports(compiled.engine) if fast else {}
        linker = Linker(compiled.engine)
        with linker.root() as root:
            for iface, funcs in (
                ("clock", (("now-ms", services.now_ms),)),
                ("storage", (("read", services.read), ("write", services.write), ("list-due", services.list_due))),
                ("consent", (("request-consent", services.request_consent),)),
                ("audit", (("append", services.append),)),
                ("journal", (("append-then-write", services.append_then_write), ("write-then-append", services.write_then_append))),
                ("digest", (("sha256", sha256),)),
            ):
                with root.add_instance(_iface(iface)) as i:
                    types = imports[_iface(iface)].ty.exports(compiled.engine) if fast else {}
                    for name, func in funcs:
                        if fast:
                            _fast.add_func(i, name, types[name].ty, func)
                        else:
                            i.add_func(name, func)
        self.store = Store(compiled.engine)
        self.store.set_limits(memory_size=max_memory_bytes)
        instance = linker.instantiate(self.store, compiled.component)
        gate = instance.get_export_index(self.store, _iface("gate"))
        self._funcs: dict[str, Any] = {}
        for name in EXPORTS:
            index = instance.get_export_index(self.store, name, gate)
            func = instance.get_func(self.store, index) if index is not None else None
            if func is None:
                raise WasmtimeError(f"the component does not export `{name}`")
            self._funcs[name] = _fast.ExportFunc(func, func.type(self.store)) if fast else func
        self._fast = fast

    def call(self, name: str, *args: Any) -> Any:
        func = self._funcs[name]
        result = func(self.store, *args)
        if not self._fast:
            func.post_return(self.store)
        return result


def server_value(kind: str, text: str) -> Variant:
    return Variant(kind, text)


def unbound_value(kind: str, method: Optional[str]) -> Variant:
    return Variant(kind) if method is None else Variant(kind, method)


def outcome_value(error: Optional[str], policy: Optional[str]) -> Variant:
    """A `caller-outcome`: tagged, since two of its cases carry a string."""
    if policy is not None:
        return Variant("policy-denied", policy)
    return Variant("cancelled") if error is None else Variant("error", error)


def policy_value(p: Any) -> Record:
    return _record(
        round_trip_lifetime_ms=p.round_trip_lifetime_ms,
        max_request_state_bytes=p.max_request_state_bytes,
        max_rounds=p.max_rounds,
        allowed_deprecated=[m.value for m in p.allowed_deprecated],
        policy_version=p.policy_version,
    )


record = _record
