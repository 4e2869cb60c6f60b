"""Counters and histograms fed by committed outcomes (one engine hook, no polling).

Labels are the operator's model ids, outcome kinds and error reasons — all bounded by
the server's config and the contract's enums. Never a run id, a tenant, a dataset name
or anything a client sent."""

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram

from evald_server.domain import OutcomeKind
from evald_server.store import SubtaskOutcome

# Provider calls last from milliseconds (a local vLLM) to minutes (a long generation).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
_OUTCOME = {
    OutcomeKind.SUCCEEDED: "succeeded",
    OutcomeKind.RETRY: "transient_error",
    OutcomeKind.FAILED_PERMANENT: "permanent_error",
    OutcomeKind.CANCELLED: "cancelled",
}


class OutcomeMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.calls = Counter(
            "evald_provider_calls",
            "Provider calls by model and outcome (a cancelled call was aborted in flight).",
            ["model", "outcome"],
            registry=registry,
        )
        self.duration = Histogram(
            "evald_provider_call_duration_seconds",
            "Duration of provider calls that returned (an answer or an error).",
            ["model"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.retries = Counter(
            "evald_provider_retries_scheduled",
            "Failed calls scheduled for a retry.",
            ["model"],
            registry=registry,
        )
        self.rate_limited = Counter(
            "evald_provider_rate_limited",
            "Calls the provider answered as rate-limited.",
            ["model"],
            registry=registry,
        )
        self.errors = Counter(
            "evald_provider_errors",
            "Failed calls by model and error reason (an evald.v1 ErrorReason name).",
            ["model", "reason"],
            registry=registry,
        )
        self.tokens = Counter(
            "evald_provider_tokens",
            "Tokens of successful calls, as the provider reported them.",
            ["model", "kind"],
            registry=registry,
        )

    def observe(self, batch: Sequence[SubtaskOutcome]) -> None:
        """Count one committed batch (called by the engine after its transaction)."""
        for outcome in batch:
            outcome_label = _OUTCOME.get(outcome.kind)
            if not outcome.attempted or outcome_label is None:
                continue  # released by a drain: no call was made
            model = outcome.model_id
            self.calls.labels(model, outcome_label).inc()
            if outcome.kind is not OutcomeKind.CANCELLED:
                self.duration.labels(model).observe(outcome.call_time_s)
            if outcome.kind is OutcomeKind.RETRY:
                self.retries.labels(model).inc()
            if outcome.rate_limited:
                self.rate_limited.labels(model).inc()
            if outcome.error is not None and outcome.kind is not OutcomeKind.CANCELLED:
                self.errors.labels(model, outcome.error.reason.name).inc()
            if outcome.kind is OutcomeKind.SUCCEEDED:
                self.tokens.labels(model, "prompt").inc(outcome.prompt_tokens or 0)
                self.tokens.labels(model, "completion").inc(outcome.completion_tokens or 0)
