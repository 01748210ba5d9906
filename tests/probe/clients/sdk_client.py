"""The official Python SDK client (mcp 2.3.0) as a client of `mrtr-gate probe` (docs/probe.md
"Run it against your client"): `python sdk_client.py [--gated] URL`, or with
MCP_PROBE_TRANSPORT=stdio `python sdk_client.py SERVER_COMMAND_LINE` (split like a shell and
spawned by the SDK's stdio_client; ungated only: the adapter takes streamable HTTP only,
docs/adapters.md), with the venv that
`./scripts/python --install` fills (mcp and mrtr_gate). It lists the endpoint's tools, calls
each in order with `{}`, goes on after a failed call (one JSON line per call on stdout), reads
each URI of the context's `read_twice` twice, one read after the other (the SDK's
read_resource, its cache as configured by default), answers each elicitation as MCP_CONFORMANCE_CONTEXT's `answers` say (badly where a scenario
needs it), and exits 0 once the calls are done. It obeys the context's `forge`: once the forged
tool's call has ended, a new call carrying the given requestState and inputResponses with other
arguments (a confused app or a stale-copy bug), by the SDK's own call_tool, which sends what the
app gives it (gated too: the adapter's call_tool takes no MRTR fields, so the app goes around it,
and the adapter must refuse what it did not start). The context's `capabilities` cannot be
honoured: mcp 2.3.0 declares form and URL elicitation both whenever a callback is set (the
adapter sets one), so `mrtr-url-undeclared` is SKIPPED (docs/probe.md). Context `cancel_on`
(`notifications/message`): the call in flight runs in an anyio cancel scope, cancelled by the
logging callback. --gated: the adapter reads a call's whole answer before the SDK sees any of
it, so the notification on a stream still open would reach the app only once the call ended
(docs/adapters.md); the app cancels instead on the nearest event it can see, the head of the
first call's answer arriving (the user presses cancel while the call is in flight), by the
adapter's inner transport.

Without --gated: the SDK unmodified, in its automatic MRTR mode (it fulfils rounds itself). The
SDK's callback sees no input key, so the answer is found by the elicitation's message
(`answer_by_message`), or is the context's one answer when it has one.
With --gated: the same SDK through the gate by the Python package's adapter
(mrtr_gate.sdk_client.GatedSdkClient), whose `answer` gets the keys; the "user" consents to
every grant in advance, so what the gate refuses is the gate's own doing.
"""

import asyncio
import json
import os
import sys

import shlex

import anyio
import mcp.types as t
from mcp import Client
from mcp.client.stdio import StdioServerParameters

GATED = "--gated" in sys.argv[1:-1]
URL = sys.argv[-1]
STDIO = os.environ.get("MCP_PROBE_TRANSPORT") == "stdio"
CONTEXT = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
ANSWERS = CONTEXT.get("answers") or {}
DECLINE = {"action": "decline"}
FORGE = CONTEXT.get("forge")
CANCEL_ON = CONTEXT.get("cancel_on")
in_flight = None


def report(line):
    print(json.dumps(line), flush=True)


def by_message(message):
    key = (CONTEXT.get("answer_by_message") or {}).get(message)
    if key is None and len(ANSWERS) == 1:
        key = next(iter(ANSWERS))
    return ANSWERS.get(key) or DECLINE


async def elicit(_context, params):
    report({"handler": params.message})
    return t.ElicitResult(**by_message(params.message))


async def on_log(_params):
    report({"cancel": CANCEL_ON})
    if in_flight is not None:
        in_flight.cancel()


async def cancellable(send):
    global in_flight
    with anyio.CancelScope() as scope:
        in_flight = scope
        await send()
    in_flight = None
    if scope.cancelled_caught:
        raise RuntimeError("cancelled by the app")


async def attempt(label, name, send):
    try:
        await cancellable(send)
        report({label: name, "ok": True})
    # The adapter's and the gate's refusals, the SDK's errors, and an anyio group of them.
    except BaseException as e:
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        report({label: name, "ok": False, "error": f"{type(e).__name__} {getattr(e, 'code', '')} {e}"[:300]})


async def run(client, call, read):
    for tool in (await client.list_tools()).tools:
        await attempt("tool", tool.name, lambda: call(tool.name))
        if FORGE and FORGE.get("tool") == tool.name:
            await attempt("forged", tool.name, lambda: client.call_tool(
                tool.name, FORGE.get("arguments") or {},
                request_state=FORGE.get("requestState"), input_responses=FORGE.get("inputResponses")))
    for uri in CONTEXT.get("read_twice") or []:
        for _ in range(2):
            await attempt("read", uri, lambda: read(uri))


def cancel_on_answer():
    """--gated with cancel_on: the inner transport the adapter sends through; once the head of
    the first call's answer has come, that call is cancelled (once)."""
    import httpx2

    class CancelOnAnswer(httpx2.AsyncBaseTransport):
        def __init__(self):
            self._inner = httpx2.AsyncHTTPTransport()
            self._armed = True

        async def handle_async_request(self, request):
            response = await self._inner.handle_async_request(request)
            if self._armed and in_flight is not None:
                self._armed = False
                report({"cancel": "the call's answer began"})
                in_flight.cancel()
            return response

        async def aclose(self):
            await self._inner.aclose()

    return CancelOnAnswer()


def server():
    if not STDIO:
        return URL
    words = shlex.split(URL)
    return StdioServerParameters(command=words[0], args=words[1:])


async def main():
    if CANCEL_ON and CANCEL_ON != "notifications/message":
        print("mrtr-probe: unsupported: cancel", flush=True)
        return
    if not GATED:
        logging = {"logging_callback": on_log, "log_level": "info"} if CANCEL_ON else {}
        async with Client(server(), elicitation_callback=elicit, **logging) as client:
            await run(client, lambda name: client.call_tool(name, {}), client.read_resource)
        return
    if STDIO:
        sys.exit("sdk_client.py: --gated takes streamable HTTP only (the adapter offers no stdio, docs/adapters.md)")
    import mrtr_gate
    from mrtr_gate import hosts
    from mrtr_gate.sdk_client import GatedSdkClient

    clock = hosts.SystemClock()
    gate = mrtr_gate.Gate(clock=clock, storage=hosts.MemoryStorage(clock),
                          consent=hosts.CallbackConsent(lambda _p: True), audit=hosts.MemoryAudit())
    gated = GatedSdkClient(gate, URL, user="probe", tenant="default",
                           answer=lambda view, _v: {i["key"]: ANSWERS.get(i["key"], DECLINE) for i in view["inputs"]},
                           # Opening is the app's; this one opens nothing (the probe's shims would see it).
                           open_url=lambda u: report({"open": u}),
                           inner=cancel_on_answer() if CANCEL_ON else None)
    async with Client(gated.transport(), **GatedSdkClient.client_options()) as client:
        gated.attach(client)
        await run(client, lambda name: gated.call_tool(name, {}), gated.read_resource)


asyncio.run(main())
