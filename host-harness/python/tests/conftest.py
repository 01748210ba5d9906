import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True, params=["fast", "api"])
def engine(request, monkeypatch):
    """Every test runs through both ways values cross into wasmtime (mrtr_gate/_fast.py and
    wasmtime-py's public component API): the two must agree on everything, the whole corpus
    and its trails included."""
    monkeypatch.setenv("MRTR_GATE_PY_ENGINE", request.param)
    yield request.param
