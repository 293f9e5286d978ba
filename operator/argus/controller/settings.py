"""Operator configuration from flags and ARGUS_* environment variables."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from ..core.config import PlatformConfig


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
    leader_lease_seconds: float = 15.0


def add_operator_flags(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument("--ray-address", default=env("ARGUS_RAY_ADDRESS", "http://127.0.0.1:8265"), help="Ray dashboard address (env ARGUS_RAY_ADDRESS)")
    parser.add_argument("--max-running", type=int, default=int(env("ARGUS_MAX_RUNNING", "4")), help="tasks that may run at once (env ARGUS_MAX_RUNNING)")
    parser.add_argument("--poll-interval", type=float, default=float(env("ARGUS_POLL_INTERVAL", "2")), help="seconds between Ray polls of running tasks (env ARGUS_POLL_INTERVAL)")
    parser.add_argument("--ray-grace", type=float, default=float(env("ARGUS_RAY_GRACE_SECONDS", "300")), help="seconds Ray may be unreachable before running tasks fail (env ARGUS_RAY_GRACE_SECONDS)")
    parser.add_argument("--delete-grace", type=float, default=float(env("ARGUS_DELETE_GRACE_SECONDS", "300")), help="seconds a deleted task waits for an unreachable Ray before its finalizer is released (env ARGUS_DELETE_GRACE_SECONDS)")
    parser.add_argument("--leader-elect", action="store_true", default=env("ARGUS_LEADER_ELECT", "") in ("1", "true"), help="elect a leader through a Lease so that two replicas never both act (env ARGUS_LEADER_ELECT)")
    parser.add_argument("--leader-election-namespace", default=env("ARGUS_LEADER_ELECTION_NAMESPACE") or env("POD_NAMESPACE") or "default", help="namespace of the argus-operator Lease (default $POD_NAMESPACE or default)")
    parser.add_argument("--leader-lease-seconds", type=float, default=float(env("ARGUS_LEADER_LEASE_SECONDS", "15")), help="how long a leader's Lease lasts without renewal")
    parser.add_argument("--namespace", "-n", action="append", dest="namespaces", default=[n for n in env("ARGUS_NAMESPACES", "").split(",") if n], help="namespace to watch, repeatable (default all; env ARGUS_NAMESPACES comma-separated)")


def operator_config(args: argparse.Namespace, platform: PlatformConfig) -> OperatorConfig:
    if args.max_running < 1:
        raise ValueError(f"--max-running: {args.max_running}: must be at least 1")
    if args.poll_interval <= 0:
        raise ValueError(f"--poll-interval: {args.poll_interval}: must be positive")
    return OperatorConfig(
        platform=platform, ray_address=args.ray_address.rstrip("/"), max_running=args.max_running,
        poll_interval=args.poll_interval, ray_grace_seconds=args.ray_grace, delete_grace_seconds=args.delete_grace,
        namespaces=tuple(args.namespaces),
        leader_election_namespace=args.leader_election_namespace if args.leader_elect else None,
        leader_lease_seconds=args.leader_lease_seconds,
    )
