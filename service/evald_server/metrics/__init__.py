"""Prometheus metrics: counters fed by committed outcomes, gauges read at scrape time,
served on an optional loopback port."""

from evald_server.metrics._endpoint import metrics_endpoint
from evald_server.metrics._outcomes import OutcomeMetrics
from evald_server.metrics._state import StateCollector

__all__ = ["OutcomeMetrics", "StateCollector", "metrics_endpoint"]
