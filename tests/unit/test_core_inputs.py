"""core.inputs: the files and folders a validated task reads, each with the key that names it,
and the decision given the shared tree's answers (issue 36, item 5)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from argus.adapters.verlcompose import HydraComposer
from argus.core.config import PlatformConfig
from argus.core.inputs import InputPath, message, missing, on_root, warning_lines
from argus.core.plan import validate_task
from argus.core.queue import Capacity, QueuedTask, QueueSettings, WorkerNode, decide
from argus.core.verlconfig import ConfigTree
from argus.core.vocabulary import Reason
from verltrees import verl_tree

pytestmark = pytest.mark.unit

_COMPOSERS: dict[str, HydraComposer] = {}


def composer(version: str = "0.9.1") -> HydraComposer:
    if version not in _COMPOSERS:
        _COMPOSERS[version] = HydraComposer(ConfigTree(version, verl_tree(version), "release"))
    return _COMPOSERS[version]


def task(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask", "metadata": {"name": "t", "namespace": "team"},
            "spec": {"nnodes": 1, "nGpusPerNode": 1, **spec}}


PPO = ("python3 -m verl.trainer.main_ppo {data} actor_rollout_ref.model.path={model} "
       "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 actor_rollout_ref.rollout.name=vllm "
       "actor_rollout_ref.rollout.tensor_model_parallel_size=1 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 "
       "critic.ppo_micro_batch_size_per_gpu=4 trainer.nnodes=1 trainer.n_gpus_per_node=1 +ray_kwargs.ray_init.address=auto {extra}")


def inputs_of(command: str, version: str = "0.9.1") -> list[tuple[str, str, str]]:
    verdict = validate_task(task({"kind": "advanced", "workload": "ppo", "command": command}), "alice", PlatformConfig(),
                            composer(version))
    assert verdict.valid, verdict.error_lines()
    return [(i.field, i.path, i.role) for i in verdict.inputs]


def test_data_files_reward_and_a_model_folder_are_inputs_with_their_keys() -> None:
    command = PPO.format(data="data.train_files=[$HOME/datasets/a.parquet,$HOME/common/datasets/b.parquet] "
                              "data.val_files=$HOME/datasets/c.parquet",
                         model="$HOME/models/tiny", extra="reward.custom_reward_function.path=$HOME/code/reward.py")
    assert sorted(inputs_of(command)) == sorted([
        ("data.train_files[0]", "/private/users/alice/datasets/a.parquet", "data"),
        ("data.train_files[1]", "/private/datasets/b.parquet", "data"),  # $HOME/common/datasets: the shared datasets
        ("data.val_files", "/private/users/alice/datasets/c.parquet", "data"),
        ("actor_rollout_ref.model.path", "/private/users/alice/models/tiny", "model"),
        ("reward.custom_reward_function.path", "/private/users/alice/code/reward.py", "code"),
    ])


def test_a_hub_model_is_not_looked_for_and_a_shared_model_is() -> None:
    command = PPO.format(data="data.train_files=$HOME/datasets/a.parquet data.val_files=$HOME/datasets/a.parquet",
                         model="Qwen/Qwen2.5-0.5B-Instruct", extra="critic.model.path=$HOME/common/hf/qwen")
    found = inputs_of(command)
    # One path once, under the first key that names it; the hub id is none.
    assert sorted(found) == sorted([("data.train_files", "/private/users/alice/datasets/a.parquet", "data"),
                                    ("critic.model.path", "/private/hf/qwen", "model")])


def test_the_legacy_reward_key_names_the_file_it_sets() -> None:
    command = PPO.format(data="data.train_files=$HOME/datasets/a.parquet data.val_files=$HOME/datasets/b.parquet",
                         model="Qwen/Qwen2.5-0.5B-Instruct",
                         extra="custom_reward_function.path=$HOME/code/r.py custom_reward_function.name=compute_score")
    assert ("custom_reward_function.path", "/private/users/alice/code/r.py", "code") in inputs_of(command)
    assert [f for f, p, _ in inputs_of(command) if p.endswith("/r.py")] == ["custom_reward_function.path"]


def test_the_basic_template_and_sft_name_their_inputs() -> None:
    basic = {"workload": "grpo", "modelId": "$HOME/models/m", "trainFile": "$HOME/datasets/t.parquet",
             "valFile": "$HOME/datasets/v.parquet", "customRewardPath": "$HOME/code/reward.py"}
    verdict = validate_task(task(basic), "alice", PlatformConfig(), composer())
    assert verdict.valid, verdict.error_lines()
    assert {i.field for i in verdict.inputs} == {"data.train_files", "data.val_files", "actor_rollout_ref.model.path",
                                                 "reward.custom_reward_function.path"}
    sft = {"workload": "sft", "modelId": "$HOME/models/m", "trainFile": "$HOME/datasets/t.parquet", "valFile": "$HOME/datasets/v.parquet"}
    verdict = validate_task(task(sft), "alice", PlatformConfig(), composer("0.6.1"))
    assert verdict.valid, verdict.error_lines()
    assert ("model.partial_pretrain", "/private/users/alice/models/m") in {(i.field, i.path) for i in verdict.inputs}


def test_an_invalid_task_names_no_inputs() -> None:
    verdict = validate_task(task({"kind": "advanced", "workload": "ppo", "command": "python3 -m verl.trainer.main_ppo "
                                  "data.train_files=/etc/passwd"}), "alice", PlatformConfig(), composer())
    assert not verdict.valid and verdict.inputs == ()


def test_without_a_composer_there_are_no_inputs() -> None:
    verdict = validate_task(task({"workload": "grpo", "modelId": "Qwen/Qwen2.5-0.5B", "trainFile": "$HOME/datasets/t.parquet",
                                  "valFile": "$HOME/datasets/v.parquet"}),
                            "alice", PlatformConfig())
    assert verdict.valid and verdict.inputs == ()


DATA = InputPath("data.train_files", "/private/users/alice/datasets/gsm8k/train.parquet", "data")
MODEL = InputPath("actor_rollout_ref.model.path", "/private/hf/qwen", "model")


def test_the_decision_keeps_what_the_tree_says_is_absent_and_not_what_it_cannot_tell() -> None:
    answers = {DATA.path: False, MODEL.path: None}
    assert missing([DATA, MODEL], answers.get) == [DATA]
    assert missing([DATA, MODEL], {DATA.path: True, MODEL.path: True}.get) == []


def test_the_message_names_the_field_the_path_and_the_rule_one_line_each() -> None:
    assert message([DATA]) == ("data.train_files: /private/users/alice/datasets/gsm8k/train.parquet does not exist in the shared "
                               "tree (the file verl reads at start)\n"
                               "waiting: the task goes when it exists (upload it, or fix the path in a new task)")
    lines = message([InputPath(f"data.train_files[{i}]", f"/p/{i}", "data") for i in range(8)]).splitlines()
    assert len(lines) == 7 and lines[5] == "... and 3 more missing inputs"
    assert "folder" in message([MODEL]).splitlines()[0]
    assert warning_lines([DATA]) == [DATA.line() + ": the task will wait in the queue (InputMissing) until it exists"]


def test_a_path_control_character_is_shown_escaped() -> None:
    line = InputPath("data.train_files", "/private/users/alice/a\nb", "data").line()
    assert "\n" not in line and "a\\nb" in line


def test_a_cluster_with_another_root_sees_the_paths_under_its_own() -> None:
    moved = on_root([DATA, InputPath("x", "/elsewhere/f", "read")], "/private", "/mnt/b")
    assert [i.path for i in moved] == ["/mnt/b/users/alice/datasets/gsm8k/train.parquet", "/elsewhere/f"]
    assert on_root([DATA], "/private", "/private") == (DATA,)


NOW = dt.datetime(2026, 12, 3, 12, 0, 0, tzinfo=dt.UTC)


def test_the_queue_holds_a_task_with_missing_inputs_and_it_blocks_nobody() -> None:
    first = QueuedTask("a", "first", 0, "2026-12-03T11:00:00Z")
    second = QueuedTask("a", "second", 0, "2026-12-03T11:01:00Z")
    held = {first.key: (Reason.InputMissing, message([DATA]))}
    d = decide([first, second], running=0, capacity=Capacity((WorkerNode("w0", 1),)), settings=QueueSettings(), now=NOW,
               held_back=held)
    assert [t.name for t in d.admit] == ["second"]
    assert d.waiting == {first.key: held[first.key]} and d.positions == {first.key: 1}
