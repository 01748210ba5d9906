"""scripts/probe's judge and table writer over `mrtr-gate probe --json` reports (stdlib only).

    matrix.py check NAME REPORT EXIT EXPECTED_SKIPS   a gated configuration: exit 0, no FAILURE,
                                                      and its SKIPPED check ids equal to
                                                      EXPECTED_SKIPS[NAME]; says why on stdout,
                                                      exits 1 otherwise
    matrix.py recorded NAME REPORT EXIT               an ungated one: the probe ran (exit 0 or 1)
                                                      and its report is whole; nothing else
    matrix.py table OUT NAME=REPORT...                the ungated client x scenario table (Markdown)
                                                      with the commands that reproduce each column
                                                      (columns may mix transports: each report
                                                      names its own)
    matrix.py suite NAME REPORT SUITE_DIR             the probe's report beside the conformance
                                                      suite's run of the same client: every check
                                                      the suite wrote (its checks.json under
                                                      SUITE_DIR) that the probe runs under the
                                                      same id must have the same status; says
                                                      which differ, exits 1 otherwise
"""

import json
import sys
from datetime import datetime, timezone


def load(path):
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    if not report.get("scenarios") or "summary" not in report:
        raise ValueError(f"{path}: no scenario was run")
    return report


def statuses(report):
    return [(s["name"], c) for s in report["scenarios"] for c in s["checks"]]


def check(name, path, exit_status, expected_path):
    with open(expected_path, encoding="utf-8") as f:
        expected = json.load(f)
    if name not in expected:
        return [f"{expected_path} has no entry for `{name}`: every gated configuration declares its SKIPPED checks"]
    problems = []
    try:
        report = load(path)
    except (OSError, ValueError) as e:
        return [f"no report: {e}"]
    if exit_status != 0:
        problems.append(f"the probe exited {exit_status}")
    for scenario, c in statuses(report):
        if c["status"] == "FAILURE":
            problems.append(f"{scenario} {c['id']} FAILURE: {c.get('errorMessage')}")
    skipped = sorted(c["id"] for _, c in statuses(report) if c["status"] == "SKIPPED")
    want = sorted(expected[name])
    if skipped != want:
        problems.append(f"SKIPPED {skipped}, expected {want} ({expected_path}): a check that slips to SKIPPED is a regression too")
    if not problems:
        s = report["summary"]
        print(f"probe: {name}: ok, {s['passed']} passed, {s['failed']} failed, {s['skipped']} skipped")
    return problems


def recorded(name, path, exit_status):
    if exit_status not in (0, 1):
        return [f"the probe exited {exit_status}: it did not run the client"]
    try:
        report = load(path)
    except (OSError, ValueError) as e:
        return [f"no report: {e}"]
    s = report["summary"]
    print(f"probe: {name}: recorded (not asserted), {s['passed']} passed, {s['failed']} failed, {s['skipped']} skipped")
    control = [c for _, c in statuses(report) if c["id"] == "mrtr-control-completes"]
    if not control or control[0]["status"] != "SUCCESS":
        print(f"probe: {name}: the control round was not completed, so its passes prove nothing (recorded as such)")
    return []


def cell(checks):
    bad = [c for c in checks if c["status"] != "SUCCESS"]
    if not bad:
        return f"pass ({len(checks)}/{len(checks)})"
    failed = [c for c in bad if c["status"] == "FAILURE"]
    if not failed:
        # A skip is not a failure: no bold, and the passes are counted.
        return f"pass ({len(checks) - len(bad)}/{len(checks)}), skipped: " + ", ".join(f"`{c['id']}`" for c in bad)
    return f"**{len([c for c in bad if c['status'] == 'FAILURE'])} of {len(checks)} failed**: " + ", ".join(
        f"`{c['id']}`" + ("" if c["status"] == "FAILURE" else f" ({c['status']})") for c in bad)


def table(out, pairs):
    columns = []
    for pair in pairs:
        name, path = pair.split("=", 1)
        columns.append((name, load(path)))
    scenarios = [s["name"] for s in columns[0][1]["scenarios"]]
    lines = [
        "# mrtr-gate probe: the ungated SDK clients (recorded by scripts/probe, not asserted)",
        "",
        f"{datetime.now(timezone.utc).strftime('%Y-%m-%d')}, {columns[0][1]['probe']}, transports "
        f"{', '.join(sorted({r['transport'] for _, r in columns}))}. A cell is the scenario's checks for that "
        "client; a SKIPPED check is named with its reason below.",
        "",
        "| Scenario | " + " | ".join(name for name, _ in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for scenario in scenarios:
        row = [scenario]
        for _, report in columns:
            found = [s for s in report["scenarios"] if s["name"] == scenario]
            row.append(cell(found[0]["checks"]) if found else "not run")
        lines.append("| `" + row[0] + "` | " + " | ".join(row[1:]) + " |")
    lines += ["", "| Client | Summary | Reproduce (from the repository's root) |", "|---|---|---|"]
    for name, report in columns:
        s = report["summary"]
        transport = "" if report["transport"] == "http" else f" --transport {report['transport']}"
        lines.append(f"| {name} | {s['passed']} passed, {s['failed']} failed, {s['skipped']} skipped | "
                     f"`target/debug/mrtr-gate probe{transport} --command \"{report['command']}\"` |")
    lines += ["", "What each FAILURE was (the request that shows it is in the report):", ""]
    for name, report in columns:
        for scenario, c in statuses(report):
            if c["status"] == "FAILURE":
                what = (c.get("errorMessage") or "").split(": tools/call", 1)[0]
                lines.append(f"- {name}, `{c['id']}`: {what}")
    skips = [(name, c) for name, report in columns for _, c in statuses(report) if c["status"] == "SKIPPED"]
    if skips:
        lines += ["", "Why each SKIPPED check was skipped:", ""]
        lines += [f"- {name}, `{c['id']}`: {c.get('errorMessage')}" for name, c in skips]
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def suite(name, path, suite_dir):
    """The suite's verdicts beside the probe's, check by check, by the suite's own ids."""
    import glob
    try:
        report = load(path)
    except (OSError, ValueError) as e:
        return [f"no report: {e}"]
    files = sorted(glob.glob(f"{suite_dir}/**/checks.json", recursive=True))
    if not files:
        return [f"the suite wrote no checks.json under {suite_dir}"]
    theirs = {}
    for file in files:
        with open(file, encoding="utf-8") as f:
            for c in json.load(f):
                theirs[c["id"]] = c["status"]
    ours = {c["id"]: c["status"] for _, c in statuses(report)}
    shared = sorted(set(theirs) & set(ours))
    problems = [f"{i}: the suite says {theirs[i]}, the probe {ours[i]}" for i in shared if theirs[i] != ours[i]]
    if not shared:
        problems.append("the probe ran none of the suite's checks")
    if not problems:
        print(f"probe: {name}: the suite's {len(shared)} checks read the same in both reports "
              f"({', '.join(f'{i} {ours[i]}' for i in shared)})")
    return problems


def main(argv):
    mode = argv[1] if len(argv) > 1 else ""
    if mode == "check" and len(argv) == 6:
        problems = check(argv[2], argv[3], int(argv[4]), argv[5])
    elif mode == "recorded" and len(argv) == 5:
        problems = recorded(argv[2], argv[3], int(argv[4]))
    elif mode == "suite" and len(argv) == 5:
        problems = suite(argv[2], argv[3], argv[4])
    elif mode == "table" and len(argv) >= 4:
        table(argv[2], argv[3:])
        return 0
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for p in problems:
        print(f"probe: {argv[2]}: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
