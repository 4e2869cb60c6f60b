"""Numbers in free text, GSM8K style (``#### 42``), shared by validation and prompts."""

import re

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")
_GSM8K_ANSWER = re.compile(r"####\s*(\S+)")


def _to_float(token: str) -> float | None:
    try:
        return float(token.replace(",", ""))
    except ValueError:
        return None


def last_number(text: str) -> float | None:
    """The last number written in ``text`` (thousands separators allowed), or None."""
    matches = _NUMBER.findall(text)
    return _to_float(matches[-1]) if matches else None


def reference_number(reference: str) -> float | None:
    """The number a reference stands for: after ``####`` when present, else its last number."""
    gsm8k = _GSM8K_ANSWER.search(reference)
    if gsm8k is not None:
        return last_number(gsm8k.group(1))
    return last_number(reference)
