"""Prometheus metrics (docs/metrics.md lists them). Served by ``--metrics-port``."""

from __future__ import annotations

import time
from collections import Counter as _Count
from typing import Iterable

from prometheus_client import Counter, Gauge, Histogram

from ..core.spec import Phase
from ..core.times import parse_time, utcnow

TASKS = Gauge("argus_tasks", "ArgusTasks by phase", ["phase"])
QUEUE_LENGTH = Gauge("argus_queue_length", "ArgusTasks waiting in the queue")
SUBMIT_LATENCY = Histogram("argus_submit_latency_seconds", "Time from task creation to its Ray submission",
                           buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400))
RAY_CALLS = Counter("argus_ray_api_calls_total", "Ray API calls made, by operation", ["operation"])
RAY_ERRORS = Counter("argus_ray_api_errors_total", "Ray API calls that failed (Ray unreachable or refusing), by operation", ["operation"])
JOBS_LOST = Counter("argus_ray_jobs_lost_total", "Submitted jobs Ray no longer knows (a head restart): tasks Failed/RayJobLost")
RECONCILE_ERRORS = Counter("argus_reconcile_errors_total", "Reconcile ticks that failed unexpectedly")
ADMISSION_PASS = Gauge("argus_admission_pass_seconds", "Duration of the last admission pass over the queue (capacity read + queue decision)")

USER_GPUS = Gauge("argus_user_gpus_in_use", "GPUs held by a user's running tasks (Submitted or Running)", ["user"])
USER_QUEUED = Gauge("argus_user_tasks_queued", "A user's tasks waiting in the queue", ["user"])
USER_QUOTA = Gauge("argus_user_gpu_quota", "A user's GPU quota (absent: none)", ["user"])
USER_GPU_SECONDS = Counter("argus_user_gpu_seconds_total", "GPU-seconds a user's tasks have held (summed at each admission pass)", ["user"])
_last_usage: dict[str, float] = {}  # monotonic time of the last GPU-seconds count, per user
_known_users: set[str] = set()      # users seen by an admission pass (their gauges go to 0, not away)

# Every operation is exported from the start (at 0), so that rate()/increase() alerts see a
# series before the first call or error.
RAY_OPERATIONS = ("submit", "status", "stop", "delete", "logs", "nodes")
for _operation in RAY_OPERATIONS:
    RAY_CALLS.labels(_operation)
    RAY_ERRORS.labels(_operation)


def count_ray_call(operation: str, outcome: str) -> None:
    """``adapters.ray.RayJobsClient``'s call hook. An unknown job or an existing submission
    id is an answer, not an error."""
    RAY_CALLS.labels(operation).inc()
    if outcome in ("RayUnreachable", "RayAuthFailed", "RayRefused"):
        RAY_ERRORS.labels(operation).inc()


def observe_phases(views: Iterable[object]) -> None:
    counts = _Count(getattr(v, "phase", None) or "New" for v in views)
    for phase in [p.value for p in Phase] + ["New"]:
        TASKS.labels(phase).set(counts.get(phase, 0))
    QUEUE_LENGTH.set(counts.get(Phase.Queued.value, 0))


def observe_submit_latency(created: str) -> None:
    t0 = parse_time(created)
    if t0 is not None:
        SUBMIT_LATENCY.observe(max(0.0, (utcnow() - t0).total_seconds()))


def observe_phase_change(old: str | None, new: str | None, reason: str | None) -> None:
    """Called by the status writer for each phase change it wrote."""
    if reason == "RayJobLost" and old != new:
        JOBS_LOST.inc()


def observe_users(in_use: dict[str, int], queued: Iterable[object], quotas: dict[str, int | None]) -> None:
    """Per-user gauges and the GPU-seconds counter, at each admission pass."""
    now = time.monotonic()
    waiting = _Count((getattr(v, "status", None) or {}).get("user") or "" for v in queued)
    _known_users.update(u for u in (*in_use, *waiting) if u)
    for user in _known_users:
        held = in_use.get(user, 0)
        USER_GPUS.labels(user).set(held)
        USER_QUEUED.labels(user).set(waiting.get(user, 0))
        last = _last_usage.get(user)
        if last is not None and held:
            USER_GPU_SECONDS.labels(user).inc(held * (now - last))
        _last_usage[user] = now
    for user, quota in quotas.items():
        if quota is not None:
            USER_QUOTA.labels(user).set(quota)
