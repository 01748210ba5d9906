"""A faster path through wasmtime-py's own C bindings, for this package's one world.

wasmtime-py (50.0.1) re-derives the type of every parameter and result, through ctypes, on
every call: a form round spends most of its time there (docs/performance.md, "Python host").
This module derives each function's converters once, from the same public type objects
(`FuncType`, `RecordType`, ...), and then moves values exactly as wasmtime-py does: the same
Python shapes (a `Record` with kebab-case attributes, untagged results and variants where
wasmtime-py leaves them untagged, `Variant` where it tags them), the same C calls, the same
ownership (an argument's strings and lists are freed by whoever lifts them).

It uses wasmtime-py's C bindings module (`wasmtime._ffi`) and two private attributes
(`Func._func`, `Store._context()`), patches nothing, and is used only with the exact
wasmtime-py it was written for (`SUPPORTED`); with any other version, or with
`MRTR_GATE_PY_ENGINE=api`, the package takes wasmtime-py's public component API instead.
tests/test_engines.py runs the whole corpus through both and requires identical results.
"""

from __future__ import annotations

import ctypes
from importlib import metadata
from ctypes import byref, pointer
from typing import Any, Callable, Optional

from wasmtime import WasmtimeError
from wasmtime import _ffi as ffi
from wasmtime.component import (
    Bool,
    EnumType,
    ListType,
    OptionType,
    Record,
    RecordType,
    ResultType,
    S32,
    S64,
    String,
    U8,
    U32,
    U64,
    Variant,
    VariantType,
)

#: The wasmtime-py this module was written against.
SUPPORTED = "50.0.1"

Lower = Callable[[Any, Any], None]
Lift = Callable[[Any], Any]

_BOOL = ffi.WASMTIME_COMPONENT_BOOL

# `wasm_byte_vec_new` declared to take the bytes object itself: one C call per string, where
# `ffi.str_to_capi` makes three and a copy (the most frequent call of a round).
_vec_new = ffi.dll["wasm_byte_vec_new"]
_vec_new.restype = None
_vec_new.argtypes = [ctypes.POINTER(ffi.wasm_byte_vec_t), ctypes.c_size_t, ctypes.c_char_p]
_Vec = ffi.wasm_byte_vec_t


def _capi(b: bytes) -> Any:
    vec = _Vec()
    _vec_new(byref(vec), len(b), b)
    return vec


def available() -> bool:
    try:
        return metadata.version("wasmtime") == SUPPORTED
    except metadata.PackageNotFoundError:
        return False


def _classes(ty: Any) -> tuple:
    """The Python classes a value of `ty` takes (wasmtime-py's `add_classes`)."""
    s: set = set()
    ty.add_classes(s)
    return tuple(s)


def _zero(val: Any) -> None:
    val.kind = _BOOL
    val.of.boolean = False


def converters(ty: Any) -> tuple[Lower, Lift]:
    """(lower, lift) for a value of `ty`: lower writes a Python value into a
    `wasmtime_component_val_t` pointer; lift reads one (taking ownership of what it holds)."""
    if isinstance(ty, String):
        kind = ffi.WASMTIME_COMPONENT_STRING
        to_str, vec_delete = ffi.to_str, ffi.wasm_byte_vec_delete

        def lower(v, p):
            if type(v) is not str:
                raise TypeError("expected string type")
            c = p.contents
            c.kind = kind
            c.of.string = _capi(v.encode("utf-8"))

        def lift(c):
            s = to_str(c.of.string)
            vec_delete(byref(c.of.string))
            return s

        return lower, lift
    for cls, kind, field in (
        (U64, ffi.WASMTIME_COMPONENT_U64, "u64"),
        (U32, ffi.WASMTIME_COMPONENT_U32, "u32"),
        (S64, ffi.WASMTIME_COMPONENT_S64, "s64"),
        (S32, ffi.WASMTIME_COMPONENT_S32, "s32"),
        (U8, ffi.WASMTIME_COMPONENT_U8, "u8"),
    ):
        if isinstance(ty, cls):
            return _integer(kind, field)
    if isinstance(ty, Bool):
        kind = ffi.WASMTIME_COMPONENT_BOOL

        def lower(v, p):
            if not isinstance(v, bool):
                raise TypeError("expected bool for Bool type")
            c = p.contents
            c.kind = kind
            c.of.boolean = v

        return lower, lambda c: bool(c.of.boolean)
    if isinstance(ty, EnumType):
        kind = ffi.WASMTIME_COMPONENT_ENUM

        def lower(v, p):
            if not isinstance(v, str):
                raise TypeError("expected str type")
            c = p.contents
            c.kind = kind
            c.of.enumeration = _capi(v.encode("utf-8"))

        def lift(c):
            s = ffi.to_str(c.of.enumeration)
            ffi.wasm_byte_vec_delete(byref(c.of.enumeration))
            return s

        return lower, lift
    if isinstance(ty, ListType):
        return _list(ty)
    if isinstance(ty, RecordType):
        return _record(ty)
    if isinstance(ty, (VariantType, OptionType, ResultType)):
        return _variant_like(ty)
    raise TypeError(f"no fast converter for {type(ty).__name__}")


def _integer(kind: Any, field: str) -> tuple[Lower, Lift]:
    def lower(v, p):
        if not isinstance(v, int):
            raise TypeError("expected int")
        c = p.contents
        c.kind = kind
        setattr(c.of, field, v)

    return lower, lambda c: int(getattr(c.of, field))


def _list(ty: ListType) -> tuple[Lower, Lift]:
    if isinstance(ty.element, U8):
        raise TypeError("list<u8> has no fast converter (the world has none)")
    lower_e, lift_e = converters(ty.element)
    kind = ffi.WASMTIME_COMPONENT_LIST

    def lower(v, p):
        if not isinstance(v, list):
            raise TypeError("expected list value")
        raw = ffi.wasmtime_component_vallist_t()
        ffi.wasmtime_component_vallist_new_uninit(raw, len(v))
        done = 0
        try:
            for e in v:
                lower_e(e, pointer(raw.data[done]))
                done += 1
        except BaseException:
            for j in range(done, len(v)):
                _zero(raw.data[j])
            ffi.wasmtime_component_vallist_delete(byref(raw))
            raise
        c = p.contents
        c.kind = kind
        c.of.list = raw

    def lift(c):
        lst = c.of.list
        out = []
        try:
            for i in range(lst.size):
                e = lst.data[i]
                out.append(lift_e(e))
                _zero(e)
        finally:
            ffi.wasmtime_component_vallist_delete(byref(c.of.list))
        return out

    return lower, lift


def _record(ty: RecordType) -> tuple[Lower, Lift]:
    fields = [(name, name.encode("utf-8"), *converters(t)) for name, t in ty.fields]
    kind = ffi.WASMTIME_COMPONENT_RECORD

    def lower(v, p):
        raw = ffi.wasmtime_component_valrecord_t()
        ffi.wasmtime_component_valrecord_new_uninit(raw, len(fields))
        done = 0
        try:
            for name, name_bytes, lower_f, _ in fields:
                entry = raw.data[done]
                lower_f(getattr(v, name), pointer(entry.val))
                entry.name = _capi(name_bytes)
                done += 1
        except BaseException:
            for j in range(done, len(fields)):
                _zero(raw.data[j].val)
            ffi.wasmtime_component_valrecord_delete(byref(raw))
            raise
        c = p.contents
        c.kind = kind
        c.of.record = raw

    def lift(c):
        rec = c.of.record
        out = Record()
        try:
            for i, (name, _, _, lift_f) in enumerate(fields):
                entry = rec.data[i]
                setattr(out, name, lift_f(entry.val))
                _zero(entry.val)
        finally:
            ffi.wasmtime_component_valrecord_delete(byref(c.of.record))
        return out

    return lower, lift


def _variant_like(ty: Any) -> tuple[Lower, Lift]:
    # wasmtime-py's rules (`VariantLikeType._tagged`, `_lower`, `_lift`), decided once.
    cases = [(name, t, converters(t) if t is not None else None) for name, t in ty._cases()]
    tagged = ty._tagged()
    tests = [(object,) if t is None else _classes(t) for _, t, _ in cases]
    if isinstance(ty, OptionType):
        mode, kind = "option", ffi.WASMTIME_COMPONENT_OPTION
    elif isinstance(ty, ResultType):
        mode, kind = "result", ffi.WASMTIME_COMPONENT_RESULT
    else:
        mode, kind = "variant", ffi.WASMTIME_COMPONENT_VARIANT

    def box(conv, payload):
        raw = ffi.wasmtime_component_val_t()
        conv[0](payload, pointer(raw))
        return ffi.wasmtime_component_val_new(byref(raw))

    def lower(v, p):
        if tagged and not isinstance(v, Variant):
            raise TypeError("expected Variant type")
        for (name, t, conv), test in zip(cases, tests):
            if tagged:
                if name != v.tag:
                    continue
            elif t is None:
                if v is not None:
                    continue
            elif not isinstance(v, test):
                continue
            raw = None if conv is None else box(conv, v.payload if tagged else v)
            c = p.contents
            c.kind = kind
            if mode == "option":
                c.of.option = raw
            elif mode == "result":
                c.of.result.is_ok = name == "ok"
                c.of.result.val = raw
            else:
                c.of.variant.discriminant = _capi(name.encode("utf-8"))
                c.of.variant.val = raw
            return
        raise ValueError("value not valid for this variant")

    by_name = {name: conv for name, _, conv in cases}

    def unbox(tag, ptr):
        conv = by_name.get(tag, False)
        if conv is False:
            raise ValueError(f"tag {tag} not found in variant cases")
        if conv is None:
            return Variant(tag) if tagged else None
        payload = conv[1](ptr.contents)
        _zero(ptr.contents)
        ffi.wasmtime_component_val_delete(ptr)
        return Variant(tag, payload) if tagged else payload

    if mode == "option":
        return lower, lambda c: unbox("some" if c.of.option else "none", c.of.option)
    if mode == "result":
        return lower, lambda c: unbox("ok" if c.of.result.is_ok else "err", c.of.result.val)

    def lift(c):
        tag = ffi.to_str(c.of.variant.discriminant)
        ffi.wasm_byte_vec_delete(byref(c.of.variant.discriminant))
        return unbox(tag, c.of.variant.val)

    return lower, lift


# ---- host functions ------------------------------------------------------------------------

_HOST_FUNCS: dict[int, Callable[[Any, Any, int], int]] = {}
_NEXT = [1]


@ffi.wasmtime_component_func_callback_t
def _trampoline(idx, _context, _ty, args, nargs, results, _nresults):  # type: ignore[no-untyped-def]
    return _HOST_FUNCS[idx or 0](args, results, nargs)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _finalize(idx):  # type: ignore[no-untyped-def]
    _HOST_FUNCS.pop(idx or 0, None)


def add_func(instance: Any, name: str, fty: Any, func: Callable[..., Any]) -> None:
    """Define `name` in the linker instance `instance` (a `LinkerInstance`) as `func`, whose
    function type is `fty`: arguments lifted and the result lowered by converters made once."""
    lifts = [converters(t)[1] for _, t in fty.params]
    result = fty.result
    lower = converters(result)[0] if result is not None else None

    def call(args, results, nargs):
        try:
            values = [lifts[i](args[i]) for i in range(nargs)]
            out = func(None, *values)
            if lower is not None:
                lower(out, results)
            return 0
        except BaseException as e:  # noqa: BLE001 - a trap, as wasmtime-py makes one
            err = WasmtimeError(f"python exception: {type(e).__name__}: {e}")
            return ctypes.cast(err._consume(), ctypes.c_void_p).value

    idx = _NEXT[0]
    _NEXT[0] += 1
    _HOST_FUNCS[idx] = call
    name_bytes = name.encode("utf-8")
    err = ffi.wasmtime_component_linker_instance_add_func(
        instance.ptr(), ctypes.create_string_buffer(name_bytes), len(name_bytes), _trampoline, idx, _finalize
    )
    if err:
        raise WasmtimeError._from_ptr(err)


# ---- exported functions ----------------------------------------------------------------------


class ExportFunc:
    """An exported function with its converters made once."""

    def __init__(self, func: Any, fty: Any) -> None:
        self._func = func
        self._lowers = [converters(t)[0] for _, t in fty.params]
        self._n = len(self._lowers)
        self._lift: Optional[Lift] = converters(fty.result)[1] if fty.result is not None else None

    def __call__(self, store: Any, *args: Any) -> Any:
        n = self._n
        if len(args) != n:
            raise TypeError(f"wrong number of parameters provided: given {len(args)}, expected {n}")
        params = (ffi.wasmtime_component_val_t * n)()
        made = 0
        try:
            for i in range(n):
                self._lowers[i](args[i], pointer(params[i]))
                made += 1
            result = ffi.wasmtime_component_val_t()
            err = ffi.wasmtime_component_func_call(
                byref(self._func._func), store._context(), params, n, byref(result) if self._lift else None, 1 if self._lift else 0
            )
            if err:
                raise WasmtimeError._from_ptr(err)
            value = self._lift(result) if self._lift is not None else None
        finally:
            for i in range(made):
                ffi.wasmtime_component_val_delete(byref(params[i]))
        err = ffi.wasmtime_component_func_post_return(byref(self._func._func), store._context())
        if err:
            raise WasmtimeError._from_ptr(err)
        return value

