"""The canonical JSON text (RFC 8785, JCS) of the answers a retry carries, and its SHA-256:
what the gate binds consent to (`responses_sha256`). Held to the gate's own function by the
vectors in tests/canonical/responses_vectors.json."""

from __future__ import annotations

import hashlib
import json
import math
from decimal import Decimal
from typing import Any, Mapping, Union


def _number(value: float) -> str:
    """A float as ECMAScript's Number#toString writes it (JCS's number format)."""
    if not math.isfinite(value):
        raise ValueError("answers may not hold NaN or an infinity")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    # repr is the shortest text that reads back to the same double: its digits are JCS's.
    digits_tuple = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, digits_tuple.digits))
    k = len(digits)
    n = int(digits_tuple.exponent) + k
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        text = f"{mantissa}e{'+' if e > 0 else '-'}{abs(e)}"
    return sign + text


def canonical(value: Any) -> str:
    """The JCS text of a JSON value (dict keys sorted by their UTF-16 code units)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        keys = sorted(value, key=lambda k: k.encode("utf-16-be"))
        for k in keys:
            if not isinstance(k, str):
                raise ValueError("object keys must be strings")
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + canonical(value[k]) for k in keys) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(canonical(v) for v in value) + "]"
    raise ValueError(f"not a JSON value: {type(value).__name__}")


def _no_duplicates(pairs: list) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"the key `{k}` appears twice")
        out[k] = v
    return out


def responses_sha256(responses: Union[str, Mapping[str, Any]]) -> str:
    """The SHA-256 (lowercase hex) of the canonical text of `inputResponses`: a mapping, or the
    JSON text the host will pass to `build_retry` (an object without duplicate keys)."""
    if isinstance(responses, str):
        value = json.loads(responses, object_pairs_hook=_no_duplicates)
    else:
        value = responses
    if not isinstance(value, Mapping):
        raise ValueError("`inputResponses` must be an object")
    return hashlib.sha256(canonical(value).encode("utf-8")).hexdigest()
