"""Issue 34, "The checker, exact both ways": what verl's own example scripts write must
validate (the environment by role, verl's megatron config, main_eval, counts filled from the
spec, a config of the user's own unreadable offline), and no input crashes the checker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from argus.adapters.verlcompose import HydraComposer
from argus.core.command.environment import (
    ENVIRONMENT_RULES,
    KNOB,
    PATH,
    REFUSED,
    URL,
    env_rule,
    environment_reason,
)
from argus.core.config import PlatformConfig
from argus.core.plan import validate_task
from argus.core.verlconfig import ConfigTree
from verltrees import verl_tree

pytestmark = pytest.mark.unit

HOME = "/private/users/alice"
JOB = f"{HOME}/jobs/alice-t-12345678"
KEYS = ("data.train_files=$HOME/datasets/a.parquet data.val_files=$HOME/datasets/b.parquet "
        "trainer.nnodes=1 trainer.n_gpus_per_node=1 +ray_kwargs.ray_init.address=auto trainer.default_local_dir=$HOME/ckpt "
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 "
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1 actor_rollout_ref.rollout.name=vllm critic.ppo_micro_batch_size_per_gpu=4")
PPO = "python3 -m verl.trainer.main_ppo " + KEYS
_COMPOSERS: dict[str, HydraComposer] = {}


def composer(version: str = "0.9.1") -> HydraComposer:
    if version not in _COMPOSERS:
        _COMPOSERS[version] = HydraComposer(ConfigTree(version, verl_tree(version), "release"))
    return _COMPOSERS[version]


def task(command: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask",
            "metadata": {"name": "t", "namespace": "alice", "uid": "12345678-0000-0000-0000-000000000000"},
            "spec": {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "command": command, **spec}}


def verdict(command: str, version: str = "0.9.1", config: PlatformConfig | None = None, **spec: Any) -> Any:
    return validate_task(task(command, **spec), "alice", config or PlatformConfig(), composer(version))


def valid(command: str, version: str = "0.9.1", **spec: Any) -> Any:
    v = verdict(command, version, **spec)
    assert v.valid, v.error_lines()
    return v


def refused(command: str, *needles: str, version: str = "0.9.1") -> list[str]:
    v = verdict(command, version)
    lines = v.error_lines()
    assert not v.valid and v.plan is None, v.warning_lines()
    for needle in needles:
        assert any(needle in line for line in lines), (needle, lines)
    assert all("\n" not in line for line in lines)
    return lines


# --- the environment, by role ------------------------------------------------------------


@pytest.mark.parametrize(("name", "role"), [
    ("HYDRA_FULL_ERROR", KNOB), ("HYDRA_MAIN_MODULE", REFUSED), ("HYDRA_X", REFUSED),
    ("NCCL_NVLS_ENABLE", KNOB), ("NCCL_IBEXT_DISABLE", KNOB), ("NCCL_DEBUG", KNOB), ("NCCL_DEBUG_FILE", PATH),
    ("NCCL_TOPO_FILE", PATH), ("NCCL_NET_PLUGIN", REFUSED), ("NCCL_TUNER_PLUGIN", REFUSED), ("NCCL_CONF_FILE", REFUSED),
    ("TENSORBOARD_DIR", PATH), ("WANDB_DIR", PATH), ("WANDB_API_KEY", KNOB), ("MLFLOW_TRACKING_URI", URL),
    ("PYTHONSTARTUP", REFUSED), ("LD_PRELOAD", REFUSED), ("RAY_ADDRESS", REFUSED),
])
def test_each_name_has_its_role(name: str, role: str) -> None:
    rule = env_rule(name)
    assert rule is not None and rule.role == role


def test_a_name_no_rule_matches_is_refused() -> None:
    assert env_rule("MY_VARIABLE") is None
    assert environment_reason("MY_VARIABLE") is not None
    assert environment_reason("HYDRA_FULL_ERROR") is None


def test_every_pattern_is_reachable() -> None:
    """A rule shadowed by an earlier pattern would never decide anything."""
    for rule in ENVIRONMENT_RULES:
        if "*" not in rule.pattern:
            assert env_rule(rule.pattern) is rule, rule.pattern


@pytest.mark.parametrize("exports", [
    "export HYDRA_FULL_ERROR=1",
    "export NCCL_NVLS_ENABLE=0\nexport NCCL_IBEXT_DISABLE=1\nexport NCCL_DEBUG=WARN",
    "export NCCL_DEBUG_FILE=$HOME/logs/nccl.%h.%p",
    "export NCCL_NET_PLUGIN=none",
    "export TENSORBOARD_DIR=$HOME/tensorboard/run1",
    "export MLFLOW_TRACKING_URI=file://$HOME/mlruns",
    "export MLFLOW_TRACKING_URI=sqlite:///$HOME/mlruns.db",
    "export MLFLOW_TRACKING_URI=https://mlflow.example.org",
    "export WANDB_DIR=$HOME/wandb",
])
def test_honest_environments_validate(exports: str) -> None:
    valid(f"{exports}\n{PPO}")


@pytest.mark.parametrize(("exports", "needle"), [
    ("export HYDRA_MAIN_MODULE=x", "HYDRA_MAIN_MODULE"),
    ("export NCCL_NET_PLUGIN=$HOME/lib/net.so", "NCCL loads the shared library"),
    ("export NCCL_CONF_FILE=$HOME/nccl.conf", "NCCL_CONF_FILE"),
    ("export NCCL_DEBUG_FILE=/tmp/nccl.log", "NCCL_DEBUG_FILE must be under /private/users/alice/"),
    ("export TENSORBOARD_DIR=/private/users/bob/tb", "another user's home"),
    ("export MLFLOW_TRACKING_URI=file:///tmp/mlruns", "MLFLOW_TRACKING_URI must be under"),
    ("export MLFLOW_TRACKING_URI=sqlite:////tmp/mlruns.db", "MLFLOW_TRACKING_URI must be under"),
    ("export MLFLOW_TRACKING_URI=s3://bucket/x", "MLFLOW_TRACKING_URI must be an http(s):// server"),
    ("export WANDB_DIR=../x", "no '..'"),
])
def test_the_files_and_plugins_the_environment_names_are_checked(exports: str, needle: str) -> None:
    refused(f"{exports}\n{PPO}", needle)


@pytest.mark.parametrize(("exports", "name", "value"), [
    ("export WANDB_DIR=wandb", "WANDB_DIR", f"{JOB}/wandb"),
    ("WANDB_DIR=wandb\nexport WANDB_DIR", "WANDB_DIR", f"{JOB}/wandb"),
    ("export TENSORBOARD_DIR=tb/run1", "TENSORBOARD_DIR", f"{JOB}/tb/run1"),
    ("export MLFLOW_TRACKING_URI=file://mlruns", "MLFLOW_TRACKING_URI", f"file://{JOB}/mlruns"),
])
def test_a_relative_output_of_the_environment_goes_into_the_job_folder(exports: str, name: str, value: str) -> None:
    v = valid(f"{exports}\n{PPO}")
    assert f"{name}={value}" in v.plan.command, v.plan.command
    assert any("is a relative path" in w and name in w for w in v.warning_lines()), v.warning_lines()


# --- verl's own configs, and the counts ----------------------------------------------------


@pytest.mark.parametrize("version", ["0.9.1", "0.6.1"])
@pytest.mark.parametrize("options", ["--config-name=ppo_megatron_trainer", "--config-path=config --config-name=ppo_megatron_trainer",
                                     "--config-path=./config --config-name=ppo_megatron_trainer",
                                     "--config-path=config --config-name='ppo_megatron_trainer.yaml'"])
def test_verls_megatron_config_is_compared_with_itself(version: str, options: str) -> None:
    valid(f"python3 -m verl.trainer.main_ppo {options} {KEYS}", version)


@pytest.mark.parametrize("version", ["0.9.1", "0.6.1"])
def test_main_eval_gets_no_trainer_counts(version: str) -> None:
    v = valid("python3 -m verl.trainer.main_eval data.path=$HOME/datasets/gen.parquet +ray_kwargs.ray_init.address=auto", version)
    assert "trainer.n" not in v.plan.command, v.plan.command
    assert not any("data.train_files" in w or "trainer.n" in w for w in v.warning_lines()), v.warning_lines()


@pytest.mark.parametrize("left_out", ["trainer.n_gpus_per_node=1", "trainer.nnodes=1"])
def test_a_count_left_out_is_filled_from_the_spec_with_a_warning(left_out: str) -> None:
    v = valid(PPO.replace(f" {left_out}", ""))
    assert left_out in v.plan.command.split(), v.plan.command
    assert any(w.startswith(f"spec.command: '{left_out}': is not set") for w in v.warning_lines()), v.warning_lines()


def test_both_counts_left_out_on_two_gpus() -> None:
    command = PPO.replace(" trainer.n_gpus_per_node=1", "").replace(" trainer.nnodes=1", "")
    v = valid(command.replace("tensor_model_parallel_size=1", "tensor_model_parallel_size=2"), nGpusPerNode=2)
    assert {"trainer.nnodes=1", "trainer.n_gpus_per_node=2"} <= set(v.plan.command.split()), v.plan.command


# --- a config of the user's own, offline ---------------------------------------------------


OWN = f"python3 -m verl.trainer.main_ppo --config-path=$HOME/code/cfg --config-name=mine {KEYS}"


def test_a_config_of_ones_own_unreadable_offline_is_a_warning(tmp_path: Any) -> None:
    config = PlatformConfig(root=str(tmp_path / "not-mounted"))
    v = verdict(OWN.replace(" trainer.n_gpus_per_node=1", ""), config=config)
    assert v.valid, v.error_lines()
    assert any("cannot be read here" in w and "was not checked" in w for w in v.warning_lines()), v.warning_lines()
    assert "trainer.n_gpus_per_node=1" in v.plan.command.split()


def test_a_config_of_ones_own_missing_from_a_readable_home_is_refused(tmp_path: Any) -> None:
    (tmp_path / "users" / "alice").mkdir(parents=True)
    v = verdict(OWN, config=PlatformConfig(root=str(tmp_path)))
    assert not v.valid and any("Primary config directory not found" in e for e in v.error_lines()), v.error_lines()


def test_a_config_of_ones_own_unreadable_on_the_clusters_tree_is_refused(tmp_path: Any) -> None:
    c = HydraComposer(ConfigTree("0.9.1", verl_tree("0.9.1"), "cluster"))
    v = validate_task(task(OWN), "alice", PlatformConfig(root=str(tmp_path / "x")), c)
    assert not v.valid and any("cannot be read through the shared tree" in e for e in v.error_lines()), v.error_lines()


# --- no input crashes the checker ---------------------------------------------------------

_PIECES = st.sampled_from(["${", "}", "${oc.select:", "${oc.env:", "\\", "\\${", "\"", "'", ":", ",", "=", "[", "]", "{", "}",
                           "$", "x", "a.b", "/", "..", "~", "_target_", "é", "\u00a0", "💥", "${oc.select:\\\"x\\\"}", "${now:%H}",
                           "${trainer.project_name}", "$HOME", " ", "\\\\", "+", "~trainer", "null", "1", "'${x}'"])
_TEXTS = st.lists(st.one_of(_PIECES, st.text(max_size=4)), max_size=8).map("".join)
_KEYS = st.sampled_from(["+x.y", "++x.y", "trainer.experiment_name", "trainer.default_local_dir", "data.train_files",
                         "actor_rollout_ref.model.path", "+hydra.job.name", "critic.optim.lr", "+actor_rollout_ref.actor.z"])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=_KEYS, value=_TEXTS, quoted=st.sampled_from(["'", '"', ""]))
@example(key="+x.y", value='"${oc.select:\\"x\\"}"', quoted="'")
@example(key="+x.y", value="\\${oc.env:HOME}", quoted="'")
def test_generated_overrides_get_a_verdict_never_an_exception(key: str, value: str, quoted: str) -> None:
    if quoted == "'":
        word = "'" + f"{key}={value}".replace("'", "'\"'\"'") + "'"
    elif quoted == '"':
        word = '"' + "".join("\\" + c if c in '"$`\\' else c for c in f"{key}={value}") + '"'
    else:
        word = f"{key}={value}"
    v = verdict(f"{PPO} {word}")
    assert not any("the checks failed on this task" in e for e in v.error_lines()), v.error_lines()
    assert all("\n" not in line for line in v.error_lines() + v.warning_lines())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(overrides=st.lists(st.builds(lambda k, v: f"{k}={v}", _KEYS, _TEXTS), min_size=1, max_size=3))
def test_the_composer_answers_any_override_with_a_composition_or_hydras_words(overrides: list[str]) -> None:
    from argus.core.verlconfig import ComposeRequest

    composed = composer().compose(ComposeRequest(module="verl.trainer.main_ppo", overrides=tuple(overrides), env={}, job_dir=JOB))
    assert composed.error is None or isinstance(composed.error, str)


def test_a_check_that_raises_is_a_refusal_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import argus.core.plan as plan

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(plan, "_compose_and_check", boom)
    v = verdict(PPO)
    assert not v.valid and v.plan is None
    assert v.error_lines() == ["spec: 'RuntimeError: boom second line': the checks failed on this task (a bug in Argus: report it "
                               "with the task); it is refused rather than run unchecked"]


# --- what verl hands to a shell, and outputs in the worker's home --------------------------


@pytest.mark.parametrize(("override", "needle"), [
    ("global_profiler.finish_hook_cmd='touch x'", "(global_profiler.finish_hook_cmd)"),
    ("actor_rollout_ref.actor.profiler.finish_hook_cmd=id", "runs finish_hook_cmd under /bin/sh -c"),
    ("'+global_profiler.global_tool_config.nsys.worker_nsight_options={env-var: \"LD_PRELOAD=/x.so\"}'",
     "(global_profiler.global_tool_config.nsys.worker_nsight_options)"),
    ("\"global_profiler.global_tool_config.nsys.controller_nsight_options.trace='cuda;id'\"", "pastes these options unquoted"),
    ("trainer.default_hdfs_dir=hdfs://nn/x", "copies hdfs:// paths with a shell command"),
    ("data.val_files=hdfs://nn/x.parquet", "(data.val_files)"),
    ("skip.rollout.enable=true", "(skip.rollout.dump_dir)"),
    ("actor_rollout_ref.rollout.prometheus.enable=true", "(actor_rollout_ref.rollout.prometheus.file)"),
    ("actor_rollout_ref.rollout.router_config_path=/private/datasets/router.yaml", "a file that names code verl loads"),
])
def test_what_verl_hands_to_a_shell_is_refused(override: str, needle: str) -> None:
    refused(f"{PPO.replace(' data.val_files=$HOME/datasets/b.parquet', '')} {override}", needle)


def test_a_dump_folder_in_the_home_is_fine() -> None:
    valid(f"{PPO} skip.rollout.enable=true skip.rollout.dump_dir=$HOME/dumps")
    valid(f"{PPO} actor_rollout_ref.rollout.prometheus.enable=true actor_rollout_ref.rollout.prometheus.file=$HOME/prom.yml")
    valid(f"{PPO} actor_rollout_ref.rollout.router_config_path=$HOME/code/router.yaml")


# --- resolve where verl resolves, once ----------------------------------------------------


@pytest.mark.parametrize("override", [
    "'+x.a=\\${oc.env:HOME}'",                                   # escaped: live again at verl's second resolution
    "'+x.d=$' \"+x.b='\\${x.d}{oc.env:HOME}'\"",                  # a $ glued to {...} by the first resolution
])
def test_an_interpolation_left_after_the_first_resolution_is_refused(override: str) -> None:
    refused(f"{PPO} {override}", "is still an interpolation after resolution")


def test_oc_env_reads_the_taskrunners_environment_not_the_commands_exports() -> None:
    refused(f"export OMP_NUM_THREADS=4\n{PPO} 'trainer.project_name=${{oc.env:OMP_NUM_THREADS}}'", "which verl's TaskRunner")
    v = valid(f"{PPO} 'trainer.project_name=${{oc.env:WANDB_PROJECT,proj}}'")
    assert v.valid


def test_a_trackers_export_reaches_the_taskrunner_through_the_runtime_env() -> None:
    v = valid(f"export WANDB_PROJECT=p\nexport MLFLOW_EXPERIMENT_NAME=e\n{PPO} 'trainer.project_name=${{oc.env:WANDB_PROJECT}}'")
    assert v.valid, v.error_lines()
    assert v.plan is not None
    env = v.plan.runtime_env["env_vars"]
    assert env["WANDB_PROJECT"] == "p" and env["MLFLOW_EXPERIMENT_NAME"] == "e"


# --- one verl per task --------------------------------------------------------------------


def _basic_with_code(tmp_path: Any, version: str | None) -> Any:
    code = tmp_path / "common" / "code" / "verl-x"
    if version is not None:
        (code / "verl" / "version").mkdir(parents=True)
        (code / "verl" / "version" / "version").write_text(version + "\n")
    doc = task("", kind="basic", workload="grpo", modelId="Qwen/Qwen2.5-0.5B-Instruct", trainFile="$HOME/datasets/a.parquet",
               valFile="$HOME/datasets/b.parquet", codePath=str(code))
    del doc["spec"]["command"]
    return validate_task(doc, "alice", PlatformConfig(root=str(tmp_path)), composer("0.9.1"))


def test_a_codepath_at_the_composed_version_runs(tmp_path: Any) -> None:
    v = _basic_with_code(tmp_path, "0.9.1")
    assert v.valid, v.error_lines()


def test_a_codepath_at_another_verl_version_is_refused(tmp_path: Any) -> None:
    v = _basic_with_code(tmp_path, "0.6.1")
    assert not v.valid
    assert any(e.startswith("spec.codePath: ") and "holds verl 0.6.1, but the task is composed and checked with verl 0.9.1" in e
               for e in v.error_lines()), v.error_lines()


def test_a_codepath_unreadable_offline_is_a_warning(tmp_path: Any) -> None:
    v = _basic_with_code(tmp_path, None)
    assert v.valid, v.error_lines()
    assert any(w.startswith("spec.codePath: ") and "was not checked" in w for w in v.warning_lines()), v.warning_lines()


# --- the honest corpus --------------------------------------------------------------------

HONEST = yaml.safe_load((Path(__file__).resolve().parents[1] / "integration" / "verl_corpus" / "honest.yaml").read_text())["cases"]


# Each case with each release it names (default: both), so no case is skipped.
HONEST_RUNS = [(case, version) for case in HONEST for version in case.get("versions", ["0.9.1", "0.6.1"])]


@pytest.mark.parametrize("case, version", HONEST_RUNS, ids=[f"{c['id']}-{v}" for c, v in HONEST_RUNS])
def test_the_honest_corpus_validates(case: dict[str, Any], version: str) -> None:
    v = verdict(case["command"], version, workload=case["workload"], nnodes=case["nnodes"], nGpusPerNode=case["gpus"])
    assert v.valid, v.error_lines()
    assert v.plan is not None and "$HOME" not in v.plan.command


# --- outputs verl writes outside the job by default ---------------------------------------


def test_verls_tracker_outputs_go_into_the_job_folder_through_the_runtime_env() -> None:
    env = valid(PPO).plan.runtime_env["env_vars"]
    assert env["TENSORBOARD_DIR"] == f"{JOB}/tensorboard_log"
    assert env["MLFLOW_TRACKING_URI"] == f"sqlite:///{JOB}/mlruns.db"
    assert env["SWANLAB_LOG_DIR"] == f"{JOB}/swanlog"


def test_a_tracker_output_the_command_sets_reaches_verls_actors() -> None:
    env = valid(f"export TENSORBOARD_DIR=$HOME/tb/run1\nexport MLFLOW_TRACKING_URI=mlruns\n{PPO}").plan.runtime_env["env_vars"]
    assert env["TENSORBOARD_DIR"] == f"{HOME}/tb/run1"
    assert env["MLFLOW_TRACKING_URI"] == f"{JOB}/mlruns"


# --- every path-like key of every supported release is classified ---------------------------

_CONFIGS = {"0.9.1": [("verl.trainer.main_ppo", None), ("verl.trainer.main_ppo", "ppo_megatron_trainer"),
                      ("verl.trainer.main_eval", None), ("verl.trainer.sft_trainer", None)],
            "0.6.1": [("verl.trainer.main_ppo", None), ("verl.trainer.main_ppo", "ppo_megatron_trainer"),
                      ("verl.trainer.main_eval", None), ("verl.trainer.fsdp_sft_trainer", None)]}


def _leaves(node: Any, parts: tuple[str, ...] = ()) -> Any:
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, (*parts, str(k)))
    elif isinstance(node, list):
        for v in node:
            yield from _leaves(v, parts)
    else:
        yield parts


@pytest.mark.parametrize("version", sorted(_CONFIGS))
def test_every_path_like_key_of_verl_has_a_declared_role(version: str) -> None:
    """A supported release that adds a key named like a path, a command or code
    (keys.PATH_LIKE) fails here until it is classified in keys.py (a role, the shell rules,
    or PLAIN): the table is reviewed, not guessed at run time."""
    import fnmatch

    from argus.core.verlconfig import ComposeRequest
    from argus.core.verlconfig.keys import PATH_LIKE, PLAIN, SHELL_BLOCK_SUFFIX, SHELL_LEAVES, role_of

    unclassified = set()
    for module, name in _CONFIGS[version]:
        composed = composer(version).compose(ComposeRequest(module=module, overrides=(), env={}, job_dir=JOB, config_name=name))
        assert composed.error is None, (module, name, composed.error)
        for parts in _leaves(composed.raw):
            last = parts[-1]
            if not PATH_LIKE.search(last) or last in SHELL_LEAVES or any(p.endswith(SHELL_BLOCK_SUFFIX) for p in parts):
                continue
            if role_of(".".join(parts)) is None and not any(fnmatch.fnmatchcase(last, p) for p in PLAIN):
                unclassified.add(".".join(parts))
    assert not unclassified, f"verl {version}: classify these keys in argus/core/verlconfig/keys.py: {sorted(unclassified)}"


@pytest.mark.parametrize(("override", "needle"), [
    ("+trainer.checkpoint_callback_class=os.system", "imports the module or class this names"),
    ("actor_rollout_ref.rollout.checkpoint_engine.custom_backend_module=evil", "imports the module or class this names"),
    ("--config-name=ppo_megatron_trainer actor_rollout_ref.actor.megatron.dist_checkpointing_path=/etc", "a file verl reads must be under"),
    ("+sandbox_fusion.url=file:///etc/passwd", "must be an http(s):// URL"),
])
def test_the_new_roles_hold(override: str, needle: str) -> None:
    options, _, override = override.rpartition(" ")
    refused(f"python3 -m verl.trainer.main_ppo {options} {KEYS} {override}", needle)


def test_main_eval_reads_generated_responses_from_the_home_but_nobody_elses() -> None:
    valid("python3 -m verl.trainer.main_eval data.path=$HOME/outputs/gen/test.parquet +ray_kwargs.ray_init.address=auto")
    refused("python3 -m verl.trainer.main_eval data.path=/etc/x.parquet +ray_kwargs.ray_init.address=auto", "a file verl reads must be under")


def _own_config(tmp_path: Any, text: str) -> PlatformConfig:
    folder = tmp_path / "users" / "alice" / "code" / "cfg"
    folder.mkdir(parents=True)
    (folder / "mine.yaml").write_text(text)
    return PlatformConfig(root=str(tmp_path))


OWN_DIR = f"python3 -m verl.trainer.main_ppo --config-dir=$HOME/code/cfg --config-name=mine {KEYS}"


def test_a_config_of_ones_own_built_on_verls_megatron_config_is_compared_with_it(tmp_path: Any) -> None:
    config = _own_config(tmp_path, "defaults:\n  - ppo_megatron_trainer\n  - _self_\ntrainer:\n  total_epochs: 3\n")
    v = verdict(OWN_DIR, config=config)
    assert v.valid, v.error_lines()


def test_a_target_in_a_config_of_ones_own_built_on_verls_is_still_refused(tmp_path: Any) -> None:
    config = _own_config(tmp_path, "defaults:\n  - ppo_megatron_trainer\n  - _self_\ncritic:\n  _target_: os.system\n")
    v = verdict(OWN_DIR, config=config)
    assert any("(critic._target_)" in e and "os.system" in e for e in v.error_lines()), v.error_lines()


# --- keys with no reviewed role (issue 34, item 1: argus/verlroles) -----------------------


@pytest.mark.parametrize("version", ["0.9.1", "0.6.1"])
@pytest.mark.parametrize("override", [
    "+actor_rollout_ref.model.override_config.attention_dropout=0.0",
    "+actor_rollout_ref.rollout.engine_kwargs.vllm.swap_space=4",
    "+data.apply_chat_template_kwargs.enable_thinking=False",
    "+critic.model.override_config.attention_dropout=0.0",
])
def test_keys_added_under_a_free_form_block_validate(override: str, version: str) -> None:
    valid(f"{PPO} {override}", version)


@pytest.mark.parametrize("override", ["+trainer.my_hook=$HOME/x", "+actor_rollout_ref.actor.secret_module=evil", "+foo.bar=1"])
def test_a_key_verl_does_not_declare_is_refused_in_one_line(override: str) -> None:
    key = override.split("=", 1)[0].lstrip("+")
    lines = refused(f"{PPO} {override}", f"({key})", "is not a key of verl 0.9.1's configuration")
    assert len([line for line in lines if f"({key})" in line]) == 1, lines


def test_a_key_with_an_unknown_role_is_refused_unless_verls_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from argus.core.verlconfig import roles

    patched = dict(roles.table("0.9.1") or {})
    patched["trainer.project_name"] = roles.UNKNOWN
    monkeypatch.setattr("argus.core.verlconfig.check.table", lambda version: patched)
    refused(f"{PPO} trainer.project_name=p", "(trainer.project_name)", "has no reviewed role")
    valid(PPO)
