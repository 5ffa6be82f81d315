"""Prometheus metric families, built one way for every room that shows numbers on /metrics.

Owns: making a gauge, a counter or a histogram family from a name, a help
text and either one value or its samples by label values. Must not read any
state nor know a metric's name: the callers (server/web/metrics.py, the
cluster's replication/cluster_metrics.py, the router's route/router.py) read
their numbers at scrape time and hand them over.

A sample's key is its label values in the order of `labels`: one string for
one label, a tuple for more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

Key = str | tuple[str, ...]
# Any: a mapping's key type is invariant, and callers keep theirs (str, or tuples).
Samples = Mapping[Any, float]
# A histogram's sample: its cumulative buckets (upper bound, count) and its sum.
Buckets = tuple[Sequence[tuple[str, float]], float]


def _values(key: Key) -> list[str]:
    return [key] if isinstance(key, str) else list(key)


def _family(
    kind: type[GaugeMetricFamily] | type[CounterMetricFamily],
    name: str,
    doc: str,
    value: float | None = None,
    labels: Sequence[str] = (),
    samples: Samples | None = None,
) -> Metric:
    if not labels:
        return kind(name, doc, value=value)
    family = kind(name, doc, labels=labels)
    for key, sample in (samples or {}).items():
        family.add_metric(_values(key), sample)
    return family


# gauge(name, doc, value) or gauge(name, doc, labels=[...], samples={key: value}); counter alike.
gauge = partial(_family, GaugeMetricFamily)
counter = partial(_family, CounterMetricFamily)


def histogram(name: str, doc: str, labels: Sequence[str], samples: Mapping[Any, Buckets]) -> Metric:
    """A histogram: one series per key of `samples` (label values)."""
    family = HistogramMetricFamily(name, doc, labels=labels)
    for key, (buckets, total) in samples.items():
        family.add_metric(_values(key), list(buckets), total)
    return family
