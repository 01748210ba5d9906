"""The values that cross the gate's API, as plain dataclasses (the WIT's records and variants,
`wit/gate.wit`, in Python shape: snake_case fields, `None` for an absent option)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from enum import Enum
from typing import Optional, Union

from .shown import shown_text

#: A JSON-RPC id: an integer within +-(2**53 - 1) or a string of 1 to 256 bytes. `1` and `"1"`
#: are different ids.
RequestId = Union[int, str]


@dataclass(frozen=True)
class Origin:
    """A server the host verified at the transport, by its `http`/`https` endpoint URL."""

    url: str


@dataclass(frozen=True)
class Endpoint:
    """A server on a transport without a URL (stdio), by a host-assigned id of 1 to 128
    bytes of `[A-Za-z0-9._:/@-]`."""

    id: str


#: The server a message came from, as the host verified it (never self-reported `serverInfo`).
ServerIdentity = Union[Origin, Endpoint]


class DeprecatedMethod(str, Enum):
    """A deprecated server-to-client request a binding may explicitly accept."""

    ROOTS_LIST = "roots-list"
    SAMPLING_CREATE_MESSAGE = "sampling-create-message"


@dataclass(frozen=True)
class Policy:
    """Per-request policy, fixed at registration."""

    round_trip_lifetime_ms: int = 5 * 60 * 1000
    max_request_state_bytes: int = 64 * 1024
    max_rounds: int = 10
    allowed_deprecated: tuple[DeprecatedMethod, ...] = ()
    policy_version: str = "default"


class ErrorCause(str, Enum):
    """Who is to blame for a denial."""

    PEER = "peer"
    CALLER = "caller"
    HOST = "host"


class GateError(Exception):
    """A denial. `code` is the gate's stable snake_case code (docs/errors.md), or one of this
    package's: `guest_trapped` (the instance trapped and was replaced), `invalid_argument`
    (a value the WIT cannot carry, refused before the call)."""

    def __init__(self, code: str, cause: ErrorCause, message: str, audited: bool) -> None:
        # `message` may quote the server's names (a field its schema named): a traceback
        # shows it through `shown_text`; the attribute keeps the gate's text as it is.
        super().__init__(f"{code} ({cause.value}): {shown_text(message)}")
        self.code = code
        self.cause = cause
        self.message = message
        self.audited = audited


@dataclass(frozen=True)
class Registered:
    """A bound request: the exact JSON-RPC request text to send."""

    request_json: str
    params_sha256: str
    expires_at_ms: int


@dataclass(frozen=True)
class InputRequired:
    """An accepted `input_required` round: show the view, collect answers, build the retry."""

    view_json: str
    view_sha256: str
    round: int
    input_keys: tuple[str, ...]
    request_state_sha256: Optional[str]

    @cached_property
    def view(self) -> dict:
        """The consent view, parsed once (docs/consent-view.md): every reader of this round
        gets the same parse."""
        return json.loads(self.view_json)


@dataclass(frozen=True)
class Complete:
    """A complete result (or one without `resultType`): the binding ended."""


@dataclass(frozen=True)
class ErrorResult:
    """A JSON-RPC error: the binding ended."""

    code: int


#: What a server response meant for its binding.
Verdict = Union[InputRequired, Complete, ErrorResult]


@dataclass(frozen=True)
class Retry:
    """The complete retry request to send, and the receipt it rests on (none for a
    state-only round)."""

    request_json: str
    round: int
    consent_receipt_id: Optional[str]


class TerminalOutcome(str, Enum):
    """How a binding ended."""

    COMPLETE = "complete"
    ERROR = "error"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


# ---- what the host services exchange with the gate ---------------------------------------


@dataclass(frozen=True)
class Entry:
    """A key's live value and the version its last write got (never 0, never reused)."""

    version: int
    value: str


@dataclass(frozen=True)
class DuePage:
    """One page of `Storage.list_due`: the due keys, and the cursor of the next page (None:
    the listing is complete)."""

    keys: list[str]
    next: Optional[str]


@dataclass(frozen=True)
class ReadKey:
    """A key to read, and the version of its value the gate already holds (0: none): a key
    still at that version comes back with an empty value."""

    key: str
    have: int


@dataclass(frozen=True)
class WriteOp:
    """One compare-and-swap: if the key's version is `expected` (0: absent), write `value`
    with a TTL of `ttl_ms` (`None`: delete)."""

    key: str
    expected: int
    value: Optional[str]
    ttl_ms: int


@dataclass(frozen=True)
class ConsentPrompt:
    """What the user is asked to approve: the consent view and the answers about to be sent."""

    view_json: str
    view_sha256: str
    responses_json: str
    responses_sha256: str


class ConsentDecision(str, Enum):
    GRANTED = "granted"
    REFUSED = "refused"


class ConsentMethod(str, Enum):
    """How a decision was made; the trail records it (`consent_method`), so a preset or
    automatic approval is never taken for a person's."""

    USER_AT_SCREEN = "user-at-screen"
    """A person decided at a screen the host rendered from the prompt's view."""
    PRESET_ANSWERS = "preset-answers"
    """The answers and the approval were given before the round was seen (a flag, a file, a script)."""
    DELEGATED_TO_CLIENT = "delegated-to-client"
    """Another client's own UI collected the answers and the decision."""
    POLICY_HOOK = "policy-hook"
    """An automatic policy hook decided; no person saw the prompt."""


class Unbound(str, Enum):
    """What a relay refused with no binding behind it (`Gate.refuse_unbound`): a message that
    asks for, or gives, input outside every round the gate holds."""

    SERVER_REQUEST = "server-request"
    """A request the server sent outside any round (a 2025-era `elicitation/create`,
    `sampling/createMessage` or `roots/list`); pass its `method`: `legacy_server_request`."""
    INPUT_REQUIRED = "input-required"
    """The server's answer to a request the gate does not bind asks for input
    (`input_required`, `inputRequests` in its result, a `-32042` URL elicitation error):
    `input_required_not_allowed`."""
    INPUT_REQUESTS_NOTIFIED = "input-requests-notified"
    """A notification of the server's carries `inputRequests`: `input_requests_not_bound`."""
    INPUT_RESPONSES = "input-responses"
    """A message of the client's carries `inputResponses` outside a gated request's retry:
    `input_responses_not_bound` (caller)."""


@dataclass(frozen=True)
class ConsentReceipt:
    """The host's record of the user's decision, bound to one view and one set of answers."""

    receipt_id: str
    decision: ConsentDecision
    method: ConsentMethod
    view_sha256: str
    responses_sha256: str


@dataclass(frozen=True)
class AuditEntry:
    """One hash-chained audit event, for the chain of `shard`: `line` is canonical JSON carrying
    `shard`, `seq` and `prev_sha256` itself, `event_sha256` is the SHA-256 of `line`. A sink keeps
    one chain per shard: `seq` counts from 1 in each, and a shard's first `prev_sha256` is
    `GENESIS_SHA256`. `shard` is the server's storage key part (32 lowercase hex digits), or
    `"root"` for a host's anchor lines."""

    shard: str
    seq: int
    prev_sha256: str
    event_sha256: str
    line: str


@dataclass(frozen=True)
class ChainHead:
    """The last event of one shard's chain: `seq` 0 and `GENESIS_SHA256` while it has none."""

    seq: int
    event_sha256: str


@dataclass(frozen=True)
class AppendOutcome:
    """What a sink did with an entry: written (and the line read back, `None` if that read
    found nothing), or not written because the head of the entry's shard is elsewhere; and that
    shard's head after the call."""

    written: bool
    stored: Optional[str]
    head_seq: int
    head_sha256: str


class HostError(Exception):
    """Raised by a host service to report a failure; the gate denies (and audits the denial
    where it can). The message goes to the caller's logs only: keep secrets out of it."""


GENESIS_SHA256 = "0" * 64

__all__ = [
    "AppendOutcome",
    "AuditEntry",
    "ChainHead",
    "Complete",
    "ConsentDecision",
    "ConsentMethod",
    "ConsentPrompt",
    "ConsentReceipt",
    "DeprecatedMethod",
    "DuePage",
    "Endpoint",
    "Entry",
    "ErrorCause",
    "ErrorResult",
    "GENESIS_SHA256",
    "GateError",
    "HostError",
    "InputRequired",
    "Origin",
    "Policy",
    "ReadKey",
    "Registered",
    "RequestId",
    "Retry",
    "ServerIdentity",
    "TerminalOutcome",
    "Unbound",
    "Verdict",
    "WriteOp",
]
