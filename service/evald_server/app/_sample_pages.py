"""ListSamples pages bounded by bytes, so that every stored row stays readable.

A page holds at most ``page_size`` rows *and* at most ``SampleBudget.page_bytes`` of
text, well under the gRPC message limit; it always holds at least one row. A text
field longer than ``SampleBudget.field_bytes`` (the rendered input, the expected
answer, the output) is cut at a UTF-8 boundary and named in ``Sample.truncated`` with
its full size, so a row too large for one message is still listed, never an error.
The output is cut inside SQLite already (``output_chars``): a huge answer is never
read whole for a listing.
"""

from dataclasses import dataclass, replace

from evald_server.app._types import Sample

# Room left in a message for everything that is not row text (field tags, the token).
HEADROOM_BYTES = 64 * 1024
# What a row costs besides its texts: ids, state, scores, errors, timestamps (errors
# carry at most a few hundred bytes of message).
ROW_OVERHEAD_BYTES = 2048


@dataclass(frozen=True, slots=True)
class SampleBudget:
    page_bytes: int
    field_bytes: int

    @classmethod
    def for_message_limit(cls, max_message_bytes: int) -> "SampleBudget":
        page = max(4 * ROW_OVERHEAD_BYTES, max_message_bytes - HEADROOM_BYTES)
        # Three cut fields and the overhead of one row always fit a page together.
        return cls(page_bytes=page, field_bytes=max(256, (page - ROW_OVERHEAD_BYTES) // 3))

    @property
    def output_chars(self) -> int:
        """Characters of output to read: enough for ``field_bytes`` of any UTF-8 text."""
        return self.field_bytes + 1


def cut_utf8(text: str, limit: int) -> tuple[str, int | None]:
    """``text`` within ``limit`` UTF-8 bytes, and its full size when it had to be cut."""
    if len(text) * 4 <= limit:  # cheap: no character is longer than 4 bytes
        return text, None
    encoded = text.encode()
    if len(encoded) <= limit:
        return text, None
    return encoded[:limit].decode(errors="ignore"), len(encoded)


def fitted(sample: Sample, budget: SampleBudget, output_bytes: int | None) -> Sample:
    """The sample with each oversize text field cut; ``output_bytes`` is the stored
    output's full size when the read already cut it."""
    truncated: dict[str, int] = {}
    text_input, full = cut_utf8(sample.input, budget.field_bytes)
    if full is not None:
        truncated["input"] = full
    expected, full = cut_utf8(sample.expected, budget.field_bytes)
    if full is not None:
        truncated["expected"] = full
    output = sample.output
    if output is not None:
        output, full = cut_utf8(output, budget.field_bytes)
        if output_bytes is not None and output_bytes > len(output.encode()):
            full = output_bytes
        if full is not None:
            truncated["output"] = full
    if not truncated:
        return sample
    return replace(
        sample,
        input=text_input,
        expected=expected,
        output=output,
        truncated={**sample.truncated, **truncated},
    )


def cost(sample: Sample) -> int:
    """An upper bound of the row's serialized size."""
    texts = (sample.input, sample.expected, sample.output or "")
    return ROW_OVERHEAD_BYTES + sum(len(t.encode()) for t in texts)
