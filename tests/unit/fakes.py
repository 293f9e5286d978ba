"""In-memory fakes of the controller's ports (``argus.controller.ports``), for unit tests
that drive the real control_loop in milliseconds, without processes:

- ``FakeRay``: Ray's Jobs API and node list as a dict of jobs, with the answers the real
  client's adapter gives (adopt on an existing id, RayJobUnknown, RayUnreachable, and
  RayAuthFailed when told to refuse the operator's credentials).
- ``FakeCluster``: the API server's side: ArgusTask objects with merge-patched status,
  finalizers and deletion as Kubernetes does them, Events, namespaces, the served CRDs'
  annotations; it is also the task source (a watch that shows every write at once, or lags
  when told to).
  ``refused`` makes a port method raise what the API server answers a request its RBAC
  rules do not allow (``forbidden``), as the adapters raise it (``core.store``'s StoreError).
- ``FakeSharedTree``: the shared trees where the operator mounts them: the paths that
  exist, the roots not mounted, every path looked for.
- ``FakeClock``: wall and monotonic time that move only when a test says so.
- ``FakeComposer``: the core's ``Composer`` (argus.core.verlconfig) over an in-memory base
  config: overrides set dotted keys (values read as YAML), a key that is not there is
  refused in Hydra's words; no files, no resolution (values are taken as resolved).

The integration tests run the same code against the real kube-apiserver and Ray.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import itertools
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from argus.controller.view import TaskView
from argus.core.doctor import ProbeJob
from argus.core.jobscript import exit_marker_for
from argus.core.lifecycle import RAY_ACTIVE
from argus.core.patch import apply_merge_patch
from argus.core.rayjobs import PlacementGroup, RayAuthFailed, RayJob, RayJobState, RayJobUnknown, RayNode, RayRefused, RayUnreachable
from argus.core.store import StoreError
from argus.core.submission import SubmissionPlan
from argus.core.times import format_time
from argus.core.verlconfig import Composed, ComposeRequest, ConfigTree


class FakeClock:
    def __init__(self, start: dt.datetime = dt.datetime(2026, 12, 3, 8, 0, 0, tzinfo=dt.UTC)):
        self.wall = start
        self.mono = 1000.0

    def now(self) -> dt.datetime:
        return self.wall

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        self.wall += dt.timedelta(seconds=seconds)
        self.mono += seconds


@dataclass
class FakeJob:
    plan: SubmissionPlan | None
    status: str = "PENDING"
    message: str = ""
    driver_node_id: str | None = None
    start_time_ms: int | None = None
    end_time_ms: int | None = None
    log: list[str] = field(default_factory=list)
    shown_at: list[float] = field(default_factory=list)  # when each log line reaches the stream (clock.monotonic)
    exited: bool = False  # the command ended (its exit marker written) while Ray may still say RUNNING


class FakeLogFiles:
    """The jobs' log files as a mounted shared tree shows them (``controller.ports.LogFiles``):
    a job's file holds every line its driver printed at once (``tee``), whatever Ray's stream
    lags; no file until the job printed something."""

    def __init__(self, ray: FakeRay):
        self.ray = ray
        self.reads: list[tuple[str, int]] = []
        self.most: int | None = None  # set: no read returns more bytes than this (short reads)
        self.unmounted: set[str | None] = set()  # users folders not mounted here
        self.looks = 0  # calls of present (the exit markers' looks)

    def mounted(self, users_root: str | None) -> bool:
        return users_root not in self.unmounted

    async def present(self, files: list[tuple[str, str | None]]) -> set[str]:
        """A job's exit marker is there once the job has ended (as the entrypoint writes it)."""
        self.looks += 1
        markers = {exit_marker_for(j.plan.log_file) for j in self.ray.jobs.values()
                   if j.plan is not None and (j.exited or j.status not in RAY_ACTIVE)}
        return {path for path, _ in files if path in markers}

    async def read(self, path: str, offset: int, limit: int, users_root: str | None = None) -> bytes:
        self.reads.append((path, offset))
        for job in self.ray.jobs.values():
            if job.plan is not None and job.plan.log_file == path and job.log:
                return "".join(job.log).encode()[offset:offset + min(limit, self.most or limit)]
        raise FileNotFoundError(path)


class FakeSharedTree:
    """The shared trees as the operator sees them where they are mounted
    (``controller.ports.SharedTree``): the paths that exist, and the roots not mounted here."""

    def __init__(self, *paths: str):
        self.paths: set[str] = set(paths)
        self.unmounted: set[str] = set()
        self.unreadable: set[str] = set()  # paths it cannot tell about (None)
        self.looks: list[str] = []  # every path looked for, in order

    def mounted(self, root: str) -> bool:
        return root not in self.unmounted

    async def exists(self, root: str, paths: Sequence[str]) -> dict[str, bool | None]:
        self.looks += paths
        return {p: None if p in self.unreadable else p in self.paths for p in paths}


class FakeRay:
    """What the operator sees of Ray through ``adapters.ray.RayJobsClient``."""

    def __init__(self, clock: FakeClock, *, worker_gpus: float = 4, worker_resource: str = "worker_node"):
        self.clock = clock
        self.jobs: dict[str, FakeJob] = {}
        self.nodes_: list[RayNode] = [
            RayNode("head", {"CPU": 0.0}, is_head=True, gpus_used=0.0),
            RayNode("w1", {"CPU": 1.0, "GPU": worker_gpus, worker_resource: 100.0}, gpus_used=0.0),
        ]
        self.groups: list[PlacementGroup] = []  # placement groups holding GPUs (verl's workers)
        self.reachable = True
        # Seconds (of the fake clock) before a line the driver prints reaches the log stream:
        # Ray reads the driver's log file about once a second, so a job's last lines arrive
        # after its end.
        self.log_lag = 0.0
        self.refuse_credentials: int | None = None  # 401 or 403: every call is refused so
        self.refuse_submissions: str | None = None
        self.calls: list[tuple[str, str]] = []
        self.deleted: list[str] = []
        # Jobs whose record Ray's job monitor writes again after a delete that came before it
        # noticed the supervisor exit (see controller.jobsync.HistoryRemovals): once each.
        self.rewritten_after_delete: set[str] = set()
        # The same, but the monitor is late (a loaded machine): the record is written again
        # only after the first read that found it gone.
        self.rewritten_late: dict[str, FakeJob] = {}
        # argus doctor: the cluster's version, whether its Jobs API has label selectors, and
        # what a probe does on its node: (final status, log), or None to stay PENDING.
        self.version = "2.60.0"
        self.label_selector = True
        self.probe_answer: Callable[[ProbeJob, str], tuple[str, str] | None] = lambda probe, node: None
        self.probes: dict[str, ProbeJob] = {}
        self.held_reads: set[str] = set()  # jobs (by submission id) whose status reads wait while here
        self.reads_waiting: set[str] = set()

    def _ms(self) -> int:
        return int(self.clock.now().timestamp() * 1000)

    def _check(self, operation: str, sid: str = "") -> None:
        self.calls.append((operation, sid))
        if not self.reachable:
            raise RayUnreachable("ConnectionError: Failed to connect to Ray")
        if self.refuse_credentials:
            raise RayAuthFailed(self.refuse_credentials)

    # -- the port ---------------------------------------------------------------------
    async def submit(self, plan: SubmissionPlan) -> bool:
        assert plan.submission_id
        self._check("submit", plan.submission_id)
        if plan.submission_id in self.jobs:
            return False
        if self.refuse_submissions:
            raise RayRefused(self.refuse_submissions)
        self.jobs[plan.submission_id] = FakeJob(plan)
        return True

    async def submit_probe(self, probe: ProbeJob) -> str:
        self._check("submit", probe.submission_id)
        if probe.submission_id in self.jobs:
            raise RayRefused(f"Job with submission_id {probe.submission_id} already exists")
        pinned = "label" if self.label_selector else "ip"
        if pinned == "ip" and not probe.fallback_resources:
            raise RayRefused("cannot pin the probe")
        node = probe.node_id  # the node-id label, or the node:<ip> resource: the fake's nodes have one each
        self.probes[probe.submission_id] = probe
        job = self.jobs[probe.submission_id] = FakeJob(None)
        answer = self.probe_answer(probe, node)
        if answer is not None:
            job.status, text = answer
            job.driver_node_id, job.start_time_ms, job.end_time_ms = node, self._ms(), self._ms()
            job.log.append(text)
        return pinned

    async def logs(self, submission_id: str) -> str:
        self._check("logs", submission_id)
        job = self.jobs.get(submission_id)
        if job is None:
            raise RayJobUnknown(f"Job {submission_id} does not exist.")
        return "".join(job.log)

    async def cluster_version(self) -> str:
        self._check("version")
        return self.version

    async def job(self, submission_id: str) -> RayJob:
        self._check("status", submission_id)
        if submission_id in self.held_reads:  # a slow dashboard, for this job
            self.reads_waiting.add(submission_id)
            while submission_id in self.held_reads:
                await asyncio.sleep(0.001)
            self.reads_waiting.discard(submission_id)
        job = self.jobs.get(submission_id)
        if job is None:
            if submission_id in self.rewritten_late and submission_id in self.deleted:
                self.jobs[submission_id] = self.rewritten_late.pop(submission_id)  # written just after this read
            raise RayJobUnknown(f"Job {submission_id} does not exist.")
        state = RayJobState.parse(job.status)  # as the adapter parses Ray's word
        return RayJob(submission_id, state, job.message, job.driver_node_id, job.start_time_ms, job.end_time_ms,
                      unknown_status="" if state is not None else job.status,
                      job_id=f"job-{submission_id}" if job.status != "PENDING" else None,
                      metadata=dict(job.plan.metadata) if job.plan is not None else {})

    async def stop(self, submission_id: str) -> bool:
        self._check("stop", submission_id)
        job = self.jobs.get(submission_id)
        if job is None:
            raise RayJobUnknown(f"Job {submission_id} does not exist.")
        if job.status not in ("PENDING", "RUNNING"):
            return False
        job.status, job.end_time_ms = "STOPPED", self._ms()
        return True

    async def delete(self, submission_id: str) -> bool:
        self._check("delete", submission_id)
        job = self.jobs.get(submission_id)
        if job is None:
            raise RayJobUnknown(f"Job {submission_id} does not exist.")
        if job.status in ("PENDING", "RUNNING"):
            raise RayRefused(f"Job {submission_id} is not in a terminal state")
        del self.jobs[submission_id]
        self.deleted.append(submission_id)
        if submission_id in self.rewritten_late and self.deleted.count(submission_id) == 1:
            self.rewritten_late[submission_id] = FakeJob(job.plan, "FAILED", "Unexpected error occurred: Job supervisor actor died",
                                                         end_time_ms=self._ms())
        if submission_id in self.rewritten_after_delete:
            self.rewritten_after_delete.discard(submission_id)
            self.jobs[submission_id] = FakeJob(job.plan, "FAILED", "Unexpected error occurred: Job supervisor actor died",
                                               end_time_ms=self._ms())
        return True

    async def tail_logs(self, submission_id: str) -> AsyncIterator[str]:
        """Ray's log stream: the log so far, then what the driver writes, until the job ends."""
        self._check("logs", submission_id)
        job = self.jobs.get(submission_id)
        if job is None:
            raise RayJobUnknown(f"Job {submission_id} does not exist.")
        sent = 0
        while True:
            if not self.reachable:
                raise RayUnreachable("the log stream broke")
            while sent < len(job.log) and (sent >= len(job.shown_at) or job.shown_at[sent] <= self.clock.monotonic()):
                sent += 1
                yield job.log[sent - 1]
            if job.status not in ("PENDING", "RUNNING") and sent == len(job.log):
                return
            await asyncio.sleep(0.001)

    async def nodes(self) -> list[RayNode]:
        self._check("nodes")
        return list(self.nodes_)

    async def placement_groups(self) -> list[PlacementGroup]:
        self._check("nodes")
        return list(self.groups)

    def add_worker(self, node_id: str, gpus: float, used: float = 0.0, worker_resource: str = "worker_node") -> None:
        self.nodes_.append(RayNode(node_id, {"CPU": 1.0, "GPU": gpus, worker_resource: 100.0}, gpus_used=used))

    def use_gpus(self, node_id: str, gpus: float) -> None:
        """Something (a job outside Argus, or placement groups) holds GPUs on the node."""
        self.nodes_ = [RayNode(n.node_id, n.resources_total, n.is_head, (n.gpus_used or 0.0) + gpus) if n.node_id == node_id else n
                       for n in self.nodes_]

    # -- what Ray does on its own -----------------------------------------------------
    def run(self, submission_id: str, driver: str = "w1") -> None:
        job = self.jobs[submission_id]
        job.status, job.driver_node_id, job.start_time_ms = "RUNNING", driver, self._ms()

    def finish(self, submission_id: str, status: str = "SUCCEEDED", message: str = "") -> None:
        job = self.jobs[submission_id]
        job.status, job.message, job.end_time_ms = status, message, self._ms()

    def exit(self, submission_id: str) -> None:
        """The job's command ends and writes its exit marker; Ray's supervisor notices later
        (``finish``: it looks at the process every 0.1 s)."""
        self.jobs[submission_id].exited = True

    def say(self, submission_id: str, text: str) -> None:
        """The driver prints ``text``."""
        job = self.jobs[submission_id]
        job.log.append(text)
        job.shown_at.extend([0.0] * (len(job.log) - 1 - len(job.shown_at)) + [self.clock.monotonic() + self.log_lag])

    def restart_head(self) -> None:
        """A stateless head forgets every job."""
        self.jobs.clear()

    def put(self, plan: SubmissionPlan, status: str = "RUNNING") -> None:
        """A job that reached Ray by some path the operator did not record."""
        self.jobs[plan.submission_id] = FakeJob(plan, status=status, driver_node_id="w1")

    def active(self) -> list[str]:
        return [sid for sid, j in self.jobs.items() if j.status in ("PENDING", "RUNNING")]

    def count(self, operation: str) -> int:
        return sum(1 for op, _ in self.calls if op == operation)


def forbidden(verb: str, resource: str, name: str = "", namespace: str | None = None) -> StoreError:
    """The API server's 403 for a request the operator's roles do not allow, as the adapters
    raise it: with the message of the body the real one sends (the verb, the resource and the
    identity; ``adapters.kube.store_error`` reads it from the Status body)."""
    where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    group = "argus.io" if resource.startswith("argus") else "ray.io" if resource == "rayclusters" else ""
    message = (f'{resource} "{name}" is forbidden: User "system:serviceaccount:argus-system:argus" '
               f'cannot {verb} resource "{resource}" in API group "{group}"{where}')
    return StoreError(403, "Forbidden", message)


@dataclass
class Event:
    namespace: str
    name: str
    type: str
    reason: str
    message: str


@dataclass
class Writes:
    status: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    metadata: list[tuple[str, list[str]]] = field(default_factory=list)
    cluster_status: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


class FakeCluster:
    """The API server's side of the controller: TaskStore and TaskSource in one."""

    def __init__(self, clock: FakeClock):
        self.clock = clock
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.namespaces: dict[str, dict[str, str]] = {}
        self.namespace_error: Exception | None = None
        self.namespace_reads = 0
        self.quotas: dict[str, int] = {}  # namespace -> its argus.io/gpu-quota
        self.deletions: list[str] = []
        self.events: list[Event] = []
        self.writes = Writes()
        self.synced = asyncio.Event()
        self.synced.set()
        self._rv = itertools.count(1)
        self._uids = itertools.count(1)
        self.lagging: dict[tuple[str, str], dict[str, Any]] | None = None  # a stale watch, when set
        self.failing_status_patches = 0  # the next this many status patches fail as a 500 would
        self.held_status_patches: set[str] = set()  # tasks (by name) whose status patches wait while here
        self.status_patches_waiting: set[str] = set()  # those waiting now
        self.crds: dict[str, dict[str, str]] = {}  # served CustomResourceDefinitions: name -> annotations
        self.crd_error: Exception | None = None   # raised by the next CRD reads while set (a 403, say)
        self._views: dict[tuple[str, str], tuple[str, TaskView]] = {}
        # The last list of views and what it was made from (the objects shown, how many, the
        # last resourceVersion given): a tick asks for the list several times, and the real
        # cache's is a copy of a dict's values, so the fake's must not cost a pass over every
        # object each time (bench/tick_cost.py measures the controller over these fakes).
        self._listed: tuple[tuple[int, int, int], list[TaskView]] | None = None
        self._rv_now = 0
        # ArgusClusters (cluster-scoped): name -> object; Secrets: (namespace, name) -> data
        self.clusters: dict[str, dict[str, Any]] = {}
        self.secrets: dict[tuple[str, str], dict[str, str]] = {}
        self.cluster_list_error: Exception | None = None
        # KubeRay's RayClusters and the Services KubeRay makes: (namespace, name) -> object
        self.rayclusters: dict[tuple[str, str], dict[str, Any]] = {}
        self.services: dict[tuple[str, str], dict[str, Any]] = {}
        self.ref_reads = 0           # RayCluster and Service reads made
        self.ref_error: Exception | None = None  # raised by those reads while set
        # A ClusterStore method's name -> what it raises while set (``forbidden``: a rule missing
        # from the operator's roles; tests/integration/test_chart.py removes them for real).
        self.refused: dict[str, Exception] = {}

    # -- test helpers -------------------------------------------------------------------
    def onboard(self, namespace: str, user: str = "alice", labels: dict[str, str] | None = None) -> str:
        self.namespaces[namespace] = {"argus.io/user": user, **(labels or {})}
        return namespace

    def add_cluster(self, name: str, **spec: Any) -> None:
        """An ArgusCluster, as ``kubectl apply`` would create it."""
        self.clusters[name] = {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusCluster",
                               "metadata": {"name": name, "generation": 1, "resourceVersion": self._next_rv()},
                               "spec": copy.deepcopy(spec)}

    def delete_cluster(self, name: str) -> None:
        """kubectl delete: gone at once without finalizers, else marked."""
        obj = self.clusters[name]
        if obj["metadata"].get("finalizers"):
            obj["metadata"]["deletionTimestamp"] = format_time(self.clock.now())
        else:
            del self.clusters[name]

    def create(self, name: str, spec: dict[str, Any], namespace: str = "team") -> tuple[str, str]:
        key = (namespace, name)
        assert key not in self.objects
        uid = f"{next(self._uids):08x}-0000-4000-8000-000000000000"
        self.objects[key] = {
            "apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask",
            "metadata": {"name": name, "namespace": namespace, "uid": uid, "generation": 1,
                         "creationTimestamp": format_time(self.clock.now()), "resourceVersion": self._next_rv()},
            "spec": {"kind": "basic", "cancel": False, "priority": 0, **copy.deepcopy(spec)},
        }
        self.clock.advance(1)  # creation times are whole seconds: keep them apart
        return key

    def status(self, key: tuple[str, str]) -> dict[str, Any]:
        return self.objects[key].get("status") or {}

    def update_spec(self, key: tuple[str, str], **changes: Any) -> None:
        obj = self.objects[key]
        obj["spec"].update(changes)
        obj["metadata"]["generation"] += 1
        self._bump(obj)

    def cancel(self, key: tuple[str, str]) -> None:
        self.update_spec(key, cancel=True)

    def delete(self, key: tuple[str, str]) -> None:
        obj = self.objects[key]
        if obj["metadata"].get("finalizers"):
            obj["metadata"].setdefault("deletionTimestamp", format_time(self.clock.now()))
            self._bump(obj)
        else:
            del self.objects[key]

    def reasons(self, key: tuple[str, str]) -> list[str]:
        return [e.reason for e in self.events if (e.namespace, e.name) == key]

    def freeze_watch(self) -> None:
        """From now on the source shows the objects as they are now (a slow watch)."""
        self.lagging = copy.deepcopy(self.objects)

    def thaw_watch(self) -> None:
        self.lagging = None

    def _next_rv(self) -> str:
        self._rv_now = next(self._rv)
        return str(self._rv_now)

    def _bump(self, obj: dict[str, Any]) -> None:
        obj["metadata"]["resourceVersion"] = self._next_rv()

    # -- TaskSource ---------------------------------------------------------------------
    def views(self) -> list[TaskView]:
        objects = self.lagging if self.lagging is not None else self.objects
        made_from = (id(objects), len(objects), self._rv_now)
        if self._listed is None or self._listed[0] != made_from:
            self._listed = (made_from, [self._view(key, o) for key, o in objects.items()])
        return list(self._listed[1])

    def get(self, key: tuple[str, str]) -> TaskView | None:
        objects = self.lagging if self.lagging is not None else self.objects
        return self._view(key, objects[key]) if key in objects else None

    def _view(self, key: tuple[str, str], body: dict[str, Any]) -> TaskView:
        """One view per resourceVersion, the same object until the next change, as the real
        cache (adapters/taskcache.py) converts each watch event once."""
        rv = body["metadata"]["resourceVersion"]
        kept = self._views.get(key)
        if kept is None or kept[0] != rv:
            kept = self._views[key] = (rv, TaskView.from_body(copy.deepcopy(body)))
        return kept[1]

    # -- TaskStore ------------------------------------------------------------------------
    async def patch_status(self, namespace: str, name: str, patch: dict[str, Any]) -> bool:
        obj = self.objects.get((namespace, name))
        if obj is None:
            return False
        if self.failing_status_patches:
            self.failing_status_patches -= 1
            raise StoreError(500, "Internal Server Error (a fault the test injected)")
        if name in self.held_status_patches:  # a slow API server, for this task
            self.status_patches_waiting.add(name)
            while name in self.held_status_patches:
                await asyncio.sleep(0.001)
            self.status_patches_waiting.discard(name)
        self.writes.status.append((name, copy.deepcopy(patch)))
        obj["status"] = apply_merge_patch(obj.get("status") or {}, patch)
        self._bump(obj)
        return True

    async def add_finalizer(self, namespace: str, name: str, finalizers: list[str], annotations: dict[str, str] | None = None,
                            *, resource_version: str | None = None, annotated: bool = True) -> bool:
        obj = self.objects.get((namespace, name))
        if annotations and obj is not None and not annotated and resource_version and obj["metadata"]["resourceVersion"] != resource_version:
            return False  # the JSON patch's resourceVersion test failed
        after = finalizers if "argus.io/stop-ray-job" in finalizers else [*finalizers, "argus.io/stop-ray-job"]
        if not self._finalizers(namespace, name, finalizers, after):
            return False
        if annotations:
            obj = self.objects[(namespace, name)]
            obj["metadata"].setdefault("annotations", {}).update(annotations)
        return True

    async def remove_finalizer(self, namespace: str, name: str, finalizers: list[str]) -> bool:
        return self._finalizers(namespace, name, finalizers, [f for f in finalizers if f != "argus.io/stop-ray-job"])

    def _finalizers(self, namespace: str, name: str, before: list[str], after: list[str]) -> bool:
        obj = self.objects.get((namespace, name))
        if obj is None or list(obj["metadata"].get("finalizers") or []) != before:
            return False  # gone, or the JSON patch's test failed
        self.writes.metadata.append((name, after))
        obj["metadata"]["finalizers"] = after
        self._bump(obj)
        if not after and obj["metadata"].get("deletionTimestamp"):
            del self.objects[(namespace, name)]
        return True

    async def event(self, namespace: str, name: str, uid: str, type_: str, reason: str, message: str) -> None:
        self.events.append(Event(namespace, name, type_, reason, message))

    async def delete_task(self, namespace: str, name: str) -> bool:
        if (namespace, name) not in self.objects:
            return False
        self.deletions.append(name)
        self.delete((namespace, name))
        return True

    async def user_namespaces(self) -> dict[str, tuple[str, int | None, dict[str, str]]]:
        return {ns: (labels["argus.io/user"], self.quotas.get(ns), dict(labels)) for ns, labels in self.namespaces.items()
                if "argus.io/user" in labels}

    # -- ClusterStore ---------------------------------------------------------------------
    def _refuse(self, method: str) -> None:
        if method in self.refused:
            raise self.refused[method]

    async def list_clusters(self) -> list[dict[str, Any]]:
        self._refuse("list_clusters")
        if self.cluster_list_error is not None:
            raise self.cluster_list_error
        return [copy.deepcopy(o) for o in self.clusters.values()]

    async def patch_cluster_status(self, name: str, patch: dict[str, Any]) -> bool:
        self._refuse("patch_cluster_status")
        obj = self.clusters.get(name)
        if obj is None:
            return False
        self.writes.cluster_status.append((name, copy.deepcopy(patch)))
        obj["status"] = apply_merge_patch(obj.get("status") or {}, patch)
        return True

    async def set_cluster_finalizers(self, name: str, before: list[str], after: list[str]) -> bool:
        self._refuse("set_cluster_finalizers")
        obj = self.clusters.get(name)
        if obj is None or list(obj["metadata"].get("finalizers") or []) != before:
            return False
        obj["metadata"]["finalizers"] = after
        if not after and obj["metadata"].get("deletionTimestamp"):
            del self.clusters[name]  # the API server removes a deleted object once its finalizers are gone
        return True

    async def secret_value(self, namespace: str, name: str, key: str) -> str | None:
        self._refuse("secret_value")
        if (namespace, name) not in self.secrets:
            raise StoreError(404, f"secrets \"{name}\" not found")
        return self.secrets[(namespace, name)].get(key) or None

    # -- TaskSecrets (the Secrets spec.env names; ``secrets`` above holds them too) ----------
    async def data(self, namespace: str, name: str) -> dict[str, str] | None:
        self._refuse("secret_data")
        found = self.secrets.get((namespace, name))
        return dict(found) if found is not None else None

    async def ray_cluster(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._refuse("ray_cluster")
        return self._ref_read(self.rayclusters, namespace, name)

    async def service(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._refuse("service")
        return self._ref_read(self.services, namespace, name)

    def _ref_read(self, objects: dict[tuple[str, str], dict[str, Any]], namespace: str, name: str) -> dict[str, Any] | None:
        self.ref_reads += 1
        if self.ref_error is not None:
            raise self.ref_error
        found = objects.get((namespace, name))
        return copy.deepcopy(found) if found is not None else None

    async def crd_annotations(self, name: str) -> dict[str, str] | None:
        if self.crd_error is not None:
            raise self.crd_error
        return dict(self.crds[name]) if name in self.crds else None

    async def namespace_labels(self, namespace: str) -> dict[str, str] | None:
        self.namespace_reads += 1
        if self.namespace_error is not None:
            raise self.namespace_error
        return dict(self.namespaces[namespace]) if namespace in self.namespaces else None


RELEASE_TREE = ConfigTree("0.9.1", "/trees/0.9.1", "release")


class FakeComposer:
    def __init__(self, base: dict[str, Any], hydra: dict[str, Any], *, raw: dict[str, str] | None = None,
                 tree: ConfigTree = RELEASE_TREE):
        self.base, self.hydra_node, self.raw_values, self._tree = base, hydra, raw or {}, tree
        self.requests: list[ComposeRequest] = []
        self.code_versions: dict[str, str] = {}  # code_version's answers (a verl snapshot's version file)

    @property
    def tree(self) -> ConfigTree:
        return self._tree

    def code_version(self, root: str) -> str | None:
        return self.code_versions.get(root)

    def compose(self, request: ComposeRequest) -> Composed:
        import yaml  # noqa: PLC0415

        self.requests.append(request)
        config, raw = copy.deepcopy(self.base), copy.deepcopy(self.base)
        for key, value in self.raw_values.items():
            _set(raw, key, value)
        for line in request.overrides:
            op = "++" if line.startswith("++") else "+" if line.startswith("+") else ""
            key, _, text = line[len(op):].partition("=")
            if not op and _get(config, key) is _ABSENT:
                return Composed(primary="ppo_trainer", error=f"{line}: Could not override '{key}'. To append to your config use +{line}")
            value = yaml.safe_load(text) if text else None
            _set(config, key, value)
            _set(raw, key, value)
        applied = []
        for line in request.defaults:
            key, _, text = line.partition("=")
            if _get(config, key) is not _ABSENT:
                _set(config, key, yaml.safe_load(text))
                _set(raw, key, yaml.safe_load(text))
                applied.append(line)
        return Composed(primary="ppo_trainer", config=config, raw=raw, hydra=copy.deepcopy(self.hydra_node), base=self.base,
                        base_hydra=self.hydra_node, defaults_applied=tuple(applied))


_ABSENT = object()


def _get(tree: Any, key: str) -> Any:
    for part in key.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return _ABSENT
        tree = tree[part]
    return tree


def _set(tree: dict[str, Any], key: str, value: Any) -> None:
    *parents, last = key.split(".")
    for part in parents:
        tree = tree.setdefault(part, {})
    tree[last] = value
