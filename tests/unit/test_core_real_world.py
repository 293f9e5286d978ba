"""Real verl launch scripts pass (issue 11): reconstructed from verl's documented example
scripts (examples/grpo_trainer, examples/ppo_trainer, examples/sft in volcengine/verl,
v0.4 to v0.7), with their data moved under $HOME/datasets and their GPU counts matching
the spec. Each keeps what makes real scripts hard for a checker: ``set -x`` and
``export VLLM_...`` preambles, comments and commented-out overrides after the last line,
Hydra lists built in variables, ``$(date ...)`` experiment names, counts in variables,
``torchrun --nproc_per_node=$nproc_per_node``, a trailing ``$@``, ``2>&1 | tee``.

Each must be valid, with exactly the listed warnings, and the verl stand-in
(hack/verl-standin, which reads overrides like Hydra) must accept every override the
generated command passes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from argus.core.command import check_command
from argus.core.config import PlatformConfig
from argus.core.expand import expand
from argus.core.plan import validate_task
from argus.core.policy import Findings, PathPolicy

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
NO_RAY = "'+ray_kwargs.ray_init.address=auto': is not set: verl may start its own local Ray instead of joining the cluster"


@dataclass
class Script:
    id: str
    workload: str
    nnodes: int
    gpus: int
    command: str
    warnings: list[str] = field(default_factory=list)


GRPO_MATH_LISTS = """\
set -x

# If you are using vllm<=0.6.3, you might need to set the following environment variable to avoid bugs:
# export VLLM_ATTENTION_BACKEND=XFORMERS

gsm8k_train_path=$HOME/datasets/gsm8k/train.parquet
gsm8k_test_path=$HOME/datasets/gsm8k/test.parquet
math_train_path=$HOME/datasets/math/train.parquet
math_test_path=$HOME/datasets/math/test.parquet

train_files="['$gsm8k_train_path', '$math_train_path']"
test_files="['$gsm8k_test_path', '$math_test_path']"

python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_files="$train_files" \\
    data.val_files="$test_files" \\
    data.train_batch_size=1024 \\
    data.max_prompt_length=1024 \\
    data.max_response_length=1024 \\
    data.filter_overlong_prompts=True \\
    data.truncation='error' \\
    actor_rollout_ref.model.path=Qwen/Qwen2-7B-Instruct \\
    actor_rollout_ref.actor.optim.lr=1e-6 \\
    actor_rollout_ref.model.use_remove_padding=True \\
    actor_rollout_ref.actor.ppo_mini_batch_size=256 \\
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 \\
    actor_rollout_ref.actor.use_kl_loss=True \\
    actor_rollout_ref.actor.kl_loss_coef=0.001 \\
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \\
    actor_rollout_ref.actor.entropy_coeff=0 \\
    actor_rollout_ref.model.enable_gradient_checkpointing=True \\
    actor_rollout_ref.actor.fsdp_config.param_offload=False \\
    actor_rollout_ref.actor.fsdp_config.optimizer_offload=False \\
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16 \\
    actor_rollout_ref.rollout.tensor_model_parallel_size=2 \\
    actor_rollout_ref.rollout.name=vllm \\
    actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \\
    actor_rollout_ref.rollout.n=5 \\
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16 \\
    actor_rollout_ref.ref.fsdp_config.param_offload=True \\
    algorithm.use_kl_in_reward=False \\
    trainer.critic_warmup=0 \\
    trainer.logger=['console','wandb'] \\
    trainer.project_name='verl_grpo_example_gsm8k_math' \\
    trainer.experiment_name='qwen2_7b_function_rm' \\
    trainer.n_gpus_per_node=8 \\
    trainer.nnodes=1 \\
    trainer.save_freq=20 \\
    trainer.test_freq=5 \\
    trainer.total_epochs=15 $@
"""

PPO_WITH_CRITIC = """\
set -x

python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=gae \\
    data.train_files=$HOME/datasets/gsm8k/train.parquet \\
    data.val_files=$HOME/datasets/gsm8k/test.parquet \\
    data.train_batch_size=1024 \\
    data.max_prompt_length=512 \\
    data.max_response_length=512 \\
    data.filter_overlong_prompts=True \\
    data.truncation='error' \\
    actor_rollout_ref.model.path=deepseek-ai/deepseek-llm-7b-chat \\
    actor_rollout_ref.actor.optim.lr=1e-6 \\
    actor_rollout_ref.model.use_remove_padding=True \\
    actor_rollout_ref.actor.ppo_mini_batch_size=256 \\
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 \\
    actor_rollout_ref.actor.fsdp_config.param_offload=False \\
    actor_rollout_ref.actor.fsdp_config.optimizer_offload=False \\
    actor_rollout_ref.actor.use_kl_loss=False \\
    actor_rollout_ref.model.enable_gradient_checkpointing=True \\
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=32 \\
    actor_rollout_ref.rollout.tensor_model_parallel_size=4 \\
    actor_rollout_ref.rollout.name=vllm \\
    actor_rollout_ref.rollout.gpu_memory_utilization=0.4 \\
    critic.optim.lr=1e-5 \\
    critic.model.use_remove_padding=False \\
    critic.model.path=deepseek-ai/deepseek-llm-7b-chat \\
    critic.model.enable_gradient_checkpointing=True \\
    critic.ppo_micro_batch_size_per_gpu=32 \\
    critic.model.fsdp_config.param_offload=False \\
    critic.model.fsdp_config.optimizer_offload=False \\
    algorithm.use_kl_in_reward=False \\
    trainer.critic_warmup=0 \\
    trainer.logger=['console'] \\
    trainer.project_name='verl_example_gsm8k' \\
    trainer.experiment_name='deepseek_llm_7b_function_rm' \\
    trainer.n_gpus_per_node=8 \\
    trainer.nnodes=1 \\
    trainer.total_training_steps=2 \\
    trainer.use_legacy_worker_impl=False \\
    trainer.total_epochs=15 $@

    # trainer.save_freq=20 \\
    # trainer.test_freq=1 \\
"""

GRPO_LORA = """\
set -x

# If you are using vllm<=0.6.3, you might need to set the following environment variable to avoid bugs:
# export VLLM_ATTENTION_BACKEND=XFORMERS

python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_files=$HOME/datasets/gsm8k/train.parquet \\
    data.val_files=$HOME/datasets/gsm8k/test.parquet \\
    data.train_batch_size=1024 \\
    data.max_prompt_length=512 \\
    data.max_response_length=1024 \\
    data.filter_overlong_prompts=True \\
    data.truncation='error' \\
    data.shuffle=False \\
    actor_rollout_ref.model.path=Qwen/Qwen2.5-3B-Instruct \\
    actor_rollout_ref.model.use_shm=True \\
    actor_rollout_ref.model.lora_rank=64 \\
    actor_rollout_ref.model.lora_alpha=32 \\
    actor_rollout_ref.model.target_modules=all-linear \\
    actor_rollout_ref.actor.optim.lr=3e-6 \\
    actor_rollout_ref.model.use_remove_padding=True \\
    actor_rollout_ref.actor.ppo_mini_batch_size=256 \\
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=40 \\
    actor_rollout_ref.actor.use_kl_loss=True \\
    actor_rollout_ref.actor.kl_loss_coef=0.001 \\
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \\
    actor_rollout_ref.actor.entropy_coeff=0 \\
    actor_rollout_ref.model.enable_gradient_checkpointing=True \\
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=40 \\
    actor_rollout_ref.rollout.tensor_model_parallel_size=2 \\
    actor_rollout_ref.rollout.name=vllm \\
    actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \\
    actor_rollout_ref.rollout.n=5 \\
    actor_rollout_ref.rollout.load_format=safetensors \\
    actor_rollout_ref.rollout.layered_summon=True \\
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=40 \\
    actor_rollout_ref.ref.fsdp_config.param_offload=True \\
    algorithm.use_kl_in_reward=False \\
    trainer.critic_warmup=0 \\
    trainer.logger=['console','wandb'] \\
    trainer.project_name='verl_grpo_example_gsm8k' \\
    trainer.experiment_name='qwen2.5_3b_grpo_lora' \\
    trainer.n_gpus_per_node=8 \\
    trainer.nnodes=1 \\
    trainer.save_freq=20 \\
    trainer.test_freq=5 \\
    trainer.total_epochs=15 $@
"""

SFT_PEFT_TORCHRUN = """\
# Tested with 2 & 4 GPUs

set -x

nproc_per_node=2
save_path=$HOME/checkpoints/sft/qwen05-peft

torchrun --standalone --nnodes=1 --nproc_per_node=$nproc_per_node \\
     -m verl.trainer.fsdp_sft_trainer \\
    data.train_files=$HOME/datasets/gsm8k/train.parquet \\
    data.val_files=$HOME/datasets/gsm8k/test.parquet \\
    data.prompt_key=extra_info \\
    data.response_key=extra_info \\
    optim.lr=1e-4 \\
    data.prompt_dict_keys=['question'] \\
    +data.response_dict_keys=['answer'] \\
    data.micro_batch_size_per_gpu=4 \\
    model.partial_pretrain=Qwen/Qwen2.5-0.5B-Instruct \\
    trainer.default_local_dir=$save_path \\
    trainer.project_name=gsm8k-sft \\
    trainer.experiment_name=gsm8k-sft-qwen-2.5-0.5b-instruct \\
    trainer.logger=['console'] \\
    trainer.total_epochs=1 \\
    trainer.default_hdfs_dir=null $@ \\
    model.lora_rank=32\\
    model.lora_alpha=16 \\
    model.target_modules=all-linear

    # Or you can do this:
    # model.target_modules=[q_proj,v_proj] \\
"""

SFT_SEQUENCE_PARALLEL = """\
set -x

nproc_per_node=4
save_path=$HOME/checkpoints/sft/qwen05-sp2

torchrun --nnodes=1 --nproc_per_node=$nproc_per_node \\
    -m verl.trainer.fsdp_sft_trainer \\
    data.train_files=$HOME/datasets/gsm8k/train.parquet \\
    data.val_files=$HOME/datasets/gsm8k/test.parquet \\
    data.prompt_key=extra_info \\
    data.response_key=extra_info \\
    optim.lr=1e-4 \\
    data.prompt_dict_keys=['question'] \\
    +data.response_dict_keys=['answer'] \\
    data.micro_batch_size=4 \\
    model.partial_pretrain=Qwen/Qwen2.5-0.5B-Instruct \\
    trainer.default_local_dir=$save_path \\
    trainer.project_name=gsm8k-sft \\
    trainer.experiment_name=gsm8k-sft-qwen-2.5-0.5b-instruct-sp2 \\
    trainer.logger=console \\
    trainer.total_training_steps=1 \\
    trainer.default_hdfs_dir=null $@ \\
    ulysses_sequence_parallel_size=2 \\
    use_remove_padding=true
"""

GRPO_DATE_TEE_CUSTOM_REWARD = """\
#!/usr/bin/env bash
set -euxo pipefail

export VLLM_ATTENTION_BACKEND=XFORMERS
export VLLM_USE_V1=1
export PYTHONPATH=$HOME/code:$PYTHONPATH

project_name=gsm8k_grpo
experiment_name=qwen2.5_0.5b_$(date +%Y%m%d_%H%M)
reward_file=$HOME/code/gsm8k_reward.py

python3 -u -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_files=$HOME/datasets/gsm8k/train.parquet \\
    data.val_files=$HOME/datasets/gsm8k/test.parquet \\
    data.train_batch_size=256 \\
    actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct \\
    actor_rollout_ref.rollout.n=8 \\
    actor_rollout_ref.rollout.name=vllm \\
    custom_reward_function.path="$reward_file" \\
    custom_reward_function.name=compute_score \\
    +custom_reward_function.reward_kwargs.format_bonus=0.1 \\
    trainer.project_name=$project_name \\
    trainer.experiment_name=$experiment_name \\
    trainer.default_local_dir=$HOME/checkpoints/$project_name \\
    trainer.logger=['console'] \\
    trainer.n_gpus_per_node=4 \\
    trainer.nnodes=1 \\
    +ray_kwargs.ray_init.address=auto \\
    trainer.total_epochs=2 2>&1 | tee $HOME/logs/grpo_gsm8k.log
"""

SFT_TO_RL = """\
set -x
# the SFT -> RL pipeline: start from my own SFT checkpoint, the critic from the shared hub copy (v3.0 path)
sft_ckpt=$HOME/checkpoints/sft/global_step_100/huggingface

python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=gae \\
    data.train_files=$HOME/datasets/gsm8k/train.parquet \\
    data.val_files=$HOME/common/datasets/gsm8k/test.parquet \\
    actor_rollout_ref.model.path=$sft_ckpt \\
    critic.model.path=/private/common/hf/Qwen2.5-0.5B-Instruct \\
    trainer.default_local_dir=$HOME/checkpoints/rl/from-sft \\
    trainer.n_gpus_per_node=2 \\
    trainer.nnodes=1 \\
    +ray_kwargs.ray_init.address=auto $@
"""

MULTI_NODE_COUNTS_IN_VARIABLES = """\
set -x

NNODES=2
NGPUS_PER_NODE=8

python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_files=$HOME/datasets/math/train.parquet \\
    data.val_files=$HOME/datasets/math/test.parquet \\
    actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct \\
    actor_rollout_ref.rollout.tensor_model_parallel_size=4 \\
    actor_rollout_ref.rollout.n=5 \\
    trainer.nnodes=$NNODES \\
    trainer.n_gpus_per_node=$NGPUS_PER_NODE \\
    trainer.logger=['console','wandb'] \\
    +ray_kwargs.ray_init.address=auto $@
"""

PPO_REWARD_MODEL = """\
set -x
# Disclaimer: the model used in the script is only for academic example,
gsm8k_train_path=$HOME/datasets/gsm8k/train.parquet
gsm8k_test_path=$HOME/datasets/gsm8k/test.parquet
math_train_path=$HOME/datasets/math/train.parquet
math_test_path=$HOME/datasets/math/test.parquet

train_files="['$gsm8k_train_path', '$math_train_path']"
test_files="['$gsm8k_test_path', '$math_test_path']"

python3 -m verl.trainer.main_ppo \\
    data.train_files="$train_files" \\
    data.val_files="$test_files" \\
    data.train_batch_size=1024 \\
    data.val_batch_size=6312 \\
    data.max_prompt_length=1024 \\
    data.max_response_length=512 \\
    data.return_raw_chat=True \\
    actor_rollout_ref.model.path=Qwen/Qwen2-7B-Instruct \\
    actor_rollout_ref.actor.optim.lr=1e-6 \\
    actor_rollout_ref.actor.optim.lr_warmup_steps_ratio=0.1 \\
    actor_rollout_ref.rollout.name=vllm \\
    critic.optim.lr=1e-5 \\
    critic.model.path=Qwen/Qwen2-7B-Instruct \\
    reward_model.enable=True \\
    reward_model.model.path=sfairXC/FsfairX-Gemma2-RM-v0.1\\
    reward_model.model.use_rmpad=True \\
    reward_model.micro_batch_size=16 \\
    algorithm.kl_ctrl.kl_coef=0.001 \\
    trainer.logger=['console','wandb'] \\
    trainer.project_name='verl_example' \\
    trainer.experiment_name='Qwen2-7B-Instruct_hybrid_rm' \\
    trainer.n_gpus_per_node=8 \\
    trainer.nnodes=1 \\
    trainer.save_freq=-1 \\
    trainer.test_freq=5 \\
    trainer.total_epochs=15 $@
"""

MEGATRON_STYLE_VARIABLES = """\
#!/usr/bin/env bash
set -xeuo pipefail

export CUDA_DEVICE_MAX_CONNECTIONS=1
export VLLM_ALLREDUCE_USE_SYMM_MEM=0
export NCCL_DEBUG=WARN
export VERL_LOGGING_LEVEL=WARN


project_name='GRPO-qwen8b'
exp_name='GRPO-Qwen3-8b_bf16'

adv_estimator=grpo
use_kl_in_reward=False
kl_coef=0.0
clip_ratio_low=3e-4
clip_ratio_high=4e-4

max_prompt_length=4096
max_response_length=3072
enable_overlong_buffer=True
overlong_buffer_len=2048
overlong_penalty_factor=1.0

loss_agg_mode="token-mean"
train_prompt_bsz=16
n_resp_per_prompt=4

NNODES=1
NGPUS_PER_NODE=8

MODEL_PATH=$HOME/common/hf/Qwen3-8B
CKPTS_DIR=$HOME/checkpoints/${project_name}/${exp_name}
TRAIN_FILE=$HOME/datasets/dapo/train.parquet
TEST_FILE=$HOME/datasets/aime/test.parquet

# Algorithm
temperature=1.0
top_p=1.0
top_k=-1 # 0 for HF rollout, -1 for vLLM rollout

offload=True
gen_tp=2
gen_ep=1
train_tp=8

python3 -m verl.trainer.main_ppo \\
    --config-path=config \\
    --config-name='ppo_megatron_trainer.yaml' \\
    data.train_files="${TRAIN_FILE}" \\
    data.val_files="${TEST_FILE}" \\
    data.prompt_key=prompt \\
    data.truncation='left' \\
    data.max_prompt_length=${max_prompt_length} \\
    data.max_response_length=${max_response_length} \\
    data.train_batch_size=${train_prompt_bsz} \\
    actor_rollout_ref.rollout.n=${n_resp_per_prompt} \\
    algorithm.adv_estimator=${adv_estimator} \\
    algorithm.use_kl_in_reward=${use_kl_in_reward} \\
    algorithm.kl_ctrl.kl_coef=${kl_coef} \\
    actor_rollout_ref.actor.clip_ratio_low=${clip_ratio_low} \\
    actor_rollout_ref.actor.clip_ratio_high=${clip_ratio_high} \\
    actor_rollout_ref.model.path="${MODEL_PATH}" \\
    actor_rollout_ref.actor.loss_agg_mode=${loss_agg_mode} \\
    actor_rollout_ref.actor.megatron.param_offload=${offload} \\
    actor_rollout_ref.actor.megatron.tensor_model_parallel_size=${train_tp} \\
    actor_rollout_ref.rollout.tensor_model_parallel_size=${gen_tp} \\
    actor_rollout_ref.rollout.temperature=${temperature} \\
    actor_rollout_ref.rollout.top_p=${top_p} \\
    actor_rollout_ref.rollout.top_k=${top_k} \\
    +actor_rollout_ref.actor.megatron.override_transformer_config.recompute_method=uniform \\
    reward_model.reward_manager=dapo \\
    +reward_model.reward_kwargs.overlong_buffer_cfg.enable=${enable_overlong_buffer} \\
    +reward_model.reward_kwargs.overlong_buffer_cfg.len=${overlong_buffer_len} \\
    +reward_model.reward_kwargs.overlong_buffer_cfg.penalty_factor=${overlong_penalty_factor} \\
    +reward_model.reward_kwargs.max_resp_len=${max_response_length} \\
    trainer.logger='["console","wandb"]' \\
    trainer.project_name="${project_name}" \\
    trainer.experiment_name="${exp_name}-tp${gen_tp}-ep${gen_ep}" \\
    trainer.n_gpus_per_node="${NGPUS_PER_NODE}" \\
    trainer.nnodes="${NNODES}" \\
    trainer.val_before_train=True \\
    trainer.default_local_dir="${CKPTS_DIR}" \\
    trainer.resume_mode=auto \\
    +ray_kwargs.ray_init.address=auto
"""

ENGINE_FROM_FIRST_ARGUMENT = """\
set -x
ENGINE=${1:-vllm}

python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_files=$HOME/datasets/geo3k/train.parquet \\
    data.val_files=$HOME/datasets/geo3k/test.parquet \\
    data.image_key=images \\
    actor_rollout_ref.model.path=Qwen/Qwen2.5-VL-7B-Instruct \\
    actor_rollout_ref.rollout.name=$ENGINE \\
    actor_rollout_ref.rollout.engine_kwargs.vllm.disable_mm_preprocessor_cache=True \\
    trainer.n_gpus_per_node=8 \\
    trainer.nnodes=1 \\
    +ray_kwargs.ray_init.address=auto $@
"""

DEFAULT_COUNTS_LEFT_OUT = """\
set -x
python3 -m verl.trainer.main_ppo --config-name=ppo_trainer \\
    data.train_files=$HOME/datasets/gsm8k/train.parquet \\
    data.val_files=$HOME/datasets/gsm8k/test.parquet \\
    actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct \\
    critic.model.path=Qwen/Qwen2.5-0.5B-Instruct \\
    trainer.logger=console \\
    +ray_kwargs.ray_init.address=auto
"""

SCRIPTS: list[Script] = [
    Script("grpo-math-lists-in-variables", "grpo", 1, 8, GRPO_MATH_LISTS, [NO_RAY]),
    Script("ppo-with-critic-commented-tail", "ppo", 1, 8, PPO_WITH_CRITIC, [NO_RAY]),
    Script("grpo-lora", "grpo", 1, 8, GRPO_LORA, [NO_RAY]),
    Script("sft-peft-torchrun-nproc-variable", "sft", 1, 2, SFT_PEFT_TORCHRUN),
    Script("sft-sequence-parallel-torchrun", "sft", 1, 4, SFT_SEQUENCE_PARALLEL),
    Script("grpo-date-tee-custom-reward", "grpo", 1, 4, GRPO_DATE_TEE_CUSTOM_REWARD),
    Script("sft-to-rl-own-checkpoint", "ppo", 1, 2, SFT_TO_RL),
    Script("multi-node-counts-in-variables", "grpo", 2, 8, MULTI_NODE_COUNTS_IN_VARIABLES),
    Script("ppo-reward-model", "ppo", 1, 8, PPO_REWARD_MODEL, [NO_RAY]),
    Script("megatron-style-braced-variables", "grpo", 1, 8, MEGATRON_STYLE_VARIABLES),
    Script("engine-from-first-argument", "grpo", 1, 8, ENGINE_FROM_FIRST_ARGUMENT),
    Script("counts-left-to-the-spec", "ppo", 1, 2, DEFAULT_COUNTS_LEFT_OUT,
           ["'trainer.nnodes=1 trainer.n_gpus_per_node=2': are not set: verl would use its defaults (1 node, 8 GPUs per node) "
            "while the queue reserves the spec's GPUs; Argus adds them to the command (see status.command)"]),
]


def manifest(s: Script) -> dict:
    return {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask", "metadata": {"name": s.id},
            "spec": {"kind": "advanced", "workload": s.workload, "nnodes": s.nnodes, "nGpusPerNode": s.gpus, "command": s.command}}


@pytest.fixture(scope="module")
def hydra_overrides() -> OverridesParser:
    """Hydra's own override parser: the one verl's @hydra.main reads the command line with."""
    return OverridesParser.create()


def test_the_set_covers_what_issue_11_names() -> None:
    text = "\n".join(s.command for s in SCRIPTS)
    for construct in ("set -x", "export VLLM_", "$(date +", "2>&1 | tee", " $@", "--nproc_per_node=$nproc_per_node",
                      '="$train_files"', "    # trainer.save_freq=20 \\", "lora_rank", "critic.model.path", "fsdp_sft_trainer",
                      "trainer.nnodes=$NNODES", "global_step_100/huggingface", "/private/common/hf/"):
        assert construct in text, construct
    assert len(SCRIPTS) >= 12


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.id for s in SCRIPTS])
def test_real_verl_script_is_valid(script: Script, hydra_overrides: OverridesParser) -> None:
    verdict = validate_task(manifest(script), "alice", PlatformConfig())
    assert verdict.error_lines() == []
    assert sorted(verdict.warning_lines()) == sorted(f"spec.command: {w}" for w in script.warnings)
    assert verdict.plan is not None and verdict.plan.gpus == script.nnodes * script.gpus
    # every override the generated command passes is one Hydra parses
    findings = Findings()
    checked = check_command("spec.command", expand(script.command, "alice", PlatformConfig()), policy=PathPolicy(PlatformConfig(), "alice"),
                            nnodes=script.nnodes, gpus_per_node=script.gpus, findings=findings)
    assert checked is not None
    for setting in checked.settings:
        hydra_overrides.parse_overrides([setting.text.replace("$(date +%Y%m%d_%H%M)", "20240102_0304")])


def test_what_the_lists_in_variables_become() -> None:
    verdict = validate_task(manifest(SCRIPTS[0]), "alice", PlatformConfig())
    assert verdict.plan is not None
    assert ("\"data.train_files=['/private/users/alice/datasets/gsm8k/train.parquet', "
            "'/private/users/alice/datasets/math/train.parquet']\" \\\n") in verdict.plan.command
    assert verdict.plan.command.endswith("  trainer.total_epochs=15\n")  # $@ is empty; the commented tail is gone
