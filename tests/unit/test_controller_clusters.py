"""The controller over several Ray clusters (issue 23), tick by tick over the fakes: each
ArgusCluster its own FakeRay; placement, the placement annotation before a submission (a
restarted operator submits again to the same cluster: adopted), every Ray call on the task's
own cluster, a new attempt's cluster (spec.moveOnRetry), each ArgusCluster's status and
finalizer, a token read from its Secret, and an install without ArgusClusters unchanged."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from argus.controller.loop import ControlLoop
from argus.controller.metrics import Metrics
from argus.controller.settings import OperatorConfig
from argus.core.clusters import ClusterConfig
from argus.core.config import PlatformConfig
from argus.core.progress import ProgressSource
from fakes import FakeClock, FakeCluster, FakeLogFiles, FakeRay, forbidden

pytestmark = pytest.mark.unit

NS = "team"
CMD = ("python3 -m verl.trainer.main_ppo data.train_files=$HOME/datasets/a.parquet data.val_files=$HOME/datasets/b.parquet "
       "+ray_kwargs.ray_init.address=auto trainer.nnodes=1 trainer.n_gpus_per_node={g}")


def spec(gpus: int = 1, **extra: Any) -> dict[str, Any]:
    return {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": gpus, "command": CMD.format(g=gpus), **extra}


class TreeFiles(FakeLogFiles):
    """The log files of every cluster's jobs, each under the users folder it was read with."""

    def __init__(self, rays: dict[str, FakeRay]):
        super().__init__(FakeRay(FakeClock()))
        self.rays = rays
        self.roots: list[str | None] = []

    async def read(self, path: str, offset: int, limit: int, users_root: str | None = None) -> bytes:
        self.reads.append((path, offset))
        self.roots.append(users_root)
        assert users_root is not None and path.startswith(users_root + "/"), (path, users_root)
        for ray in self.rays.values():
            for job in ray.jobs.values():
                if job.plan is not None and job.plan.log_file == path and job.log:
                    return "".join(job.log).encode()[offset:offset + limit]
        raise FileNotFoundError(path)


class Fleet:
    """A control_loop over a fake API server, the implicit cluster's FakeRay and one FakeRay per
    ArgusCluster (made when the operator first connects to it)."""

    def __init__(self, *, gpus: dict[str, float], max_running: int = 8, restart_policy_retry: bool = False,
                 progress_source: ProgressSource = ProgressSource.stream, composers: Any = None):
        self.clock = FakeClock()
        self.api = FakeCluster(self.clock)
        self.implicit = FakeRay(self.clock, worker_gpus=4)
        self.gpus = gpus
        self.rays: dict[str, FakeRay] = {}
        self.tokens: dict[str, Callable[[], str | None]] = {}
        self.connected: list[tuple[str, str]] = []  # (cluster, address) of every client made
        self.config = OperatorConfig(platform=PlatformConfig(), ray_address="http://ray-head:8265", max_running=max_running,
                                     poll_interval=2.0, progress_source=progress_source)
        self.files = TreeFiles(self.rays)
        self.composers = composers
        self.loop = asyncio.new_event_loop()
        self.api.onboard(NS, "alice")
        self.control_loop = self.make()

    def connect(self, config: ClusterConfig, token: Callable[[], str | None]) -> FakeRay:
        ray = self.rays.get(config.name) or FakeRay(self.clock, worker_gpus=self.gpus[config.name])
        self.rays[config.name] = ray
        self.tokens[config.name] = token
        self.connected.append((config.name, config.address))
        return ray

    def make(self) -> ControlLoop:
        r = ControlLoop(self.config, self.implicit, self.api, self.api, clock=self.clock, metrics=Metrics(self.clock),
                       clusters=self.api, connect=self.connect, token_namespace="argus-system", log_files=self.files,
                       composers=self.composers)
        r.task_reconciler.strict_transitions = True
        return r

    def tick(self, after: float = 2.0) -> None:
        self.clock.advance(after)

        async def go() -> None:
            await asyncio.sleep(0)
            await self.control_loop.tick()
            await self.control_loop.idle()
        self.loop.run_until_complete(go())

    def status(self, key: tuple[str, str]) -> dict[str, Any]:
        return self.api.status(key)

    def sid(self, key: tuple[str, str]) -> str:
        view = self.api.get(key)
        assert view is not None
        return view.state.submission_id

    def close(self) -> None:
        self.control_loop.logs.close()
        self.loop.run_until_complete(asyncio.sleep(0))
        self.loop.close()


@pytest.fixture
def made() -> Iterator[list[Fleet]]:
    fleets: list[Fleet] = []
    yield fleets
    for f in fleets:
        f.close()


def fleet_of(made: list[Fleet], **kwargs: Any) -> Fleet:
    f = Fleet(**kwargs)
    made.append(f)
    return f


def test_tasks_go_to_the_preferred_cluster_then_the_next_and_each_call_to_its_own(made: list[Fleet]) -> None:
    f = fleet_of(made, gpus={"a": 2, "b": 4})
    f.api.add_cluster("a", address="http://ray-a:8265", preference=10)
    f.api.add_cluster("b", address="http://ray-b:8265")
    one, two = f.api.create("one", spec(2)), f.api.create("two", spec(2))
    f.tick()
    assert (f.status(one)["cluster"], f.status(two)["cluster"]) == ("a", "b")
    assert f.status(one)["rayJob"]["dashboardUrl"] == "http://ray-a:8265"
    assert f.sid(one) in f.rays["a"].jobs and f.sid(two) in f.rays["b"].jobs
    assert f.implicit.jobs == {}  # nothing goes to --ray-address once ArgusClusters exist
    # Reads, stops and history removals go to each task's own cluster.
    f.rays["a"].run(f.sid(one))
    f.rays["b"].run(f.sid(two))
    f.tick()
    assert (f.status(one)["phase"], f.status(two)["phase"]) == ("Running", "Running")
    assert ("status", f.sid(two)) in f.rays["b"].calls and ("status", f.sid(two)) not in f.rays["a"].calls
    f.api.cancel(two)
    f.tick()
    assert ("stop", f.sid(two)) in f.rays["b"].calls and not any(c == ("stop", f.sid(two)) for c in f.rays["a"].calls)
    sid = f.sid(two)
    f.api.delete(two)
    f.rays["b"].finish(sid, "STOPPED")
    for _ in range(4):
        f.tick()
    assert ("delete", sid) in f.rays["b"].calls


def test_the_placement_is_written_with_the_finalizer_and_a_restart_submits_to_the_same_cluster(made: list[Fleet]) -> None:
    f = fleet_of(made, gpus={"a": 1, "b": 1})
    f.api.add_cluster("a", address="http://ray-a:8265", preference=10)
    f.api.add_cluster("b", address="http://ray-b:8265")
    key = f.api.create("t", spec())
    # Ray takes the job and the operator dies before the status write: the status never says a.
    original = f.api.patch_status
    died: list[bool] = []

    async def die(namespace: str, name: str, patch: dict[str, Any]) -> bool:
        died.append(True)
        raise RuntimeError("the operator died here")
    f.api.patch_status = die  # type: ignore[method-assign]
    f.tick()
    f.api.patch_status = original  # type: ignore[method-assign]
    assert died and f.sid(key) in f.rays["a"].jobs
    assert f.api.objects[key]["metadata"]["annotations"]["argus.io/placement"] == "1:a"
    assert not f.status(key).get("cluster")
    # a is full (a job outside Argus, say), b has room: a fresh operator goes where the
    # placement says, finds the job on a and adopts it; nothing goes to b.
    node = f.rays["a"].nodes_[1]
    f.rays["a"].nodes_[1] = node.__class__("w1", node.resources_total, gpus_used=1.0)
    f.control_loop = f.make()
    f.tick()
    f.tick()
    assert (f.status(key)["phase"], f.status(key)["reason"]) == ("Submitted", "AdoptedExistingJob")
    assert f.status(key)["cluster"] == "a" and f.rays["b"].jobs == {}
    assert not [c for c in f.rays["b"].calls if c[0] in ("submit", "status")]


def one_running_one_waiting(made: list[Fleet]) -> tuple[Fleet, tuple[str, str], tuple[str, str]]:
    """Cluster a with one GPU: ``first`` running there, ``second`` queued behind it."""
    f = fleet_of(made, gpus={"a": 1}, progress_source=ProgressSource.file)
    f.api.add_cluster("a", address="http://ray-a:8265")
    first = f.api.create("first", spec())
    f.tick()
    f.rays["a"].run(f.sid(first))
    second = f.api.create("second", spec())
    f.tick()
    assert (f.status(first)["phase"], f.status(second)["phase"]) == ("Running", "Queued")
    return f, first, second


def test_the_next_task_is_armed_with_its_placement_and_started_with_no_second_patch_while_the_watch_lags(
        made: list[Fleet]) -> None:
    """The task next in line for an ending job's GPUs gets the finalizer and its placement in
    one patch while Ray still says the job runs; its start, once Ray says it ended, is the
    submission alone, even before the watch shows that patch (the operator reads its own
    writes, the placement too: without it the start's patch would test a stale resourceVersion
    and fail)."""
    f, first, second = one_running_one_waiting(made)
    f.api.freeze_watch()
    f.control_loop.jobs.hurry(first)  # its exit marker, before Ray's status moved
    f.tick(0.0)
    meta = f.api.objects[second]["metadata"]
    assert meta["finalizers"] == ["argus.io/stop-ray-job"] and meta["annotations"]["argus.io/placement"] == "1:a"
    patches = [w for w in f.api.writes.metadata if w[0] == "second"]
    assert len(patches) == 1 and f.sid(second) not in f.rays["a"].jobs
    f.rays["a"].finish(f.sid(first))
    f.tick(0.03)
    assert f.status(first)["phase"] == "Succeeded" and f.status(second)["phase"] == "Submitted"
    assert f.rays["a"].calls.count(("submit", f.sid(second))) == 1
    assert [w for w in f.api.writes.metadata if w[0] == "second"] == patches  # no second patch
    f.api.thaw_watch()


def test_a_task_armed_ahead_of_its_start_counts_as_queued_on_the_clusters_status(made: list[Fleet]) -> None:
    """The task next in line holds the finalizer while Ray still says the ending job runs; the
    cluster's status still counts it as queued, not as running there."""
    f, first, second = one_running_one_waiting(made)
    f.control_loop.jobs.hurry(first)  # its exit marker, before Ray's status moved
    f.tick(0.0)
    assert f.api.objects[second]["metadata"]["finalizers"] == ["argus.io/stop-ray-job"]
    f.tick()  # a poll interval on: the cluster's status is written again, Ray still says running
    assert f.status(second)["phase"] == "Queued" and f.sid(second) not in f.rays["a"].jobs
    status = f.api.clusters["a"]["status"]
    assert (status["running"], status["queued"]) == (1, 1)


def test_a_task_armed_for_a_cluster_being_deleted_goes_to_another_and_does_not_hold_it(made: list[Fleet]) -> None:
    """Armed for the slot of an ending job on a, the next task is not pinned there: a is
    deleted before Ray says the job ended, and goes as soon as that job has ended (the armed
    task does not hold it); the task goes to b once b has room."""
    f = fleet_of(made, gpus={"a": 1, "b": 1}, progress_source=ProgressSource.file)
    f.api.add_cluster("a", address="http://ray-a:8265", preference=10)
    f.api.add_cluster("b", address="http://ray-b:8265")
    first = f.api.create("first", spec())
    f.tick()
    third = f.api.create("third", spec())
    f.tick()
    assert (f.status(first)["cluster"], f.status(third)["cluster"]) == ("a", "b")
    f.rays["a"].run(f.sid(first))
    f.rays["b"].run(f.sid(third))
    second = f.api.create("second", spec())
    f.tick()
    f.control_loop.jobs.hurry(first)
    f.tick(0.0)
    assert f.api.objects[second]["metadata"]["annotations"]["argus.io/placement"] == "1:a"
    f.api.delete_cluster("a")
    f.tick()
    f.rays["a"].finish(f.sid(first))
    f.tick()
    f.tick()
    assert f.status(first)["phase"] == "Succeeded" and "a" not in f.api.clusters
    assert f.status(second)["phase"] == "Queued" and f.sid(second) not in f.rays["a"].jobs
    f.rays["b"].finish(f.sid(third))
    f.tick()
    f.tick()
    assert (f.status(second)["phase"], f.status(second)["cluster"]) == ("Submitted", "b")
    assert f.api.objects[second]["metadata"]["annotations"]["argus.io/placement"] == "1:b"
    assert f.sid(second) in f.rays["b"].jobs


def test_a_namespace_selector_and_spec_cluster_limit_the_clusters(made: list[Fleet]) -> None:
    f = fleet_of(made, gpus={"a": 1, "b": 8})
    f.api.onboard("secret", "alice", labels={"team": "red"})
    f.api.add_cluster("a", address="http://ray-a:8265", preference=10,
                      namespaceSelector={"matchLabels": {"team": "red"}})
    f.api.add_cluster("b", address="http://ray-b:8265",
                      namespaceSelector={"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["red"]}]})
    red1, red2 = f.api.create("r1", spec(), namespace="secret"), f.api.create("r2", spec(), namespace="secret")
    pinned = f.api.create("p", spec(cluster="a"))
    f.tick()
    assert f.status(red1)["cluster"] == "a"
    assert (f.status(red2)["phase"], f.status(red2)["reason"]) == ("Queued", "Queued")  # a is full; b is not the red team's
    assert (f.status(pinned)["phase"], f.status(pinned)["reason"]) == ("Queued", "NoCluster")
    assert f.rays["b"].jobs == {}


def test_each_clusters_status_and_its_finalizer_while_tasks_are_on_it(made: list[Fleet]) -> None:
    f = fleet_of(made, gpus={"a": 4})
    f.api.add_cluster("a", address="http://ray-a:8265")
    key = f.api.create("t", spec(2))
    f.tick()
    f.tick()
    obj = f.api.clusters["a"]
    status = obj["status"]
    assert (status["workerNodes"], status["gpus"], status["running"], status["rayVersion"]) == (1, 4, 1, "2.60.0")
    assert status["freeGpus"] == 2  # the task's claim: Ray does not show its GPUs in use yet
    reachable = next(c for c in status["conditions"] if c["type"] == "RayReachable")
    assert (reachable["status"], reachable["reason"]) == ("True", "RayReachable")
    assert obj["metadata"]["finalizers"] == ["argus.io/tasks-on-cluster"]
    f.api.delete_cluster("a")
    f.tick()
    deleting = next(c for c in f.api.clusters["a"]["status"]["conditions"] if c["type"] == "Deleting")
    assert f"{NS}/t" in deleting["message"]
    f.rays["a"].run(f.sid(key))
    f.rays["a"].finish(f.sid(key))
    f.tick()
    f.tick()
    assert f.status(key)["phase"] == "Succeeded"
    assert "a" not in f.api.clusters  # its finalizer went with its last task


def test_an_unreachable_cluster_shows_on_its_status_and_holds_only_its_own_tasks(made: list[Fleet]) -> None:
    f = fleet_of(made, gpus={"a": 4, "b": 4})
    f.api.add_cluster("a", address="http://ray-a:8265", preference=10)
    f.api.add_cluster("b", address="http://ray-b:8265")
    f.tick(0)
    f.rays["a"].reachable = False
    pinned, free = f.api.create("p", spec(cluster="a")), f.api.create("f", spec())
    for _ in range(3):
        f.tick()
    assert (f.status(pinned)["phase"], f.status(pinned)["reason"]) == ("Queued", "RayUnreachable")
    assert f.status(free)["cluster"] == "b"
    conditions = {c["type"]: c for c in f.api.clusters["a"]["status"]["conditions"]}
    assert (conditions["RayReachable"]["status"], conditions["RayReachable"]["reason"]) == ("False", "RayUnreachable")


def kuberay(f: Fleet, dashboard_port: int = 8265, *, service_name: str | None = "gpu-head-svc") -> None:
    """A RayCluster ray/gpu as KubeRay keeps it, and its head Service."""
    status = {"head": {"serviceName": service_name}} if service_name else {}
    f.api.rayclusters[("ray", "gpu")] = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "gpu", "namespace": "ray"},
                                         "status": {"state": "ready", **status}}
    f.api.services[("ray", "gpu-head-svc")] = {"metadata": {"name": "gpu-head-svc", "namespace": "ray"}, "spec": {
        "clusterIP": "10.96.0.9", "ports": [{"name": "client", "port": 10001}, {"name": "dashboard", "port": dashboard_port}]}}


def test_a_raycluster_ref_is_reached_through_its_head_service_and_followed(made: list[Fleet]) -> None:
    from argus.controller.fleet import REF_REREAD_SECONDS
    from argus.core.store import StoreError
    f = fleet_of(made, gpus={"k": 4})
    kuberay(f)
    f.api.add_cluster("k", rayClusterRef={"name": "gpu", "namespace": "ray"})
    key = f.api.create("t", spec(2))
    f.tick()
    f.tick()
    url = "http://gpu-head-svc.ray.svc.cluster.local:8265"
    assert f.connected == [("k", url)]
    assert (f.status(key)["cluster"], f.status(key)["rayJob"]["dashboardUrl"]) == ("k", url)
    status = f.api.clusters["k"]["status"]
    assert status["address"] == url and next(c for c in status["conditions"] if c["type"] == "RayReachable")["status"] == "True"
    # While its Ray answers, the reference is read again only every REF_REREAD_SECONDS.
    reads = f.api.ref_reads
    assert reads == 2  # the RayCluster and its Service
    for _ in range(int(REF_REREAD_SECONDS // 2) - 2):
        f.tick()
    assert f.api.ref_reads == reads
    # KubeRay's head Service moves to another port: followed, with a new client.
    kuberay(f, 8266)
    for _ in range(3):
        f.tick()
    assert f.connected[-1] == ("k", "http://gpu-head-svc.ray.svc.cluster.local:8266")
    # The API server cannot be read: the address last read is kept (no new client).
    f.api.ref_error = StoreError(500, "etcdserver: leader changed")
    made_before = len(f.connected)
    for _ in range(int(REF_REREAD_SECONDS // 2) + 2):
        f.tick()
    assert len(f.connected) == made_before and f.api.clusters["k"]["status"]["address"].endswith(":8266")
    f.api.ref_error = None
    # The RayCluster is deleted: the cluster says why, and its task's Ray calls fail as unreachable.
    del f.api.rayclusters[("ray", "gpu")]
    for _ in range(int(REF_REREAD_SECONDS // 2) + 2):
        f.tick()
    reachable = next(c for c in f.api.clusters["k"]["status"]["conditions"] if c["type"] == "RayReachable")
    assert (reachable["status"], reachable["reason"]) == ("False", "RayClusterRefUnresolved")
    assert reachable["message"] == "spec.rayClusterRef: RayCluster ray/gpu does not exist (KubeRay's ray.io/v1)"
    assert "address" not in f.api.clusters["k"]["status"]
    task_reachable = next(c for c in f.status(key)["conditions"] if c["type"] == "RayReachable")
    assert (task_reachable["status"], task_reachable["message"]) == ("False", reachable["message"])
    assert f.status(key)["phase"] == "Submitted" and f.status(key)["rayUnreachableSince"]  # the outage grace counts
    # Back, as KubeRay makes it again: read at the next pass (unresolved: read at every one).
    kuberay(f)
    f.tick()
    f.tick()
    assert f.connected[-1] == ("k", url)
    assert next(c for c in f.api.clusters["k"]["status"]["conditions"] if c["type"] == "RayReachable")["status"] == "True"


@pytest.mark.parametrize(("service_name", "port_name", "words"), [
    (None, "dashboard", None),  # status names no Service: <name>-head-svc
    ("other-svc", "dashboard", "its head Service ray/other-svc does not exist"),
    ("gpu-head-svc", "dash", "has no port named dashboard"),
])
def test_a_raycluster_ref_without_a_usable_head_service_holds_its_tasks(made: list[Fleet], service_name: str | None, port_name: str,
                                                                        words: str | None) -> None:
    f = fleet_of(made, gpus={"k": 4})
    kuberay(f, service_name=service_name)
    f.api.services[("ray", "gpu-head-svc")]["spec"]["ports"][1]["name"] = port_name
    f.api.add_cluster("k", rayClusterRef={"name": "gpu", "namespace": "ray"})
    key = f.api.create("t", spec())
    f.tick()
    f.tick()
    reachable = next(c for c in f.api.clusters["k"]["status"]["conditions"] if c["type"] == "RayReachable")
    if words is None:
        assert reachable["status"] == "True" and f.status(key)["cluster"] == "k"
        return
    assert (reachable["status"], reachable["reason"]) == ("False", "RayClusterRefUnresolved") and words in reachable["message"]
    assert f.connected == [] and f.status(key)["phase"] == "Queued"


def test_a_read_of_the_clusters_beside_another_waits_for_it_and_sees_its_clusters(made: list[Fleet]) -> None:
    """The doctor's loop reads the fleet while the controller's tick may be reading it: the
    second caller must not return before the first has the clusters (it once checked none)."""
    f = fleet_of(made, gpus={"a": 4})
    f.api.add_cluster("a", address="http://ray-a:8265")
    fleet = f.control_loop.fleet
    listed = f.api.list_clusters

    async def slow() -> list[dict[str, Any]]:
        await asyncio.sleep(0.01)
        return await listed()
    f.api.list_clusters = slow  # type: ignore[method-assign]

    async def both() -> list[list[str]]:
        async def read() -> list[str]:
            await fleet.refresh()
            return sorted(fleet.named)
        return list(await asyncio.gather(read(), read()))
    assert f.loop.run_until_complete(both()) == [["a"], ["a"]]


def test_progress_from_files_reads_each_clusters_own_tree_and_streams_where_it_is_not_mounted(made: list[Fleet],
                                                                                          caplog: pytest.LogCaptureFixture) -> None:
    """--progress-source file: a job's log is read under its cluster's own tree (its spec.root,
    mounted here at that path); a cluster whose tree is not mounted here is followed through
    its Ray's log stream instead, said once."""
    f = fleet_of(made, gpus={"a": 1, "b": 1}, progress_source=ProgressSource.file)
    f.api.add_cluster("a", address="http://ray-a:8265", root="/private-a", preference=10)
    f.api.add_cluster("b", address="http://ray-b:8265", root="/private-b")
    f.files.unmounted.add("/private-b/users")
    one, two = f.api.create("one", spec()), f.api.create("two", spec())
    f.tick()
    assert (f.status(one)["cluster"], f.status(two)["cluster"]) == ("a", "b")
    assert f.status(one)["logFile"]["jobPath"].startswith("/private-a/users/alice/jobs/")
    for name, key in (("a", one), ("b", two)):
        f.rays[name].run(f.sid(key))
        f.rays[name].say(f.sid(key), "Total training steps: 10\nstep:4 - critic/score/mean:0.5\n")
    for _ in range(10):
        f.tick(1.0)
    for name, key in (("a", one), ("b", two)):
        f.rays[name].finish(f.sid(key))
    for _ in range(4):
        f.tick()
    assert (f.status(one)["progress"]["step"], f.status(two)["progress"]["step"]) == (4, 4)
    assert {path for path, _ in f.files.reads} == {f.status(one)["logFile"]["jobPath"]} and set(f.files.roots) == {"/private-a/users"}
    assert not any(op == "logs" and sid == f.sid(one) for op, sid in f.rays["a"].calls)  # a: by file only
    assert any(op == "logs" for op, _ in f.rays["b"].calls)  # b: by its Ray's stream
    said = [r.getMessage() for r in caplog.records if "is not mounted here" in r.getMessage()]
    assert len(said) == 1 and "cluster b (/private-b/users)" in said[0]


def test_the_doctor_verdict_shows_in_the_clusters_status(made: list[Fleet]) -> None:
    from argus.core.clusters import doctor_summary
    from argus.core.doctor import Check, Row, Status
    f = fleet_of(made, gpus={"a": 4})
    f.api.add_cluster("a", address="http://ray-a:8265")
    f.tick()
    assert "doctor" not in f.api.clusters["a"]["status"]
    f.control_loop.doctor_verdicts["a"] = doctor_summary([Row("w1", Check.python3, Status.fail, "no python3")], "2026-12-05T10:00:00Z")
    f.tick()
    assert f.api.clusters["a"]["status"]["doctor"] == {"checkedAt": "2026-12-05T10:00:00Z", "verdict": "Failed", "failed": 1,
                                                       "warnings": 0, "message": "w1 python3: no python3"}


def test_a_clusters_token_comes_from_its_secret(made: list[Fleet]) -> None:
    f = fleet_of(made, gpus={"a": 1})
    f.api.secrets[("argus-system", "ray-a")] = {"token": "s3cret"}
    f.api.add_cluster("a", address="http://ray-a:8265", tokenSecret={"name": "ray-a"})
    f.tick()
    assert f.tokens["a"]() == "s3cret"


def test_a_new_attempt_stays_on_its_cluster_unless_move_on_retry(made: list[Fleet]) -> None:
    f = fleet_of(made, gpus={"a": 1, "b": 1})
    f.api.add_cluster("a", address="http://ray-a:8265", preference=10)
    f.api.add_cluster("b", address="http://ray-b:8265")
    stay = f.api.create("stay", spec(restartPolicy="OnFailure"))
    move = f.api.create("move", spec(restartPolicy="OnFailure", moveOnRetry=True))
    f.tick()
    assert (f.status(stay)["cluster"], f.status(move)["cluster"]) == ("a", "b")
    # Both fail; a is taken by a job outside Argus meanwhile.
    for key in (stay, move):
        ray = f.rays[f.status(key)["cluster"]]
        ray.run(f.sid(key))
        ray.finish(f.sid(key), "FAILED")
    node = f.rays["a"].nodes_[1]
    f.rays["a"].nodes_[1] = node.__class__("w1", node.resources_total, gpus_used=1.0)
    for _ in range(3):
        f.tick()
    assert (f.status(stay)["attempt"], f.status(stay)["phase"]) == (2, "Queued")  # waits for a
    assert (f.status(move)["attempt"], f.status(move)["cluster"]) == (2, "b")
    f.rays["a"].nodes_[1] = node
    f.tick()
    assert (f.status(stay)["attempt"], f.status(stay)["cluster"], f.status(stay)["phase"]) == (2, "a", "Submitted")
    records = f.status(stay)["attempts"]
    assert [r.get("cluster") for r in records] == ["a", "a"]


def test_without_argusclusters_everything_goes_to_ray_address(made: list[Fleet]) -> None:
    f = fleet_of(made, gpus={})
    key = f.api.create("t", spec())
    f.tick()
    assert f.sid(key) in f.implicit.jobs
    status = f.status(key)
    assert "cluster" not in status and "argus.io/placement" not in (f.api.objects[key]["metadata"].get("annotations") or {})
    assert status["rayJob"]["dashboardUrl"] == "http://ray-head:8265"


def verl_verdict(found: str | None, supported: tuple[str, ...] = ("0.9.1",)) -> Any:
    """argus doctor's verdict on a cluster whose probe read verl ``found`` in its snapshot."""
    from argus.core.clusters import doctor_summary
    from argus.core.doctor import Check, Row, Status
    status = Status.ok if found in supported else Status.fail
    return doctor_summary([Row("w1", Check.verl, status, f"/private/common/verl: verl {found}", found=found)],
                          "2026-12-06T08:00:00Z", supported)


def condition(status: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions") or () if c["type"] == type_), None)


def test_verl_drift_holds_new_tasks_back_leaves_running_ones_and_a_clean_verdict_releases_them(made: list[Fleet]) -> None:
    f = fleet_of(made, gpus={"a": 4})
    f.api.add_cluster("a", address="http://ray-a:8265")
    running = f.api.create("running", spec())
    f.tick()
    assert f.status(running)["phase"] == "Submitted"
    f.rays["a"].run(f.sid(running))
    # The doctor finds verl 0.6.1 in a's snapshot; Argus composes with 0.9.1.
    f.control_loop.doctor_verdicts["a"] = verl_verdict("0.6.1")
    held = f.api.create("held", spec())
    f.tick()
    f.tick()
    status = f.status(held)
    assert (status["phase"], status["reason"]) == ("Queued", "VerlDrift")
    assert "cluster a runs verl 0.6.1" in status["message"] and "composed for verl 0.9.1" in status["message"]
    assert not any(op == "submit" for op, sid in f.rays["a"].calls if sid == f.sid(held))
    assert f.status(running)["phase"] == "Running"  # running tasks are left alone
    # The ArgusCluster says so: its doctor verdict failed, and the VerlDrift condition.
    cluster = f.api.clusters["a"]["status"]
    assert cluster["doctor"]["verdict"] == "Failed" and cluster["doctor"]["verlVersions"] == ["0.6.1"]
    drift = condition(cluster, "VerlDrift")
    assert drift is not None and (drift["status"], drift["reason"]) == ("True", "VerlDrift")
    assert "runs verl 0.6.1, but Argus composes with verl 0.9.1" in drift["message"]
    # The next verdict is clean: the task goes, and the condition turns False.
    f.control_loop.doctor_verdicts["a"] = verl_verdict("0.9.1")
    f.tick()
    f.tick()
    assert f.status(held)["phase"] == "Submitted" and f.status(held)["cluster"] == "a"
    drift = condition(f.api.clusters["a"]["status"], "VerlDrift")
    assert drift is not None and (drift["status"], drift["reason"]) == ("False", "VerlMatches")


def test_a_cluster_whose_verl_is_not_known_yet_holds_nothing_back(made: list[Fleet]) -> None:
    # The doctor has not run (or is off, or no probe read a version): nothing is known, and the
    # queue does not guess; verl's own start still says it when the version is wrong.
    f = fleet_of(made, gpus={"a": 4})
    f.api.add_cluster("a", address="http://ray-a:8265")
    f.control_loop.doctor_verdicts["a"] = verl_verdict(None)
    key = f.api.create("t", spec())
    f.tick()
    assert f.status(key)["phase"] == "Submitted"
    assert condition(f.api.clusters["a"]["status"], "VerlDrift") is None


def test_a_task_that_may_use_a_clean_cluster_runs_there_past_a_drifted_one(made: list[Fleet]) -> None:
    f = fleet_of(made, gpus={"a": 4, "b": 4})
    f.api.add_cluster("a", address="http://ray-a:8265", preference=10)
    f.api.add_cluster("b", address="http://ray-b:8265")
    f.control_loop.doctor_verdicts["a"] = verl_verdict("0.6.1")
    f.control_loop.doctor_verdicts["b"] = verl_verdict("0.9.1")
    anywhere, pinned = f.api.create("anywhere", spec()), f.api.create("pinned", spec(cluster="a"))
    f.tick()
    f.tick()
    assert (f.status(anywhere)["phase"], f.status(anywhere)["cluster"]) == ("Submitted", "b")
    assert f.sid(anywhere) in f.rays["b"].jobs and not f.rays["a"].jobs
    assert (f.status(pinned)["phase"], f.status(pinned)["reason"]) == ("Queued", "VerlDrift")


def test_a_doctor_run_that_reads_no_version_keeps_the_last_one() -> None:
    import asyncio as aio

    from argus.controller.doctor import DoctorLoop
    from argus.core.doctor import Check, DoctorSettings, Row, Status

    class Stub:
        def __init__(self, rows: list[Row]):
            self.rows, self.settings = rows, DoctorSettings(PlatformConfig(), expected_verl=("0.9.1",))

        async def run(self) -> list[Row]:
            return self.rows

    drifted = Stub([Row("w1", Check.verl, Status.fail, "verl 0.6.1", found="0.6.1")])
    blind = Stub([Row("w1", Check.probe, Status.warn, "the probe did not start")])
    current: list[Any] = [drifted]

    async def named() -> list[tuple[str, Any]]:
        return [("a", current[0])]

    verdicts: dict[str, Any] = {}
    loop = DoctorLoop(drifted, 60, leads=lambda: True, observe=lambda rows, name: None, post_event=None, monotonic=lambda: 0.0,
                      named=named, verdicts=verdicts, now=lambda: "2026-12-06T08:00:00Z")
    aio.run(loop.run_once())
    assert verdicts["a"].verl_versions == ["0.6.1"] and verdicts["a"].supported_verl == ["0.9.1"]
    current[0] = blind
    aio.run(loop.run_once())
    assert verdicts["a"].verl_versions == ["0.6.1"]  # not released by a run that did not look


def test_a_restarted_operator_holds_back_by_the_verdict_the_status_keeps(made: list[Fleet]) -> None:
    # Before the new process's first doctor run, the verdict in the ArgusCluster's status counts.
    f = fleet_of(made, gpus={"a": 4})
    f.api.add_cluster("a", address="http://ray-a:8265")
    f.api.clusters["a"]["status"] = {"doctor": verl_verdict("0.6.1").model_dump(by_alias=True, exclude_none=True, mode="json")}
    key = f.api.create("t", spec())
    f.tick()
    f.tick()
    assert (f.status(key)["phase"], f.status(key)["reason"]) == ("Queued", "VerlDrift")
    assert f.control_loop.doctor_verdicts == {}


# --- without one rule of the chart's roles (tests/integration/test_chart.py removes each for real,
# one case per kind of symptom; the other rules' refusals are here: the same symptom, the same
# API server message in a warning)

def warned(caplog: pytest.LogCaptureFixture, words: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and words in r.getMessage()]


def test_without_list_on_argusclusters_tasks_go_to_ray_address_and_the_log_says_why(made: list[Fleet], caplog: pytest.LogCaptureFixture) -> None:
    f = fleet_of(made, gpus={"a": 4})
    f.api.add_cluster("a", address="http://ray-a:8265")
    f.api.refused["list_clusters"] = forbidden("list", "argusclusters")
    key = f.api.create("t", spec())
    for _ in range(3):
        f.tick()
    assert f.status(key)["phase"] == "Submitted" and "cluster" not in f.status(key)
    assert f.implicit.count("submit") == 1 and "a" not in f.rays
    said = warned(caplog, 'cannot list resource "argusclusters"')
    assert len(said) == 1 and said[0].startswith("cannot read the ArgusClusters: "), said  # said once, not at every read


@pytest.mark.parametrize(("method", "verb", "resource"), [
    ("set_cluster_finalizers", "patch", "argusclusters"),      # the finalizer that holds a cluster while tasks are on it
    ("patch_cluster_status", "patch", "argusclusters/status"),
])
def test_without_patch_on_an_arguscluster_its_tasks_run_and_the_log_says_why(made: list[Fleet], caplog: pytest.LogCaptureFixture,
                                                                             method: str, verb: str, resource: str) -> None:
    f = fleet_of(made, gpus={"a": 4})
    f.api.add_cluster("a", address="http://ray-a:8265")
    f.api.refused[method] = forbidden(verb, resource, "a")
    key = f.api.create("t", spec())
    f.tick()
    f.tick()
    f.rays["a"].run(f.sid(key))
    f.rays["a"].finish(f.sid(key))
    for _ in range(3):
        f.tick()
    assert (f.status(key)["phase"], f.status(key)["cluster"]) == ("Succeeded", "a")
    said = warned(caplog, f'cannot {verb} resource "{resource}"')
    assert said and said[0].startswith("cannot update ArgusCluster a: "), said
    assert not f.api.clusters["a"]["metadata"].get("finalizers")  # never held: the one refusal stops the pass's writes
    assert ("status" in f.api.clusters["a"]) == (method != "patch_cluster_status")  # written once the finalizer is not wanted


def test_without_get_on_secrets_a_clusters_tasks_run_without_its_token_and_the_log_says_why(made: list[Fleet],
                                                                                          caplog: pytest.LogCaptureFixture) -> None:
    f = fleet_of(made, gpus={"a": 1})
    f.api.secrets[("argus-system", "ray-a")] = {"token": "s3cret"}
    f.api.add_cluster("a", address="http://ray-a:8265", tokenSecret={"name": "ray-a"})
    f.api.refused["secret_value"] = forbidden("get", "secrets", "ray-a", "argus-system")
    key = f.api.create("t", spec())
    for _ in range(3):
        f.tick()
    assert f.tokens["a"]() is None and f.status(key)["phase"] == "Submitted"
    said = warned(caplog, 'cannot get resource "secrets"')
    assert len(said) == 1 and said[0].startswith("ArgusCluster a: cannot read its token (Secret argus-system/ray-a): "), said


@pytest.mark.parametrize(("method", "resource"), [("ray_cluster", "rayclusters"), ("service", "services")])
def test_without_get_on_a_references_objects_the_cluster_is_unresolved_and_its_tasks_wait(made: list[Fleet], caplog: pytest.LogCaptureFixture,
                                                                                         method: str, resource: str) -> None:
    f = fleet_of(made, gpus={"k": 4})
    kuberay(f)
    f.api.add_cluster("k", rayClusterRef={"name": "gpu", "namespace": "ray"})
    f.api.refused[method] = forbidden("get", resource, "gpu", "ray")
    key = f.api.create("t", spec())
    for _ in range(3):
        f.tick()
    reachable = next(c for c in f.api.clusters["k"]["status"]["conditions"] if c["type"] == "RayReachable")
    assert (reachable["status"], reachable["reason"]) == ("False", "RayClusterRefUnresolved")
    assert reachable["message"].startswith("spec.rayClusterRef: cannot read RayCluster ray/gpu: ") and f'cannot get resource "{resource}"' in reachable["message"]
    assert f.status(key)["phase"] == "Queued" and f.connected == []
    assert len(warned(caplog, f'cannot get resource "{resource}"')) == 1


def test_a_drifted_implicit_cluster_holds_new_tasks_back_too(made: list[Fleet]) -> None:
    # No ArgusCluster: the cluster of --ray-address. The doctor's verdict on it counts as an
    # ArgusCluster's does (it has no status to show it, and a restart forgets it until the
    # first doctor run, which comes at once).
    f = fleet_of(made, gpus={})
    f.control_loop.doctor_verdicts[""] = verl_verdict("0.6.1")
    key = f.api.create("t", spec())
    f.tick()
    f.tick()
    status = f.status(key)
    assert (status["phase"], status["reason"]) == ("Queued", "VerlDrift")
    assert "the Ray cluster of --ray-address runs verl 0.6.1" in status["message"], status["message"]
    assert not any(op == "submit" for op, _ in f.implicit.calls)
    f.control_loop.doctor_verdicts[""] = verl_verdict("0.9.1")
    f.tick()
    f.tick()
    assert f.status(key)["phase"] == "Submitted"


def test_the_doctor_keeps_its_verdict_on_the_implicit_cluster() -> None:
    import asyncio as aio

    from argus.controller.doctor import DoctorLoop
    from argus.core.doctor import Check, DoctorSettings, Row, Status

    class Stub:
        settings = DoctorSettings(PlatformConfig(), expected_verl=("0.9.1",))

        async def run(self) -> list[Row]:
            return [Row("w1", Check.verl, Status.fail, "verl 0.6.1", found="0.6.1")]

    verdicts: dict[str, Any] = {}
    loop = DoctorLoop(Stub(), 60, leads=lambda: True, observe=lambda rows, name: None, post_event=None, monotonic=lambda: 0.0,
                      verdicts=verdicts, now=lambda: "2026-12-06T08:00:00Z")
    aio.run(loop.run_once())
    assert verdicts[""].verl_versions == ["0.6.1"] and verdicts[""].supported_verl == ["0.9.1"]
