"""Prometheus metrics (docs/metrics.md lists them; tests/unit/test_metrics.py checks names,
types and labels). Served by ``--metrics-port``."""

from __future__ import annotations

import platform
import time
from collections import Counter as _Count
from typing import Iterable

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

from .. import __version__
from ..core.vocabulary import Phase, Reason, is_ended
from ..core.times import parse_time, utcnow

# No *_created series next to every counter and histogram: nothing here reads them.
disable_created_metrics()

# Seconds, for calls that take milliseconds normally and up to the client's timeout (10 s).
CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

TASKS = Gauge("argus_tasks", "ArgusTasks by phase", ["phase"])
QUEUE_LENGTH = Gauge("argus_queue_length", "ArgusTasks waiting in the queue")
SUBMIT_LATENCY = Histogram("argus_submit_latency_seconds", "Time from task creation to its Ray submission",
                           buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400))
RAY_CALLS = Counter("argus_ray_api_calls_total", "Ray API calls made, by operation", ["operation"])
RAY_ERRORS = Counter("argus_ray_api_errors_total", "Ray API calls that failed (Ray unreachable or refusing), by operation", ["operation"])
RAY_CALL_SECONDS = Histogram("argus_ray_api_call_duration_seconds", "Duration of Ray API calls (answers and errors), by operation",
                             ["operation"], buckets=CALL_BUCKETS)
JOBS_LOST = Counter("argus_ray_jobs_lost_total", "Submitted jobs Ray no longer knows (a head restart): tasks Failed/RayJobLost")
TASKS_FINISHED = Counter("argus_tasks_finished_total", "Tasks that reached an end phase (Succeeded, Failed, Stopped, Rejected), by phase and reason",
                         ["phase", "reason"])
RECONCILE_ERRORS = Counter("argus_reconcile_errors_total", "Reconcile ticks that failed unexpectedly")
ADMISSION_PASS = Histogram("argus_admission_pass_seconds", "Duration of admission passes over the queue (capacity read + queue decision)",
                           buckets=CALL_BUCKETS)
WEBHOOK_REVIEWS = Histogram("argus_webhook_review_duration_seconds", "Admission reviews answered by the webhook, by operation and result "
                            "(allowed, denied, error), with their duration", ["operation", "result"], buckets=CALL_BUCKETS)
LEADER = Gauge("argus_leader", "1 while this replica holds the leader Lease (or runs without leader election), else 0")
BUILD_INFO = Gauge("argus_build_info", "Always 1; the labels say which build runs", ["version", "python"])
WATCH_AGE = Gauge("argus_task_watch_age_seconds", "Seconds since the task cache's list/watch last heard from the API server "
                  "(an event, a bookmark or a new watch), the largest over its scopes")
CLUSTER_READY = Gauge("argus_cluster_ready", "argus doctor's last verdict on the Ray cluster, per node and check: 1 passed (or only "
                      "warned), 0 failed (a task would fail there); checks not made are absent", ["node", "check"])
CLUSTER_CHECKED = Gauge("argus_cluster_checked_timestamp_seconds", "When argus doctor last checked the Ray cluster (Unix time)")

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
BUILD_INFO.labels(__version__, platform.python_version()).set(1)
LEADER.set(0)

def count_ray_call(operation: str, outcome: str, seconds: float | None = None) -> None:
    """``adapters.ray.RayJobsClient``'s call hook. An unknown job or an existing submission
    id is an answer, not an error."""
    RAY_CALLS.labels(operation).inc()
    if seconds is not None:
        RAY_CALL_SECONDS.labels(operation).observe(seconds)
    if outcome in ("RayUnreachable", "RayAuthFailed", "RayRefused"):
        RAY_ERRORS.labels(operation).inc()


def observe_doctor(rows: Iterable[object]) -> None:
    """argus doctor's rows (``core.doctor.Row``): the series of the last run only."""
    CLUSTER_READY.clear()
    for row in rows:
        status = getattr(getattr(row, "status", None), "value", None)
        if status in ("ok", "warn", "fail"):
            CLUSTER_READY.labels(getattr(row, "node"), getattr(getattr(row, "check"), "value")).set(0 if status == "fail" else 1)
    CLUSTER_CHECKED.set(time.time())


def observe_phases(views: Iterable[object]) -> None:
    counts = _Count(getattr(v, "phase", None) or "New" for v in views)
    for phase in [p.value for p in Phase] + ["New"]:
        TASKS.labels(phase).set(counts.get(phase, 0))
    QUEUE_LENGTH.set(counts.get(Phase.Queued.value, 0))


def observe_submit_latency(created: str) -> None:
    t0 = parse_time(created)
    if t0 is not None:
        SUBMIT_LATENCY.observe(max(0.0, (utcnow() - t0).total_seconds()))


def observe_admission_pass(seconds: float) -> None:
    ADMISSION_PASS.observe(seconds)


def observe_phase_change(old: str | None, new: str | None, reason: str | None) -> None:
    """Called by the status writer for each phase change it wrote."""
    if old == new:
        return
    if reason == Reason.RayJobLost:
        JOBS_LOST.inc()
    if is_ended(new) and not is_ended(old):
        TASKS_FINISHED.labels(new, reason or "").inc()


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
