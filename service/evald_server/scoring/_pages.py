"""Samples on their way to a scoring worker, one page at a time, in their stored form.

A task's samples reach the scoring pool as a ``SampleSource``: pages read from the
store one after the other, each sent to the worker as soon as it is read, so the server
never holds more than a page of them. A page keeps each record as the JSON text the
store holds (the worker decodes it: a decoded record costs several times its text), and
the repeats of a record share one text object (pickle writes it once per page).
"""

import json
from collections.abc import AsyncIterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from evald_server.scoring._compact import Compactor
from evald_server.scoring._types import ScoringSample


class EncodedSample(NamedTuple):
    """A ``ScoringSample`` with its record still as the stored JSON object text."""

    subtask_id: str
    record_id: str
    repeat_index: int
    record_json: str
    output: str | None  # None: the subtask did not succeed, counted as skipped
    top_logprobs: tuple[tuple[str, float], ...] | None = None  # when the run asked for them
    execution: str | None = None  # a code sample's run in the sandbox (JSON text)


@dataclass(frozen=True, slots=True)
class EncodedPage:
    samples: tuple[EncodedSample, ...]


SampleSource = AsyncIterable[EncodedPage]
"""A task's samples, page by page, in order (iterated once)."""


class PageDecoder:
    """Turns pages back into ``ScoringSample``s; one per task, in the worker.

    A record's text is decoded once for the run of samples that share it (the repeats
    of one record are adjacent), and equal small values are shared across records.
    """

    def __init__(self) -> None:
        self._compact = Compactor()
        self._text: str | None = None
        self._record: Any = None

    def decode(self, page: EncodedPage) -> list[ScoringSample]:
        samples = []
        for subtask_id, record_id, repeat_index, text, output, top_logprobs, run in page.samples:
            if text is not self._text:
                record = json.loads(text)
                if not isinstance(record, dict):
                    raise ValueError(f"record {record_id!r} is not a JSON object")
                self._text, self._record = text, self._compact.value(record)
            samples.append(
                ScoringSample(
                    subtask_id,
                    record_id,
                    repeat_index,
                    self._record,
                    self._compact.value(output),
                    top_logprobs=top_logprobs,
                    execution=None if run is None else json.loads(run),
                )
            )
        return samples


async def read_samples(source: SampleSource) -> list[ScoringSample]:
    """Every sample of ``source``, decoded here (for scoring in this process)."""
    decoder = PageDecoder()
    samples: list[ScoringSample] = []
    async for page in source:
        samples.extend(decoder.decode(page))
    return samples
