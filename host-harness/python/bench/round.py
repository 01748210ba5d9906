"""Times the mrtr:gate component from Python (the `mrtr_gate` package over wasmtime-py) on the
same full round as `mrtr-gate-testkit bench` and `host-harness/node/bench/round.mjs` (form, schema
seen): register, accept the `input_required` (a 3-field form with state), consent, audit
appends (each read back), build the retry, accept `complete`. The hosts are the package's
reference ones: a wall clock, the in-memory store, a consent callback that grants, and the
in-memory audit sink keeping its newest 1,024 lines. Prints min/median/max in microseconds as
one JSON line (the format `mrtr-gate-testkit bench --external` reads).

Usage: python bench/round.py [rounds]"""

import json
import platform
import sys
import time

import mrtr_gate as m
from mrtr_gate import hosts

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
clock = hosts.SystemClock()
storage = hosts.MemoryStorage(clock)
gate = m.Gate(clock=clock, storage=storage, consent=hosts.CallbackConsent(lambda p: True), audit=hosts.MemoryAudit(window=1024))

server = m.Origin("https://flights.example.com/mcp")
params = json.dumps({"name": "book_flight", "arguments": {"from": "OSL", "to": "SFO"}, "_meta": {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}}}})
schema = {"type": "object", "title": "Passenger", "properties": {
    "full_name": {"type": "string", "minLength": 1, "maxLength": 100},
    "seat": {"type": "string", "enum": ["aisle", "window"]},
    "bags": {"type": "integer", "minimum": 0, "maximum": 3}}, "required": ["full_name", "seat"]}
answers = json.dumps({"passenger": {"action": "accept", "content": {"full_name": "Alice Example", "seat": "aisle", "bags": 1}}})


def inputs(n):
    return (
        n * 2,
        json.dumps({"jsonrpc": "2.0", "id": n * 2, "result": {"resultType": "input_required", "inputRequests": {
            "passenger": {"method": "elicitation/create", "params": {"message": "Who is flying?", "requestedSchema": schema}}},
            "requestState": "c3RhdGUtb2YtdGhlLWJvb2tpbmctZmxvdw"}}),
        json.dumps({"jsonrpc": "2.0", "id": n * 2 + 1, "result": {"resultType": "complete", "content": []}}),
    )


def one(x):
    rid, required, complete = x
    gate.register(request_id=rid, server=server, user="alice", tenant="acme", method="tools/call", params=params)
    v = gate.accept_response(server, required)
    assert isinstance(v, m.InputRequired), v
    r = gate.build_retry(server=server, request_id=rid, retry_id=rid + 1, user="alice", tenant="acme", responses=answers)
    assert "inputResponses" in r.request_json
    assert isinstance(gate.accept_response(server, complete), m.Complete)


warmup = 200
xs = [inputs(n) for n in range(warmup + rounds)]
for x in xs[:warmup]:
    one(x)
samples = []
for x in xs[warmup:]:
    t = time.perf_counter_ns()
    one(x)
    samples.append((time.perf_counter_ns() - t) / 1000)
assert len(storage) == 0, f"the store holds {len(storage)} keys after every round ended"
samples.sort()
print(json.dumps({
    "engine": f"component (python {platform.python_version()}, {gate.engine})",
    "workload": "form, schema seen",
    "rounds": rounds,
    "min_us": samples[0],
    "median_us": samples[len(samples) // 2],
    "max_us": samples[-1],
}))
