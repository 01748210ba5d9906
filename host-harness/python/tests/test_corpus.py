"""Every corpus scenario through the Python package: the verdicts and codes the scenario
expects and, line for line, the transcript (every call's whole outcome) and the audit trail
the Rust component and native core recorded (`tests/corpus/transcripts/`, `trails/`): the
host-differential check (docs/corpus.md)."""

import pytest

import corpus_runner as cr

SCENARIOS = cr.scenarios()


def test_the_corpus_is_all_there():
    assert len(SCENARIOS) >= 75


def _first_difference(want: str, got: str) -> int:
    a, b = want.splitlines(), got.splitlines()
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b))) + 1


@pytest.mark.parametrize("file,scenario", SCENARIOS, ids=[f for f, _ in SCENARIOS])
def test_scenario(file, scenario):
    failure, lines, transcript = cr.run(scenario)
    assert failure is None, f"{file}: {failure}"
    for kind, got in (("transcripts", transcript), ("trails", lines)):
        text = "".join(line + "\n" for line in got)
        want = cr.recorded(kind, file)
        if text != want:
            pytest.fail(f"{file}: the {kind[:-1]} differs from the recorded one at line {_first_difference(want, text)}")
