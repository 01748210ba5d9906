#!/usr/bin/env python3
"""The probe's self-test client: an MCP client (2026-07-28, streamable HTTP or stdio, stdlib
only) that makes every mistake on purpose, so that every check but the control one must FAIL
against it (a check it passes is vacuous). Launched by `mrtr-gate probe --command "python3
naive.py"`: the last argument is the endpoint's URL, or with MCP_PROBE_TRANSPORT=stdio a server
command line (split like a shell, spawned, newline-delimited JSON on its stdin and stdout); the
scenario's context is in MCP_CONFORMANCE_CONTEXT.

Its mistakes: reads JSON with Python's parser (a duplicated key: the last one wins), reads
`resultType` case-insensitively and retries anything that is not `complete`, "cleans" the
requestState it echoes (re-serialises what looks like JSON, strips spaces, replaces
non-ASCII with `?`), sends whatever answer it is told without checking the schema, accepts
any URL elicitation, fetches the URL and hands it to xdg-open, takes the first response of an
SSE stream (over stdio: the first response line) whatever its id, answers a server's 2025-era
elicitation/create, sends a retry again when its connection broke (over stdio: when its server
died, to a server it spawns again), and has no round cap. It sends a retry under the id of
the call it retries, a round that carried no requestState back with the last state it saw, the
last round's inputResponses and requestState on its next call of another tool, and retries once a
result that names no resultType (with those same leftovers). A 2025-era `-32042` URL
elicitation error it acts on: it fetches and opens each URL and sends the call again. A task
(the tasks extension, declared when the context's `capabilities` say so) it drives by
`tasks/get`, answering its input requests by `tasks/update` as unchecked as a round's. It reads
each URI of the context's `read_twice` twice and serves the second read from a cache holding
the first read's retry's result. It does
complete a well-formed
round, so the control scenario passes. It also dereferences a schema's network
`$ref`, echoes a state of any size, declares the elicitation modes it is told to (context
`capabilities`) yet answers a mode it did not declare, and obeys a `forge`: a new call carrying
the round's state with other arguments. It obeys `cancel_on` (over HTTP it closes the call's
exchange, over stdio it sends `notifications/cancelled` naming the call) and then takes the first
response of its next request (a ping), the cancelled call's late round, as the call's answer and
answers it. It never paces, and it keeps one message ahead: over HTTP the next tools/call's head
is sent, and read by the server (which answers `100 Continue`), before the current call's body;
over stdio every write ends with the next message's first bytes, so they reach the probe in the
same read as the current line's end, before that line is answered. Either way a retry's first
byte precedes its round, and no load can make its gap look paced.
"""
import http.client
import json
import os
import shlex
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

URL = sys.argv[-1]
STDIO = os.environ.get("MCP_PROBE_TRANSPORT") == "stdio"
PARTS = urllib.parse.urlsplit(URL)
CONTEXT = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
VERSION = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "2026-07-28")
HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": VERSION,
}
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": CONTEXT.get("capabilities") or {"elicitation": {"form": {}, "url": {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "naive", "version": "0"},
}
# Not a safety cap: it only keeps the self-test finite if a scenario loops.
MAX_LEGS = 100
# How every message this client writes begins (json.dumps keeps the key order given).
PREFIX = b'{"jsonrpc": "2.0", '
CANCELLED = {"cancelled": True}
next_id = 0
ahead = None


class Ahead:
    """A POST whose head the server has read (it answered `100 Continue`); its body, chunked,
    follows once the client knows it."""

    def __init__(self):
        self.conn = http.client.HTTPConnection(PARTS.hostname, PARTS.port)
        self.conn.putrequest("POST", PARTS.path or "/", skip_accept_encoding=True)
        for name, value in HEADERS.items():
            self.conn.putheader(name, value)
        self.conn.putheader("Transfer-Encoding", "chunked")
        self.conn.putheader("Expect", "100-continue")
        self.conn.endheaders()
        interim = b""
        while not interim.endswith(b"\r\n\r\n"):
            byte = self.conn.sock.recv(1)  # one byte at a time: the final response is not ours yet
            if not byte:
                raise OSError("the server closed before 100 Continue")
            interim += byte

    def send(self, data):
        self.conn.send(b"%x\r\n" % len(data) + data + b"\r\n0\r\n\r\n")
        response = self.conn.getresponse()
        return read(response, response.headers.get("Content-Type", ""), self.conn)


def post(method, params, same_id=None):
    global next_id, ahead
    next_id += 1
    # Mistake: a retry goes under the id of the call it retries.
    message = {"jsonrpc": "2.0", "id": same_id or next_id, "method": method, "params": params}
    if method != "tools/call" or STDIO:
        return send(message)
    current = ahead or Ahead()
    ahead = Ahead()  # Mistake (of pacing): the next call is under way before this one's answer.
    return current.send(json.dumps(message).encode("utf-8", "surrogatepass"))


class Server:
    """The stdio server, spawned again when it has died (the broken retry is then resent).
    Mistake (of pacing): every write ends with the first bytes of the next message, so the
    next message is under way, in the same write as this one, before this one's answer."""
    process = None
    ahead = False  # This process has been sent the next message's first bytes.

    @classmethod
    def write(cls, message):
        line = json.dumps(message).encode("utf-8", "surrogatepass")
        if cls.ahead:
            line = line[len(PREFIX):]
        cls.process.stdin.write(line + b"\n" + PREFIX)
        cls.process.stdin.flush()
        cls.ahead = True

    @classmethod
    def exchange(cls, message, reply):
        if cls.process is None or cls.process.poll() is not None:
            cls.process = subprocess.Popen(shlex.split(URL), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            cls.ahead = False
        try:
            cls.write(message)
        except OSError as e:
            cls.stop()
            raise ConnectionError("the server is gone") from e
        while reply:
            line = cls.process.stdout.readline()
            if not line:
                cls.stop()
                raise ConnectionError("the server ended")
            event = json.loads(line.decode("utf-8", "surrogatepass"))
            if "method" in event and "id" in event:
                cls.exchange({"jsonrpc": "2.0", "id": event["id"], "result": {"action": "accept", "content": {"confirm": True}}}, False)
            elif "method" in event:
                if event["method"] == CONTEXT.get("cancel_on"):
                    # The call is cancelled the stdio way: its server goes on.
                    cls.exchange({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                  "params": {"requestId": message["id"], "reason": "cancel_on"}}, False)
                    return CANCELLED
            else:
                # Mistake: the first response line is the answer, whatever its id.
                return event
        return {}

    @classmethod
    def stop(cls):
        if cls.process is not None:
            try:
                if cls.ahead:
                    # The message under way ends as a ping, so no line is left half sent.
                    cls.process.stdin.write(b'"id": %d, "method": "ping"}\n' % (next_id + 1))
                cls.process.stdin.close()
            except OSError:
                pass
            cls.process.wait()
            cls.process = None


def send(message, reply=True):
    if STDIO:
        return Server.exchange(message, reply)
    body = json.dumps(message)
    request = urllib.request.Request(URL, data=body.encode("utf-8", "surrogatepass"), method="POST", headers=HEADERS)
    try:
        with urllib.request.urlopen(request) as response:
            return read(response, response.headers.get("Content-Type", ""), response)
    except urllib.error.HTTPError as e:
        return read(e, "application/json", e)


def read(response, kind, closer):
    if not kind.startswith("text/event-stream"):
        text = response.read().decode("utf-8", "surrogatepass")
        # Mistake: duplicated keys collapse, the last one wins.
        return json.loads(text) if text.strip() else {}
    answer = None
    # Events as they come: a held stream ends only when the client gives up.
    for raw in iter(response.readline, b""):
        line = raw.decode("utf-8", "surrogatepass").strip()
        if not line.startswith("data:"):
            continue
        event = json.loads(line[5:].strip())
        if "method" in event and "id" in event:
            # Mistake: a 2025-era server request is answered inside a 2026 session.
            send({"jsonrpc": "2.0", "id": event["id"], "result": {"action": "accept", "content": {"confirm": True}}}, False)
        elif "method" in event:
            if event["method"] == CONTEXT.get("cancel_on"):
                closer.close()  # The call is cancelled: its exchange is closed.
                response.close()
                return CANCELLED
        elif answer is None:
            # Mistake: the first response of the stream is the answer, whatever its id.
            answer = event
    return answer or {}


def result_type(result):
    # Mistake: wire casing is not exact.
    for key, value in result.items():
        if key.lower() == "resulttype":
            return str(value)
    return None


def clean(state):
    # Mistake: the state is "normalised" instead of echoed.
    if state.startswith("{"):
        try:
            state = json.dumps(json.loads(state))
        except ValueError:
            pass
    return state.strip().encode("ascii", "replace").decode("ascii")


def visit(url, open_it=True):
    # Mistake: the URL is prefetched (and opened) without asking anyone.
    parts = urllib.parse.urlsplit(url)
    try:
        with socket.create_connection((parts.hostname, parts.port or 443), timeout=5) as s:
            s.sendall(("GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" % (parts.path or "/", parts.hostname)).encode())
            s.recv(1024)
    except OSError:
        pass
    if not open_it:
        return
    try:
        subprocess.run(["xdg-open", url], check=False, timeout=10)
    except (OSError, subprocess.SubprocessError):
        pass


def answer(key, request):
    params = request.get("params", {})
    told = CONTEXT.get("answers", {}).get(key)
    if params.get("mode") == "url":
        visit(params.get("url", ""))
        return told or {"action": "accept"}
    for prop in (params.get("requestedSchema") or {}).get("properties", {}).values():
        if isinstance(prop, dict) and str(prop.get("$ref", "")).startswith("http"):
            visit(prop["$ref"], open_it=False)  # Mistake: a network $ref is dereferenced.
    return told or {"action": "accept", "content": {}}


def drive_task(task_id):
    # Mistake: a task's input requests are answered as told, unchecked (its URLs fetched and
    # opened), by tasks/update.
    for _ in range(MAX_LEGS):
        task = post("tasks/get", {"taskId": task_id, "_meta": META}).get("result") or {}
        status = task.get("status")
        if status == "input_required":
            requests = task.get("inputRequests") or {}
            responses = {key: answer(key, r) for key, r in requests.items()}
            post("tasks/update", {"taskId": task_id, "inputResponses": responses, "_meta": META})
        elif status != "working":
            return


# Results of reads, by URI.
cache = {}


def read_resource(uri):
    # Mistake: a result a retry produced is cached under the URI and served again.
    if uri in cache:
        return cache[uri]
    params = {"uri": uri, "_meta": META}
    for _ in range(MAX_LEGS):
        result = post("resources/read", params).get("result") or {}
        if result.get("resultType") != "input_required":
            cache[uri] = result
            return result
        params = {"uri": uri, "_meta": META}
        requests = result.get("inputRequests") or {}
        if requests:
            params["inputResponses"] = {key: answer(key, r) for key, r in requests.items()}
        if isinstance(result.get("requestState"), str):
            params["requestState"] = result["requestState"]
    return {}


# The last round's inputResponses and requestState.
leftovers = {}


def call(tool):
    global leftovers
    # Mistake: the last round's answers and state ride along on this call of another tool.
    params = {"name": tool, "arguments": {}, "_meta": META, **leftovers}
    first_id = None
    untyped_retried = False
    for _ in range(MAX_LEGS):
        try:
            message = post("tools/call", params, first_id)
        except (OSError, http.client.HTTPException):
            # Mistake: a retry whose connection broke is sent again.
            message = post("tools/call", params, first_id)
        first_id = first_id or next_id
        if message is CANCELLED:
            # Mistake: the next request's first response (the cancelled call's late round) is
            # taken as this call's answer.
            message = post("ping", {})
        error = message.get("error")
        if isinstance(error, dict) and error.get("code") == -32042 and first_id == next_id:
            # Mistake: a 2025-era URL elicitation error is acted on in a 2026 session: each URL
            # is fetched and opened, and the call is sent again as if the flow were done.
            for elicitation in (error.get("data") or {}).get("elicitations") or []:
                visit(elicitation.get("url", ""))
            continue
        result = message.get("result")
        if not isinstance(result, dict):
            return
        kind = result_type(result)
        if kind is None:
            # Mistake: a result that names no resultType is taken for a round, once, and
            # retried with the leftovers.
            if untyped_retried or not leftovers:
                return
            untyped_retried = True
            params = {"name": tool, "arguments": {}, "_meta": META, **leftovers}
            continue
        if kind.lower() == "complete":
            return
        if kind.lower() == "task":
            drive_task(result.get("taskId"))
            return
        retry = {"name": tool, "arguments": {}, "_meta": META}
        requests = result.get("inputRequests") or {}
        if requests:
            retry["inputResponses"] = {key: answer(key, r) for key, r in requests.items()}
        if isinstance(result.get("requestState"), str):
            retry["requestState"] = clean(result["requestState"])
        elif "requestState" in leftovers:
            # Mistake: a round that carried no state gets the last one seen.
            retry["requestState"] = leftovers["requestState"]
        leftovers = {k: retry[k] for k in ("inputResponses", "requestState") if k in retry}
        params = retry


def main():
    post("server/discover", {"_meta": META})
    tools = post("tools/list", {"_meta": META}).get("result", {}).get("tools", [])
    for tool in tools:
        try:
            call(tool["name"])
            forge = CONTEXT.get("forge")
            if forge and forge.get("tool") == tool["name"]:
                # Mistake: the round's state is sent again, on a call with other arguments.
                post("tools/call", {"name": tool["name"], "arguments": forge.get("arguments") or {},
                                    "requestState": forge.get("requestState"),
                                    "inputResponses": forge.get("inputResponses") or {}, "_meta": META})
        except Exception as e:  # noqa: BLE001 - a naive client goes on with the next tool
            print("naive: %s: %r" % (tool["name"], e), file=sys.stderr)
    for uri in CONTEXT.get("read_twice") or []:
        for _ in range(2):
            try:
                read_resource(uri)
            except Exception as e:  # noqa: BLE001 - likewise
                print("naive: %s: %r" % (uri, e), file=sys.stderr)
    if ahead is not None:
        # The call kept ahead gets a body too, so no request is left half sent.
        ahead.send(json.dumps({"jsonrpc": "2.0", "id": next_id + 1, "method": "ping"}).encode())


main()
if STDIO:
    Server.stop()
