"""Operator configuration from flags and ARGUS_* environment variables."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from ..core.clusters import DEFAULT_KUBERAY_URL, check_kuberay_url
from ..core.config import PlatformConfig
from ..core.gitops import DEFAULT_TRACKING_LABEL
from ..core.polling import read_slack
from ..core.preemption import PreemptionPolicy
from ..core.progress import ProgressSource
from ..platform import env_bool

DEFAULT_PROGRESS_METRICS = ("critic/score/mean",)


def _optional_number(text: str | None) -> float | None:
    return float(text) if text not in (None, "") else None


@dataclass(frozen=True)
class OperatorConfig:
    platform: PlatformConfig
    ray_address: str = "http://127.0.0.1:8265"
    ray_token_file: str | None = None     # the Ray cluster's token (token authentication), sent on every call
    max_running: int = 4
    poll_interval: float = 2.0
    ray_grace_seconds: float = 300.0      # Ray unreachable this long -> active tasks fail
    delete_grace_seconds: float = 300.0   # Ray unreachable this long -> finalizer released
    namespaces: tuple[str, ...] = ()      # empty: all namespaces
    leader_election_namespace: str | None = None  # set: only the Lease holder acts
    own_namespace: str = "default"        # the operator's namespace: the ArgusClusters' token Secrets are here
    leader_election_name: str = "argus-operator"  # the Lease; the chart names it after the release
    leader_lease_seconds: float = 15.0
    health_host: str = "0.0.0.0"
    health_port: int | None = None        # /healthz and /readyz (host/health.py)
    watch_seconds: int = 120              # each task watch request lasts this long (then a new one)
    watch_stale_seconds: float = 300.0    # liveness fails when the watch heard nothing for this long
    tick_stuck_seconds: float = 300.0     # liveness fails when one controller tick has run this long
    progress_interval: float = 15.0       # at most one progress write per task this often
    progress_metrics: tuple[str, ...] = DEFAULT_PROGRESS_METRICS
    progress_source: ProgressSource = ProgressSource.stream  # where running jobs' logs are read for progress
    ray_job_retention_seconds: float | None = None  # ended tasks' Ray jobs leave Ray's history after this
    default_ttl_seconds: int | None = None          # ended tasks are deleted after this (spec.ttlSecondsAfterFinished wins)
    gitops_tracking_label: str = DEFAULT_TRACKING_LABEL  # Argo CD's label tracking key; tracked tasks outlive their TTL
    queue_policy: str = "fifo"                      # fifo | fair
    fair_share_half_life: float = 3600.0
    fair_share_max_wait: float = 24 * 3600.0
    default_gpu_quota: int | None = None            # GPUs per user unless a namespace says (argus.io/gpu-quota)
    doctor_interval: float = 3600.0                 # argus doctor at start and this often (0: never)
    crd_check_interval: float = 600.0               # the served CRD against this build's, at start and this often (0: at start only)
    kuberay_dashboard_url: str = DEFAULT_KUBERAY_URL  # where an ArgusCluster's rayClusterRef head Service is reached
    preemption: PreemptionPolicy = PreemptionPolicy()  # off by default (core.preemption)


# The flags, one add_argument each: alike in shape with the servers' flag tables (duplicates lists
# the pair), each a different flag; argparse is the one definition.
def add_operator_flags(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument("--ray-address", default=env("ARGUS_RAY_ADDRESS", "http://127.0.0.1:8265"), help="Ray dashboard address (env ARGUS_RAY_ADDRESS)")
    parser.add_argument("--ray-token-file", default=env("ARGUS_RAY_TOKEN_FILE") or None,
                        help="file holding the Ray cluster's token, for clusters with token authentication (RAY_AUTH_MODE=token); "
                             "read again after a refusal, so a rotated Secret counts (env ARGUS_RAY_TOKEN_FILE)")
    parser.add_argument("--max-running", type=int, default=int(env("ARGUS_MAX_RUNNING", "4")), help="tasks that may run at once (env ARGUS_MAX_RUNNING)")
    parser.add_argument("--poll-interval", type=float, default=float(env("ARGUS_POLL_INTERVAL", "2")), help="seconds between Ray polls of running tasks (env ARGUS_POLL_INTERVAL)")
    parser.add_argument("--ray-grace", type=float, default=float(env("ARGUS_RAY_GRACE_SECONDS", "300")), help="seconds Ray may be unreachable before running tasks fail (env ARGUS_RAY_GRACE_SECONDS)")
    parser.add_argument("--delete-grace", type=float, default=float(env("ARGUS_DELETE_GRACE_SECONDS", "300")), help="seconds a deleted task waits for an unreachable Ray before its finalizer is released (env ARGUS_DELETE_GRACE_SECONDS)")
    parser.add_argument("--leader-elect", action="store_true", default=env("ARGUS_LEADER_ELECT", "") in ("1", "true"), help="elect a leader through a Lease so that two replicas never both act (env ARGUS_LEADER_ELECT)")
    parser.add_argument("--leader-election-namespace", default=env("ARGUS_LEADER_ELECTION_NAMESPACE") or env("POD_NAMESPACE") or "default", help="namespace of the Lease (default $POD_NAMESPACE or default)")
    parser.add_argument("--leader-election-name", default=env("ARGUS_LEADER_ELECTION_NAME", "argus-operator"), help="name of the Lease (default argus-operator; the Helm chart uses <release fullname>-leader, so that two releases never share it; env ARGUS_LEADER_ELECTION_NAME)")
    parser.add_argument("--leader-lease-seconds", type=float, default=float(env("ARGUS_LEADER_LEASE_SECONDS", "15")), help="how long a leader's Lease lasts without renewal")
    parser.add_argument("--health-port", type=int, default=int(env("ARGUS_HEALTH_PORT", "0")) or None, help="serve the kubelet's probes on this port: /healthz (liveness) and /readyz (readiness) (env ARGUS_HEALTH_PORT)")
    parser.add_argument("--health-host", default=env("ARGUS_HEALTH_HOST", "0.0.0.0"), help="address of the probes' server (default 0.0.0.0)")
    parser.add_argument("--watch-timeout", type=int, default=int(env("ARGUS_WATCH_TIMEOUT_SECONDS", "120")), help="seconds each ArgusTask watch request lasts before a new one is opened; a watch silent for longer (half as long again, 5-30 s) is dropped and the tasks listed again (default 120)")
    parser.add_argument("--watch-stale-seconds", type=float, default=float(env("ARGUS_WATCH_STALE_SECONDS", "300")), help="liveness (/healthz) fails when the task list/watch has not heard from the API server for this long; 0: never (default 300)")
    parser.add_argument("--tick-stuck-seconds", type=float, default=float(env("ARGUS_TICK_STUCK_SECONDS", "300")),
                        help="liveness (/healthz) fails when one controller tick has run this long (a tick awaits only calls with "
                             "deadlines: one this long is stuck); 0: never (default 300; env ARGUS_TICK_STUCK_SECONDS)")
    parser.add_argument("--progress-interval", type=float, default=float(env("ARGUS_PROGRESS_INTERVAL", "15")),
                        help="at most one progress write per running task this often, in seconds (default 15; env ARGUS_PROGRESS_INTERVAL)")
    parser.add_argument("--progress-source", choices=[s.value for s in ProgressSource], default=env("ARGUS_PROGRESS_SOURCE", "stream"),
                        help="where a running job's log is read for status.progress: stream (Ray's log stream, one per running job, "
                             "served by the Ray head), file (the attempt's log file in the job folder; the shared tree must be "
                             "mounted here read-only at the jobs' paths; costs Ray nothing), off (no progress) "
                             "(default stream; env ARGUS_PROGRESS_SOURCE). Whatever the source, where the shared tree is "
                             "mounted each job's end is seen by its exit marker within 50 ms")
    parser.add_argument("--progress-metrics", default=env("ARGUS_PROGRESS_METRICS", ",".join(DEFAULT_PROGRESS_METRICS)),
                        help="verl metrics shown in status.progress.metrics, comma-separated (default critic/score/mean; env ARGUS_PROGRESS_METRICS)")
    parser.add_argument("--ray-job-retention", type=_optional_number, default=_optional_number(env("ARGUS_RAY_JOB_RETENTION_SECONDS")),
                        help="seconds after a task ends until its Ray jobs are removed from Ray's job history (default: only when the "
                             "task is deleted; env ARGUS_RAY_JOB_RETENTION_SECONDS)")
    parser.add_argument("--ttl-seconds-after-finished", type=_optional_number, default=_optional_number(env("ARGUS_TTL_SECONDS_AFTER_FINISHED")),
                        help="delete ended tasks this many seconds after they ended, unless their spec.ttlSecondsAfterFinished says "
                             "otherwise (default: keep them; env ARGUS_TTL_SECONDS_AFTER_FINISHED). A task Argo CD tracks is "
                             "kept instead, or Argo CD would create it again and re-run it (docs/argocd.md)")
    parser.add_argument("--gitops-tracking-label", default=env("ARGUS_GITOPS_TRACKING_LABEL", DEFAULT_TRACKING_LABEL),
                        help="the label Argo CD's label tracking sets (argocd-cm application.instanceLabelKey): a task with it "
                             "(and without Helm's release annotation), or with Argo CD's tracking-id annotation, is never "
                             "deleted by its TTL; \"\" turns label tracking off (default app.kubernetes.io/instance; "
                             "env ARGUS_GITOPS_TRACKING_LABEL)")
    parser.add_argument("--queue-policy", choices=("fifo", "fair"), default=env("ARGUS_QUEUE_POLICY", "fifo"),
                        help="order within a priority: fifo (creation time), or fair (the user with the least recent GPU usage "
                             "first; docs/queue.md) (default fifo; env ARGUS_QUEUE_POLICY)")
    parser.add_argument("--fair-share-half-life", type=float, default=float(env("ARGUS_FAIR_SHARE_HALF_LIFE", "3600")),
                        help="fair: a user's past GPU-seconds count half after this many seconds (default 3600)")
    parser.add_argument("--fair-share-max-wait", type=float, default=float(env("ARGUS_FAIR_SHARE_MAX_WAIT", str(24 * 3600))),
                        help="fair: a task queued longer than this goes first in its priority band, whatever its user's usage (default 86400 s)")
    parser.add_argument("--preemption", action=argparse.BooleanOptionalAction, default=env_bool("ARGUS_PREEMPTION"),
                        help="a waiting task may stop running tasks of lower priority to take their GPUs, those that lose the "
                             "fewest steps since their last checkpoint; they go back to the queue and resume (docs/queue.md) "
                             "(default false; env ARGUS_PREEMPTION)")
    parser.add_argument("--preemption-fair-share-ratio", type=float, default=_optional_number(env("ARGUS_PREEMPTION_FAIR_SHARE_RATIO")),
                        help="with --preemption and --queue-policy fair: a task of a user below the mean recent usage may also stop "
                             "a task of its own priority whose user is at this many times the mean or more (above 1; default: off)")
    parser.add_argument("--preemption-min-runtime", type=float, default=float(env("ARGUS_PREEMPTION_MIN_RUNTIME", "1800")),
                        help="fair-share preemption takes no task that has run less than this many seconds (default 1800)")
    parser.add_argument("--default-gpu-quota", type=_optional_number, default=_optional_number(env("ARGUS_DEFAULT_GPU_QUOTA")),
                        help="GPUs a user's running tasks may hold in all, unless the user's namespace says otherwise "
                             "(annotation argus.io/gpu-quota, set by argus onboard --gpu-quota) (default: unlimited)")
    parser.add_argument("--doctor-interval", type=float, default=float(env("ARGUS_DOCTOR_INTERVAL", "3600")),
                        help="run argus doctor's checks of the Ray cluster at start and every this many seconds, as the leader "
                             "(metric argus_cluster_ready, an Event on the leader Lease, the log); 0: never (default 3600; "
                             "env ARGUS_DOCTOR_INTERVAL)")
    parser.add_argument("--crd-check-interval", type=float, default=float(env("ARGUS_CRD_CHECK_INTERVAL", "600")),
                        help="compare the served ArgusTask and ArgusCluster CRDs with the ones this operator was built with (its argus.io/schema-hash "
                             "annotation) at start and every this many seconds; a stale CRD is an error in the log naming both "
                             "hashes and the command that applies the new one, and metric argus_crd_stale; 0: at start only "
                             "(default 600; env ARGUS_CRD_CHECK_INTERVAL)")
    parser.add_argument("--kuberay-dashboard-url", default=env("ARGUS_KUBERAY_DASHBOARD_URL", DEFAULT_KUBERAY_URL),
                        help="how the operator reaches the dashboard of an ArgusCluster's spec.rayClusterRef: a URL made from the head "
                             "Service KubeRay made, with the fields {service}, {namespace}, {port} (its port named dashboard) and "
                             "{clusterIP}; another cluster domain: change it (default " + DEFAULT_KUBERAY_URL +
                             "; env ARGUS_KUBERAY_DASHBOARD_URL)")
    parser.add_argument("--namespace", "-n", action="append", dest="namespaces", default=[n for n in env("ARGUS_NAMESPACES", "").split(",") if n], help="namespace to watch, repeatable (default all; env ARGUS_NAMESPACES comma-separated)")


def operator_config(args: argparse.Namespace, platform: PlatformConfig) -> OperatorConfig:
    if args.max_running < 1:
        raise ValueError(f"--max-running: {args.max_running}: must be at least 1")
    if args.ray_token_file:
        from ..adapters.ray import read_token_file  # noqa: PLC0415
        read_token_file(args.ray_token_file)  # a missing or empty file is a mistake said at start (RayTokenError)
    if args.poll_interval <= 0:
        raise ValueError(f"--poll-interval: {args.poll_interval}: must be positive")
    if args.watch_timeout < 1:
        raise ValueError(f"--watch-timeout: {args.watch_timeout}: must be at least 1")
    quiet = args.watch_timeout + read_slack(args.watch_timeout)
    if args.watch_stale_seconds and args.watch_stale_seconds <= quiet:
        raise ValueError(f"--watch-stale-seconds: {args.watch_stale_seconds}: must exceed {quiet:g} s (--watch-timeout and its "
                         "read slack), or a quiet but healthy watch would fail liveness")
    if args.tick_stuck_seconds and args.tick_stuck_seconds < 60:
        raise ValueError(f"--tick-stuck-seconds: {args.tick_stuck_seconds:g}: must be 0 (never) or at least 60, or a first start's "
                         "long ticks (validating a batch of new tasks on a busy machine) would fail liveness")
    if args.leader_lease_seconds < 2:
        raise ValueError(f"--leader-lease-seconds: {args.leader_lease_seconds}: must be at least 2")
    if args.progress_source not in {s.value for s in ProgressSource}:
        raise ValueError(f"--progress-source: {args.progress_source}: must be one of " + ", ".join(s.value for s in ProgressSource))
    if args.progress_source == ProgressSource.file and not os.path.isdir(platform.users_root()):
        raise ValueError(f"--progress-source file: {platform.users_root()} is not a folder here: mount the shared tree read-only at "
                         f"{platform.root} (the jobs' paths) or use --progress-source stream")
    if args.progress_interval < 0:
        raise ValueError(f"--progress-interval: {args.progress_interval}: must not be negative")
    for flag, value in (("--ray-job-retention", args.ray_job_retention), ("--ttl-seconds-after-finished", args.ttl_seconds_after_finished)):
        if value is not None and value < 0:
            raise ValueError(f"{flag}: {value:g}: must not be negative")
    if args.fair_share_half_life <= 0 or args.fair_share_max_wait <= 0:
        raise ValueError("--fair-share-half-life and --fair-share-max-wait must be positive")
    if args.doctor_interval < 0:
        raise ValueError(f"--doctor-interval: {args.doctor_interval:g}: must not be negative (0: never)")
    if args.crd_check_interval < 0:
        raise ValueError(f"--crd-check-interval: {args.crd_check_interval:g}: must not be negative (0: at start only)")
    check_kuberay_url(args.kuberay_dashboard_url)
    ratio = args.preemption_fair_share_ratio
    if ratio is not None and (ratio <= 1 or not args.preemption or args.queue_policy != "fair"):
        raise ValueError(f"--preemption-fair-share-ratio: {ratio:g}: must be above 1 (the hysteresis that keeps two users from taking "
                         "GPUs back and forth), with --preemption and --queue-policy fair")
    if args.preemption_min_runtime < 0:
        raise ValueError(f"--preemption-min-runtime: {args.preemption_min_runtime:g}: must not be negative")
    if args.default_gpu_quota is not None and (args.default_gpu_quota < 0 or args.default_gpu_quota != int(args.default_gpu_quota)):
        raise ValueError(f"--default-gpu-quota: {args.default_gpu_quota:g}: must be a whole number of GPUs, 0 or more")
    return OperatorConfig(
        queue_policy=args.queue_policy, fair_share_half_life=args.fair_share_half_life, fair_share_max_wait=args.fair_share_max_wait,
        default_gpu_quota=int(args.default_gpu_quota) if args.default_gpu_quota is not None else None,
        progress_interval=args.progress_interval, doctor_interval=args.doctor_interval, crd_check_interval=args.crd_check_interval,
        progress_metrics=tuple(m.strip() for m in args.progress_metrics.split(",") if m.strip()),
        progress_source=ProgressSource(args.progress_source),
        ray_job_retention_seconds=args.ray_job_retention,
        default_ttl_seconds=int(args.ttl_seconds_after_finished) if args.ttl_seconds_after_finished is not None else None,
        gitops_tracking_label=args.gitops_tracking_label.strip(),
        platform=platform, ray_address=args.ray_address.rstrip("/"), ray_token_file=args.ray_token_file, max_running=args.max_running,
        poll_interval=args.poll_interval, ray_grace_seconds=args.ray_grace, delete_grace_seconds=args.delete_grace,
        namespaces=tuple(args.namespaces),
        leader_election_namespace=args.leader_election_namespace if args.leader_elect else None,
        own_namespace=args.leader_election_namespace,
        leader_election_name=args.leader_election_name, leader_lease_seconds=args.leader_lease_seconds,
        health_host=args.health_host, health_port=args.health_port,
        watch_seconds=args.watch_timeout, watch_stale_seconds=args.watch_stale_seconds,
        tick_stuck_seconds=args.tick_stuck_seconds, kuberay_dashboard_url=args.kuberay_dashboard_url,
        preemption=PreemptionPolicy(enabled=args.preemption, fair_share_ratio=ratio, fair_share_min_runtime=args.preemption_min_runtime),
    )
