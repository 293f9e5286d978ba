"""Cluster commands of the ``argus`` CLI: ``logs`` (and ``onboard``). They talk to the
Kubernetes API (kubeconfig as kubectl uses it) and to the Ray dashboard recorded in the
task's status."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class ClusterError(Exception):
    """A clear, one-line failure (no such task, not submitted yet...)."""


def _load_kube(kubeconfig: str | None, context: str | None) -> Any:
    from kubernetes import client, config
    try:
        config.load_kube_config(config_file=kubeconfig, context=context)
    except Exception:  # noqa: BLE001 - fall back to in-cluster, else say what is missing
        try:
            config.load_incluster_config()
        except Exception as exc:  # noqa: BLE001
            raise ClusterError(f"no usable kubeconfig ({exc})") from None
    return client


def _current_namespace(kubeconfig: str | None, context: str | None) -> str:
    from kubernetes import config
    try:
        _, active = config.list_kube_config_contexts(config_file=kubeconfig)
        if context:
            return "default"
        return (active or {}).get("context", {}).get("namespace") or "default"
    except Exception:  # noqa: BLE001
        return "default"


def get_task(name: str, namespace: str, kubeconfig: str | None, context: str | None) -> dict[str, Any]:
    client = _load_kube(kubeconfig, context)
    from kubernetes.client.exceptions import ApiException

    from .core.spec import GROUP, PLURAL, VERSION
    try:
        return client.CustomObjectsApi().get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    except ApiException as exc:
        if exc.status == 404:
            raise ClusterError(f"no ArgusTask {name!r} in namespace {namespace!r}") from None
        if exc.status == 403:
            raise ClusterError(f"not allowed to read ArgusTask {name!r} in namespace {namespace!r}") from None
        raise ClusterError(f"cannot read ArgusTask {namespace}/{name}: {exc.reason}") from None


def cmd_logs(args: argparse.Namespace) -> int:
    namespace = args.namespace or _current_namespace(args.kubeconfig, args.context)
    try:
        task = get_task(args.task, namespace, args.kubeconfig, args.context)
        status = task.get("status") or {}
        ray_job = status.get("rayJob") or {}
        sid, address = ray_job.get("submissionId"), args.ray_address or ray_job.get("dashboardUrl")
        if not sid:
            phase = status.get("phase") or "new"
            why = f": {status.get('message')}" if phase == "Rejected" else ""
            raise ClusterError(f"ArgusTask {namespace}/{args.task} has not been submitted to Ray yet (phase {phase}){why}")
        if not address:
            raise ClusterError("the task's status names no Ray dashboard; pass --ray-address")
        from .controller.ray_adapter import RayAdapter, RayJobUnknown, RayUnreachable
        ray = RayAdapter(address, "worker_node")
        try:
            if args.follow:
                asyncio.run(_follow(ray, sid, args.tail))
            else:
                _print_tail(asyncio.run(ray.logs(sid)), args.tail)
        except RayJobUnknown:
            raise ClusterError(f"Ray no longer has job {sid} (the head restarted?); its logs are gone") from None
        except RayUnreachable as exc:
            raise ClusterError(f"cannot reach the Ray dashboard at {address}: {exc}") from None
    except ClusterError as exc:
        print(f"argus logs: {exc}", file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK


def _print_tail(text: str, tail: int | None) -> None:
    if tail is not None and tail >= 0:
        lines = text.splitlines(keepends=True)
        text = "".join(lines[-tail:]) if tail else ""
    sys.stdout.write(text)
    sys.stdout.flush()


async def _follow(ray: Any, sid: str, tail: int | None) -> None:
    if tail is not None:
        # Ray's tail stream starts from the beginning; show only the last lines of that.
        _print_tail(await ray.logs(sid), tail)
        skip = len(await ray.logs(sid))
    else:
        skip = 0
    seen = 0
    async for chunk in ray.tail_logs(sid):
        if seen + len(chunk) <= skip:
            seen += len(chunk)
            continue
        sys.stdout.write(chunk[max(0, skip - seen):])
        sys.stdout.flush()
        seen += len(chunk)


def register_cluster_commands(sub: Any) -> None:
    p = sub.add_parser("logs", help="print or follow the Ray job logs of an ArgusTask")
    p.add_argument("task", help="ArgusTask name")
    p.add_argument("-n", "--namespace", help="namespace (default: the kubeconfig context's)")
    p.add_argument("-f", "--follow", action="store_true", help="follow the log until the job ends")
    p.add_argument("--tail", type=int, default=None, help="only the last N lines")
    p.add_argument("--kubeconfig")
    p.add_argument("--context")
    p.add_argument("--ray-address", help="Ray dashboard to read from (default: the one in the task's status)")
    p.set_defaults(func=cmd_logs)
