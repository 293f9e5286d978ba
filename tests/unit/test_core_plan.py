"""The resolved submission plan (argus.core.plan) and the basic spec's template: what the
operator hands to the Ray Jobs API, as is."""

from __future__ import annotations

import shlex
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from argus.core.config import PlatformConfig
from argus.core.plan import resolve_plan, validate_spec, validate_task
from argus.core.spec import ArgusTaskSpec
from argus.core.submission import SubmissionPlan, submission_id_for
from argus.core.template import DEFAULT_VERL_VERSION, basic_command

pytestmark = pytest.mark.unit

UID = "0b8f0a36-1a8e-4c1e-9d59-3f1f8a2c7e11"
CONFIG = PlatformConfig()
ADVANCED = (
    "python3 -m verl.trainer.main_ppo \\\n"
    "  data.train_files=$HOME/common/datasets/gsm8k/train.parquet \\\n"
    "  data.val_files=$HOME/datasets/gsm8k/test.parquet \\\n"
    "  trainer.nnodes=1 trainer.n_gpus_per_node=1 \\\n"
    "  +ray_kwargs.ray_init.address=auto\n"
)


def task(spec: dict[str, Any], *, name: str = "t1", namespace: str | None = "team-a", uid: str | None = UID) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    if uid:
        metadata["uid"] = uid
    return {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask", "metadata": metadata, "spec": spec}


def advanced(command: str = ADVANCED, **spec: Any) -> dict[str, Any]:
    return {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "command": command, **spec}


def basic(**spec: Any) -> dict[str, Any]:
    return {
        "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "modelId": "Qwen/Qwen2.5-0.5B-Instruct",
        "trainFile": "$HOME/common/datasets/gsm8k/train.parquet", "valFile": "$HOME/datasets/gsm8k/test.parquet", **spec,
    }


def plan_of(doc: dict[str, Any], user: str = "alice", config: PlatformConfig = CONFIG) -> SubmissionPlan:
    verdict = validate_task(doc, user, config)
    assert verdict.valid, verdict.error_lines()
    assert verdict.plan is not None
    return verdict.plan


def overrides(command: str) -> dict[str, str]:
    """The key=value words of a one-line command, split by the standard library's shlex
    (not by the code under test)."""
    words = shlex.split(command)
    return dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("-"))


# --- the entrypoint -----------------------------------------------------------------------


def test_entrypoint_is_bash_lc_of_the_expanded_command() -> None:
    plan = plan_of(task(advanced()))
    program, flag, script = shlex.split(plan.entrypoint)
    assert (program, flag) == ("bash", "-lc")
    assert script == (
        "set -o pipefail\n"
        "mkdir -p /private/users/alice/jobs/team-a-t1-0b8f0a36 && cd /private/users/alice/jobs/team-a-t1-0b8f0a36 || exit 1\n"
        "{\n" + plan.command + "\n} 2>&1 | tee -a /private/users/alice/jobs/team-a-t1-0b8f0a36/attempt-1.log\n"
        "argus_status=$?\n"
        '{ echo "$argus_status" > /private/users/alice/jobs/team-a-t1-0b8f0a36/attempt-1.exit; } 2>/dev/null\n'
        'exit "$argus_status"'
    )
    assert "$HOME" not in plan.command and "/private/datasets/gsm8k/train.parquet" in plan.command


def test_entrypoint_shell_is_configurable() -> None:
    plan = plan_of(task(advanced()), config=PlatformConfig(entrypoint_shell="/bin/bash --noprofile -c"))
    assert shlex.split(plan.entrypoint)[:3] == ["/bin/bash", "--noprofile", "-c"]


_hostile_text = st.lists(st.sampled_from([*"ab $'\"\\`!;&|()<>*?#~{}\n\t-=/.", "'\"'\"'", "$(x)", "\\\n", "é"]), max_size=60).map("".join)


@settings(max_examples=300, deadline=None)
@given(tail=_hostile_text)
def test_entrypoint_quoting_round_trips(tail: str) -> None:
    """Whatever the command holds (quotes, $, backslashes, newlines), the entrypoint splits
    back into exactly bash, -lc and a script that ends with the command."""
    spec = ArgusTaskSpec.model_validate(advanced())
    command = "python3 -m verl.trainer.main_ppo " + tail
    plan = resolve_plan(spec, command, "alice", CONFIG, namespace="ns", name="n", uid=UID)
    words = shlex.split(plan.entrypoint)
    assert words[:2] == ["bash", "-lc"] and len(words) == 3
    assert "\n{\n" + command + "\n} 2>&1 | tee -a /private/users/alice/jobs/ns-n-0b8f0a36/attempt-1.log\nargus_status=$?\n" in words[2]


# --- resources, runtime env, job directory, metadata --------------------------------------


def test_resources_pin_the_driver_to_a_worker() -> None:
    assert plan_of(task(advanced())).entrypoint_resources == {"worker_node": 1}
    plan = plan_of(task(advanced()), config=PlatformConfig(worker_resource="argus_worker"))
    assert plan.entrypoint_resources == {"argus_worker": 1}


def test_pythonpath() -> None:
    env = plan_of(task(advanced())).runtime_env["env_vars"]
    assert env["PYTHONPATH"] == "/private/common/code/verl/verl_repo:/private/users/alice/code"
    env = plan_of(task(advanced()), config=PlatformConfig(root="/srv/p")).runtime_env["env_vars"]
    assert env["PYTHONPATH"] == "/srv/p/common/code/verl/verl_repo:/srv/p/users/alice/code"
    env = plan_of(task(advanced()), config=PlatformConfig(verl_code_path="/opt/verl")).runtime_env["env_vars"]
    assert env["PYTHONPATH"] == "/opt/verl:/private/users/alice/code"
    # a basic spec may pick another snapshot under /private/common
    env = plan_of(task(basic(codePath="/private/common/code/verl-0.5"))).runtime_env["env_vars"]
    assert env["PYTHONPATH"] == "/private/common/code/verl-0.5:/private/users/alice/code"
    assert env["ARGUS_USER"] == "alice"


def test_job_directory_is_per_task_under_the_home() -> None:
    plan = plan_of(task(advanced(), namespace="team-a", name="run-1"))
    assert plan.job_dir == "/private/users/alice/jobs/team-a-run-1-0b8f0a36"
    assert plan.runtime_env["env_vars"]["ARGUS_JOB_DIR"] == plan.job_dir
    other = plan_of(task(advanced(), namespace="team-a", name="run-1", uid="ffffffff-0000-0000-0000-000000000000"))
    assert other.job_dir != plan.job_dir  # a re-created task with the same name gets its own
    offline = plan_of(task(advanced(), namespace=None, name="run-1", uid=None))
    assert offline.job_dir == "/private/users/alice/jobs/run-1"


def test_metadata_names_the_object_and_the_user() -> None:
    command = ADVANCED.replace("trainer.nnodes=1 trainer.n_gpus_per_node=1", "trainer.nnodes=2 trainer.n_gpus_per_node=4")
    plan = plan_of(task(advanced(nnodes=2, nGpusPerNode=4, command=command)))
    assert plan.metadata == {
        "argus.io/user": "alice", "argus.io/workload": "ppo", "argus.io/gpus": "8",
        "argus.io/namespace": "team-a", "argus.io/name": "t1", "argus.io/uid": UID, "argus.io/attempt": "1",
    }
    assert all(isinstance(v, str) for v in plan.metadata.values())
    assert plan.gpus == 8 and plan.user == "alice"


def test_submission_id_is_deterministic() -> None:
    assert submission_id_for("team-a", "t1", UID) == "argus-team-a-t1-0b8f0a36"
    assert submission_id_for("team-a", "t1", "1" + UID[1:]) == "argus-team-a-t1-1b8f0a36"
    assert submission_id_for("ns", "x", "ffffffff-0000-0000-0000-000000000000") == "argus-ns-x-ffffffff"
    assert plan_of(task(advanced())).submission_id == "argus-team-a-t1-0b8f0a36"
    assert plan_of(task(advanced(), uid=None)).submission_id is None  # offline: no object yet


def test_plan_is_json_serialisable() -> None:
    dumped = plan_of(task(basic())).model_dump(mode="json")
    assert set(dumped) >= {"submission_id", "command", "entrypoint", "entrypoint_resources", "runtime_env", "metadata", "job_dir", "gpus"}


def test_validate_spec_directly() -> None:
    verdict = validate_spec(advanced(), "alice", CONFIG, namespace="ns", name="x", uid=UID)
    assert verdict.valid and verdict.plan is not None and verdict.plan.submission_id == "argus-ns-x-0b8f0a36"
    assert verdict.spec is not None and verdict.spec.n_gpus_per_node == 1


# --- the basic template -------------------------------------------------------------------


def test_basic_ppo() -> None:
    plan = plan_of(task(basic(nnodes=2, nGpusPerNode=4)))
    head = plan.command.split(" \\\n", 1)[0]
    assert head == "python3 -m verl.trainer.main_ppo"
    o = overrides(plan.command)
    assert o["algorithm.adv_estimator"] == "gae"
    assert o["data.train_files"] == "/private/datasets/gsm8k/train.parquet"
    assert o["data.val_files"] == "/private/users/alice/datasets/gsm8k/test.parquet"
    assert o["actor_rollout_ref.model.path"] == "Qwen/Qwen2.5-0.5B-Instruct"
    assert o["critic.model.path"] == "Qwen/Qwen2.5-0.5B-Instruct"
    assert o["trainer.nnodes"] == "2" and o["trainer.n_gpus_per_node"] == "4"
    assert o["trainer.total_epochs"] == "1"
    assert o["+ray_kwargs.ray_init.address"] == "auto"
    assert o["trainer.experiment_name"] == "team-a-t1"
    # The task's uid: a task deleted and created again under the same name starts fresh.
    assert o["trainer.default_local_dir"] == f"/private/users/alice/checkpoints/argus/team-a-t1/{UID}"
    assert "reward.custom_reward_function.path" not in o and "custom_reward_function.path" not in o
    # What verl requires before training, from the GPUs (8 here): a batch they divide, micro
    # batches per GPU for the actor, the rollout's log-prob pass and the critic (GAE), and a
    # rollout tensor-parallel size that divides the GPUs.
    assert o["data.train_batch_size"] == "1024" and o["actor_rollout_ref.actor.ppo_mini_batch_size"] == "256"
    assert o["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"] == "4"
    assert o["actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"] == "4"
    assert o["critic.ppo_micro_batch_size_per_gpu"] == "4"
    assert o["actor_rollout_ref.rollout.tensor_model_parallel_size"] == "2"
    assert "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu" not in o  # no KL, no reference model
    assert plan.gpus == 8


def test_basic_grpo() -> None:
    plan = plan_of(task(basic(workload="grpo", customRewardPath="$HOME/code/reward.py", rolloutN=8, totalEpochs=3)))
    o = overrides(plan.command)
    assert plan.command.startswith("python3 -m verl.trainer.main_ppo")
    assert o["algorithm.adv_estimator"] == "grpo"
    assert o["actor_rollout_ref.rollout.n"] == "8"
    assert o["actor_rollout_ref.actor.use_kl_loss"] == "True"
    assert not [k for k in o if k.startswith("critic.")]
    # verl 0.9.x's main_ppo reads the reward from the reward group.
    assert o["reward.custom_reward_function.path"] == "/private/users/alice/code/reward.py"
    assert o["reward.custom_reward_function.name"] == "compute_score"
    assert "custom_reward_function.path" not in o
    # The KL loss needs the reference model: its log-prob micro batch is set too.
    assert o["actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"] == "4"
    assert o["actor_rollout_ref.rollout.tensor_model_parallel_size"] == "1"  # one GPU
    assert o["trainer.total_epochs"] == "3"
    assert overrides(plan_of(task(basic(workload="grpo"))).command)["actor_rollout_ref.rollout.n"] == "5"


def test_basic_sft() -> None:
    plan = plan_of(task(basic(workload="sft", nGpusPerNode=2, learningRate=2e-5)))
    words = shlex.split(plan.command)
    # verl 0.9.x (the default): sft_trainer with its sft_trainer_engine config.
    assert words[:6] == ["torchrun", "--standalone", "--nnodes=1", "--nproc_per_node=2", "-m", "verl.trainer.sft_trainer"]
    o = overrides(plan.command)
    assert o["model.path"] == "Qwen/Qwen2.5-0.5B-Instruct" and "model.partial_pretrain" not in o
    assert o["data.train_batch_size"] == "256"
    assert o["trainer.nnodes"] == "1" and o["trainer.n_gpus_per_node"] == "2"
    assert o["optim.lr"] == "2e-05"
    assert "+ray_kwargs.ray_init.address" not in o and "actor_rollout_ref.model.path" not in o


def test_basic_options_reach_the_command() -> None:
    spec = basic(saveFreq=10, testFreq=5, trainBatchSize=64, maxPromptLength=256, maxResponseLength=128,
                 learningRate=3e-6, projectName="gsm8k", experimentName="exp-1", customRewardPath="$HOME/code/r.py",
                 customRewardName="score")
    o = overrides(plan_of(task(spec)).command)
    assert (o["trainer.save_freq"], o["trainer.test_freq"], o["data.train_batch_size"]) == ("10", "5", "64")
    assert (o["data.max_prompt_length"], o["data.max_response_length"]) == ("256", "128")
    assert o["actor_rollout_ref.actor.optim.lr"] == "3e-06"
    assert o["trainer.project_name"] == "gsm8k" and o["trainer.experiment_name"] == "exp-1"
    assert o["trainer.default_local_dir"] == f"/private/users/alice/checkpoints/gsm8k/exp-1/{UID}"
    assert o["reward.custom_reward_function.name"] == "score"
    # The user's batch of 64 on one GPU: the mini batch is the batch, 4 per micro batch.
    assert o["actor_rollout_ref.actor.ppo_mini_batch_size"] == "64"
    assert o["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"] == "4"


def test_basic_model_path_is_expanded() -> None:
    o = overrides(plan_of(task(basic(modelId="$HOME/common/hf/Qwen2.5-0.5B-Instruct"))).command)
    assert o["actor_rollout_ref.model.path"] == "/private/hf/Qwen2.5-0.5B-Instruct"


def test_basic_verdict_carries_the_expanded_spec() -> None:
    verdict = validate_task(task(basic()), "alice", CONFIG)
    assert verdict.spec is not None and verdict.spec.train_file == "/private/datasets/gsm8k/train.parquet"
    assert verdict.warnings == []


@pytest.mark.parametrize("spec", [
    basic(), basic(workload="grpo", customRewardPath="$HOME/code/reward.py", rolloutN=8, saveFreq=5, learningRate=3e-6),
    basic(workload="sft", nGpusPerNode=2, learningRate=2e-5, projectName="p.q", experimentName="e-1"),
], ids=["ppo", "grpo", "sft"])
def test_the_template_runs_unchanged_through_the_language(spec: dict[str, Any]) -> None:
    """The basic template's output is a program of the language, and the generated command
    passes exactly the template's words (read back by shlex, not by the code under test)."""
    verdict = validate_task(task(spec), "alice", CONFIG)
    assert verdict.valid and verdict.warnings == [], verdict.error_lines() + verdict.warning_lines()
    assert verdict.spec is not None and verdict.plan is not None
    template = basic_command(verdict.spec, home="/private/users/alice", experiment="team-a-t1", uid=UID,
                             verl_version=DEFAULT_VERL_VERSION)
    assert shlex.split(verdict.plan.command) == shlex.split(template)


# --- a torchrun launch reserves its GPUs; multi-node torchrun is refused -----------------

TORCHRUN = ("torchrun --standalone --nnodes=1 --nproc_per_node=2 -m verl.trainer.fsdp_sft_trainer "
            "data.train_files=$HOME/datasets/sft/train.parquet data.val_files=$HOME/datasets/sft/val.parquet")
ONE_NODE = ("a torchrun launch runs inside one Ray job, on the one node Ray reserves its GPUs on: use nnodes: 1; to train on several "
            "nodes run python3 -m verl.trainer.sft_trainer_ray (verl 0.9 and later), whose workers Ray places on every node")


def test_a_torchrun_launch_reserves_its_gpus_through_the_entrypoint() -> None:
    advanced_sft = plan_of(task(advanced(TORCHRUN, workload="sft", nGpusPerNode=2)))
    basic_sft = plan_of(task(basic(workload="sft", nGpusPerNode=2)))
    for plan in (advanced_sft, basic_sft):
        assert plan.entrypoint_num_gpus == 2 and plan.entrypoint_resources == {"worker_node": 1}
    # verl's own launch: its GPUs are its workers' placement groups, the driver takes none.
    assert plan_of(task(advanced())).entrypoint_num_gpus == 0
    assert plan_of(task(basic(workload="grpo"))).entrypoint_num_gpus == 0


@pytest.mark.parametrize(("spec", "errors"), [
    (advanced(TORCHRUN.replace("--nnodes=1 --nproc_per_node=2", "--nnodes=2 --nproc_per_node=2"), workload="sft", nnodes=2, nGpusPerNode=2),
     [f"spec.nnodes: 2: {ONE_NODE}"]),
    (advanced(TORCHRUN.replace("--nnodes=1", "--nnodes 2"), workload="sft", nGpusPerNode=2),
     [f"spec.command: '--nnodes=2': {ONE_NODE}"]),
    (advanced(TORCHRUN.replace("--nnodes=1 ", ""), workload="sft", nnodes=2, nGpusPerNode=2), [f"spec.nnodes: 2: {ONE_NODE}"]),
    (basic(workload="sft", nnodes=2), [f"spec.nnodes: 2: a basic sft task runs torchrun --standalone; {ONE_NODE}"]),
])
def test_a_multi_node_torchrun_launch_is_refused_with_the_way_out(spec: dict[str, Any], errors: list[str]) -> None:
    v = validate_task(task(spec), "alice", CONFIG)
    assert v.error_lines() == errors


def test_the_way_out_is_allowed() -> None:
    command = ("python3 -m verl.trainer.sft_trainer_ray data.train_files=$HOME/datasets/sft/train.parquet "
               "data.val_files=$HOME/datasets/sft/val.parquet trainer.nnodes=2 trainer.n_gpus_per_node=8")
    plan = plan_of(task(advanced(command, workload="sft", nnodes=2, nGpusPerNode=8)))
    assert plan.entrypoint_num_gpus == 0 and plan.gpus == 16


# --- the shared Hugging Face cache ----------------------------------------------------------

def test_jobs_get_the_shared_hf_cache_as_hf_home() -> None:
    assert plan_of(task(advanced())).runtime_env["env_vars"]["HF_HOME"] == "/private/hf"
    assert plan_of(task(basic()), config=PlatformConfig(root="/data")).runtime_env["env_vars"]["HF_HOME"] == "/data/hf"
    assert plan_of(task(basic()), config=PlatformConfig(hf_home="/cache/hf/")).runtime_env["env_vars"]["HF_HOME"] == "/cache/hf"
    assert "HF_HOME" not in plan_of(task(basic()), config=PlatformConfig(hf_home="")).runtime_env["env_vars"]
    with pytest.raises(ValueError, match="must be an absolute path"):
        PlatformConfig(hf_home="hf")


@pytest.mark.parametrize("command", [
    "export HF_HOME=$HOME/hf\n" + ADVANCED,
    "HF_HOME=$HOME/hf\nexport HF_HOME\n" + ADVANCED,
    "HF_HOME=$HOME/hf " + ADVANCED,
])
def test_a_command_that_exports_its_own_hf_home_keeps_it(command: str) -> None:
    plan = plan_of(task(advanced(command)))
    assert "HF_HOME" not in plan.runtime_env["env_vars"]
    assert "HF_HOME=/private/users/alice/hf" in plan.command
