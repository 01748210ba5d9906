"""Server text as a screen shows it. Whatever a server writes (a message, a title, an option,
a URL, an error, a line on its stderr) reaches a person only through `shown_text` (or
`shown_json` for a JSON value): a control character could move the cursor, clear or repaint
the screen or hide a hyperlink (ANSI/OSC sequences), a bidi control could reorder the text
around it, an invisible character could make two strings look alike. Each is written visibly
as ``\\u{h}`` (lowercase hex, at least four digits) instead, and a backslash as two, so the
rendering is exact and cannot be faked.

The same rules as the Rust host's ``mrtr_gate_host::shown`` and the JavaScript package's
``mrtr-gate/shown``; the three are held to one set of vectors, tests/screen/shown_text.json.

    from mrtr_gate.shown import shown_text
    print(f"  {shown_text(view['inputs'][0]['message'])}")
"""

import json
from typing import Any

__all__ = ["ESCAPED", "hidden_or_control", "shown_text", "shown_json", "shown_lines"]

# Inclusive code point ranges shown escaped; the reason for each is in
# tests/screen/shown_text.json. Lone surrogates are here because a Python string can hold one.
ESCAPED: tuple[tuple[int, int], ...] = (
    (0x0000, 0x001F), (0x007F, 0x009F), (0x00AD, 0x00AD), (0x034F, 0x034F),
    (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD), (0x070F, 0x070F),
    (0x0890, 0x0891), (0x08E2, 0x08E2), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x2028, 0x202E), (0x2060, 0x206F),
    (0x3164, 0x3164), (0xD800, 0xDFFF), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD),
    (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)

# One translation table for str.translate: every escaped code point to its rendering.
_TABLE = {c: f"\\u{{{c:04x}}}" for a, b in ESCAPED for c in range(a, b + 1)}
_TEXT_TABLE = {**_TABLE, ord("\\"): "\\\\"}


def hidden_or_control(c: str) -> bool:
    """True for a character a screen must not show as it is."""
    return ord(c) in _TABLE


def shown_text(text: str) -> str:
    """`text` as a screen shows it: a backslash as two, every escaped character as
    ``\\u{h}``, the rest as it is. Newlines included: a server's text is one line."""
    return text.translate(_TEXT_TABLE)


def shown_json(value: Any) -> str:
    """A JSON value as a screen shows it: compact JSON text (non-ASCII kept) with every
    escaped character that JSON leaves raw written as ``\\u{h}``. Backslashes are not
    doubled: in JSON text they only start JSON's own escapes."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.translate(_TABLE)


def shown_lines(text: str) -> str:
    """Text of several lines as a screen shows it: each line through `shown_text`, the line
    breaks (``\\n``, and ``\\r\\n`` as one) kept."""
    return "\n".join(shown_text(line.removesuffix("\r")) for line in text.split("\n"))
