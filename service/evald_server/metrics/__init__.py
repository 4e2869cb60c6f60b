"""Prometheus metrics: counters fed by committed outcomes, gauges read at scrape time,
served on an optional loopback port."""

from evald_server.metrics._endpoint import metrics_endpoint

__all__ = ["metrics_endpoint"]
