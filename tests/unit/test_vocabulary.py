"""The task vocabulary (``core.vocabulary``): the values the API carries are pinned here
literally, and every place that lists phases or reasons by hand (docs/lifecycle.md's table,
the README's Status section, the Argo CD health script and its test data) agrees with it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from argus.core.conditions import ConditionType
from argus.core.rayjobs import RayJobState
from argus.core.vocabulary import (
    ACTIVE_PHASES,
    CLUSTER_REACHABILITY_REASONS,
    END_PHASES,
    EVENT_REASONS,
    REASONS_BY_PHASE,
    STATUS_REASONS,
    ClusterReason,
    Phase,
    Reason,
    is_active,
    is_ended,
    spec_gpus,
    task_shape,
)

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
HEALTH = REPO / "deploy" / "argocd" / "resource_customizations" / "argus.io" / "ArgusTask"


def test_the_values_written_to_the_api_are_pinned() -> None:
    """What the status, conditions and Events carry: changing one breaks users' scripts,
    alerts and the Argo CD check, so it is spelled out here, not computed."""
    assert [p.value for p in Phase] == ["Queued", "Submitted", "Running", "Suspended", "Succeeded", "Failed", "Stopped", "Rejected"]
    assert sorted(r.value for r in Reason) == sorted([
        "Validated", "Queued", "Unschedulable", "QuotaExceeded", "NoCluster", "VerlDrift", "InputMissing", "SecretMissing", "Retrying", "Resumed",
        "Preempted", "Preempting", "Suspended", "InvalidSpec", "NamespaceNotOnboarded", "InvalidUser",
        "Admitted", "AdoptedExistingJob", "RayJobPending", "RayJobRunning", "RayJobSucceeded", "RayJobFailed", "RayJobLost",
        "RayJobStopped", "RaySubmitFailed", "DeadlineExceeded", "BackoffLimitExceeded", "Cancelled", "RayUnreachable",
        "RayAuthFailed", "RayReachable", "WeakCheck", "PlacementViolation", "FinalizerReleased", "KeptForGitOps"])
    assert all(r.name == r.value for r in Reason)


def test_the_conditions_and_cluster_reasons_written_to_the_api_are_pinned() -> None:
    """Condition types (``kubectl wait --for=condition=Finished``), an ArgusCluster's reasons
    (the Argo CD check's messages) and Ray's job states as recorded: spelt out, not computed."""
    assert [t.value for t in ConditionType] == ["Admitted", "Running", "Complete", "Failed", "Finished", "Suspended", "RayReachable",
                                               "Deleting", "VerlDrift"]
    assert [r.value for r in ClusterReason] == ["RayReachable", "RayUnreachable", "RayAuthFailed", "RayClusterRefUnresolved",
                                               "VerlDrift", "VerlMatches", "TasksOnCluster", "NoTasks"]
    assert [r.value for r in CLUSTER_REACHABILITY_REASONS] == ["RayReachable", "RayUnreachable", "RayAuthFailed", "RayClusterRefUnresolved"]
    assert [s.value for s in RayJobState] == ["PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED"]
    assert f"{ConditionType.Finished}" == "Finished" and f"{ClusterReason.NoTasks}" == "NoTasks" and f"{RayJobState.FAILED}" == "FAILED"


def test_a_reason_is_its_value_wherever_it_is_written() -> None:
    """A StrEnum: str(), format and JSON give the bare word (a plain (str, Enum) would
    format as 'Reason.RayJobLost' in an f-string)."""
    import json
    assert str(Reason.RayJobLost) == f"{Reason.RayJobLost}" == "RayJobLost"
    assert json.dumps({"reason": Reason.RayJobLost}) == '{"reason": "RayJobLost"}'
    assert Reason.RayJobLost == "RayJobLost"


def test_phase_sets() -> None:
    assert set(ACTIVE_PHASES) == {Phase.Submitted, Phase.Running}
    assert set(END_PHASES) == {Phase.Succeeded, Phase.Failed, Phase.Stopped, Phase.Rejected}
    assert [p.value for p in Phase if p.active] == ["Submitted", "Running"]
    assert [is_active(p) for p in ("Queued", "Submitted", "Running", "Failed", None, "", "Exploded")] == [False, True, True, False, False, False, False]
    assert [is_ended(p) for p in ("Queued", "Running", "Succeeded", "Rejected", None, "Exploded")] == [False, False, True, True, False, False]
    assert set(REASONS_BY_PHASE) == set(Phase)
    assert set(STATUS_REASONS) | set(EVENT_REASONS) | {Reason.RayReachable} == set(Reason)


@pytest.mark.parametrize("spec,shape", [({}, (1, 1)), ({"nnodes": 2, "nGpusPerNode": 8}, (2, 8)), ({"nnodes": "2", "nGpusPerNode": 0}, (1, 1)),
                                        ({"nnodes": True, "nGpusPerNode": 4}, (1, 4))])
def test_a_tasks_gpus(spec: dict[str, object], shape: tuple[int, int]) -> None:
    assert task_shape(spec) == shape
    assert spec_gpus(spec) == shape[0] * shape[1]


def _code_words(text: str) -> list[str]:
    return re.findall(r"`([A-Za-z]+)`", text)


def test_docs_lifecycle_table_is_the_vocabulary() -> None:
    doc = (REPO / "docs" / "lifecycle.md").read_text()
    table = doc.split("## Phases and reasons", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = set(_code_words(cells[1]))
    assert rows == {p.value: {r.value for r in REASONS_BY_PHASE[p]} for p in Phase}, \
        "docs/lifecycle.md's 'Phases and reasons' table is stale: make it list core.vocabulary.REASONS_BY_PHASE"


def test_readme_status_section_is_the_vocabulary() -> None:
    readme = (REPO / "README.md").read_text()
    reasons = readme.split("Reasons you may\nmeet:", 1)[1].split("`kubectl describe`", 1)[0]
    assert set(_code_words(reasons)) == {r.value for r in STATUS_REASONS}, \
        "README.md's 'Reasons you may meet' is stale: make it list core.vocabulary.STATUS_REASONS"
    phases = readme.split("Age; `-o wide` adds User, Ray job, Reason, Attempt, Cluster and Run. Phases:", 1)[1].split("(every problem", 1)[0]
    assert set(_code_words(phases)) == {p.value for p in Phase}


def test_the_docs_name_an_argusclusters_reachability_reasons_as_the_vocabulary() -> None:
    deploy = (REPO / "docs" / "deploy.md").read_text().split("the `RayReachable` condition (reason ", 1)[1].split(")", 1)[0]
    argocd = (REPO / "docs" / "argocd.md").read_text().split("| `RayReachable=False` (reason ", 1)[1].split(")", 1)[0]
    assert set(_code_words(deploy)) == {r.value for r in CLUSTER_REACHABILITY_REASONS}, "docs/deploy.md's ArgusCluster status row is stale"
    assert set(_code_words(argocd)) == {r.value for r in CLUSTER_REACHABILITY_REASONS} - {ClusterReason.RayReachable}, \
        "docs/argocd.md's ArgusCluster health row is stale"


def _lua_phases(condition: str) -> set[str]:
    return set(re.findall(r'phase == "([A-Za-z]+)"', condition))


def test_the_argocd_health_script_groups_phases_as_the_vocabulary() -> None:
    """health.lua spells phases out (Argo CD runs it alone): its 'ended' test is END_PHASES,
    and the phases it calls Progressing are the others."""
    script = (HEALTH / "health.lua").read_text()
    ended = re.search(r"^local ended = (.*)$", script, re.M)
    assert ended is not None
    assert _lua_phases(ended.group(1)) == {p.value for p in END_PHASES}
    branches = dict(re.findall(r'^(?:else)?if (phase == .*?) then\n  hs\.status = "(\w+)"', script, re.M))
    by_status: dict[str, set[str]] = {}
    for condition, status in branches.items():
        by_status.setdefault(status, set()).update(_lua_phases(condition))
    assert by_status["Progressing"] | by_status["Suspended"] == {p.value for p in Phase if not p.terminal}
    assert by_status["Suspended"] == {Phase.Suspended.value}
    assert by_status["Healthy"] | by_status["Degraded"] == {p.value for p in END_PHASES}
    assert set().union(*by_status.values()) == {p.value for p in Phase}


def test_the_argocd_test_data_uses_the_vocabulary() -> None:
    for path in sorted((HEALTH / "testdata").glob("*.yaml")):
        status = yaml.safe_load(path.read_text()).get("status") or {}
        if status.get("reason"):
            assert status["reason"] in REASONS_BY_PHASE[Phase(status["phase"])], f"{path.name}: {status['phase']}/{status['reason']}"


def test_the_docs_checks_would_see_a_stale_list() -> None:
    """Negative control for the parsers above: a table row missing a reason is told apart."""
    row = "| `Queued` | `Validated`, `Queued` | waiting |"
    cells = [c.strip() for c in row.strip().strip("|").split("|")]
    assert set(_code_words(cells[1])) != {r.value for r in REASONS_BY_PHASE[Phase.Queued]}
    assert _lua_phases('phase == "Succeeded" or phase == "Failed"') != {p.value for p in END_PHASES}
