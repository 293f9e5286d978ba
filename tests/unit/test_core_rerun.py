"""``core.rerun``: a new task's manifest from an old one with ``--set`` changes."""

from __future__ import annotations

import pytest

from argus.core.rerun import RerunError, parse_sets, rerun_manifest, rerun_name, rerun_spec

pytestmark = pytest.mark.unit

CMD = "python3 -m verl.trainer.main_ppo data.train_batch_size=8 actor_rollout_ref.actor.optim.lr=1e-6 +trainer.val_before_train=False"
ADVANCED = {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "command": CMD, "cancel": True, "suspend": True}
BASIC = {"kind": "basic", "workload": "grpo", "nnodes": 1, "nGpusPerNode": 1, "modelId": "Qwen/Qwen2.5-0.5B-Instruct",
         "overrides": ["actor_rollout_ref.actor.ppo_epochs=2", "trainer.save_freq=5"]}


def test_spec_fields_are_set_as_yaml_and_a_rerun_starts_afresh() -> None:
    spec = rerun_spec(ADVANCED, parse_sets(["nGpusPerNode=2", "priority=5", "activeDeadlineSeconds=null"]))
    assert (spec["nGpusPerNode"], spec["priority"]) == (2, 5)
    assert "cancel" not in spec and "suspend" not in spec and spec["command"] == CMD
    with pytest.raises(RerunError, match="a rerun starts afresh"):
        rerun_spec(ADVANCED, [("suspend", "true")])


def test_a_basic_task_gets_hydra_keys_in_its_overrides_in_place_of_the_same_key() -> None:
    spec = rerun_spec(BASIC, parse_sets(["trainer.save_freq=10", "+data.seed=3"]))
    assert spec["overrides"] == ["actor_rollout_ref.actor.ppo_epochs=2", "trainer.save_freq=10", "+data.seed=3"]
    assert BASIC["overrides"] == ["actor_rollout_ref.actor.ppo_epochs=2", "trainer.save_freq=5"]  # the old one is untouched


def test_an_advanced_command_has_the_value_replaced_where_it_is_set() -> None:
    spec = rerun_spec(ADVANCED, parse_sets(["actor_rollout_ref.actor.optim.lr=2e-6", "trainer.val_before_train=True"]))
    assert spec["command"] == CMD.replace("lr=1e-6", "lr=2e-6").replace("val_before_train=False", "val_before_train=True")
    assert rerun_spec(ADVANCED, [("data.train_batch_size", "a b")])["command"].startswith(
        "python3 -m verl.trainer.main_ppo data.train_batch_size='a b' ")
    with pytest.raises(RerunError, match="does not set trainer.total_epochs"):
        rerun_spec(ADVANCED, [("trainer.total_epochs", "2")])


def test_bad_sets_are_one_line() -> None:
    with pytest.raises(RerunError, match="expected key=value"):
        parse_sets(["learningRate"])


def test_the_name_is_the_first_free_rerun_n_counted_from_the_root() -> None:
    assert rerun_name("ppo", []) == "ppo-rerun-1"
    assert rerun_name("ppo", ["ppo", "ppo-rerun-1", "ppo-rerun-3"]) == "ppo-rerun-2"
    assert rerun_name("ppo-rerun-1", ["ppo", "ppo-rerun-1"]) == "ppo-rerun-2"


def test_the_manifest_drops_status_and_gitops_tracking_and_says_where_it_came_from() -> None:
    old = {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask",
           "metadata": {"name": "ppo", "namespace": "team", "uid": "u", "resourceVersion": "7",
                        "labels": {"app.kubernetes.io/instance": "argo-app", "team": "rl"}, "annotations": {"x": "y"}},
           "spec": BASIC, "status": {"phase": "Succeeded"}}
    new = rerun_manifest(old, "ppo-rerun-1", [("learningRate", "1e-6")])
    assert new == {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask",
                   "metadata": {"name": "ppo-rerun-1", "namespace": "team", "labels": {"team": "rl"},
                                "annotations": {"argus.io/rerun-of": "ppo"}},
                   "spec": {**BASIC, "learningRate": 1e-6}}
