"""What no SDK can make its server send, written as raw JSON-RPC lines on stdio: a result with
a duplicate key (`resultType` twice: a parser that keeps the last one would see a complete
result, one that keeps the first a round), and a result with a `resultType` the protocol does
not define. The gate must refuse both. The tool name picks the answer. And `tools/list` answered
with `input_required` (the SDK's own server validates a list result, so it cannot): only
tools/call, prompts/get and resources/read may take input rounds, and the client refuses it."""

import json
import sys

ANSWERS = {
    "duplicate_result_type": '{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"input_required","inputRequests":{{}},"requestState":"s","resultType":"complete","content":[]}}}}',
    "unknown_result_type": '{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"partially_done","content":[]}}}}',
}

for line in sys.stdin:
    request = json.loads(line)
    if request["method"] == "tools/list":
        answer = '{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"input_required","requestState":"list-state"}}}}'
    else:
        answer = ANSWERS[request["params"]["name"]]
    sys.stdout.write(answer.format(id=json.dumps(request["id"])) + "\n")
    sys.stdout.flush()
