"""``argus-operator --release-finalizers``: before the operator goes away for good (the
chart's pre-delete hook with ``uninstall.releaseFinalizers``, or by hand), stop every task's
Ray job and take the ``argus.io/stop-ray-job`` finalizer off, so that deleting the tasks or
their namespaces afterwards does not hang for an operator that will never come.

For each ArgusTask in scope that holds the finalizer: ask Ray to stop each of the task's
submission ids (one per attempt, derived from the object's UID: a job that reached Ray
unrecorded is found too), wait until Ray reports each ended (or does not know it), then
remove the finalizer. ``--keep-ray-jobs`` skips the stop (the jobs go on, untracked). A task
whose job Ray does not confirm ended within ``--release-timeout`` keeps its finalizer, and
the command exits 1 naming it; run it again once Ray answers. Tasks are left in place with
their status: only the finalizer goes.

Each job is stopped on the cluster it ran on (its ArgusCluster, or ``--ray-address``), and
the ArgusClusters' own finalizer (``argus.io/tasks-on-cluster``) is taken off at the end, so
that deleting them does not wait either.

Runs one scope at a time with the same RBAC as the operator (list and patch on argustasks and
argusclusters, get on the token Secrets).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

from ..adapters.kube import KubeClusterStore, KubeTaskStore
from ..adapters.ray import RayJobsClient
from ..controller.fleet import Fleet, implicit_cluster
from ..controller.ports import RayJobs
from ..controller.settings import OperatorConfig
from ..controller.view import TaskView
from ..core.clock import Clock
from ..core.clusters import CLUSTER_FINALIZER
from ..core.lifecycle import FINALIZER
from ..core.rayjobs import RayJobUnknown, RayRefused, RayUnreachable
from ..core.spec import GROUP, PLURAL, VERSION
from ..core.store import store_message
from .operator import cluster_connector

log = logging.getLogger(__name__)


def list_tasks(namespaces: tuple[str, ...]) -> list[dict[str, Any]]:
    from kubernetes import client  # noqa: PLC0415

    api = client.CustomObjectsApi()
    items: list[dict[str, Any]] = []
    for scope in namespaces or (None,):
        token = None
        while True:
            kwargs: dict[str, Any] = {"limit": 500, "_request_timeout": 60}
            if token:
                kwargs["_continue"] = token
            page = cast(dict[str, Any], api.list_namespaced_custom_object(GROUP, VERSION, scope, PLURAL, **kwargs) if scope
                        else api.list_cluster_custom_object(GROUP, VERSION, PLURAL, **kwargs))
            items.extend(page["items"])
            token = page["metadata"].get("continue")
            if not token:
                break
    return items


async def _stop_and_wait(ray: RayJobs, submission_id: str, timeout: float, clock: Clock) -> str | None:
    """None when the job has ended or Ray does not know it; else why not."""
    deadline = clock.monotonic() + timeout
    try:
        await ray.stop(submission_id)
    except RayJobUnknown:
        return None
    except (RayUnreachable, RayRefused) as exc:
        return f"could not stop Ray job {submission_id}: {exc}"
    while True:
        try:
            job = await ray.job(submission_id)
        except RayJobUnknown:
            return None
        except (RayUnreachable, RayRefused) as exc:
            return f"could not read Ray job {submission_id}: {exc}"
        if job.ended:
            return None
        if clock.monotonic() >= deadline:
            return f"Ray job {submission_id} is still {job.reported} after {timeout:.0f} s"
        await asyncio.sleep(1)


async def release_finalizers(config: OperatorConfig, *, clock: Clock, stop_jobs: bool = True, timeout: float = 120.0) -> int:
    """Returns the exit code: 0 when every finalizer is gone, 1 otherwise."""
    store = KubeTaskStore(now=clock.now)
    # a token-protected Ray refuses the stops without it
    ray = RayJobsClient(config.ray_address, monotonic=clock.monotonic, token_file=config.ray_token_file)
    clusters = KubeClusterStore(store)
    fleet = Fleet(ray, implicit_cluster(config.ray_address, config.platform.worker_resource), poll_interval=config.poll_interval,
                  monotonic=clock.monotonic, store=clusters, connect=cluster_connector(config, clock),
                  token_namespace=config.own_namespace, kuberay_url=config.kuberay_dashboard_url)
    await fleet.refresh(fresh=True)
    items = await asyncio.to_thread(list_tasks, config.namespaces)
    views = [TaskView.from_body(i) for i in items]
    held = [v for v in views if v.holds_finalizer]
    print(f"{len(views)} ArgusTask(s) in {', '.join(config.namespaces) or 'all namespaces'}; {len(held)} hold {FINALIZER}")
    failed: list[str] = []

    async def one(view: TaskView) -> None:
        what = f"{view.namespace}/{view.name}"
        sid = view.state.submission_id  # the current attempt's
        if stop_jobs:
            for attempt_sid in view.state.submission_ids():
                problem = await _stop_and_wait(fleet.ray(view.cluster_of_job(attempt_sid)), attempt_sid, timeout, clock)
                if problem:
                    failed.append(f"{what}: {problem}; its finalizer stays")
                    return
        for _ in range(5):
            try:
                if await store.remove_finalizer(view.namespace, view.name, list(view.finalizers)):
                    print(f"{what}: {'Ray job ' + sid + ' stopped or gone; ' if stop_jobs else ''}finalizer removed")
                    return
            except Exception as exc:  # noqa: BLE001 - report it with the others
                failed.append(f"{what}: cannot remove the finalizer: {store_message(exc)}")
                return
            fresh = next((TaskView.from_body(i) for i in await asyncio.to_thread(list_tasks, (view.namespace,))
                          if i["metadata"]["name"] == view.name), None)
            if fresh is None or not fresh.holds_finalizer:
                print(f"{what}: finalizer already gone")
                return
            view = fresh
        failed.append(f"{what}: the finalizers kept changing; try again")

    await asyncio.gather(*(one(v) for v in held))
    if not failed and not config.namespaces:  # every task's job is stopped: the clusters hold nothing any more
        for cluster in fleet.named.values():
            if CLUSTER_FINALIZER in cluster.finalizers:
                after = [f for f in cluster.finalizers if f != CLUSTER_FINALIZER]
                try:
                    if await clusters.set_cluster_finalizers(cluster.name, list(cluster.finalizers), after):
                        print(f"ArgusCluster {cluster.name}: {CLUSTER_FINALIZER} removed")
                        continue
                    failed.append(f"ArgusCluster {cluster.name}: its finalizers changed meanwhile; try again")
                except Exception as exc:  # noqa: BLE001 - report it with the others
                    failed.append(f"ArgusCluster {cluster.name}: cannot remove {CLUSTER_FINALIZER}: {store_message(exc)}")
    for line in failed:
        print(f"argus-operator: {line}")
    return 1 if failed else 0
