"""Gauges read at scrape time: the limiters' slots, and runs / tasks / subtasks by state
from the store. Nothing is kept up to date between scrapes."""

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from evald_server.engine import MODEL_LIMIT, RUN_LIMIT, SERVER_LIMIT, LimitStats
from evald_server.store import StateCounts

_LIMIT_KIND = {SERVER_LIMIT: "server", MODEL_LIMIT: "model", RUN_LIMIT: "run"}


class StateCollector(Collector):
    """``refresh`` (async, before each scrape) reads the store; ``collect`` reports."""

    def __init__(self, limiter_stats: Callable[[], list[LimitStats]]) -> None:
        self._limiter_stats = limiter_stats
        self._counts = StateCounts(runs={}, tasks={}, subtasks={})

    def refresh(self, counts: StateCounts) -> None:
        self._counts = counts

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["limit", "model"]
        capacity = GaugeMetricFamily(
            "evald_limit_capacity", "Slots of each concurrency limit (runs: summed).", labels=labels
        )
        in_use = GaugeMetricFamily(
            "evald_limit_in_use", "Slots held by calls in flight (runs: summed).", labels=labels
        )
        waiting = GaugeMetricFamily(
            "evald_limit_waiting", "Calls waiting for a slot (runs: summed).", labels=labels
        )
        # Run limits are summed: a run id is per-tenant data and unbounded as a label.
        totals: dict[tuple[str, str], list[int]] = {("run", ""): [0, 0, 0]}
        for stats in self._limiter_stats():
            kind = _LIMIT_KIND.get(stats.name, stats.name)
            key = (kind, stats.key if kind == "model" else "")
            row = totals.setdefault(key, [0, 0, 0])
            row[0] += stats.capacity
            row[1] += stats.in_use
            row[2] += stats.waiting
        for key, (slots, used, queued) in sorted(totals.items()):
            capacity.add_metric(list(key), slots)
            in_use.add_metric(list(key), used)
            waiting.add_metric(list(key), queued)
        yield from (capacity, in_use, waiting)
        for name, help_text, counts in (
            ("evald_runs", "Runs by state.", self._counts.runs),
            (
                "evald_tasks",
                "Tasks by state (state scoring: the scoring queue).",
                self._counts.tasks,
            ),
            ("evald_subtasks", "Subtasks by state.", self._counts.subtasks),
        ):
            family = GaugeMetricFamily(name, help_text, labels=["state"])
            for state, count in sorted(counts.items()):
                family.add_metric([state], count)
            yield family
