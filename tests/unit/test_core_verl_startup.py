"""verl's start-up checks restated (argus.core.verlconfig.startup), on small plain configs
shaped as verl's composed ones. That they agree with verl itself on verl's real composed
configs is shown by tests/integration/test_verl_oracle.py; here, each rule and its words."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from argus.core.verlconfig.startup import StartupProblem, startup_problems

pytestmark = pytest.mark.unit

PPO = "verl.trainer.main_ppo"


def ppo(**changes: Any) -> dict[str, Any]:
    """A config verl 0.9.1 accepts (one GPU, GAE), with dotted keys changed."""
    config: dict[str, Any] = {
        "algorithm": {"adv_estimator": "gae", "use_kl_in_reward": False},
        "data": {"train_batch_size": 256},
        "trainer": {"n_gpus_per_node": 1, "nnodes": 1},
        "actor_rollout_ref": {
            "model": {"use_remove_padding": False},
            "actor": {"_target_": "verl.workers.config.FSDPActorConfig", "strategy": "fsdp", "use_dynamic_bsz": False,
                      "ppo_mini_batch_size": 64, "ppo_micro_batch_size": None, "ppo_micro_batch_size_per_gpu": 4,
                      "use_kl_loss": False, "loss_agg_mode": "token-mean", "ulysses_sequence_parallel_size": 1},
            "ref": {"log_prob_micro_batch_size": None, "log_prob_micro_batch_size_per_gpu": None},
            "rollout": {"name": "vllm", "mode": "async", "n": 1, "tensor_model_parallel_size": 1, "data_parallel_size": 1,
                        "pipeline_model_parallel_size": 1, "expert_parallel_size": 1,
                        "log_prob_micro_batch_size": None, "log_prob_micro_batch_size_per_gpu": 4,
                        "temperature": 1.0, "val_kwargs": {"do_sample": False}},
        },
        "critic": {"_target_": "verl.workers.config.FSDPCriticConfig", "enable": None, "use_dynamic_bsz": False,
                   "ppo_mini_batch_size": 64, "ppo_micro_batch_size": None, "ppo_micro_batch_size_per_gpu": 4,
                   "ulysses_sequence_parallel_size": 1},
    }
    config = copy.deepcopy(config)
    for dotted, value in changes.items():
        node = config
        *parents, last = dotted.split("__")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return config


def problems(config: dict[str, Any], version: str = "0.9.1", entry: str = PPO) -> list[StartupProblem]:
    return startup_problems(config, version=version, entry=entry)


def test_an_accepted_config_has_no_problems() -> None:
    assert problems(ppo()) == []
    assert problems(ppo(), "0.6.1") == []


@pytest.mark.parametrize(("changes", "key", "words"), [
    ({"actor_rollout_ref__actor__ppo_micro_batch_size_per_gpu": None}, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
     "[actor] Please set at least one of 'actor.ppo_micro_batch_size' or 'actor.ppo_micro_batch_size_per_gpu'"),
    ({"actor_rollout_ref__actor__ppo_micro_batch_size": 4}, "actor_rollout_ref.actor.ppo_micro_batch_size",
     "[actor] You have set both 'actor.ppo_micro_batch_size' AND 'actor.ppo_micro_batch_size_per_gpu'"),
    ({"actor_rollout_ref__rollout__log_prob_micro_batch_size_per_gpu": None},
     "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
     "[actor_rollout_ref.rollout] Please set at least one of 'actor_rollout_ref.rollout.log_prob_micro_batch_size'"),
    ({"critic__ppo_micro_batch_size_per_gpu": None}, "critic.ppo_micro_batch_size_per_gpu",
     "[critic] Please set at least one of 'critic.ppo_micro_batch_size' or 'critic.ppo_micro_batch_size_per_gpu'"),
    ({"actor_rollout_ref__rollout__tensor_model_parallel_size": 2}, "actor_rollout_ref.rollout.tensor_model_parallel_size",
     "rollout world_size: 1 is not divisible by infer_world_size: 2"),
    ({"trainer__n_gpus_per_node": 3, "actor_rollout_ref__actor__ppo_mini_batch_size": 64}, "data.train_batch_size",
     "real_train_batch_size (256) must be divisible by minimal possible batch size (3)"),
    ({"data__train_batch_size": 32}, "actor_rollout_ref.actor.ppo_mini_batch_size",
     "train_batch_size (32) must be >= actor.ppo_mini_batch_size (64)"),
    ({"actor_rollout_ref__rollout__name": "???"}, "actor_rollout_ref.rollout.name",
     "Missing mandatory value: actor_rollout_ref.rollout.name"),
    ({"actor_rollout_ref__rollout__name": None}, "actor_rollout_ref.rollout.name", "Unknown rollout mode: None"),
    ({"actor_rollout_ref__actor__use_kl_loss": True}, "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
     "[actor_rollout_ref.ref] Please set at least one of"),
    ({"actor_rollout_ref__actor__loss_agg_mode": "seq-sum"}, "actor_rollout_ref.actor.loss_agg_mode",
     "Invalid loss_agg_mode: seq-sum"),
])
def test_each_rule_names_the_key_and_says_it_in_verl_s_words(changes: dict[str, Any], key: str, words: str) -> None:
    found = problems(ppo(**changes))
    assert any(p.key == key and words in p.message for p in found), found


def test_dynamic_batch_sizes_need_no_micro_batch_sizes() -> None:
    config = ppo(actor_rollout_ref__actor__use_dynamic_bsz=True, critic__use_dynamic_bsz=True,
                 actor_rollout_ref__actor__ppo_micro_batch_size_per_gpu=None, critic__ppo_micro_batch_size_per_gpu=None,
                 actor_rollout_ref__rollout__log_prob_micro_batch_size_per_gpu=None)
    assert problems(config) == []


def test_no_critic_without_gae_unless_enabled() -> None:
    grpo = ppo(algorithm__adv_estimator="grpo", critic__ppo_micro_batch_size_per_gpu=None)
    assert problems(grpo) == []
    assert [p.key for p in problems(ppo(algorithm__adv_estimator="grpo", critic__enable=True,
                                        critic__ppo_micro_batch_size_per_gpu=None))] == ["critic.ppo_micro_batch_size_per_gpu"]


def test_version_differences() -> None:
    sync = ppo(actor_rollout_ref__rollout__mode="sync")
    assert [p.key for p in problems(sync, "0.9.1")] == ["actor_rollout_ref.rollout.mode"]
    assert problems(sync, "0.6.1") == []
    # 0.6.x checks the reward model's micro batch when it is enabled; 0.9.x has no such key.
    rm = ppo(reward_model={"enable": True, "use_dynamic_bsz": False, "micro_batch_size": None, "micro_batch_size_per_gpu": None})
    assert [p.key for p in problems(rm, "0.6.1")] == ["reward_model.micro_batch_size_per_gpu"]


def test_every_problem_is_reported_not_only_the_first() -> None:
    found = problems(ppo(actor_rollout_ref__actor__ppo_micro_batch_size_per_gpu=None,
                         actor_rollout_ref__rollout__tensor_model_parallel_size=2, critic__ppo_micro_batch_size_per_gpu=None))
    assert len(found) == 3


def test_sft_checks() -> None:
    sft = {"data": {"train_batch_size": 8, "micro_batch_size_per_gpu": 4}, "trainer": {"n_gpus_per_node": 1, "nnodes": 1,
                                                                                     "profile_interval": [-1, -1]}}
    assert startup_problems(sft, version="0.9.1", entry="verl.trainer.sft_trainer") == []
    assert startup_problems(sft, version="0.6.1", entry="verl.trainer.fsdp_sft_trainer") == []
    wide = copy.deepcopy(sft)
    wide["trainer"]["n_gpus_per_node"] = 3
    assert [p.message for p in startup_problems(wide, version="0.6.1", entry="verl.trainer.fsdp_sft_trainer")] == [
        "Global batch size 8 is not divisible by dp size 3"]


def test_sft_ranks_are_torchruns_world_and_the_trainer_counts_are_not_required() -> None:
    bare = {"data": {"train_batch_size": 8, "micro_batch_size_per_gpu": 4}, "trainer": {}}
    for version, entry in (("0.6.1", "verl.trainer.sft_trainer"), ("0.9.1", "verl.trainer.sft_trainer"),
                           ("0.6.1", "verl.trainer.fsdp_sft_trainer")):
        assert startup_problems(bare, version=version, entry=entry) == []
        assert startup_problems(bare, version=version, entry=entry, world_size=2) == []
    # The world decides, not the counts: 3 ranks do not divide a batch of 8 (fsdp_sft_trainer).
    counted = {**bare, "trainer": {"n_gpus_per_node": 1, "nnodes": 1}}
    assert [p.message for p in startup_problems(counted, version="0.6.1", entry="verl.trainer.fsdp_sft_trainer", world_size=3)] == [
        "Global batch size 8 is not divisible by dp size 3"]
    assert [p.key for p in startup_problems(counted, version="0.9.1", entry="verl.trainer.sft_trainer", world_size=16)] == [
        "data.train_batch_size"]


def test_the_profile_interval_is_checked_by_verl_0_9_only() -> None:
    backwards = {"data": {"train_batch_size": 8}, "trainer": {"profile_interval": [5, 1]}}
    assert [p.key for p in startup_problems(backwards, version="0.9.1", entry="verl.trainer.sft_trainer")] == ["trainer.profile_interval"]
    assert startup_problems(backwards, version="0.6.1", entry="verl.trainer.sft_trainer") == []


def test_an_unknown_entry_gets_no_checks() -> None:
    assert startup_problems({}, version="0.9.1", entry="verl.trainer.main_eval") == []


def test_a_rollout_a_cluster_plugin_registers_is_accepted_when_declared() -> None:
    """verl 0.9's RolloutReplicaRegistry is open to plugins (VERL_USE_EXTERNAL_MODULES): the
    test cluster's CPU rollout 'hf'. Unknown to verl's own table, known once the platform
    declares it (--verl-plugin-rollout)."""
    config = ppo(actor_rollout_ref__rollout__name="hf")
    assert [p.message for p in problems(config)] == ["Unknown rollout mode: hf. Available: ['vllm', 'sglang', 'trtllm']"]
    assert startup_problems(config, version="0.9.1", entry=PPO, plugin_rollouts=("hf",)) == []
