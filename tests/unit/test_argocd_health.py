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
