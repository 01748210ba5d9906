"""The Python package's `shown_text` against the vectors the Rust and JavaScript ones are held
to (tests/screen/shown_text.json): every code point, every case, and random hostile strings."""

import json
import random
from pathlib import Path

import pytest

from mrtr_gate import shown_json, shown_lines, shown_text
from mrtr_gate.shown import ESCAPED, hidden_or_control

VECTORS = json.loads((Path(__file__).parents[3] / "tests" / "screen" / "shown_text.json").read_text(encoding="utf-8"))
RANGES = [(int(a, 16), int(b, 16)) for a, b, *_ in VECTORS["escaped"]]


@pytest.fixture(autouse=True)
def engine():
    """No gate here: one run, not one per engine."""
    yield None


def test_the_table_is_the_shared_one_and_every_code_point_follows_it():
    assert sorted(ESCAPED) == sorted(RANGES)
    for c in range(0x110000):
        listed = any(a <= c <= b for a, b in RANGES)
        shown = shown_text(chr(c))
        if listed:
            assert shown == f"\\u{{{c:04x}}}", hex(c)
        elif c != 0x5C:
            assert shown == chr(c), hex(c)


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda c: c["name"])
def test_each_shared_case(case):
    assert shown_text(case["text"]) == case["shown"]


def unshown(shown):
    out, i = [], 0
    while i < len(shown):
        if shown.startswith("\\\\", i):
            out.append("\\")
            i += 2
        elif shown.startswith("\\u{", i):
            end = shown.index("}", i)
            out.append(chr(int(shown[i + 3:end], 16)))
            i = end + 1
        else:
            out.append(shown[i])
            i += 1
    return "".join(out)


def test_hostile_strings_never_reach_the_screen_raw_and_read_back_exactly():
    alphabet = [chr(x) for a, b in RANGES for x in (a, b, max(a - 1, 0), b + 1, (a + b) // 2)] + list("\\u{}ab 名😀\x1b[")
    rng = random.Random(23)
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(24)))
        shown = shown_text(text)
        assert not any(hidden_or_control(c) for c in shown), repr(text)
        assert unshown(shown) == text
        assert not any(c != "\n" and hidden_or_control(c) for c in shown_lines(text))
        assert not any(hidden_or_control(c) for c in shown_json({"k": [text]}))


def test_lone_surrogates_are_shown_escaped():
    assert shown_text("a\ud800b\udfff") == "a\\u{d800}b\\u{dfff}"


def test_json_keeps_its_own_escapes():
    assert shown_json({"a\u202e": ["x\ny", "\u009b2J", "\\"]}) == '{"a\\u{202e}":["x\\ny","\\u{009b}2J","\\\\"]}'
