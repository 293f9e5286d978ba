"""The Argo CD health checks for ArgusTask and ArgusCluster (deploy/argocd/
resource_customizations/argus.io/<Kind>), run for real: every case of each kind's
health_test.yaml (Argo CD's own layout and test format) through its health.lua in Lua 5.1, the
dialect of Argo CD's gopher-lua, via lupa."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
KINDS = ("ArgusTask", "ArgusCluster")
CHECKS = {kind: REPO / "deploy" / "argocd" / "resource_customizations" / "argus.io" / kind for kind in KINDS}
HEALTH = CHECKS["ArgusTask"]
CASES_OF = {kind: yaml.safe_load((CHECKS[kind] / "health_test.yaml").read_text())["tests"] for kind in KINDS}
CASES = CASES_OF["ArgusTask"]
ALL_CASES = [(kind, case) for kind in KINDS for case in CASES_OF[kind]]
PHASES = ("Queued", "Submitted", "Running", "Succeeded", "Failed", "Stopped", "Rejected")


def lua_runtime() -> Any:
    lupa = pytest.importorskip("lupa")
    try:
        from lupa.lua51 import LuaRuntime  # Argo CD's gopher-lua speaks Lua 5.1
    except ImportError:  # pragma: no cover - a lupa build without 5.1
        LuaRuntime = lupa.LuaRuntime
    return LuaRuntime(unpack_returned_tuples=True)


def to_lua(lua: Any, value: Any) -> Any:
    """YAML data as Argo CD hands it to the script: mappings and lists become tables (lists
    1-based), scalars stay scalars."""
    if isinstance(value, dict):
        table = lua.table()
        for k, v in value.items():
            table[k] = to_lua(lua, v)
        return table
    if isinstance(value, list):
        return lua.table(*[to_lua(lua, v) for v in value])
    return value


def health(obj: dict[str, Any], kind: str = "ArgusTask") -> dict[str, Any]:
    lua = lua_runtime()
    lua.globals().obj = to_lua(lua, obj)
    result = lua.execute((CHECKS[kind] / "health.lua").read_text())
    return {"status": result["status"], "message": result["message"]}


@pytest.mark.parametrize("kind,case", ALL_CASES, ids=[f"{k}-{Path(c['inputPath']).stem}" for k, c in ALL_CASES])
def test_health_test_yaml_case(kind: str, case: dict[str, Any]) -> None:
    obj = yaml.safe_load((CHECKS[kind] / case["inputPath"]).read_text())
    assert obj["kind"] == kind
    assert health(obj, kind) == case["healthStatus"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_testdata_file_is_a_case(kind: str) -> None:
    files = {f"testdata/{p.name}" for p in (CHECKS[kind] / "testdata").glob("*.yaml")}
    assert files == {c["inputPath"] for c in CASES_OF[kind]}
    # Suspended ("paused, waiting to resume" in Argo CD) only for a suspended ArgusTask.
    expected = {"Healthy", "Degraded", "Progressing"} | ({"Suspended"} if kind == "ArgusTask" else set())
    assert {c["healthStatus"]["status"] for c in CASES_OF[kind]} == expected


def test_every_task_phase_is_covered() -> None:
    phases = {(yaml.safe_load((HEALTH / c["inputPath"]).read_text()).get("status") or {}).get("phase") for c in CASES}
    assert set(PHASES) | {None} <= phases
    statuses = {c["healthStatus"]["status"] for c in CASES}
    # Suspended means "paused, waiting to resume" in Argo CD: only a Suspended task (spec.suspend).
    assert statuses == {"Healthy", "Degraded", "Progressing", "Suspended"}


@pytest.mark.parametrize("phase,expected", [("Succeeded", "Healthy"), ("Failed", "Degraded"), ("Rejected", "Degraded"),
                                            ("Queued", "Progressing"), ("Submitted", "Progressing"), ("Running", "Progressing"),
                                            ("Stopped", "Degraded"), ("Suspended", "Suspended"), ("Exploded", "Unknown")])
def test_phase_mapping(phase: str, expected: str) -> None:
    obj = {"metadata": {"generation": 3}, "status": {"phase": phase, "observedGeneration": 3, "message": "m"}}
    assert health(obj)["status"] == expected
    if expected in ("Degraded", "Healthy"):
        # A stopped task says so: Degraded alone would not tell it from a failure.
        assert health(obj)["message"] == ("Stopped: m" if phase == "Stopped" else "m")


def test_generation_ahead_is_progressing_until_observed() -> None:
    obj = {"metadata": {"generation": 2}, "status": {"phase": "Queued", "observedGeneration": 1}}
    assert health(obj) == {"status": "Progressing", "message": "Waiting for the Argus operator to observe generation 2"}
    obj["status"]["observedGeneration"] = 2
    assert health(obj)["status"] == "Progressing" and health(obj)["message"].startswith("Queued")


@pytest.mark.parametrize("kind,obj", [
    ("ArgusTask", {"metadata": {}, "status": {"phase": "Succeeded"}}),
    ("ArgusCluster", {"metadata": {}, "status": {"conditions": [{"type": "RayReachable", "status": "True"}]}}),
])
def test_the_script_only_reads_obj(kind: str, obj: dict[str, Any]) -> None:
    """Argo CD runs the script in a sandbox with only ``obj`` (and the standard library)."""
    lua = lua_runtime()
    lua.globals().obj = to_lua(lua, obj)
    before = set(lua.globals().keys())
    lua.execute((CHECKS[kind] / "health.lua").read_text())
    assert set(lua.globals().keys()) == before  # no globals leaked (every variable is local)


@pytest.mark.parametrize("kind", KINDS)
def test_docs_snippet_is_the_script(kind: str) -> None:
    """docs/argocd.md's argocd-cm snippet carries each health.lua verbatim (indented 4)."""
    doc = (REPO / "docs" / "argocd.md").read_text()
    key = f"  resource.customizations.health.argus.io_{kind}: |\n"
    assert doc.count(key) == 1
    block = doc.split(key, 1)[1]
    block = block.split("```", 1)[0]
    # The next key of the same ConfigMap, if any, ends this one.
    block = block.split("\n  resource.customizations.", 1)[0] + ("\n" if "\n  resource.customizations." in block else "")
    unindented = "".join(line[4:] if line.strip() else line for line in block.splitlines(True))
    assert unindented == (CHECKS[kind] / "health.lua").read_text()


def lifecycle_task(phase: str, reason: str, seen: object) -> dict[str, Any]:
    """An ArgusTask whose status is what the operator's own lifecycle writes after ``seen``."""
    import datetime as dt  # noqa: PLC0415

    from argus.core.lifecycle import LifecycleSettings, TaskState, step  # noqa: PLC0415
    from argus.core.spec import ArgusTaskStatus, RayJobStatus  # noqa: PLC0415

    status = ArgusTaskStatus(phase=phase, reason=reason, message="m", observed_generation=1,
                             ray_job=RayJobStatus(submission_id="argus-alice-t-0b6f3c4e", status="RUNNING") if phase != "Queued" else None)
    task = TaskState(namespace="alice", name="t", uid="0b6f3c4e-0000", status=status, generation=1, holds_finalizer=True)
    now = dt.datetime(2026, 12, 3, 8, 0, tzinfo=dt.UTC)
    written = step(task, seen, now, LifecycleSettings(ray_grace_seconds=300)).status  # type: ignore[arg-type]
    return {"metadata": {"generation": 1}, "status": written.model_dump(by_alias=True, exclude_none=True)}


@pytest.mark.parametrize("phase,reason", [("Running", "RayJobRunning"), ("Submitted", "Admitted")])
def test_a_running_task_whose_operator_lost_ray_is_not_plainly_running(phase: str, reason: str) -> None:
    # Progressing, with why: the operator waits out its grace, then fails the task if Ray is still away.
    from argus.core.lifecycle import RayUnreachable  # noqa: PLC0415
    obj = lifecycle_task(phase, reason, RayUnreachable("Cannot connect to http://ray-head:8265"))
    assert health(obj) == {"status": "Progressing", "message": f"{phase}: Ray unreachable: Cannot connect to http://ray-head:8265"}


@pytest.mark.parametrize("phase,reason", [("Running", "RayJobRunning"), ("Queued", "Queued")])
def test_a_task_whose_token_ray_refuses_is_degraded(phase: str, reason: str) -> None:
    # Only a person fixes the token; until then nothing is submitted or followed.
    from argus.core.lifecycle import RayUnreachable, Waiting  # noqa: PLC0415
    error = "HTTP 401: the Ray cluster requires a token and none was sent"
    seen = (Waiting("Queued", "first in the queue", ray_error=error, ray_reason="RayAuthFailed") if phase == "Queued"
            else RayUnreachable(error, reason="RayAuthFailed"))
    result = health(lifecycle_task(phase, reason, seen))
    assert result["status"] == "Degraded"
    assert result["message"].startswith(f"{phase}: Ray refused the operator's credentials (HTTP 401") and "--ray-token-file" in result["message"]


def test_an_unschedulable_task_is_degraded_a_waiting_one_is_not() -> None:
    queued = {"metadata": {"generation": 1}, "status": {"phase": "Queued", "observedGeneration": 1, "reason": "Unschedulable",
                                                         "message": "needs 8 GPUs (2 nodes x 4), the cluster has 4 on its workers"}}
    assert health(queued) == {"status": "Degraded", "message": "Unschedulable: needs 8 GPUs (2 nodes x 4), the cluster has 4 on its workers"}
    queued["status"].update(reason="Queued", message="position 3")
    assert health(queued) == {"status": "Progressing", "message": "Queued: position 3"}
    # Ray answering again: back to plain progress.
    reachable = {"type": "RayReachable", "status": "True", "reason": "RayReachable", "message": "the Ray dashboard answers"}
    running = {"metadata": {"generation": 1}, "status": {"phase": "Running", "observedGeneration": 1, "message": "ok", "conditions": [reachable]}}
    assert health(running) == {"status": "Progressing", "message": "Running: ok"}


# --------------------------------------------------------------------------- ArgusCluster

def argus_cluster(*conditions: dict[str, Any], **figures: Any) -> dict[str, Any]:
    return {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusCluster", "metadata": {"name": "gpu-a", "generation": 1},
            "spec": {"address": "http://ray-a:8265"}, "status": {"conditions": list(conditions), **figures}}


REACHABLE = {"type": "RayReachable", "status": "True", "reason": "RayReachable", "message": "Ray answers at http://ray-a:8265"}


@pytest.mark.parametrize("reason", ["RayUnreachable", "RayAuthFailed"])
def test_cluster_ray_lost_is_degraded_with_the_reason(reason: str) -> None:
    lost = {"type": "RayReachable", "status": "False", "reason": reason, "message": "Ray at http://ray-a:8265 cannot be read: boom"}
    assert health(argus_cluster(lost), "ArgusCluster") == {
        "status": "Degraded", "message": f"{reason}: Ray at http://ray-a:8265 cannot be read: boom"}


def test_cluster_reachable_is_healthy_with_its_figures() -> None:
    obj = argus_cluster(REACHABLE, rayVersion="2.47.1", workerNodes=1, gpus=4, freeGpus=0, running=4, queued=12)
    assert health(obj, "ArgusCluster") == {"status": "Healthy", "message": "Ray 2.47.1, worker nodes: 1, GPUs free: 0/4, running: 4, queued: 12"}


def test_cluster_deleting_wins_whatever_ray_says() -> None:
    deleting = {"type": "Deleting", "status": "True", "reason": "TasksOnCluster", "message": "waiting for the tasks on it to end: a/t"}
    for ray in (REACHABLE, {**REACHABLE, "status": "False", "reason": "RayUnreachable"}):
        assert health(argus_cluster(ray, deleting), "ArgusCluster") == {"status": "Progressing", "message": "Deleting: waiting for the tasks on it to end: a/t"}
    assert health(argus_cluster(deleting), "ArgusCluster")["status"] == "Progressing"
    # A Deleting condition that is no longer True counts for nothing.
    assert health(argus_cluster(REACHABLE, {**deleting, "status": "False"}), "ArgusCluster")["status"] == "Healthy"


@pytest.mark.parametrize("obj", [{"metadata": {"name": "gpu-a"}}, {"metadata": {}, "status": {}}, {"metadata": {}, "status": {"conditions": []}},
                                 argus_cluster({"type": "Deleting", "status": "False", "reason": "NoTasks", "message": ""})])
def test_cluster_not_yet_looked_at_is_progressing(obj: dict[str, Any]) -> None:
    assert health(obj, "ArgusCluster") == {"status": "Progressing", "message": "Waiting for the Argus operator's first look at this Ray cluster"}


def test_cluster_testdata_is_valid_argusclusters() -> None:
    """The cases are objects the CRD admits: their spec and status parse with the API's models."""
    from argus.core.clusters import ArgusClusterStatus, parse_cluster  # noqa: PLC0415

    for case in CASES_OF["ArgusCluster"]:
        obj = yaml.safe_load((CHECKS["ArgusCluster"] / case["inputPath"]).read_text())
        parse_cluster(obj)
        ArgusClusterStatus.model_validate(obj.get("status") or {})


@pytest.mark.parametrize("error,reason", [(None, ""), ("Cannot connect to http://ray-a:8265", "RayUnreachable"),
                                          ("HTTP 401: the Ray cluster requires a token", "RayAuthFailed")])
@pytest.mark.parametrize("holding", [None, (), ("alice/t",)])
def test_cluster_status_as_the_operator_writes_it(error: str | None, reason: str, holding: tuple[str, ...] | None) -> None:
    """The status the operator's own code writes after a pass (core.clusters.cluster_status)."""
    clusters = pytest.importorskip("argus.core.clusters")
    if not hasattr(clusters, "cluster_status"):
        pytest.skip("the installed argus has no core.clusters.cluster_status (the operator side of ArgusCluster)")
    report = clusters.ClusterReport(error=error, error_reason=reason, version="2.52.1" if error is None else None,
                                    worker_nodes=2 if error is None else None, gpus=8.0 if error is None else None,
                                    free_gpus=3.0 if error is None else None, running=len(holding or ()), queued=1,
                                    deleting=holding is not None, holding=holding or ())
    status = clusters.cluster_status(clusters.ArgusClusterStatus(), report, address="http://ray-a:8265", now="2026-12-01T10:00:00Z",
                                     generation=1)
    obj = {"metadata": {"name": "gpu-a", "generation": 1}, "status": status.model_dump(by_alias=True, exclude_none=True, mode="json")}
    result = health(obj, "ArgusCluster")
    if holding is not None:
        assert result["status"] == "Progressing" and result["message"].startswith("Deleting: ")
        assert all(task in result["message"] for task in holding)
    elif error is None:
        assert result == {"status": "Healthy", "message": "Ray 2.52.1, worker nodes: 2, GPUs free: 3/8, running: 0, queued: 1"}
    else:
        assert result["status"] == "Degraded" and result["message"].startswith(f"{reason}: ") and error in result["message"]
