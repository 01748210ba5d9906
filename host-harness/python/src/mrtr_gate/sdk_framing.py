"""What a server's HTTP answer to one request holds, read once by the adapter, and the answer
the SDK gets instead: the one response the gate judged, re-framed by the adapter, and the
requests and notifications that are not responses, each re-encoded from the adapter's own
parse (docs/adapters.md).

Readers of one stream disagree on which event is "the" response: mcp 2.3.0 takes the first
`message` event that is a response whatever its id (and rewrites the id); the TypeScript SDK
dispatches every event with no type or type `message` and routes each response by its id; a
reader that ignores `event:` takes typed events too. So the SDK is never handed the server's
stream: anything in it that one of those readers could take as a second or other response is
refused (`StreamRefused`), and the stream the SDK reads is the adapter's, with nothing in it the
gate did not judge.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

__all__ = ["Answer", "StreamRefused", "read_answer", "reframe", "sse_events"]


class StreamRefused(Exception):
    """The answer could be read as a response other than the one the gate would judge. `code`
    is one of docs/errors.md's adapter refusals."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Answer:
    """The response to the request (its exact text, for the gate), or None; and the order of
    everything the SDK will get: each item the text of a message to pass, `None` standing for
    the response."""

    response: Optional[str] = None
    items: list[Optional[str]] = field(default_factory=list)
    sse: bool = False


def sse_events(text: str) -> list[tuple[str, str]]:
    """The (type, data) of every event in an SSE body, read as the HTML standard says (lines
    end in CRLF, LF or CR; `:` starts a comment; one space after the colon is dropped; the last
    `event:` wins; data lines are joined by LF), with one addition: an event the body ends in
    without its blank line counts, since some reader may dispatch it."""
    if text.startswith("\ufeff"):
        text = text[1:]
    events: list[tuple[str, str]] = []
    kind = ""
    data: list[str] = []
    pending = False
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line == "":
            if pending:
                events.append((kind, "\n".join(data)))
            kind, data, pending = "", [], False
            continue
        if line.startswith(":"):
            continue
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "event":
            kind = value
        elif name == "data":
            data.append(value)
            pending = True
    if pending:
        events.append((kind, "\n".join(data)))
    return events


def _same_id(a: Any, b: Any) -> bool:
    # JSON ids compare by type too: 1, 1.0, "1" and true are four ids.
    return type(a) is type(b) and a == b


def _canonical(message: dict) -> str:
    """A request or notification as the adapter read it, written afresh: only the members a
    request or notification has, so no reader can find another message in it."""
    out: dict[str, Any] = {"jsonrpc": "2.0"}
    if "id" in message:
        out["id"] = message["id"]
    out["method"] = message["method"]
    if "params" in message:
        out["params"] = message["params"]
    # No NaN or Infinity: Python reads them, JSON (and so the SDK) does not.
    return json.dumps(out, separators=(",", ":"), allow_nan=False)


def _not_a_response(message: dict) -> Optional[str]:
    """Why a message with a `method` cannot be passed on as a request or notification, or None."""
    if "result" in message or "error" in message:
        return "it has a method and a result or error at once"
    if message.get("jsonrpc") != "2.0" or not isinstance(message["method"], str):
        return "it is not a JSON-RPC 2.0 request or notification"
    if "id" in message and (isinstance(message["id"], bool) or not isinstance(message["id"], (int, str))):
        return "its id is neither a string nor an integer"
    if "params" in message and not isinstance(message["params"], dict):
        return "its params are not an object"
    return None


def _event_answer(text: str, request_id: Any) -> Answer:
    answer = Answer(sse=True)
    for kind, data in sse_events(text):
        if kind not in ("", "message"):
            try:
                carried = isinstance(json.loads(data), (dict, list))
            except (ValueError, RecursionError):
                carried = False
            if carried:
                raise StreamRefused("typed_event", f"an SSE event of type {json.dumps(kind)} carries a JSON-RPC message")
            continue  # e.g. a heartbeat: no reader takes it as a message
        if data == "":
            continue  # a priming event: no message
        try:
            message = json.loads(data)
        except (ValueError, RecursionError):
            raise StreamRefused("malformed_message", "an SSE event's data is not JSON") from None
        if isinstance(message, list):
            raise StreamRefused("batch_message", "an SSE event carries a JSON array (a batch)")
        if not isinstance(message, dict):
            raise StreamRefused("malformed_message", "an SSE event's data is not a JSON-RPC message")
        if "method" in message:
            why = _not_a_response(message)
            if why is not None:
                raise StreamRefused("malformed_message", f"an SSE event is not a JSON-RPC message the SDK can take: {why}")
            try:
                answer.items.append(_canonical(message))
            except ValueError:
                raise StreamRefused("malformed_message", "an SSE event holds a number JSON does not have") from None
        elif not _same_id(message.get("id"), request_id):
            raise StreamRefused("foreign_response", f"the stream holds a response under id {json.dumps(message.get('id'))}, not the request's")
        elif answer.response is not None:
            raise StreamRefused("duplicate_response", "the stream holds a second response to the request")
        else:
            answer.response = data
            answer.items.append(None)
    return answer


def _body_answer(text: str, request_id: Any) -> Answer:
    if text.strip() == "":
        return Answer()
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        # Not JSON: the gate (or the caller) names what is wrong with it.
        return Answer(response=text, items=[None])
    if isinstance(message, list):
        raise StreamRefused("batch_message", "the body is a JSON array (a batch)")
    if isinstance(message, dict) and "method" in message:
        return Answer()  # a request or notification where the response belongs: no response
    if isinstance(message, dict) and not _same_id(message.get("id"), request_id):
        raise StreamRefused("foreign_response", f"the body is a response under id {json.dumps(message.get('id'))}, not the request's")
    return Answer(response=text, items=[None])


def read_answer(text: str, content_type: str, request_id: Any) -> Answer:
    """What the server's answer to request `request_id` holds; `StreamRefused` if it could be
    read as another response than the one it holds. A content type other than JSON or SSE holds
    no message (neither SDK takes one from it)."""
    essence = content_type.partition(";")[0].strip().lower()
    if essence == "text/event-stream":
        return _event_answer(text, request_id)
    if essence == "application/json":
        return _body_answer(text, request_id)
    return Answer()


def reframe(answer: Answer) -> tuple[str, bytes]:
    """The content type and body the SDK gets: the judged response as one JSON body, or one SSE
    event in its place among the passed messages (no `id:` or `retry:`, so no SDK resumes
    the stream on a GET the adapter cannot judge)."""
    if not answer.sse:
        return "application/json", (answer.response or "").encode()
    out = []
    for item in answer.items:
        text = answer.response if item is None else item
        out.append("event: message\n" + "".join(f"data: {line}\n" for line in (text or "").split("\n")) + "\n")
    return "text/event-stream", "".join(out).encode()
