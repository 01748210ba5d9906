"""scripts/licenses, the license checker over CycloneDX SBOMs: the SPDX reading (what it must
permit and what it must refuse, hostile expressions included), the policy files, and SBOMs
that are not what they claim. Run by `scripts/python --installed` (scripts/test)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "licenses"


def _load():
    loader = importlib.machinery.SourceFileLoader("licenses_checker", str(SCRIPT))
    spec = importlib.util.spec_from_loader("licenses_checker", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


lic = _load()
ALLOW = {"MIT", "Apache-2.0", "Apache-2.0 WITH LLVM-exception", "BSD-3-Clause"}


@pytest.mark.parametrize("expression", [
    "MIT",
    "MIT OR GPL-3.0-only",
    "GPL-3.0-only OR MIT",
    "MIT AND Apache-2.0",
    "(MIT OR GPL-2.0-only) AND BSD-3-Clause",
    "Apache-2.0 WITH LLVM-exception",
    "GPL-2.0-only OR Apache-2.0 WITH LLVM-exception",
    "((MIT))",
])
def test_what_the_policy_allows_is_permitted(expression: str) -> None:
    assert lic.permitted(expression, ALLOW)


@pytest.mark.parametrize("expression", [
    "GPL-3.0-only",
    "MIT AND GPL-3.0-only",
    "GPL-3.0-only AND MIT",
    "(MIT OR GPL-2.0-only) AND LGPL-2.1-only",
    "Apache-2.0 WITH Classpath-exception-2.0",   # the exception is not listed with it
    "LLVM-exception",
    "mit",                                       # ids are case-sensitive in the list
    "",
    "MIT OR",
    "OR MIT",
    "MIT AND",
    "(MIT",
    "MIT)",
    "()",
    "MIT MIT",
    "MIT WITH",
    "MIT WITH OR Apache-2.0",
    "Apache-2.0 WITH (LLVM-exception)",
    "AND",
    "(" * 200 + "MIT" + ")" * 199,
])
def test_anything_else_is_refused(expression: str) -> None:
    assert not lic.permitted(expression, ALLOW)


def test_a_deep_expression_is_refused_not_a_crash() -> None:
    # Deeper than Python's recursion limit: refused, never a traceback.
    deep = "(" * 5000 + "MIT" + ")" * 5000
    try:
        ok = lic.permitted(deep, ALLOW)
    except RecursionError:
        pytest.fail("a deep expression crashed the checker")
    assert not ok


def sbom(components: list, root: dict | None = None) -> dict:
    doc: dict = {"bomFormat": "CycloneDX", "specVersion": "1.5", "components": components}
    if root is not None:
        doc["metadata"] = {"component": root}
    return doc


def comp(name: str, *licenses: dict, **extra) -> dict:
    return {"name": name, "version": "1.0.0", "licenses": list(licenses), **extra}


def run(tmp_path: Path, *args: object) -> subprocess.CompletedProcess:
    paths = []
    for i, a in enumerate(args):
        if isinstance(a, (dict, list)) or (isinstance(a, str) and not a.startswith("-")):
            p = tmp_path / f"sbom-{i}.json"
            p.write_text(a if isinstance(a, str) else json.dumps(a), encoding="utf-8")
            paths.append(str(p))
        else:
            paths.append(a)
    return subprocess.run([sys.executable, str(SCRIPT), *paths], capture_output=True, text=True, timeout=120)


def test_a_tree_of_allowed_licenses_passes(tmp_path: Path) -> None:
    doc = sbom([comp("a", {"license": {"id": "MIT"}}), comp("b", {"expression": "MIT OR GPL-3.0-only"},
                comp=None)], root=comp("root", {"license": {"id": "Apache-2.0"}}))
    r = run(tmp_path, doc)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "# pass 1" in r.stdout and "# fail 0" in r.stdout
    assert "3 packages" in r.stdout


@pytest.mark.parametrize("bad", [
    comp("copyleft", {"license": {"id": "GPL-3.0-only"}}),
    comp("unlicensed"),
    comp("named", {"license": {"name": "Some custom terms"}}),
    comp("half", {"license": {"id": "MIT"}}, {"license": {"id": "GPL-3.0-only"}}),
    comp("garbled", {"expression": "MIT AND ("}),
    comp("not-an-object", "MIT"),
])
def test_a_refused_license_anywhere_fails(tmp_path: Path, bad: dict) -> None:
    ok = comp("fine", {"license": {"id": "MIT"}})
    for doc in (sbom([ok, bad]), sbom([ok], root=bad), sbom([comp("outer", {"license": {"id": "MIT"}}, components=[bad])])):
        r = run(tmp_path, doc)
        assert r.returncode == 1, r.stdout
        assert "# fail 1" in r.stdout and "not ok" in r.stdout


def test_a_clarified_package_takes_its_clarified_license(tmp_path: Path) -> None:
    # licenses.json clarifies componentize-js 0.17.0 (its manifest names no license).
    clarified = comp("componentize-js", group="@bytecodealliance")
    clarified["version"] = "0.17.0"
    assert run(tmp_path, sbom([clarified])).returncode == 0
    other_version = dict(clarified, version="0.18.0")
    assert run(tmp_path, sbom([other_version])).returncode == 1


@pytest.mark.parametrize("text", [
    "", "not json", "[]", "null", '{"bomFormat": "SPDX"}',
    '{"bomFormat": "CycloneDX", "components": {"a": 1}}',
    '{"bomFormat": "CycloneDX", "components": [1]}',
    '{"bomFormat": "CycloneDX", "metadata": {"component": "x"}}',
    '{"bomFormat": "CycloneDX", "components": [{"name": "a", "licenses": 5}]}',
])
def test_an_sbom_that_is_not_one_fails_and_never_crashes(tmp_path: Path, text: str) -> None:
    r = run(tmp_path, text)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert "# fail 1" in r.stdout


def test_a_missing_sbom_fails(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "absent.json")], capture_output=True, text=True)
    assert r.returncode == 1 and "# fail 1" in r.stdout


def test_no_components_means_none(tmp_path: Path) -> None:
    assert run(tmp_path, "--no-components", sbom([])).returncode == 0
    r = run(tmp_path, "--no-components", sbom([comp("dep", {"license": {"id": "MIT"}})]))
    assert r.returncode == 1 and "dep@1.0.0" in r.stdout


@pytest.mark.parametrize("args", [[], ["--no-components"], ["--bogus", "x.json"]])
def test_a_usage_error_exits_2(args: list) -> None:
    r = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)
    assert r.returncode == 2


def test_every_extra_license_says_why() -> None:
    doc = json.loads((ROOT / "licenses.json").read_text(encoding="utf-8"))
    extra, clarify = lic.extras(ROOT / "licenses.json")
    assert extra == set(doc["allow"]) and extra
    assert all(lic.permitted(v, lic.deny_allow(ROOT / "deny.toml") | extra) for v in clarify.values())
    # Nothing deny.toml already allows is repeated (one place per license).
    assert not extra & lic.deny_allow(ROOT / "deny.toml")


@pytest.mark.parametrize("policy", [
    {"allow": {"MIT-0": ""}, "clarify": {}},
    {"allow": ["MIT-0"], "clarify": {}},
    {"allow": {}, "clarify": {"x@1": {"license": "MIT"}}},
    {"allow": {}},
])
def test_a_policy_without_reasons_is_refused(tmp_path: Path, policy: dict) -> None:
    p = tmp_path / "licenses.json"
    p.write_text(json.dumps(policy), encoding="utf-8")
    with pytest.raises((ValueError, KeyError)):
        lic.extras(p)


def test_a_build_target_takes_its_crates_licenses_and_nothing_else_does(tmp_path: Path) -> None:
    # cargo-cyclonedx lists a crate's targets as nested components without licenses, their
    # purl the crate's with a `#` part.
    crate = comp("mrtr-gate-core", {"expression": "Apache-2.0"}, purl="pkg:cargo/mrtr-gate-core@0.5.0")
    target = {"name": "mrtr_gate_core", "version": "0.5.0", "purl": "pkg:cargo/mrtr-gate-core@0.5.0#src/lib.rs"}
    assert run(tmp_path, sbom([], root=dict(crate, components=[target]))).returncode == 0
    # Not a part: another purl, or no purl, names no license of its own.
    for stranger in (dict(target, purl="pkg:cargo/other@1.0.0#src/lib.rs"), {"name": "x", "version": "1"},
                     dict(target, purl="pkg:cargo/mrtr-gate-core@0.5.0-evil#src/lib.rs")):
        assert run(tmp_path, sbom([], root=dict(crate, components=[stranger]))).returncode == 1
    # A part whose parent is refused is refused too.
    gpl = dict(crate, licenses=[{"license": {"id": "GPL-3.0-only"}}], components=[target])
    assert run(tmp_path, sbom([], root=gpl)).returncode == 1
