"""A sample its scorer cannot score is a failure domain of its own, not its task's.

A scoring job that raises is probed again on halves of its samples, down to the
samples that raise alone (``without_unscorable``); the job is then done without them
and they come back as ``UnscorableSample``s (the task scorer flags them ``unscorable``
and names them in the task's errors, which makes the task partial). When the job
still raises without them, when no sample raises alone (the failure is the scorer's
on the whole, not one row's), when every sample does, or when more than
``MAX_UNSCORABLE_SHARE`` of the samples raise alone (a broken scorer, not bad rows),
the job fails as it did: the original error, for the whole task.

The probe is the job's own work made cheap where it can be (a whole task's report with
one bootstrap resample), so that probing costs about as much as the job did once or
twice, whatever the number of samples: a bad sample costs log2(n) probes.
"""

from collections.abc import Callable, Sequence
from typing import TypeVar

from evald_server.scoring._types import ScoringSample, UnscorableSample

MAX_UNSCORABLE_SHARE = 0.1  # of a job's samples, at least one
UNSCORABLE_FLAG = "unscorable"
_ERROR_CHARS = 200

R = TypeVar("R")
S = TypeVar("S", bound=ScoringSample)


def without_unscorable(
    samples: Sequence[S],
    attempt: Callable[[Sequence[S]], R],
    probe: Callable[[Sequence[S]], object] | None = None,
) -> tuple[R, tuple[UnscorableSample, ...]]:
    """``attempt(samples)``, or ``attempt`` of the samples without those on which
    ``probe`` (default: ``attempt``) raises alone, and those samples; re-raises the
    attempt's error when the failure is not a few samples' (module docstring)."""
    try:
        return attempt(samples), ()
    except Exception:
        found = _raising_alone(samples, probe or attempt)
        if not found or len(found) == len(samples):
            raise
    dropped = {index for index, _ in found}
    kept = [sample for index, sample in enumerate(samples) if index not in dropped]
    unscorable = tuple(
        UnscorableSample(samples[i].subtask_id, samples[i].record_id, _describe(exc))
        for i, exc in found
    )
    return attempt(kept), unscorable


def _raising_alone(
    samples: Sequence[S], probe: Callable[[Sequence[S]], object]
) -> list[tuple[int, Exception]]:
    """(index, error) of the samples ``probe`` raises on alone, in sample order; [] when
    there are more than the share allows (or none)."""
    limit = max(1, int(len(samples) * MAX_UNSCORABLE_SHARE))
    found: list[tuple[int, Exception]] = []
    ranges = [(0, len(samples))]  # a stack: every range is split at most once
    while ranges:
        start, end = ranges.pop()
        try:
            probe(samples[start:end])
            continue
        except Exception as exc:
            if end - start == 1:
                found.append((start, exc))
                if len(found) > limit:
                    return []
                continue
        middle = (start + end) // 2
        ranges += [(middle, end), (start, middle)]
    return sorted(found, key=lambda pair: pair[0])


def _describe(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    text = text if len(text) <= _ERROR_CHARS else f"{text[: _ERROR_CHARS - 1]}…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
