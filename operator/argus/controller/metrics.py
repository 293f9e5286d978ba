"""Prometheus metrics (docs/metrics.md lists them; tests/unit/test_metrics.py checks names,
types and labels). One ``Metrics`` object per process, made by the composition root
(``host.operator.Operator.build``) with a registry of its own and handed to what
records: the control loop, the status writer, leader election, the webhook, argus doctor's
loop and the Ray client's call hook. ``--metrics-port`` serves that registry
(``Metrics.serve``)."""

from __future__ import annotations

import platform
import ssl
import threading
from collections import Counter as _Count
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    Metric,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    make_wsgi_app,
    start_http_server,
)
from prometheus_client.exposition import ThreadingWSGIServer

from .. import __version__
from ..core.clock import Clock
from ..core.doctor import Row, Status
from ..core.times import parse_time
from ..core.vocabulary import Phase, Reason, is_ended

# Seconds, for calls that take milliseconds normally and up to the client's timeout (10 s).
CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# The admission pass is milliseconds and its target is tens of them (issue 26: p99 < 50 ms at
# 10,000 tasks): buckets fine enough there for histogram_quantile to say which side it is on.
ADMISSION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

# Every operation is exported from the start (at 0), so that rate()/increase() alerts see a
# series before the first call or error.
RAY_OPERATIONS = ("submit", "status", "stop", "delete", "logs", "nodes")

class _QuietHandler(WSGIRequestHandler):
    """No line on stderr per scrape (as the client library's own server)."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


class LeaderOnly:
    """A collector that serves its metrics only while this replica leads: the task and queue
    gauges describe what the leader's loop saw, so a follower (which runs no loop) exports
    none of them, and dashboards that sum over the replicas count each task once."""

    def __init__(self, metrics: list[Gauge], leading: Callable[[], bool]) -> None:
        self.metrics = metrics
        self.leading = leading

    def collect(self) -> Iterator[Metric]:
        if self.leading():
            for metric in self.metrics:
                yield from metric.collect()


class Metrics:
    def __init__(self, clock: Clock) -> None:
        # No *_created series next to every counter and histogram: nothing here reads them.
        # (A switch of the client library for the whole process, not of one registry.)
        disable_created_metrics()
        self.clock = clock
        self.registry = CollectorRegistry()
        r = self.registry
        # The process's own series (process_*, python_*), as the client library's default
        # registry has them.
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        # The task and queue gauges: registered through LeaderOnly below, not on their own.
        self.leading = False  # set by the leader's tick (observe_phases), cleared by step_down
        self.tasks = Gauge("argus_tasks", "ArgusTasks by phase (the leader only)", ["phase"], registry=None)
        self.queue_length = Gauge("argus_queue_length", "ArgusTasks waiting in the queue (the leader only)", registry=None)
        self.submit_latency = Histogram("argus_submit_latency_seconds", "Time from task creation to its Ray submission",
                                        buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400), registry=r)
        # cluster: the ArgusCluster called ("" for --ray-address): bounded by the number of clusters.
        self.ray_calls = Counter("argus_ray_api_calls_total", "Ray API calls made, by operation and cluster", ["operation", "cluster"], registry=r)
        self.ray_errors = Counter("argus_ray_api_errors_total", "Ray API calls that failed (Ray unreachable or refusing), by operation and cluster",
                                  ["operation", "cluster"], registry=r)
        self.ray_call_seconds = Histogram("argus_ray_api_call_duration_seconds", "Duration of Ray API calls (answers and errors), by operation "
                                          "and cluster", ["operation", "cluster"], buckets=CALL_BUCKETS, registry=r)
        self.jobs_lost = Counter("argus_ray_jobs_lost_total", "Submitted jobs Ray no longer knows (a head restart): tasks Failed/RayJobLost",
                                 registry=r)
        self.tasks_finished = Counter("argus_tasks_finished_total", "Tasks that reached an end phase (Succeeded, Failed, Stopped, Rejected), "
                                      "by phase and reason", ["phase", "reason"], registry=r)
        self.reconcile_errors = Counter("argus_reconcile_errors_total", "Reconcile ticks that failed unexpectedly", registry=r)
        self.preemptions = Counter("argus_preemptions_total", "Running tasks stopped for a waiting task of higher priority (or fair "
                                   "share), by cluster", ["cluster"], registry=r)
        self.preemption_lost_gpu_steps = Counter("argus_preemption_lost_gpu_steps_total", "Training steps since their last checkpoint "
                                                 "that preempted tasks lose, times their GPUs, by cluster", ["cluster"], registry=r)
        self.undeclared_transitions = Counter("argus_undeclared_transitions_total",
                                              "Lifecycle decisions the declared transition table does not hold (carried out, logged)", registry=r)
        self.admission_pass = Histogram("argus_admission_pass_seconds", "Duration of admission passes over the queue: the queue "
                                        "decision and telling each waiting task why (the Ray capacity read it uses is timed in "
                                        "argus_ray_api_call_duration_seconds)", buckets=ADMISSION_BUCKETS, registry=r)
        self.webhook_reviews = Histogram("argus_webhook_review_duration_seconds", "Admission reviews answered by the webhook, by operation "
                                         "and result (allowed, denied, error), with their duration", ["operation", "result"],
                                         buckets=CALL_BUCKETS, registry=r)
        self.leader = Gauge("argus_leader", "1 while this replica holds the leader Lease (or runs without leader election), else 0",
                            registry=r)
        self.build_info = Gauge("argus_build_info", "Always 1; the labels say which build runs", ["version", "python"], registry=r)
        self.watch_age = Gauge("argus_task_watch_age_seconds", "Seconds since the task cache's list/watch last heard from the API server "
                               "(an event, a bookmark or a new watch), the largest over its scopes", registry=r)
        self.cluster_ready = Gauge("argus_cluster_ready", "argus doctor's last verdict on a Ray cluster, per node and check: 1 passed "
                                   "(or only warned), 0 failed (a task would fail there); checks not made are absent; cluster: the "
                                   "ArgusCluster (empty: --ray-address)", ["node", "check", "cluster"], registry=r)
        self.cluster_checked = Gauge("argus_cluster_checked_timestamp_seconds", "When argus doctor last checked a Ray cluster (Unix time)",
                                     ["cluster"], registry=r)
        self._doctor_series: dict[str, set[tuple[str, str]]] = {}  # cluster -> its (node, check) series of the last run
        self.crd_stale = Gauge("argus_crd_stale", "1 while a served CRD (crd: argustasks.argus.io, argusclusters.argus.io) is not the one "
                               "this operator was built with (its argus.io/schema-hash differs or is missing, or there is no such CRD), "
                               "0 when it is", ["crd"], registry=r)
        self.user_gpus = Gauge("argus_user_gpus_in_use", "GPUs held by a user's running tasks (Submitted or Running; the leader only)",
                               ["user"], registry=None)
        self.user_queued = Gauge("argus_user_tasks_queued", "A user's tasks waiting in the queue (the leader only)", ["user"], registry=None)
        self.user_quota = Gauge("argus_user_gpu_quota", "A user's GPU quota (absent: none; the leader only)", ["user"], registry=None)
        r.register(LeaderOnly([self.tasks, self.queue_length, self.user_gpus, self.user_queued, self.user_quota], lambda: self.leading))
        self.user_gpu_seconds = Counter("argus_user_gpu_seconds_total", "GPU-seconds a user's tasks have held (summed at each admission pass)",
                                        ["user"], registry=r)
        self._last_usage: dict[str, float] = {}  # monotonic time of the last GPU-seconds count, per user
        self._known_users: set[str] = set()      # users seen by an admission pass (their gauges go to 0, not away)
        self._clusters_seen: set[str] = {""}      # clusters whose Ray call series exist
        for operation in RAY_OPERATIONS:
            self.ray_calls.labels(operation, "")
            self.ray_errors.labels(operation, "")
        self.build_info.labels(__version__, platform.python_version()).set(1)
        self.leader.set(0)

    def serve(self, port: int, host: str, tls: ssl.SSLContext | None = None) -> None:
        """``--metrics-port``: this registry over HTTP, or HTTPS with ``tls`` (a server context,
        e.g. one that reloads renewed certificate files in its SNI callback), from a thread of
        its own. Each connection's TLS handshake happens in its own request thread, not in the
        accept loop, so a client that connects and stalls holds up nobody else."""
        if tls is None:
            start_http_server(port, addr=host, registry=self.registry)
            return
        httpd = make_server(host, port, make_wsgi_app(self.registry), ThreadingWSGIServer, handler_class=_QuietHandler)
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True, do_handshake_on_connect=False)
        threading.Thread(target=httpd.serve_forever, name="metrics-https", daemon=True).start()

    def count_ray_call(self, operation: str, outcome: str, seconds: float | None = None, cluster: str = "") -> None:
        """``adapters.ray.RayJobsClient``'s call hook (``cluster``: whose client). An unknown
        job or an existing submission id is an answer, not an error."""
        if cluster not in self._clusters_seen:
            self._clusters_seen.add(cluster)
            for op in RAY_OPERATIONS:  # every operation exported from the start, at 0
                self.ray_calls.labels(op, cluster)
                self.ray_errors.labels(op, cluster)
        self.ray_calls.labels(operation, cluster).inc()
        if seconds is not None:
            self.ray_call_seconds.labels(operation, cluster).observe(seconds)
        if outcome in ("RayUnreachable", "RayAuthFailed", "RayRefused"):
            self.ray_errors.labels(operation, cluster).inc()

    def observe_doctor(self, rows: Iterable[Row], cluster: str = "") -> None:
        """argus doctor's rows on one cluster: that cluster's series of its last run only
        (skipped checks are absent), the other clusters' kept."""
        self._drop_ready(cluster)
        series = self._doctor_series.setdefault(cluster, set())
        for row in rows:
            if row.status is not Status.skip:
                self.cluster_ready.labels(row.node, row.check.value, cluster).set(0 if row.status is Status.fail else 1)
                series.add((row.node, row.check.value))
        self.cluster_checked.labels(cluster).set(self.clock.now().timestamp())

    def forget_doctor(self, clusters: Iterable[str]) -> None:
        """The series of clusters that are gone (an ArgusCluster deleted)."""
        for cluster in clusters:
            self._drop_ready(cluster)
            try:
                self.cluster_checked.remove(cluster)
            except KeyError:
                pass

    def _drop_ready(self, cluster: str) -> None:
        """The argus_cluster_ready series of the cluster's last run."""
        for node, check in self._doctor_series.pop(cluster, set()):
            self.cluster_ready.remove(node, check, cluster)

    def step_down(self) -> None:
        """This replica does not lead (any more): the task and queue gauges go away, and the
        GPU-seconds count starts afresh when it leads again (the time between was counted by
        the other leader)."""
        if not self.leading:
            return
        self.leading = False
        for gauge in (self.tasks, self.user_gpus, self.user_queued, self.user_quota):
            gauge.clear()
        self.queue_length.set(0)
        self._last_usage.clear()
        self._known_users.clear()

    def observe_phases(self, views: Iterable[object]) -> None:
        """The leader's tick: the task gauges (and, from now on, served)."""
        self.leading = True
        counts = _Count(getattr(v, "phase", None) or "New" for v in views)
        for phase in [p.value for p in Phase] + ["New"]:
            self.tasks.labels(phase).set(counts.get(phase, 0))
        self.queue_length.set(counts.get(Phase.Queued.value, 0))

    def observe_submit_latency(self, created: str) -> None:
        t0 = parse_time(created)
        if t0 is not None:
            self.submit_latency.observe(max(0.0, (self.clock.now() - t0).total_seconds()))

    def observe_phase_change(self, old: str | None, new: str | None, reason: str | None) -> None:
        """Called by the status writer for each phase change it wrote."""
        if old == new:
            return
        if reason == Reason.RayJobLost:
            self.jobs_lost.inc()
        if is_ended(new) and not is_ended(old):
            self.tasks_finished.labels(new, reason or "").inc()

    def observe_users(self, in_use: dict[str, int], queued: Iterable[object], quotas: dict[str, int | None]) -> None:
        """Per-user gauges and the GPU-seconds counter, at each admission pass."""
        now = self.clock.monotonic()
        waiting = _Count((getattr(v, "status", None) or {}).get("user") or "" for v in queued)
        self._known_users.update(u for u in (*in_use, *waiting) if u)
        for user in self._known_users:
            held = in_use.get(user, 0)
            self.user_gpus.labels(user).set(held)
            self.user_queued.labels(user).set(waiting.get(user, 0))
            last = self._last_usage.get(user)
            if last is not None and held:
                self.user_gpu_seconds.labels(user).inc(held * (now - last))
            self._last_usage[user] = now
        for user, quota in quotas.items():
            if quota is not None:
                self.user_quota.labels(user).set(quota)
