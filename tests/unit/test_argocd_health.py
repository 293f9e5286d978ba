"""The Argo CD health check for ArgusTask (deploy/argocd/resource_customizations/argus.io/
ArgusTask), run for real: every case of its health_test.yaml (Argo CD's own layout and test
format) through health.lua in Lua 5.1, the dialect of Argo CD's gopher-lua, via lupa."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
HEALTH = REPO / "deploy" / "argocd" / "resource_customizations" / "argus.io" / "ArgusTask"
CASES = yaml.safe_load((HEALTH / "health_test.yaml").read_text())["tests"]
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


def health(obj: dict[str, Any]) -> dict[str, Any]:
    lua = lua_runtime()
    lua.globals().obj = to_lua(lua, obj)
    result = lua.execute((HEALTH / "health.lua").read_text())
    return {"status": result["status"], "message": result["message"]}


@pytest.mark.parametrize("case", CASES, ids=[Path(c["inputPath"]).stem for c in CASES])
def test_health_test_yaml_case(case: dict[str, Any]) -> None:
    obj = yaml.safe_load((HEALTH / case["inputPath"]).read_text())
    assert health(obj) == case["healthStatus"]


def test_every_testdata_file_is_a_case_and_every_phase_is_covered() -> None:
    files = {f"testdata/{p.name}" for p in (HEALTH / "testdata").glob("*.yaml")}
    assert files == {c["inputPath"] for c in CASES}
    phases = {(yaml.safe_load((HEALTH / c["inputPath"]).read_text()).get("status") or {}).get("phase") for c in CASES}
    assert set(PHASES) | {None} <= phases
    statuses = {c["healthStatus"]["status"] for c in CASES}
    # Never Suspended: in Argo CD that means "paused, waiting to resume", and a task never resumes.
    assert statuses == {"Healthy", "Degraded", "Progressing"}


@pytest.mark.parametrize("phase,expected", [("Succeeded", "Healthy"), ("Failed", "Degraded"), ("Rejected", "Degraded"),
                                            ("Queued", "Progressing"), ("Submitted", "Progressing"), ("Running", "Progressing"),
                                            ("Stopped", "Degraded"), ("Exploded", "Unknown")])
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


def test_the_script_only_reads_obj() -> None:
    """Argo CD runs the script in a sandbox with only ``obj`` (and the standard library)."""
    lua = lua_runtime()
    lua.globals().obj = to_lua(lua, {"metadata": {}, "status": {"phase": "Succeeded"}})
    before = set(lua.globals().keys())
    lua.execute((HEALTH / "health.lua").read_text())
    assert set(lua.globals().keys()) == before  # no globals leaked (every variable is local)


def test_docs_snippet_is_the_script() -> None:
    """docs/argocd.md's argocd-cm snippet carries health.lua verbatim (indented 4)."""
    doc = (REPO / "docs" / "argocd.md").read_text()
    key = "  resource.customizations.health.argus.io_ArgusTask: |\n"
    assert key in doc
    block = doc.split(key, 1)[1].split("```", 1)[0]
    unindented = "".join(line[4:] if line.strip() else line for line in block.splitlines(True))
    assert unindented == (HEALTH / "health.lua").read_text()


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
