"""What the installed package ships beside its code: the component and its digest (checked on
every load of the bundled component), and the license (held to the repository's)."""

import hashlib
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import mrtr_gate as m

ROOT = Path(__file__).resolve().parents[3]


def test_the_shipped_digest_is_the_bundled_components_and_the_clis():
    wasm = m.bundled_component()
    assert m.COMPONENT_SHA256 == hashlib.sha256(wasm).hexdigest()
    bin = os.environ.get("MRTR_GATE_BIN")
    if not bin:
        pytest.skip("MRTR_GATE_BIN is set by scripts/python")
    info = subprocess.run([bin, "info"], capture_output=True, text=True, check=True).stdout
    assert f"component sha256: {m.COMPONENT_SHA256}\n" in info


# Run in a fresh interpreter over a copy of the installed package whose files were changed.
LOAD = """
import sys
import mrtr_gate as m
from mrtr_gate import hosts
try:
    m.Gate(clock=hosts.ManualClock(), storage=hosts.MemoryStorage(), consent=hosts.DecidedConsent(), audit=hosts.MemoryAudit())
except Exception as e:
    print(type(e).__name__, e)
else:
    print("loaded")
"""


def load_damaged(tmp_path, damage):
    copy = tmp_path / "site" / "mrtr_gate"
    shutil.copytree(Path(m.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    damage(copy)
    env = dict(os.environ, PYTHONPATH=str(copy.parent))
    out = subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def flip_a_byte(pkg):
    wasm = bytearray((pkg / "gate.wasm").read_bytes())
    wasm[len(wasm) // 2] ^= 1
    (pkg / "gate.wasm").write_bytes(bytes(wasm))


def test_a_damaged_install_refuses_its_bundled_component(tmp_path):
    assert load_damaged(tmp_path, lambda pkg: None) == "loaded", "the copy itself loads"
    out = load_damaged(tmp_path / "flipped", flip_a_byte)
    assert out.startswith("UnexpectedComponent") and m.COMPONENT_SHA256 in out, out
    out = load_damaged(tmp_path / "malformed", lambda pkg: (pkg / "gate.wasm.sha256").write_text("f310b8f8  gate.wasm\n"))
    assert out.startswith("UnexpectedComponent") and "malformed" in out, out
    out = load_damaged(tmp_path / "missing", lambda pkg: (pkg / "gate.wasm.sha256").unlink())
    assert out.startswith("FileNotFoundError") and "gate.wasm.sha256 is missing" in out, out


def test_the_installed_license_is_the_repositorys():
    dist = metadata.distribution("mrtr-gate")
    assert dist.metadata["License-Expression"] == "Apache-2.0"
    assert dist.metadata.get_all("License-File") == ["LICENSE"]
    shipped = [f for f in dist.files if f.parts[-2:] == ("licenses", "LICENSE")]
    assert len(shipped) == 1, dist.files
    root = (ROOT / "LICENSE").read_text("utf-8")
    assert shipped[0].read_text("utf-8") == root
    copy = ROOT / "host-harness" / "python" / "LICENSE"
    if copy.exists():  # in the repository (an --installed run copies the root LICENSE only)
        assert copy.read_text("utf-8") == root
