"""`Gate`: the mrtr:gate component, sandboxed in wasmtime, over four Python services."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from importlib import resources
from typing import Any, Mapping, Optional, Union

from wasmtime import WasmtimeError

from . import _component as c
from ._types import (
    Complete,
    Endpoint,
    ErrorCause,
    ErrorResult,
    GateError,
    InputRequired,
    Origin,
    Policy,
    Registered,
    RequestId,
    Retry,
    ServerIdentity,
    TerminalOutcome,
    Unbound,
    Verdict,
)

#: The largest integer id the WIT carries (`s64`); the gate itself refuses beyond 2**53 - 1.
_S64_MAX = (1 << 63) - 1


class UnexpectedComponent(ValueError):
    """The component is not the one the host pinned (`Gate(expected_sha256=...)`), or the
    bundled one is not the one the package shipped (`COMPONENT_SHA256`: a damaged install): its
    SHA-256 differs. Nothing of it was compiled."""

    def __init__(self, expected: str, actual: str, message: Optional[str] = None) -> None:
        super().__init__(message or f"refused to load the gate component: its sha256 is {actual}, not the {expected} this host expects")
        self.expected = expected
        self.actual = actual


_DIGEST_FILE = "gate.wasm.sha256"
_HEX64 = re.compile(r"[0-9a-f]{64}")


@functools.lru_cache(maxsize=1)
def _shipped_sha256() -> str:
    """The component's SHA-256 as the package shipped it (`mrtr_gate/gate.wasm.sha256`, in
    `sha256sum`'s format: written by the project's `scripts/python` beside `gate.wasm`)."""
    try:
        text = resources.files(__package__).joinpath(_DIGEST_FILE).read_text("ascii")
    except FileNotFoundError as e:
        raise FileNotFoundError(
            f"mrtr_gate/{_DIGEST_FILE} is missing: build the package with the project's "
            "scripts/python, or pass component= to Gate"
        ) from e
    except UnicodeDecodeError:
        text = ""
    fields = text.split()
    digest = fields[0] if fields else ""
    if not _HEX64.fullmatch(digest):
        # Fail closed: a digest file nobody can compare against is a damaged install.
        raise UnexpectedComponent("", "", f"refused to load the gate component: mrtr_gate/{_DIGEST_FILE} is malformed (a damaged install)")
    return digest


def bundled_component() -> bytes:
    """The component this package ships (`mrtr_gate/gate.wasm`, put there by the project's
    `scripts/python`), always checked against the digest shipped beside it
    (`COMPONENT_SHA256`): a damaged install raises `UnexpectedComponent`."""
    try:
        wasm = resources.files(__package__).joinpath("gate.wasm").read_bytes()
    except FileNotFoundError as e:
        raise FileNotFoundError(
            "mrtr_gate/gate.wasm is missing: build the package with the project's "
            "scripts/python, or pass component= to Gate"
        ) from e
    expected = _shipped_sha256()
    actual = hashlib.sha256(wasm).hexdigest()
    if actual != expected:
        raise UnexpectedComponent(expected, actual)
    return wasm


def _request_id(value: RequestId, what: str) -> Union[int, str]:
    if type(value) is int and -_S64_MAX <= value <= _S64_MAX:
        return value
    if type(value) is str:
        return value
    raise GateError(
        "invalid_jsonrpc_request_id",
        ErrorCause.CALLER,
        f"`{what}` must be an int within +-(2**53 - 1) or a str, not {type(value).__name__}",
        False,
    )


def _server(server: ServerIdentity) -> Any:
    if isinstance(server, Origin):
        return c.server_value("origin", server.url)
    if isinstance(server, Endpoint):
        return c.server_value("endpoint", server.id)
    raise GateError(
        "invalid_server_identity", ErrorCause.CALLER, "the server must be an Origin or an Endpoint", False
    )


def _text(value: Any, what: str) -> str:
    if type(value) is str:
        return value
    raise GateError("invalid_argument", ErrorCause.CALLER, f"`{what}` must be a str", False)


def _json_text(value: Union[str, Mapping[str, Any]], what: str) -> str:
    """A JSON text as given (str: sent byte for byte), or a mapping written as compact JSON."""
    if type(value) is str:
        return value
    if isinstance(value, Mapping):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    raise GateError("invalid_argument", ErrorCause.CALLER, f"`{what}` must be a str or a mapping", False)


def _denial(err: Any) -> GateError:
    return GateError(err.code, ErrorCause(err.cause), err.message, err.audited)


class Gate:
    """The gate over four host services (see `mrtr_gate.hosts`). Each call runs the component
    in its wasmtime sandbox (memory capped); a trap denies the call as `guest_trapped` and the
    next call gets a fresh instance (every binding lives in `storage`, so nothing is lost).
    Not thread-safe: give each thread its own `Gate` over shared services."""

    def __init__(
        self,
        *,
        clock: Any,
        storage: Any,
        consent: Any,
        audit: Any,
        component: Optional[Union[bytes, str, os.PathLike[str]]] = None,
        max_memory_bytes: int = 256 << 20,
        expected_sha256: Optional[str] = None,
    ) -> None:
        """`expected_sha256` pins the component (lowercase hex, as `mrtr-gate info` and the
        release's SHA256SUMS print it): any other is refused with `UnexpectedComponent` before
        it is compiled."""
        if component is None:
            wasm = bundled_component()
        elif isinstance(component, (bytes, bytearray)):
            wasm = bytes(component)
        else:
            with open(component, "rb") as f:
                wasm = f.read()
        if expected_sha256 is not None:
            actual = hashlib.sha256(wasm).hexdigest()
            if actual != expected_sha256.lower():
                raise UnexpectedComponent(expected_sha256, actual)
        self._compiled = c.Compiled.of(wasm)
        self._services = c.Services(clock, storage, consent, audit)
        self._max_memory = max_memory_bytes
        self._instance: Optional[c.Instance] = None
        #: `fast` or `api`: how values cross into wasmtime (see `mrtr_gate._fast`).
        self.engine = c.engine_name()
        #: How many calls trapped (each replaced the instance).
        self.traps = 0

    def _call(self, name: str, *args: Any) -> Any:
        if self._instance is None:
            self._instance = c.Instance(self._compiled, self._services, self._max_memory, self.engine)
        try:
            return self._instance.call(name, *args)
        except WasmtimeError as e:
            self._instance = None
            self.traps += 1
            raise GateError(
                "guest_trapped",
                ErrorCause.HOST,
                f"the gate trapped; the call is denied and the instance replaced ({e})",
                False,
            ) from e

    def register(
        self,
        *,
        request_id: RequestId,
        server: ServerIdentity,
        user: str,
        tenant: str,
        method: str,
        params: Union[str, Mapping[str, Any]],
        policy: Policy = Policy(),
    ) -> Registered:
        """Bind a request before it is sent. `params` is the exact params object (a JSON
        text is sent byte for byte); send the returned `request_json`."""
        reg = c.record(
            request_id=_request_id(request_id, "request_id"),
            server=_server(server),
            user=_text(user, "user"),
            tenant=_text(tenant, "tenant"),
            method=_text(method, "method"),
            params_json=_json_text(params, "params"),
            policy=c.policy_value(policy),
        )
        r = self._call("register", reg)
        if r.tag == "err":
            raise _denial(r.payload)
        ok = r.payload
        return Registered(getattr(ok, "request-json"), getattr(ok, "params-sha256"), getattr(ok, "expires-at-ms"))

    def accept_response(self, server: ServerIdentity, response_json: str) -> Verdict:
        """Judge a JSON-RPC response (the whole message text) that arrived from `server`."""
        r = self._call("accept-response", _server(server), _text(response_json, "response_json"))
        if r.tag == "err":
            raise _denial(r.payload)
        v = r.payload
        if v is None:
            return Complete()
        if type(v) is int:
            return ErrorResult(v)
        return InputRequired(
            view_json=getattr(v, "view-json"),
            view_sha256=getattr(v, "view-sha256"),
            round=v.round,
            input_keys=tuple(getattr(v, "input-keys")),
            request_state_sha256=getattr(v, "request-state-sha256"),
        )

    def build_retry(
        self,
        *,
        server: ServerIdentity,
        request_id: RequestId,
        retry_id: RequestId,
        user: str,
        tenant: str,
        responses: Union[str, Mapping[str, Any]],
    ) -> Retry:
        """Validate the answers (`inputResponses`, exactly the round's keys; `{}` for a
        state-only round), obtain consent, consume the round, and return the retry to send."""
        req = c.record(
            server=_server(server),
            request_id=_request_id(request_id, "request_id"),
            retry_id=_request_id(retry_id, "retry_id"),
            user=_text(user, "user"),
            tenant=_text(tenant, "tenant"),
            responses_json=_json_text(responses, "responses"),
        )
        r = self._call("build-retry", req)
        if r.tag == "err":
            raise _denial(r.payload)
        ok = r.payload
        return Retry(getattr(ok, "request-json"), ok.round, getattr(ok, "consent-receipt-id"))

    def retry_from_client(
        self,
        *,
        server: ServerIdentity,
        request_id: Optional[RequestId],
        retry_id: RequestId,
        user: str,
        tenant: str,
        method: str,
        params: Union[str, Mapping[str, Any]],
    ) -> Retry:
        """A relay's path: hold a client's own retry (its `method` and whole `params`, with
        `inputResponses` and `requestState`) to the round open on `request_id` (`None`: the
        relay found none; refused `inactive_mrtr_round`, audited), then build it as
        `build_retry` does with the client's answers. Send the returned `request_json`, never
        the client's text."""
        req = c.record(
            server=_server(server),
            request_id=None if request_id is None else _request_id(request_id, "request_id"),
            retry_id=_request_id(retry_id, "retry_id"),
            user=_text(user, "user"),
            tenant=_text(tenant, "tenant"),
            method=_text(method, "method"),
            params_json=_json_text(params, "params"),
        )
        r = self._call("retry-from-client", req)
        if r.tag == "err":
            raise _denial(r.payload)
        ok = r.payload
        return Retry(getattr(ok, "request-json"), ok.round, getattr(ok, "consent-receipt-id"))

    def refuse_unbound(
        self,
        *,
        server: ServerIdentity,
        user: str,
        tenant: str,
        refusal: Unbound,
        method: Optional[str] = None,
    ) -> GateError:
        """A relay's path: record the refusal of a message no binding judges, for the client
        of `user` and `tenant` (`refusal`: see `Unbound`; `method`, the server's method, for
        `Unbound.SERVER_REQUEST` and only for it). Returns the denial, audited; refuse the
        message yourself (answer the server or the client with an error, or drop a
        notification)."""
        if not isinstance(refusal, Unbound):
            raise GateError("invalid_argument", ErrorCause.CALLER, "`refusal` must be an Unbound", False)
        if (refusal is Unbound.SERVER_REQUEST) != (method is not None):
            raise GateError(
                "invalid_argument", ErrorCause.CALLER, "`method` goes with Unbound.SERVER_REQUEST, and only with it", False
            )
        value = c.unbound_value(refusal.value, None if method is None else _text(method, "method"))
        r = self._call("refuse-unbound", _server(server), _text(user, "user"), _text(tenant, "tenant"), value)
        return _denial(r)

    def finish(
        self,
        *,
        server: ServerIdentity,
        request_id: RequestId,
        user: str,
        tenant: str,
        error: Optional[str] = None,
        policy: Optional[str] = None,
    ) -> TerminalOutcome:
        """End a binding from the caller's side: cancelled, (`error`: a short code such as
        `transport_closed`) failed, or (`policy`: the refusing policy's receipt id,
        `policy:<id>`) refused by a policy of the host's before anyone saw the round. Returns
        how it ended (`EXPIRED` once its lifetime passed)."""
        if error is not None and policy is not None:
            raise GateError("invalid_argument", ErrorCause.CALLER, "finish takes `error` or `policy`, not both", False)
        req = c.record(
            server=_server(server),
            request_id=_request_id(request_id, "request_id"),
            user=_text(user, "user"),
            tenant=_text(tenant, "tenant"),
            outcome=c.outcome_value(
                None if error is None else _text(error, "error"),
                None if policy is None else _text(policy, "policy"),
            ),
        )
        r = self._call("finish", req)
        # `result<terminal-outcome, gate-error>` is untagged in wasmtime-py: a str is `ok`.
        if type(r) is str:
            return TerminalOutcome(r)
        raise _denial(r)

    def expire_stale(self) -> int:
        """End every binding whose lifetime has passed; returns how many."""
        r = self._call("expire-stale")
        # `result<u32, gate-error>` is untagged in wasmtime-py: an int is `ok`.
        if type(r) is int:
            return r
        raise _denial(r)
