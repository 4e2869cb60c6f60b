"""Remove API keys from text a provider sent back before evald stores, logs or returns it.

A gateway may echo what it was sent: the whole key, a lower-cased copy, or a piece cut
by its own truncation. ``SecretScrubber`` therefore replaces, case-insensitively, every
run of ``MIN_FRAGMENT`` or more characters that also occurs in a configured key, and the
value of any ``Bearer …`` or ``api-key`` header echoed in the text (whatever key it
carries). Scrub whole texts *before* cutting them: a cut can split a key in two, and a
prefix shorter than the fragment length would then be left behind.
"""

import re
from collections.abc import Iterable

MIN_FRAGMENT = 8
REDACTED = "<redacted>"

# The value after "Bearer" or after an api-key header name, up to a delimiter.
_HEADER_VALUES = re.compile(
    r"""(?P<label>\bbearer\s+|\b(?:x-)?api[-_ ]?key["']?\s*[:=]\s*["']?)(?P<value>[^\s"',;&<>]+)""",
    re.IGNORECASE,
)


class SecretScrubber:
    """Replaces fragments of the given secrets and echoed auth header values in text."""

    __slots__ = ("_fragments",)

    def __init__(self, secrets: Iterable[str]) -> None:
        grams = {
            secret[i : i + MIN_FRAGMENT].lower()
            for secret in secrets
            for i in range(len(secret) - MIN_FRAGMENT + 1)
        }
        # A lookahead matches at every position, so overlapping windows are all found;
        # the windows of one echoed fragment then merge into a single redaction.
        self._fragments = (
            re.compile(
                "(?=(?:" + "|".join(re.escape(g) for g in sorted(grams)) + "))", re.IGNORECASE
            )
            if grams
            else None
        )

    def __repr__(self) -> str:
        return "SecretScrubber(<redacted>)"

    def __call__(self, text: str) -> str:
        if self._fragments is not None:
            text = self._without_fragments(text)
        return _HEADER_VALUES.sub(_redact_value, text)

    def _without_fragments(self, text: str) -> str:
        assert self._fragments is not None
        spans: list[list[int]] = []
        for match in self._fragments.finditer(text):
            start = match.start()
            if spans and start <= spans[-1][1]:
                spans[-1][1] = start + MIN_FRAGMENT
            else:
                spans.append([start, start + MIN_FRAGMENT])
        if not spans:
            return text
        pieces: list[str] = []
        previous = 0
        for start, end in spans:
            pieces += (text[previous:start], REDACTED)
            previous = end
        pieces.append(text[previous:])
        return "".join(pieces)


def _redact_value(match: re.Match[str]) -> str:
    value = match.group("value")
    if value == REDACTED or value.startswith(REDACTED):
        return match.group(0)
    return match.group("label") + REDACTED
