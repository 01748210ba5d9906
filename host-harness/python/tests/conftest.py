import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def _inside(path, folder) -> bool:
    return Path(path).resolve().is_relative_to(Path(folder).resolve())


def pytest_collection_finish(session):
    """`scripts/python --installed` runs the suites against the wheel installed in a venv of a
    temporary folder (MRTR_GATE_INSTALLED): the package must come from that venv, and nothing
    may be imported from the repository (MRTR_GATE_REPO). Checked once every test module (and
    what it put on sys.path) is in."""
    venv, repo = os.environ.get("MRTR_GATE_INSTALLED"), os.environ.get("MRTR_GATE_REPO")
    if not venv:
        return
    import mrtr_gate

    wrong = []
    if not _inside(mrtr_gate.__file__, venv):
        wrong.append(f"mrtr_gate was imported from {mrtr_gate.__file__}, not from the venv {venv}")
    if not _inside(sys.prefix, venv):
        wrong.append(f"the interpreter's prefix is {sys.prefix}, not the venv {venv}")
    if not repo:
        wrong.append("MRTR_GATE_REPO is not set: nothing to hold sys.path apart from")
    else:
        wrong += [f"sys.path holds {p}, inside the repository" for p in sys.path if p and _inside(p, repo)]
    if wrong:
        pytest.exit("not a test of the installed package:\n  " + "\n  ".join(wrong), returncode=1)


@pytest.fixture(autouse=True, params=["fast", "api"])
def engine(request, monkeypatch):
    """Every test runs through both ways values cross into wasmtime (mrtr_gate/_fast.py and
    wasmtime-py's public component API): the two must agree on everything, the whole corpus
    and its trails included."""
    monkeypatch.setenv("MRTR_GATE_PY_ENGINE", request.param)
    yield request.param
