"""Operator configuration from flags and ARGUS_* environment variables."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from ..core.config import PlatformConfig


def read_slack(watch_seconds: float) -> float:
    """How much longer than asked a task watch may stay silent before its socket read fails
    (controller/cache.py): half the watch's time, between 5 and 30 s (30 s for the default
    120 s watch)."""
    return max(5.0, min(30.0, watch_seconds / 2))


@dataclass(frozen=True)
class OperatorConfig:
    platform: PlatformConfig
    ray_address: str = "http://127.0.0.1:8265"
    max_running: int = 4
    poll_interval: float = 2.0
    ray_grace_seconds: float = 300.0      # Ray unreachable this long -> active tasks fail
    delete_grace_seconds: float = 300.0   # Ray unreachable this long -> finalizer released
    namespaces: tuple[str, ...] = ()      # empty: all namespaces
    leader_election_namespace: str | None = None  # set: only the Lease holder acts
    leader_election_name: str = "argus-operator"  # the Lease; the chart names it after the release
    leader_lease_seconds: float = 15.0
    health_host: str = "0.0.0.0"
    health_port: int | None = None        # /healthz and /readyz (controller/health.py)
    watch_seconds: int = 120              # each task watch request lasts this long (then a new one)
    watch_stale_seconds: float = 300.0    # liveness fails when the watch heard nothing for this long


def add_operator_flags(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument("--ray-address", default=env("ARGUS_RAY_ADDRESS", "http://127.0.0.1:8265"), help="Ray dashboard address (env ARGUS_RAY_ADDRESS)")
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
    parser.add_argument("--namespace", "-n", action="append", dest="namespaces", default=[n for n in env("ARGUS_NAMESPACES", "").split(",") if n], help="namespace to watch, repeatable (default all; env ARGUS_NAMESPACES comma-separated)")


def operator_config(args: argparse.Namespace, platform: PlatformConfig) -> OperatorConfig:
    if args.max_running < 1:
        raise ValueError(f"--max-running: {args.max_running}: must be at least 1")
    if args.poll_interval <= 0:
        raise ValueError(f"--poll-interval: {args.poll_interval}: must be positive")
    if args.watch_timeout < 1:
        raise ValueError(f"--watch-timeout: {args.watch_timeout}: must be at least 1")
    quiet = args.watch_timeout + read_slack(args.watch_timeout)
    if args.watch_stale_seconds and args.watch_stale_seconds <= quiet:
        raise ValueError(f"--watch-stale-seconds: {args.watch_stale_seconds}: must exceed {quiet:g} s (--watch-timeout and its "
                         "read slack), or a quiet but healthy watch would fail liveness")
    if args.leader_lease_seconds < 2:
        raise ValueError(f"--leader-lease-seconds: {args.leader_lease_seconds}: must be at least 2")
    return OperatorConfig(
        platform=platform, ray_address=args.ray_address.rstrip("/"), max_running=args.max_running,
        poll_interval=args.poll_interval, ray_grace_seconds=args.ray_grace, delete_grace_seconds=args.delete_grace,
        namespaces=tuple(args.namespaces),
        leader_election_namespace=args.leader_election_namespace if args.leader_elect else None,
        leader_election_name=args.leader_election_name, leader_lease_seconds=args.leader_lease_seconds,
        health_host=args.health_host, health_port=args.health_port,
        watch_seconds=args.watch_timeout, watch_stale_seconds=args.watch_stale_seconds,
    )
