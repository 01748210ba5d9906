"""Every corpus scenario through the Python package: the same verdicts and codes as the
scenario expects, and, line for line, the audit trail the Rust component and native core
recorded (`tests/corpus/trails/`): the host-differential check (docs/corpus.md)."""

import pytest

import corpus_runner as cr

SCENARIOS = cr.scenarios()


def test_the_corpus_is_all_there():
    assert len(SCENARIOS) >= 75


@pytest.mark.parametrize("file,scenario", SCENARIOS, ids=[f for f, _ in SCENARIOS])
def test_scenario(file, scenario):
    failure, lines = cr.run(scenario)
    assert failure is None, f"{file}: {failure}"
    got = "".join(line + "\n" for line in lines)
    want = cr.recorded_trail(file)
    if got != want:
        at = next((i for i, (a, b) in enumerate(zip(want.splitlines(), got.splitlines())) if a != b), None)
        pytest.fail(f"{file}: the trail differs from the recorded one at line {(at or 0) + 1}")
