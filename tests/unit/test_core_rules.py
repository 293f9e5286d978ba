"""The spec's structural rules (``core.rules``), in their Python rendering. The CEL
rendering is checked in test_crd.py, which also shows both renderings agree."""

from __future__ import annotations

import pytest

from argus.core.rules import change_problems, kind_problems

pytestmark = pytest.mark.unit

HINT = ("an ArgusTask cannot be changed after creation (only spec.cancel may go from false to true, and spec.suspend and spec.ttlSecondsAfterFinished may change); "
        "create a new task with a new name instead")


def test_only_cancel_suspend_and_the_ttl_may_change_and_cancel_only_to_true() -> None:
    old = {"kind": "advanced", "command": "a", "nnodes": 1, "cancel": False}
    assert change_problems(old, dict(old)) == []
    assert change_problems(old, {**old, "cancel": True}) == []
    assert change_problems(old, {**old, "command": "b", "priority": 3}) == [
        f"spec.command is immutable: {HINT}", f"spec.priority is immutable: {HINT}"]
    assert change_problems({**old, "cancel": True}, old) == ["spec.cancel cannot go back from true to false: a cancelled task stays cancelled"]
    gone = dict(old)
    del gone["nnodes"]
    assert change_problems(old, gone) == [f"spec.nnodes is immutable: {HINT}"]
    # The time to live after the end may be set, moved or removed later (as on a Job).
    assert change_problems(old, {**old, "ttlSecondsAfterFinished": 600}) == []
    assert change_problems({**old, "ttlSecondsAfterFinished": 600}, old) == []
    # spec.suspend pauses and resumes: both ways.
    assert change_problems(old, {**old, "suspend": True}) == []
    assert change_problems({**old, "suspend": True}, {**old, "suspend": False}) == []


@pytest.mark.parametrize("spec,expected", [
    ({"kind": "advanced", "workload": "ppo"}, [("spec.command", None, "is required when spec.kind is advanced")]),
    ({"kind": "basic", "command": "x", "modelId": "m", "trainFile": "t", "valFile": "v"},
     [("spec.command", "x", "is only allowed when spec.kind is advanced (a basic spec builds the command from its template fields)")]),
    ({"kind": "advanced", "command": "x", "totalEpochs": 2},
     [("spec.totalEpochs", 2, "is a basic-spec field; an advanced spec gives the whole command in spec.command")]),
    ({"workload": "ppo", "modelId": "m"},  # kind defaults to basic
     [("spec.trainFile", None, "is required when spec.kind is basic"), ("spec.valFile", None, "is required when spec.kind is basic")]),
    ({"kind": "advanced", "command": "x"}, []),
])
def test_kind_rules(spec: dict, expected: list[tuple]) -> None:
    assert [(p.field, p.value, p.rule) for p in kind_problems(spec)] == expected
