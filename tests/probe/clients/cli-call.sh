#!/usr/bin/env bash
# `mrtr-gate call` as a probe client: calls each of the scenario's tools ($MCP_PROBE_TOOLS, in
# order, one call each) at the endpoint URL the probe appends as the last argument (with
# MCP_PROBE_TRANSPORT=stdio: the server command line, given to `call --stdio`, which splits it
# like a shell and spawns it once per call, its stderr logged to a temporary file removed at
# the end), answering rounds from $MCP_PROBE_ANSWERS_FILE with --yes. A refused call is reported on stderr and the
# next tool is called; the script exits 0 (the probe judges the wire, not the exit status).
# `mrtr-gate call` takes no MRTR fields, so a context's `forge` is answered "unsupported"; it
# cannot cancel a call in flight, so a context's `cancel_on` is too, and nothing is called (a
# held call would only wait for the probe's fallback).
# Then reads each URI of $MCP_PROBE_READS (the context's `read_twice`) twice, one `call
# resources/read` after the other.
# Environment: MRTR_GATE_BIN, the binary (default: `mrtr-gate` on PATH); XDG_CONFIG_HOME, where
# the host key is made on first use.
set -euo pipefail
last="${!#}"
bin="${MRTR_GATE_BIN:-mrtr-gate}"
transport=(--http "$last")
if [ "${MCP_PROBE_TRANSPORT:-http}" = stdio ]; then
  log=$(mktemp)
  trap 'rm -f "$log"' EXIT
  transport=(--server-log "$log" --stdio "$last")
fi
case "${MCP_CONFORMANCE_CONTEXT:-}" in
  *'"forge"'*) echo "mrtr-probe: unsupported: forge" ;;
  *'"cancel_on"'*) echo "mrtr-probe: unsupported: cancel"; exit 0 ;;
esac
for tool in $MCP_PROBE_TOOLS; do
  "$bin" call --json --yes --user probe --answers "$MCP_PROBE_ANSWERS_FILE" \
    "${transport[@]}" tools/call "$tool" '{}' || echo "cli-call: $tool: exit $?" >&2
done
for uri in ${MCP_PROBE_READS:-}; do
  for _ in 1 2; do
    "$bin" call --json --yes --user probe --answers "$MCP_PROBE_ANSWERS_FILE" \
      "${transport[@]}" resources/read "$uri" || echo "cli-call: $uri: exit $?" >&2
  done
done
