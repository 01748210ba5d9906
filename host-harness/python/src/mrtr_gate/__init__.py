"""mrtr-gate: the client-side security gate for MCP Multi Round-Trip Requests, as a
sandboxed WebAssembly component run by wasmtime.

    from mrtr_gate import Gate, Origin, hosts

    gate = Gate(clock=hosts.SystemClock(), storage=hosts.MemoryStorage(),
                consent=hosts.CallbackConsent(ask_the_user), audit=hosts.FileAudit("audit.jsonl"))
    sent = gate.register(request_id=1, server=Origin(url), user="alice", tenant="acme",
                         method="tools/call", params=params)
    verdict = gate.accept_response(Origin(url), response_text)

See README.md beside this package for the whole flow."""

from . import hosts
from ._types import *  # noqa: F401,F403 - the API's values, listed once in _types.__all__
from ._types import __all__ as _values
from .gate import Gate, UnexpectedComponent, bundled_component
from .shown import shown_json, shown_lines, shown_text

__all__ = [*_values, "Gate", "UnexpectedComponent", "bundled_component", "hosts", "shown_json", "shown_lines", "shown_text"]


def __getattr__(name: str) -> str:
    # COMPONENT_SHA256 is read when first asked for, not at import (and is not in __all__, so
    # `import *` does not ask): a package built without the component still imports, for a
    # host that passes component= to Gate and needs neither file.
    if name == "COMPONENT_SHA256":
        from .gate import _shipped_sha256

        return _shipped_sha256()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
