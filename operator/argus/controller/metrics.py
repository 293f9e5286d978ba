"""Prometheus metrics (docs/metrics.md lists them). Served by ``--metrics-port``."""

from __future__ import annotations

import datetime as dt
from collections import Counter as _Count
from typing import Iterable

from prometheus_client import Counter, Gauge, Histogram

from ..core.spec import Phase

TASKS = Gauge("argus_tasks", "ArgusTasks by phase", ["phase"])
QUEUE_LENGTH = Gauge("argus_queue_length", "ArgusTasks waiting in the queue")
SUBMIT_LATENCY = Histogram("argus_submit_latency_seconds", "Time from task creation to its Ray submission",
                           buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400))
RAY_ERRORS = Counter("argus_ray_api_errors_total", "Ray API calls that failed", ["operation"])
RAY_CALLS = Counter("argus_ray_api_calls_total", "Ray API calls made")
RECONCILE_ERRORS = Counter("argus_reconcile_errors_total", "Reconcile ticks or handlers that failed unexpectedly")
ADMISSION_PASS = Gauge("argus_admission_pass_seconds", "Duration of the last admission pass over the queue (capacity read + queue decision)")

# Every known operation is exported from the start (at 0), so that rate()/increase() alerts
# see a series before the first error.
RAY_OPERATIONS = ("capacity", "submit", "status", "stop", "lost")
for _operation in RAY_OPERATIONS:
    RAY_ERRORS.labels(_operation)


def observe_phases(views: Iterable[object]) -> None:
    counts = _Count(getattr(v, "phase", None) or "New" for v in views)
    for phase in [p.value for p in Phase] + ["New"]:
        TASKS.labels(phase).set(counts.get(phase, 0))
    QUEUE_LENGTH.set(counts.get(Phase.Queued.value, 0))


def observe_submit_latency(created: str) -> None:
    try:
        t0 = dt.datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return
    SUBMIT_LATENCY.observe(max(0.0, (dt.datetime.now(dt.timezone.utc) - t0).total_seconds()))
