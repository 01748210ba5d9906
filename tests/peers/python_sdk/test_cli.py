"""`mrtr-gate call` (the project's own CLI client, the Rust binary scripts/python builds and
names in MRTR_GATE_BIN) against the Python SDK's servers beside this file, over stdio and
streamable HTTP: what the user ends up with (the tool's answer on stdout, or the refusal's
code and exit status) and the audit file (its chain intact, one terminal event for every
received round, no secret in any line)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_sdk_server import HERE, SECRETS, HttpPeer, start_http

BIN = os.environ.get("MRTR_GATE_BIN", "")
pytestmark = pytest.mark.skipif(not BIN, reason="MRTR_GATE_BIN is set by scripts/python")


def stdio_command(script: str = "server.py") -> str:
    return f"{sys.executable} {HERE / script}"


@pytest.fixture(autouse=True)
def own_config_folder(tmp_path, monkeypatch):
    """Every run makes (or finds) its host key in a config folder of this test's own, never
    in the real home (the CLI's keys are on by default: docs/host-keys.md)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("MRTR_GATE_HOST_KEYS", raising=False)


@pytest.fixture(scope="module")
def http_peer():
    p = HttpPeer()
    yield p
    p.close()


@pytest.fixture(params=["stdio", "http"])
def server(request, http_peer) -> list[str]:
    if request.param == "stdio":
        return ["--stdio", stdio_command()]
    return ["--http", http_peer.url]


class Run:
    def __init__(self, proc: subprocess.CompletedProcess, audit: Path) -> None:
        self.code = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.audit = audit

    @property
    def report(self) -> dict:
        return json.loads(self.stdout)

    def lines(self) -> list[dict]:
        if not self.audit.exists():
            return []
        return [json.loads(line) for line in self.audit.read_text().splitlines()]

    def events(self) -> list[dict]:
        """The gate's events: every line but the root's anchors (docs/audit.md, "Shards and the root")."""
        return [e for e in self.lines() if e["shard"] != "root"]

    def check_trail(self) -> None:
        if self.audit.exists():
            verified = subprocess.run([BIN, "verify-audit", str(self.audit)], capture_output=True, text=True)
            assert verified.returncode == 0, verified.stdout + verified.stderr
        events = self.events()
        # A call ends by anchoring every shard it wrote to: the root's last line names each
        # shard's last line.
        lines = self.lines()
        if events:
            root = lines[-1]
            assert root["shard"] == "root" and root["event"] == "anchor", root
            for shard in {e["shard"] for e in events}:
                last = [e for e in events if e["shard"] == shard][-1]
                assert root["heads"][shard]["seq"] == last["seq"], (shard, root)
        for original in {e["request_id"] for e in events if e["event"] == "received"}:
            terminal = [e for e in events if e["event"] == "terminal" and e["request_id"] == original]
            assert len(terminal) == 1, f"binding {original}: {len(terminal)} terminal events"
        text = self.audit.read_text() if self.audit.exists() else ""
        for secret in SECRETS:
            assert secret not in text


def call(tmp_path: Path, server: list[str], *args: str, answers=None, stdin: str | None = None,
         flags: tuple[str, ...] = ("--yes",)) -> Run:
    audit = tmp_path / "audit.jsonl"
    cmd = [BIN, "call", *server, "--user", "alice", "--tenant", "acme", "--audit", str(audit)]
    if answers is not None:
        path = tmp_path / "answers.json"
        path.write_text(json.dumps(answers))
        cmd += ["--answers", str(path), *flags]
    cmd += list(args)
    proc = subprocess.run(cmd, input=stdin or "", capture_output=True, text=True, timeout=120)
    return Run(proc, audit)


PASSENGER = {"passenger": {"action": "accept", "content": {"full_name": "Ada Lovelace", "seat": "window", "bags": 1}}}


def test_a_form_round(tmp_path, server):
    r = call(tmp_path, server, "tools/call", "book_flight", '{"origin":"OSL","destination":"SFO"}', answers=PASSENGER)
    assert r.code == 0, r.stderr
    assert r.stdout.strip() == 'booked OSL-SFO: {"passenger": {"action": "accept", "content": {"bags": 1, "full_name": "Ada Lovelace", "seat": "window"}}}'
    assert "(consent given with --yes)" in r.stderr and '"full_name"* (string) Full name' in r.stderr
    assert [e["event"] for e in r.events()] == ["received", "consented", "submitted", "terminal"]
    r.check_trail()


def test_the_same_round_typed_at_the_terminal_form(tmp_path, server):
    # accept the form; fields in name order: bags empty (optional), full name, seat 2 (window);
    # then y at the consent prompt
    r = call(tmp_path, server, "tools/call", "book_flight", '{"origin":"OSL","destination":"SFO"}',
             stdin="a\n\nAda Lovelace\n2\ny\n")
    assert r.code == 0, r.stderr
    assert '"content": {"full_name": "Ada Lovelace", "seat": "window"}' in r.stdout
    assert "Send these answers? [y/N]" in r.stderr
    r.check_trail()


def test_a_url_is_handed_over_only_after_consent(tmp_path, server):
    r = call(tmp_path, server, "tools/call", "pay", '{"amount": 42}', answers={"pay": {"action": "accept"}})
    assert r.code == 0, r.stderr
    assert r.stdout.strip() == 'paid 42: {"pay": {"action": "accept"}}'
    consent = r.stderr.index("(consent given with --yes)")
    opened = r.stderr.index("open this URL in your browser: https://pay.example.com/authorize?session=SECRET-SESSION")
    assert consent < opened
    r.check_trail()


def test_a_refused_consent_sends_nothing_and_opens_nothing(tmp_path, server):
    # Answers from a file but no --yes: the consent prompt reads the terminal, which is closed.
    r = call(tmp_path, server, "--json", "tools/call", "pay", '{"amount": 42}',
             answers={"pay": {"action": "accept"}}, flags=())
    assert r.code == 1
    assert (r.report["code"], r.report["cause"]) == ("consent_refused", "caller")
    assert "open this URL" not in r.stderr
    assert [(e["event"], e.get("outcome"), e.get("reason")) for e in r.events()] == [
        ("received", "accepted", None), ("rejected", "denied", "consent_refused"), ("terminal", "cancelled", None)]
    r.check_trail()


def test_a_state_only_round(tmp_path, server):
    r = call(tmp_path, server, "--json", "tools/call", "continue_job", "{}")
    assert r.code == 0, r.stderr
    assert r.report["rounds"] == 1
    assert r.report["result"]["content"][0]["text"] == "job done after step-1"
    assert [e["event"] for e in r.events()] == ["received", "submitted", "terminal"]
    r.check_trail()


def test_a_form_and_a_url_in_one_round(tmp_path, server):
    answers = {"contact": {"action": "accept", "content": {"email": "ada@example.com"}}, "verify": {"action": "decline"}}
    r = call(tmp_path, server, "tools/call", "combined", "{}", answers=answers)
    assert r.code == 0, r.stderr
    assert r.stdout.strip().endswith("state=combined-state")
    assert "open this URL" not in r.stderr, "a declined URL is never handed over"
    r.check_trail()


def test_three_rounds_answered_round_by_round(tmp_path, server):
    answers = [{f"q{n}": {"action": "accept", "content": {"answer": f"answer {n}"}}} for n in (1, 2, 3)]
    r = call(tmp_path, server, "--json", "tools/call", "survey", "{}", answers=answers)
    assert r.code == 0, r.stderr
    assert r.report["rounds"] == 3 and "answer 3" in r.report["result"]["content"][0]["text"]
    r.check_trail()


def test_a_server_that_never_finishes_meets_the_round_cap(tmp_path, server):
    started = time.monotonic()
    r = call(tmp_path, server, "--json", "--max-rounds", "4", "tools/call", "forever", "{}")
    assert r.code == 1
    assert (r.report["code"], r.report["cause"], r.report["audited"]) == ("round_limit_exceeded", "peer", True)
    # Paced: 50 + 100 + 200 + 400 ms between the state-only rounds at least.
    assert time.monotonic() - started >= 0.75
    events = r.events()
    assert [e["event"] for e in events].count("submitted") == 4
    assert events[-1]["event"] == "terminal" and events[-1]["outcome"] == "error"
    r.check_trail()


def test_sealed_state_goes_back_untouched(tmp_path, server):
    r = call(tmp_path, server, "tools/call", "sealed", "{}")
    assert r.code == 0, r.stderr
    r.check_trail()


def test_a_missing_answer_cancels_the_request(tmp_path, server):
    r = call(tmp_path, server, "--json", "tools/call", "book_flight", '{"origin":"A","destination":"B"}',
             answers={"someone_else": {"action": "decline"}})
    assert r.code == 5 and r.report["code"] == "no_answer"
    assert [(e["event"], e.get("outcome"), e.get("reason")) for e in r.events()] == [
        ("received", "accepted", None), ("terminal", "error", "no_answer")]
    r.check_trail()


# Consent by policy (`call --policy`, docs/policy.md): the examples in examples/policies/ judge
# this server's rounds before anyone sees them.
EXAMPLES = HERE.parent.parent.parent / "examples" / "policies"
CREDENTIALS = {"credentials": {"action": "accept", "content": {"username": "ada", "password": "SECRET-pw"}}}


def trail_ends(r: Run) -> list[tuple]:
    return [(e["event"], e.get("outcome"), e.get("reason"), e.get("consent_method"), e.get("consent_receipt_id"))
            for e in r.events()]


def test_a_policy_refuses_a_round_before_anyone_sees_it(tmp_path, server):
    answers = {"contact": {"action": "accept", "content": {"email": "ada@example.com"}}, "verify": {"action": "accept"}}
    r = call(tmp_path, server, "--policy", str(EXAMPLES / "deny-url-outside-allowed.cedar"), "--json",
             "tools/call", "combined", "{}", answers=answers)
    assert r.code == 1, r.stderr
    assert r.report["code"] == "policy_denied" and "url-outside-allowed-domains" in r.report["message"]
    # Nothing of the round was shown: no form, no URL.
    assert "accounts.example.com" not in r.stderr and "How can we reach you" not in r.stderr
    assert trail_ends(r) == [
        ("received", "accepted", None, None, None),
        ("terminal", "error", "policy_denied", "policy_hook", "policy:url-outside-allowed-domains")]
    r.check_trail()


def test_a_policy_lets_the_payment_page_through_to_the_consent(tmp_path, server):
    r = call(tmp_path, server, "--policy", str(EXAMPLES / "deny-url-outside-allowed.cedar"),
             "tools/call", "pay", '{"amount": 42}', answers={"pay": {"action": "accept"}})
    assert r.code == 0, r.stderr
    assert "(consent given with --yes)" in r.stderr
    r.check_trail()


def test_a_policy_grants_a_form_with_no_one_asked(tmp_path, server):
    # Answers from a file and no --yes: the consent prompt would read the terminal, which is
    # closed, and refuse. The policy grants the form's consent instead.
    r = call(tmp_path, server, "--policy", str(EXAMPLES / "person-for-secrets.cedar"),
             "tools/call", "book_flight", '{"origin":"OSL","destination":"SFO"}', answers=PASSENGER, flags=())
    assert r.code == 0, r.stderr
    assert r.stdout.startswith("booked OSL-SFO")
    consented = [e for e in r.events() if e["event"] == "consented"]
    assert [(e["consent_method"], e["consent_receipt_id"]) for e in consented] == [("policy_hook", "policy:forms-granted")]
    r.check_trail()


def test_a_password_form_goes_to_the_person_whatever_a_permit_says(tmp_path, server):
    policy = str(EXAMPLES / "person-for-secrets.cedar")
    refused = call(tmp_path, server, "--policy", policy, "--json", "tools/call", "sign_in", "{}",
                   answers=CREDENTIALS, flags=())
    assert refused.code == 1 and refused.report["code"] == "consent_refused", refused.stderr
    refused.check_trail()
    (tmp_path / "given").mkdir()
    given = call(tmp_path / "given", server, "--policy", policy, "tools/call", "sign_in", "{}", answers=CREDENTIALS)
    assert given.code == 0, given.stderr
    assert given.stdout.strip() == "signed in as ada"
    assert [e["consent_method"] for e in given.events() if e["event"] == "consented"] == ["preset_answers"]
    given.check_trail()


def test_a_policy_refuses_an_untrusted_servers_state_only_round(tmp_path, server):
    r = call(tmp_path, server, "--policy", str(EXAMPLES / "trusted-state-only.cedar"), "--json",
             "tools/call", "continue_job", "{}")
    assert r.code == 1 and r.report["code"] == "policy_denied", r.stderr
    assert trail_ends(r)[-1] == ("terminal", "error", "policy_denied", "policy_hook", "policy:state-only-from-trusted")
    r.check_trail()


def test_a_policy_file_with_a_mistake_is_a_usage_error_naming_its_line(tmp_path):
    policy = tmp_path / "policy.cedar"
    policy.write_text("permit (principal, action, resource);\nforbid (principal, action, resource) when { context.nope };\n")
    r = call(tmp_path, ["--stdio", stdio_command()], "--policy", str(policy), "tools/call", "continue_job", "{}")
    assert r.code == 2, r.stderr
    assert f"{policy}:2:" in r.stderr and "policy_invalid" in r.stderr
    assert not r.audit.exists() or r.events() == []


@pytest.fixture(scope="module")
def misbehaving_http():
    proc, url = start_http("misbehaving.py", "the misbehaving HTTP peer")
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(params=["stdio", "http"])
def misbehaving(request, misbehaving_http) -> list[str]:
    if request.param == "stdio":
        return ["--stdio", stdio_command("misbehaving.py")]
    return ["--http", misbehaving_http]


@pytest.mark.parametrize(
    "tool,code",
    [
        ("http_url", "unsafe_url_elicitation"),
        ("userinfo_url", "unsafe_url_elicitation"),
        ("ref_schema", "invalid_form_requestedSchema"),
        ("nested_schema", "invalid_form_requestedSchema"),
        ("oversized_state", "invalid_requestState"),
    ],
)
def test_misbehaving_rounds_are_refused(tmp_path, misbehaving, tool, code):
    r = call(tmp_path, misbehaving, "--json", "tools/call", tool, "{}")
    assert r.code == 1
    assert (r.report["code"], r.report["cause"]) == (code, "peer")
    assert [(e["event"], e.get("outcome")) for e in r.events()] == [("rejected", "denied"), ("terminal", "error")]
    r.check_trail()


@pytest.mark.parametrize("tool,code", [("duplicate_result_type", "duplicate_json_key"), ("unknown_result_type", "invalid_result_type")])
def test_raw_lines_no_sdk_sends_are_refused(tmp_path, tool, code):
    r = call(tmp_path, ["--stdio", stdio_command("raw_server.py")], "--json", "tools/call", tool, "{}")
    assert r.code == 1 and r.report["code"] == code
    r.check_trail()


def test_input_required_on_tools_list_is_refused(tmp_path):
    proc = subprocess.run([BIN, "list", "--stdio", stdio_command("raw_server.py"), "--json", "tools"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["code"] == "input_required_not_allowed"


def test_tools_are_listed(http_peer):
    proc = subprocess.run([BIN, "list", "--http", http_peer.url, "tools"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert [line.split()[0] for line in proc.stdout.splitlines()][:2] == ["book_flight", "pay"]


def test_a_ten_mib_result_passes(tmp_path, misbehaving):
    r = call(tmp_path, misbehaving, "--json", "tools/call", "big_result", "{}")
    assert r.code == 0, r.stderr
    assert len(r.report["result"]["content"][0]["text"]) == 10 * 1024 * 1024


def test_a_server_that_dies_is_a_transport_failure(tmp_path):
    dying = f"{sys.executable} -c 'import sys; sys.stdin.readline()'"
    r = call(tmp_path, ["--stdio", dying], "--json", "tools/call", "anything", "{}")
    assert r.code == 4 and r.report["code"] == "server_closed"
    r.check_trail()


def test_ctrl_c_while_waiting_cancels(tmp_path):
    silent = f"{sys.executable} -c 'import sys, time; sys.stdin.readline(); time.sleep(60)'"
    audit = tmp_path / "audit.jsonl"
    proc = subprocess.Popen([BIN, "call", "--stdio", silent, "--audit", str(audit), "--json", "tools/call", "slow", "{}"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 5, err
    assert json.loads(out)["code"] == "cancelled"
    assert "waiting for the server: tools/call" in err, "a progress line while it waits"


def test_a_refusal_is_explained_to_people(tmp_path):
    r = call(tmp_path, ["--stdio", stdio_command("misbehaving.py")], "tools/call", "http_url", "{}")
    assert r.code == 1 and r.stdout == ""
    assert "refused: unsafe_url_elicitation:" in r.stderr and "cause: peer" in r.stderr


def test_quit_at_the_form_sends_nothing(tmp_path, server):
    r = call(tmp_path, server, "--json", "tools/call", "book_flight", '{"origin":"A","destination":"B"}', stdin="q\n")
    assert r.code == 5 and r.report["code"] == "cancelled"
    assert [(e["event"], e.get("outcome")) for e in r.events()] == [("received", "accepted"), ("terminal", "cancelled")]
    r.check_trail()


def test_cancel_at_the_form_is_an_answer_the_server_gets(tmp_path, server):
    # `c` answers the input with `cancel` (sent, so it needs consent: `y`); `q` would send nothing.
    r = call(tmp_path, server, "tools/call", "book_flight", '{"origin":"A","destination":"B"}', stdin="c\ny\n")
    assert r.code == 0, r.stderr
    assert r.stdout.strip() == 'booked A-B: {"passenger": {"action": "cancel"}}'
    r.check_trail()


def fake_opener(tmp_path: Path) -> tuple[dict, Path]:
    """A system opener on PATH that records its arguments (the real one would start a browser)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "opened.json"
    opener = bin_dir / "xdg-open"
    opener.write_text(f"#!{sys.executable}\nimport json, sys\nopen({str(record)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n")
    opener.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}, record


def test_open_hands_the_url_to_the_opener_as_one_argument_after_consent(tmp_path, server):
    env, record = fake_opener(tmp_path)
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"pay": {"action": "accept"}}))
    base = [BIN, "call", *server, "--answers", str(answers), "--open"]
    proc = subprocess.run([*base, "--yes", "tools/call", "pay", '{"amount": 42}'], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for _ in range(50):
        if record.exists():
            break
        time.sleep(0.1)
    assert [json.loads(line) for line in record.read_text().splitlines()] == [
        ["https://pay.example.com/authorize?session=SECRET-SESSION"]]
    # Without consent (no --yes, a closed terminal) the opener is never started.
    record.unlink()
    proc = subprocess.run([*base, "tools/call", "pay", '{"amount": 42}'], env=env, input="", capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    time.sleep(0.5)
    assert not record.exists()
