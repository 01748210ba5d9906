"""A raw stdio MCP server that writes every line it receives to a file (argv[1]) before it
answers, so a test can say exactly what reached the server through a proxy, and what never did.

Tools, by name:
- `book`: a form round (`seat`, a string of at most 4 characters) with a `requestState` unique
  to the call; the retry that carries that state and an accepted seat completes.
- `confirm`: a form round with no `requestState`; any retry with `inputResponses` completes.
Anything else that is a request gets an empty result; notifications get nothing.
"""

import json
import sys

log = open(sys.argv[1], "a", encoding="utf-8")
calls = 0


def answer(request_id, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}) + "\n")
    sys.stdout.flush()


SEAT_FORM = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Pick a seat",
        "requestedSchema": {
            "type": "object",
            "properties": {"seat": {"type": "string", "maxLength": 4}},
            "required": ["seat"],
        },
    },
}

for line in sys.stdin:
    log.write(line if line.endswith("\n") else line + "\n")
    log.flush()
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue
    params = message.get("params") or {}
    if message["method"] != "tools/call":
        answer(message["id"], {})
        continue
    name = params.get("name")
    responses = params.get("inputResponses")
    if responses is None:
        calls += 1
        result = {"resultType": "input_required", "inputRequests": {"seat": SEAT_FORM}}
        if name == "book":
            result["requestState"] = f"state-{calls}"
        answer(message["id"], result)
    else:
        seat = responses.get("seat", {}).get("content", {}).get("seat")
        answer(message["id"], {"content": [{"type": "text", "text": f"booked {seat}"}]})
