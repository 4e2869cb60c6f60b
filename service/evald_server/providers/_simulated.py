"""The ``simulated`` provider: a stand-in model for the embedded demo and load tests.

This is a SIMULATOR, not a language model. It never looks at the prompt's meaning:
the engine passes the record's answer in ``ProviderRequest.reference`` as
``{"expected": str, "distractors": [str, ...]}`` and the simulator returns
``expected`` with probability ``simulator.accuracy``, otherwise one of the
distractors (or, without any, a perturbed ``expected``), after a log-normal latency
(median ``latency_ms_median``, shape ``latency_sigma``).

Determinism: every draw is a blake2b hash of ``(simulator.seed, model id, request_key,
purpose)``, never Python's per-process randomised ``hash()``, so the same config and
subtask give the same answer and latency in any process.

Faults: with ``fault_rate`` a call raises a transient PROVIDER_HTTP_5XX. The fault
draw also hashes the number of faults this instance has already raised for the
``request_key`` (``request_key`` names the subtask, not the attempt), so a retry gets
a fresh draw and a faulted subtask succeeds eventually. Only keys currently in a
faulted streak are remembered, so memory stays flat for large runs; after a restart
the streak count starts again at zero (the same fault may repeat once).
"""

import contextlib
import hashlib
import math
import time
from collections.abc import Mapping, Sequence
from statistics import NormalDist
from typing import Any

import anyio
import anyio.lowlevel

from evald_server.config import ModelConfig
from evald_server.domain import ErrorReason, NotAToolAnswer, ToolCall, decode_tool_answer
from evald_server.providers._answer_bounds import AnswerBounds, checked_text, checked_usage
from evald_server.providers._base import (
    Completion,
    ProviderFailure,
    ProviderRequest,
    RetryDecision,
    RetryKind,
)

# The simulated time to first token, as a share of the call's latency.
TTFT_SHARE = 0.3

_UNIT = NormalDist()
_TWO_64 = float(1 << 64)


class SimulatedProvider:
    """Answers from the reference with a configured accuracy (see the module docstring)."""

    wants_reference = True

    def __init__(self, model: ModelConfig) -> None:
        self._model_id = model.id
        self._settings = model.simulator
        self._bounds = AnswerBounds.of(model)
        self._fault_streaks: dict[str, int] = {}

    def __repr__(self) -> str:
        s = self._settings
        return (
            f"SimulatedProvider(model_id={self._model_id!r}, accuracy={s.accuracy:g}, "
            f"latency_ms_median={s.latency_ms_median:g}, fault_rate={s.fault_rate:g})"
        )

    async def complete(self, request: ProviderRequest) -> Completion:
        key = request.request_key
        started = time.perf_counter()
        delay_s = self.latency_s(key)
        if delay_s > 0:
            await anyio.sleep(delay_s)
        else:
            await anyio.lowlevel.checkpoint()  # stay cancellable even at zero latency
        latency_s = time.perf_counter() - started
        if self._draw_fault(key):
            raise ProviderFailure(
                ErrorReason.PROVIDER_HTTP_5XX,
                "simulated provider fault (HTTP 503)",
                RetryDecision(RetryKind.TRANSIENT),
                http_status=503,
                latency_s=latency_s,
            )
        # The reference is a dataset's text: it passes the same bounds as a provider's.
        text, text_flags = checked_text(self.answer(key, request.reference))
        calls: tuple[ToolCall, ...] = ()
        if request.tools is not None:  # a tool-call record: its answers are stored calls
            with contextlib.suppress(NotAToolAnswer):  # a perturbed answer: text, no call
                text, calls = decode_tool_answer(text)
        words = text.split()
        prompt_words = sum(len(m.content.split()) for m in request.messages)
        usage = checked_usage(
            {"prompt_tokens": prompt_words, "completion_tokens": len(words)}, self._bounds
        )
        return Completion(
            text=text,
            latency_s=latency_s,
            ttft_s=latency_s * TTFT_SHARE,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            # A simulator, not a model: its answer's first word is its only alternative.
            top_logprobs=((words[0], math.log(0.9)),)
            if request.top_logprobs is not None and words
            else None,
            finish_reason="stop",
            flags=usage.flags + text_flags,
            tool_calls=calls,
        )

    async def aclose(self) -> None:
        """Nothing to release: the simulator holds no connections."""

    def answer(self, request_key: str, reference: Mapping[str, Any]) -> str:
        """The (deterministic) text this simulator answers for ``request_key``."""
        expected = reference.get("expected")
        if expected is None:
            # Nothing to be right about: a stable placeholder, always "wrong".
            return f"simulated answer {self._uniform(request_key, 'text'):.6f}"
        if not isinstance(expected, str):
            raise ValueError(f"reference['expected'] must be a string, got {type(expected)}")
        if self._uniform(request_key, "correct") < self._settings.accuracy:
            return expected
        distractors = _distractors(reference.get("distractors", ()), expected)
        pick = self._uniform(request_key, "wrong")
        if distractors:
            return distractors[min(int(pick * len(distractors)), len(distractors) - 1)]
        return perturb(expected, pick)

    def latency_s(self, request_key: str) -> float:
        """Log-normal: ``median * exp(sigma * z)`` with z drawn from the key."""
        median_s = self._settings.latency_ms_median / 1000.0
        if median_s <= 0:
            return 0.0
        z = _UNIT.inv_cdf(self._uniform(request_key, "latency"))
        return median_s * math.exp(self._settings.latency_sigma * z)

    def _draw_fault(self, key: str) -> bool:
        rate = self._settings.fault_rate
        if rate <= 0:
            return False
        streak = self._fault_streaks.get(key, 0)
        if self._uniform(key, f"fault:{streak}") < rate:
            self._fault_streaks[key] = streak + 1
            return True
        self._fault_streaks.pop(key, None)
        return False

    def _uniform(self, request_key: str, purpose: str) -> float:
        """A uniform draw in the open interval (0, 1), stable across processes."""
        digest = hashlib.blake2b(
            f"{self._settings.seed}\x1f{self._model_id}\x1f{request_key}\x1f{purpose}".encode(),
            digest_size=8,
        ).digest()
        return (int.from_bytes(digest, "big") + 0.5) / _TWO_64


def _distractors(raw: object, expected: str) -> list[str]:
    if isinstance(raw, str) or not isinstance(raw, Sequence):
        raise ValueError("reference['distractors'] must be a list of strings")
    if not all(isinstance(item, str) for item in raw):
        raise ValueError("reference['distractors'] must be a list of strings")
    # A distractor equal to the answer would silently raise the simulated accuracy.
    return [item for item in raw if item != expected]


def perturb(expected: str, pick: float) -> str:
    """A plausibly wrong variant of ``expected``, always different from it.

    Several words: drop one content word (longer than three letters, so not an
    article that answer normalisation would ignore anyway). Otherwise negate it.
    """
    words = expected.split()
    candidates = [i for i, word in enumerate(words) if len(word) > 3]
    if len(words) >= 2 and candidates:
        drop = candidates[min(int(pick * len(candidates)), len(candidates) - 1)]
        return " ".join(word for i, word in enumerate(words) if i != drop)
    return f"not {expected}" if expected.strip() else "unknown"
