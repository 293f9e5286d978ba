"""The basic template for each supported verl version, and the spec's own overrides.

Whether verl accepts what the template generates is shown against verl's real config trees
and checks in tests/integration/test_verl_versions.py and test_verl_oracle.py; here, the
pure choices."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from argus.core.config import PlatformConfig
from argus.core.plan import validate_task
from argus.core.spec import ArgusTaskSpec
from argus.core.template import DEFAULT_VERL_VERSION, basic_command

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
UID = "6a1f7d4e-0000-4000-8000-000000000001"


def spec(**fields: Any) -> ArgusTaskSpec:
    base = {"workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "modelId": "Qwen/Qwen2.5-0.5B-Instruct",
            "trainFile": "/private/datasets/a.parquet", "valFile": "/private/datasets/b.parquet"}
    return ArgusTaskSpec.model_validate({**base, **fields})


def argv(command: str) -> list[str]:
    """The command's words as bash reads them (a backslash-newline joins lines)."""
    return shlex.split(command.replace("\\\n", " "))


def words(command: str) -> dict[str, str]:
    return dict(w.split("=", 1) for w in argv(command) if "=" in w and not w.startswith("-"))


def render(s: ArgusTaskSpec, version: str = DEFAULT_VERL_VERSION, uid: str | None = UID) -> str:
    return basic_command(s, home="/private/users/alice", experiment="ns-t", uid=uid, verl_version=version)


def test_the_default_version_is_the_newest_supported_release() -> None:
    first = next(line.split()[0] for line in (REPO / "operator" / "argus" / "verl-releases.txt").read_text().splitlines()
                 if line.strip() and not line.startswith("#"))
    assert DEFAULT_VERL_VERSION == first


@pytest.mark.parametrize(("version", "module", "model_key"), [
    ("0.9.1", "verl.trainer.sft_trainer", "model.path"),
    ("0.6.1", "verl.trainer.fsdp_sft_trainer", "model.partial_pretrain"),
])
def test_sft_runs_the_sft_trainer_of_the_version(version: str, module: str, model_key: str) -> None:
    command = render(spec(workload="sft", nGpusPerNode=2), version)
    assert argv(command)[5] == module
    assert words(command)[model_key] == "Qwen/Qwen2.5-0.5B-Instruct"


def test_legacy_sft_micro_batch_divides_each_gpu_s_share() -> None:
    o = words(render(spec(workload="sft", nGpusPerNode=3, trainBatchSize=18), "0.6.1"))
    assert o["data.train_batch_size"] == "18" and o["data.micro_batch_size_per_gpu"] == "2"  # 6 a GPU


@pytest.mark.parametrize(("version", "prefix"), [("0.9.1", "reward.custom_reward_function"),
                                                  ("0.6.1", "custom_reward_function")])
def test_the_reward_goes_under_the_key_the_version_reads(version: str, prefix: str) -> None:
    o = words(render(spec(workload="grpo", customRewardPath="/private/users/alice/code/r.py"), version))
    assert o[f"{prefix}.path"] == "/private/users/alice/code/r.py" and o[f"{prefix}.name"] == "compute_score"
    assert len([k for k in o if k.endswith("custom_reward_function.path")]) == 1


@pytest.mark.parametrize(("gpus", "nnodes", "batch", "tp", "micro"), [
    (1, 1, "1024", "1", "4"),
    (2, 1, "1024", "2", "4"),
    (3, 1, "1026", "1", "1"),   # 1026 = 1024 rounded up to 3 GPUs; 256/3 a GPU: micro batch 1
    (8, 2, "1024", "2", "4"),
])
def test_values_verl_requires_come_from_the_gpus(gpus: int, nnodes: int, batch: str, tp: str, micro: str) -> None:
    o = words(render(spec(nnodes=nnodes, nGpusPerNode=gpus)))
    assert o["data.train_batch_size"] == batch and int(batch) % (gpus * nnodes) == 0
    assert o["actor_rollout_ref.rollout.tensor_model_parallel_size"] == tp
    for key in ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
                "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "critic.ppo_micro_batch_size_per_gpu"):
        assert o[key] == micro, key


def test_checkpoints_are_kept_per_task_uid() -> None:
    assert words(render(spec()))["trainer.default_local_dir"] == f"/private/users/alice/checkpoints/argus/ns-t/{UID}"
    # argus validate of a file has no uid yet: the folder then has none either.
    assert words(render(spec(), uid=None))["trainer.default_local_dir"] == "/private/users/alice/checkpoints/argus/ns-t"


def test_spec_overrides_come_last_and_replace_the_template_s_value() -> None:
    command = render(spec(overrides=["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2", "+trainer.x=a b"]))
    assert argv(command)[-2:] == ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2", "+trainer.x=a b"]
    assert command.count("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=") == 1


def manifest(**fields: Any) -> dict[str, Any]:
    base = {"workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "modelId": "Qwen/Qwen2.5-0.5B-Instruct",
            "trainFile": "$HOME/common/datasets/gsm8k/train.parquet", "valFile": "$HOME/datasets/gsm8k/test.parquet"}
    return {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask", "metadata": {"name": "t", "uid": UID},
            "spec": {**base, **fields}}


def test_spec_overrides_are_expanded_and_checked_like_a_command() -> None:
    ok = validate_task(manifest(overrides=["data.val_files=$HOME/datasets/other.parquet"]), "alice", PlatformConfig())
    assert ok.valid, ok.error_lines()
    assert ok.plan is not None and "data.val_files=/private/users/alice/datasets/other.parquet" in ok.plan.command
    bad = validate_task(manifest(overrides=["data.val_files=/private/users/bob/datasets/x.parquet"]), "alice",
                        PlatformConfig())
    assert not bad.valid and any("another user's home" in line for line in bad.error_lines()), bad.error_lines()


def test_overrides_are_a_basic_field() -> None:
    doc = manifest(overrides=["trainer.total_epochs=2"])
    doc["spec"] = {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1,
                   "command": "python3 -m verl.trainer.main_ppo", "overrides": ["trainer.total_epochs=2"]}
    verdict = validate_task(doc, "alice", PlatformConfig())
    assert any(line.startswith("spec.overrides") for line in verdict.error_lines()), verdict.error_lines()
