"""The checks of the composed, resolved configuration (argus.core.verlconfig.check), on
hand-built compositions, and the pipeline around them (plan.validate_task) with the
in-memory composer of fakes.py. One test per class of the issue 21 red-team round, and
the rewrites Argus adds (relative outputs, the legacy reward keys)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from argus.core.config import PlatformConfig
from argus.core.plan import validate_task
from argus.core.policy import Findings, PathPolicy
from argus.core.verlconfig import Composed, ConfigTree
from argus.core.verlconfig.check import check_composed
from fakes import FakeComposer

pytestmark = pytest.mark.unit

HOME = "/private/users/alice"
JOB = f"{HOME}/jobs/alice-t-12345678"
TREE = ConfigTree("0.9.1", "/trees/0.9.1", "release")

# A small verl-like base config (the shape of verl 0.9.1's ppo_trainer where it matters).
# verl's base as a fake composer returns it: a fragment of verl's tree, with what verl's
# start-up checks need already set (the pipeline runs them on every composed config).
BASE: dict[str, Any] = {
    "data": {"train_files": "~/data/train.parquet", "val_files": "~/data/test.parquet", "custom_cls": {"path": None},
             "train_batch_size": 4},
    "actor_rollout_ref": {"actor": {"_target_": "verl.workers.config.FSDPActorConfig", "strategy": "fsdp",
                                    "checkpoint": {"save_contents": ["model"]}, "ppo_micro_batch_size_per_gpu": 1},
                          "rollout": {"name": "vllm", "n": 1, "log_prob_micro_batch_size_per_gpu": 1},
                          "model": {"path": "~/models/x"}},
    "critic": {"model": {"path": "~/models/x"}},
    "custom_reward_function": {"path": None, "name": None},
    "reward": {"_target_": "verl.workers.config.RewardConfig",
               "custom_reward_function": {"path": None, "name": "compute_score"},
               "reward_model": {"enable": False, "enable_resource_pool": False, "n_gpus_per_node": 8, "nnodes": 0}},
    "distillation": {"enabled": False, "n_gpus_per_node": 8, "nnodes": 0},
    "trainer": {"nnodes": 1, "n_gpus_per_node": 8, "project_name": "p", "experiment_name": "e",
                "default_local_dir": "checkpoints/p/e"},
    "ray_kwargs": {"ray_init": {"num_cpus": None}, "timeline_json_file": None},
}
RAW_DEFAULT_DIR = "checkpoints/${trainer.project_name}/${trainer.experiment_name}"
HYDRA: dict[str, Any] = {
    "mode": None, "searchpath": [], "run": {"dir": "outputs/2026-01-02/03-04-05"}, "sweep": {"dir": "multirun/x"},
    "output_subdir": ".hydra", "verbose": False, "callbacks": {},
    "job": {"name": "main_ppo", "chdir": None, "env_set": {}, "env_copy": []},
    "job_logging": {"handlers": {"file": {"class": "logging.FileHandler", "filename": f"{JOB}/outputs/main_ppo.log"}}},
    "hydra_logging": {},
}


def composed(changes: dict[str, Any] | None = None, hydra: dict[str, Any] | None = None, base: dict[str, Any] | None = None,
             raw: dict[str, Any] | None = None) -> Composed:
    """verl's base with ``changes`` (dotted keys) applied, as the composer would return it."""
    base = copy.deepcopy(base or BASE)
    config = copy.deepcopy(base)
    config["trainer"].update({"nnodes": 1, "n_gpus_per_node": 1})
    for key, value in (changes or {}).items():
        node = config
        *parents, last = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    raw_config = copy.deepcopy(config)
    raw_config["trainer"]["default_local_dir"] = RAW_DEFAULT_DIR if config["trainer"]["default_local_dir"] == "checkpoints/p/e" \
        else config["trainer"]["default_local_dir"]
    for key, value in (raw or {}).items():
        node = raw_config
        *parents, last = key.split(".")
        for p in parents:
            node = node[p]
        node[last] = value
    h = copy.deepcopy(HYDRA)
    for key, value in (hydra or {}).items():
        node = h
        *parents, last = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return Composed(primary="ppo_trainer", config=config, raw=raw_config, hydra=h, base=base, base_hydra=copy.deepcopy(HYDRA))


def check(c: Composed, module: str = "verl.trainer.main_ppo", tree: ConfigTree = TREE) -> tuple[list[str], list[str], list[str]]:
    findings = Findings()
    added = check_composed("spec.command", c, tree=tree, module=module, policy=PathPolicy(PlatformConfig(), "alice"),
                           nnodes=1, gpus=1, job_dir=JOB, findings=findings)
    return [str(p) for p in findings.errors], [str(p) for p in findings.warnings], added


def only_rewrites(c: Composed) -> None:
    errors, _, _ = check(c)
    assert errors == []


# --- the good case ----------------------------------------------------------------------


def test_a_plain_command_passes_and_gets_its_checkpoints_in_the_job_folder() -> None:
    errors, warnings, added = check(composed({"data.train_files": f"{HOME}/datasets/a.parquet",
                                              "actor_rollout_ref.model.path": "Qwen/Qwen2.5-0.5B-Instruct"}))
    assert errors == []
    # The value as written, so that verl still resolves its interpolations (a $(date) among them).
    assert added == [f"trainer.default_local_dir={JOB}/{RAW_DEFAULT_DIR}"]
    assert len(warnings) == 1 and "trainer.default_local_dir=checkpoints/p/e" in warnings[0]
    assert f"absolute under the job folder {JOB}" in warnings[0]


def test_an_absolute_output_in_the_home_is_left_alone() -> None:
    errors, warnings, added = check(composed({"trainer.default_local_dir": f"{HOME}/ckpt"}))
    assert errors == [] and added == [] and warnings == []


# --- class 1: instantiation keys, lists and oc.create included ---------------------------


def test_a_target_in_a_list_value_is_refused() -> None:
    errors, _, _ = check(composed({"actor_rollout_ref.actor.checkpoint.save_contents": [{"_target_": "os.system", "_args_": ["id"]}]}))
    assert any("(actor_rollout_ref.actor.checkpoint.save_contents[0]._target_)" in e and "'os.system'" in e
               and "verl 0.9.1's own config has none here" in e for e in errors), errors
    assert any("save_contents[0]._args_" in e for e in errors)


def test_a_target_verl_has_may_stay_but_not_change() -> None:
    only_rewrites(composed({"actor_rollout_ref.actor._target_": "verl.workers.config.FSDPActorConfig"}))
    errors, _, _ = check(composed({"actor_rollout_ref.actor._target_": "builtins.exec"}))
    assert errors == ["spec.command (actor_rollout_ref.actor._target_): 'builtins.exec': _target_ makes Hydra or verl instantiate "
                      "Python code; verl 0.9.1's own config has 'verl.workers.config.FSDPActorConfig' here, and only that is allowed"]


def test_a_target_built_by_oc_create_is_seen_after_resolution() -> None:
    # ${oc.create:{_target_: ...}} resolves into a mapping: the check reads the resolved config.
    errors, _, _ = check(composed({"x": {"y": {"_target_": "runpy.run_path", "path_name": f"{HOME}/code/x.py"}}}))
    assert any("(x.y._target_)" in e for e in errors)


# --- class 2 and 3: Hydra's job name and folders ------------------------------------------


@pytest.mark.parametrize("name", ["../../bob/x", "a/b", "..", "~x"])
def test_hydra_job_name_is_one_file_name(name: str) -> None:
    errors, _, _ = check(composed(hydra={"job.name": name}))
    assert any("(hydra.job.name)" in e and "one file name" in e for e in errors), errors


@pytest.mark.parametrize("key", ["output_subdir", "run.dir", "sweep.dir"])
def test_hydra_folders_stay_in_the_home(key: str) -> None:
    errors, _, _ = check(composed(hydra={key: "/private/users/bob/x"}))
    assert any(f"(hydra.{key})" in e and "must be under /private/users/alice/" in e for e in errors), errors
    errors, _, _ = check(composed(hydra={key: "../x"}))
    assert any(f"(hydra.{key})" in e and "no '..'" in e for e in errors), errors
    only_rewrites(composed(hydra={key: f"{HOME}/runs/x"}))


def test_a_config_that_turns_on_hydras_multirun_is_refused() -> None:
    errors, _, _ = check(composed(hydra={"mode": "MULTIRUN"}))
    assert errors == ["spec.command (hydra.mode): 'MULTIRUN': Hydra would run a multirun (one job per value of a sweep): one run only"]


def test_hydra_logging_handler_class_must_be_hydras() -> None:
    errors, _, _ = check(composed(hydra={"job_logging.handlers.file.class": "mylib.Handler"}))
    assert any("(hydra.job_logging.handlers.file.class)" in e for e in errors), errors


def test_hydra_env_set_is_under_the_environment_allowlist() -> None:
    errors, _, _ = check(composed(hydra={"job.env_set": {"RAY_ADDRESS": "local", "WANDB_MODE": "offline"}}))
    assert len(errors) == 1 and "(hydra.job.env_set.RAY_ADDRESS)" in errors[0] and "Ray reads it" in errors[0]


def test_hydra_searchpath_only_adds_folders_in_the_home() -> None:
    errors, _, _ = check(composed(hydra={"searchpath": ["pkg://mylab.conf", "file:///private/users/bob/conf"]}))
    assert len(errors) == 2, errors


# --- class 4: paths built by interpolation, wherever they sit -----------------------------


def test_a_resolved_helper_key_naming_another_home_is_refused() -> None:
    errors, _, _ = check(composed({"x": {"a": "/private/users/bob/secret"}}))
    assert errors == ["spec.command (x.a): '/private/users/bob/secret': is in another user's home (bob); only "
                      "/private/users/alice/... is yours"]


def test_a_resolved_checkpoint_folder_in_another_home_is_refused() -> None:
    errors, _, _ = check(composed({"trainer.default_local_dir": "/private/users/bob/ckpt"}))
    assert any("(trainer.default_local_dir)" in e and "an output path must be under /private/users/alice/" in e for e in errors)


def test_role_paths_are_absolute_and_normalised_after_resolution() -> None:
    errors, _, _ = check(composed({"data.train_files": ["datasets/a.parquet"]}))
    assert any("(data.train_files[0])" in e and "absolute path" in e for e in errors), errors
    errors, _, _ = check(composed({"data.val_files": f"{HOME}/datasets/../code/a.parquet"}))
    assert any("'..' segments" in e for e in errors), errors
    errors, _, _ = check(composed({"actor_rollout_ref.model.path": "~/models/mine"}))
    assert any("the worker's home" in e for e in errors), errors


def test_code_keys_are_python_files_under_code() -> None:
    for key in ("reward.custom_reward_function.path", "data.custom_cls.path"):
        errors, _, _ = check(composed({key: f"{HOME}/datasets/r.py"}))
        assert any(f"({key})" in e and "under /private/users/alice/code/" in e for e in errors), (key, errors)
        only_rewrites(composed({key: f"{HOME}/code/r.py"}))


# --- class 5: Ray's runtime env -------------------------------------------------------------


@pytest.mark.parametrize("key, value", [("py_executable", f"{HOME}/code/wrap.sh"), ("working_dir", f"{HOME}/code"),
                                        ("pip", ["evil"]), ("env_vars", {"LD_PRELOAD": f"{HOME}/x.so"})])
def test_ray_runtime_env_is_env_vars_under_the_allowlist(key: str, value: Any) -> None:
    errors, _, _ = check(composed({"ray_kwargs.ray_init.runtime_env": {key: value}}))
    assert len(errors) == 1 and "ray_kwargs.ray_init.runtime_env" in errors[0], errors


def test_ray_runtime_env_vars_on_the_allowlist_pass() -> None:
    only_rewrites(composed({"ray_kwargs.ray_init.runtime_env": {"env_vars": {"WANDB_MODE": "offline"}}}))


def test_ray_init_keys_verl_does_not_declare_are_refused() -> None:
    errors, _, _ = check(composed({"ray_kwargs.ray_init.namespace": "bob"}))
    assert len(errors) == 1 and "(ray_kwargs.ray_init.namespace)" in errors[0]
    only_rewrites(composed({"ray_kwargs.ray_init.address": "auto", "ray_kwargs.ray_init.num_cpus": 4}))


# --- class 7: GPU pools the queue does not count ---------------------------------------------


def test_a_reward_model_pool_of_its_own_is_refused() -> None:
    errors, _, _ = check(composed({"reward.reward_model": {"enable": True, "enable_resource_pool": True, "n_gpus_per_node": 8, "nnodes": 1}}))
    assert errors == ["spec.command (reward.reward_model): 'nnodes=1 n_gpus_per_node=8': asks for 8 GPUs in a pool of its own, "
                      "which the queue does not count: the task gets spec.nnodes x spec.nGpusPerNode GPUs; share them instead"]


def test_a_colocated_or_disabled_pool_is_not_counted() -> None:
    only_rewrites(composed({"reward.reward_model": {"enable": True, "enable_resource_pool": False, "n_gpus_per_node": 8, "nnodes": 1}}))
    only_rewrites(composed({"distillation": {"enabled": False, "n_gpus_per_node": 8, "nnodes": 2}}))
    errors, _, _ = check(composed({"distillation": {"enabled": True, "n_gpus_per_node": 8, "nnodes": 1}}))
    assert any("(distillation)" in e for e in errors)


def test_the_trainer_counts_must_be_the_specs_after_resolution() -> None:
    errors, _, _ = check(composed({"trainer.n_gpus_per_node": 8}))
    assert any("(trainer.n_gpus_per_node)" in e and "spec.nGpusPerNode (1)" in e for e in errors)


# --- item 7: the keys this version reads ------------------------------------------------------


def test_legacy_reward_keys_are_pointed_at_the_key_main_ppo_reads() -> None:
    errors, warnings, added = check(composed({"custom_reward_function": {"path": f"{HOME}/code/r.py", "name": None},
                                              "trainer.default_local_dir": f"{HOME}/ckpt"}))
    assert errors == []
    assert added == ["++reward.custom_reward_function.path=${custom_reward_function.path}"]
    assert len(warnings) == 1 and "verl 0.9.1's main_ppo reads reward.custom_reward_function.*" in warnings[0]


def test_a_legacy_reward_path_is_checked_as_code() -> None:
    errors, _, _ = check(composed({"custom_reward_function": {"path": f"{HOME}/datasets/r.py", "name": "f"}}))
    assert any("(reward.custom_reward_function.path)" in e and "/private/users/alice/code/" in e for e in errors), errors


def test_both_reward_spellings_at_once_are_refused() -> None:
    errors, _, _ = check(composed({"custom_reward_function": {"path": f"{HOME}/code/a.py", "name": "f"},
                                   "reward.custom_reward_function": {"path": f"{HOME}/code/b.py", "name": "g"}}))
    assert any("set only reward.custom_reward_function.*" in e for e in errors), errors


def test_a_version_that_reads_the_top_level_keys_is_left_as_is() -> None:
    base = copy.deepcopy(BASE)
    del base["reward"]
    c = composed({"custom_reward_function": {"path": f"{HOME}/code/r.py", "name": "f"},
                  "trainer.default_local_dir": f"{HOME}/ckpt"}, base=base)
    errors, warnings, added = check(c, tree=ConfigTree("0.6.1", "/trees/0.6.1", "release"))
    assert errors == [] and warnings == [] and added == []


# --- outputs that follow another key ------------------------------------------------------------


def test_an_output_following_a_helper_key_that_is_not_rewritten_is_refused() -> None:
    c = composed({"x": {"dir": "rel"}, "trainer.default_local_dir": "rel"}, raw={"trainer.default_local_dir": "${x.dir}"})
    errors, _, _ = check(c)
    assert any("(trainer.default_local_dir)" in e and "through x.dir" in e for e in errors), errors


# --- composition errors, in Hydra's words ------------------------------------------------------


def test_a_composition_error_is_one_line_in_hydras_words() -> None:
    c = Composed(primary="ppo_trainer", error="trainer.n_gpus_per_nod=1: Could not override 'trainer.n_gpus_per_nod'. "
                                              "To append to your config use +trainer.n_gpus_per_nod=1")
    errors, _, _ = check(c)
    assert errors == ["spec.command: 'verl.trainer.main_ppo': verl 0.9.1 (the pinned release, /trees/0.9.1) cannot compose this "
                      "configuration: trainer.n_gpus_per_nod=1: Could not override 'trainer.n_gpus_per_nod'. To append to your "
                      "config use +trainer.n_gpus_per_nod=1"]


# --- the pipeline: validate_task with the in-memory composer ------------------------------------


def task(command: str) -> dict[str, Any]:
    return {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask",
            "metadata": {"name": "t", "namespace": "alice", "uid": "12345678-0000-0000-0000-000000000000"},
            "spec": {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "command": command}}


GOOD = ("python3 -m verl.trainer.main_ppo data.train_files=$HOME/datasets/a.parquet data.val_files=$HOME/datasets/b.parquet "
        "trainer.nnodes=1 trainer.n_gpus_per_node=1 +ray_kwargs.ray_init.address=auto")


def test_the_pipeline_adds_the_rewrites_to_the_generated_command() -> None:
    composer = FakeComposer(BASE, HYDRA, raw={"trainer.default_local_dir": RAW_DEFAULT_DIR})
    v = validate_task(task(GOOD), "alice", PlatformConfig(), composer)
    assert v.valid, v.error_lines()
    assert v.verl == {"version": "0.9.1", "source": "release", "root": "/trees/0.9.1"}
    assert f"trainer.default_local_dir={JOB}/checkpoints/" in (v.expanded_command or "")
    assert any("not the cluster's own verl snapshot" in w for w in v.warning_lines())
    # What the composer saw: the overrides as Hydra reads them, and the job's environment.
    request = composer.requests[-1]
    assert request.module == "verl.trainer.main_ppo" and request.job_dir == JOB
    assert request.env["ARGUS_JOB_DIR"] == JOB and request.env["PYTHONPATH"].endswith(f"{HOME}/code")


def test_the_pipeline_resolves_with_the_taskrunners_environment_not_the_commands_exports() -> None:
    """verl resolves the config in its TaskRunner, a Ray actor: it has the job's runtime env
    (what Argus sets), not what the command exports in the driver's shell (issue 34)."""
    composer = FakeComposer(BASE, HYDRA)
    validate_task(task(f"export OMP_NUM_THREADS=4\nexport WANDB_MODE=offline\nexport PYTHONPATH=$HOME/code/lib:$PYTHONPATH\n{GOOD}"),
                  "alice", PlatformConfig(), composer)
    env = composer.requests[-1].env
    assert "OMP_NUM_THREADS" not in env
    assert env["WANDB_MODE"] == "offline"  # verl's trackers read it in the TaskRunner: Argus puts it in the runtime env (issue 36)
    assert env["PYTHONPATH"] == f"/private/common/code/verl/verl_repo:{HOME}/code"


def test_the_pipeline_refuses_an_override_typo_in_hydras_words() -> None:
    v = validate_task(task(GOOD + " trainer.n_gpus_per_nod=1"), "alice", PlatformConfig(), FakeComposer(BASE, HYDRA))
    assert not v.valid and v.plan is None
    assert any("Could not override 'trainer.n_gpus_per_nod'" in e for e in v.error_lines()), v.error_lines()


def test_more_added_keys_than_the_limit_are_refused_before_composing() -> None:
    from argus.core.verlconfig import MAX_ADDED_KEYS

    composer = FakeComposer(BASE, HYDRA)
    extra = " ".join(f"+x.k{i}=1" for i in range(MAX_ADDED_KEYS + 1))
    v = validate_task(task(f"{GOOD} {extra}"), "alice", PlatformConfig(), composer)
    assert not v.valid and composer.requests == []
    assert any(f"'{MAX_ADDED_KEYS + 2} overrides with + or ++': adds more than {MAX_ADDED_KEYS} keys" in e for e in v.error_lines())  # GOOD adds one


def test_the_environment_allowlist_in_the_docs_is_the_declared_one() -> None:
    from pathlib import Path

    from argus.core.command.environment import allowlist_markdown

    page = (Path(__file__).parents[2] / "docs" / "security.md").read_text()
    shown = page.split("<!-- environment allowlist: begin -->\n", 1)[1].split("\n<!-- environment allowlist: end -->", 1)[0]
    assert shown == allowlist_markdown(), "docs/security.md: render the allowlist again (argus.core.command.environment.allowlist_markdown)"


# --- TransferQueue's storage on the worker nodes --------------------------------------------

TQ = {"backend": {"storage_backend": "SimpleStorage", "SimpleStorage": {"num_data_storage_units": 8}}}


def test_transfer_queue_storage_is_pinned_to_the_worker_nodes() -> None:
    """verl 0.9's main_ppo places its storage actors over every node, the head included,
    unless told a resource (found by the real-verl integration test: unschedulable on a head
    with no CPUs). Argus adds the worker resource, with + (verl does not declare the key)."""
    base = {**copy.deepcopy(BASE), "transfer_queue": copy.deepcopy(TQ)}
    errors, warnings, added = check(composed({"trainer.default_local_dir": f"{HOME}/ckpt"}, base=base))
    assert errors == [] and warnings == []
    assert added == ["+transfer_queue.backend.SimpleStorage.required_node_resource=worker_node"]
    findings = Findings()
    added = check_composed("spec.command", composed({"trainer.default_local_dir": f"{HOME}/ckpt"}, base=base), tree=TREE,
                           module="verl.trainer.main_ppo", policy=PathPolicy(PlatformConfig(worker_resource="gpu_box"), "alice"),
                           nnodes=1, gpus=1, job_dir=JOB, findings=findings)
    assert added == ["+transfer_queue.backend.SimpleStorage.required_node_resource=gpu_box"]


def test_a_storage_resource_the_command_sets_is_kept_and_a_declared_key_gets_no_plus() -> None:
    base = {**copy.deepcopy(BASE), "transfer_queue": copy.deepcopy(TQ)}
    own = composed({"trainer.default_local_dir": f"{HOME}/ckpt",
                    "transfer_queue.backend.SimpleStorage.required_node_resource": "storage_node"}, base=base)
    assert check(own)[2] == []
    base["transfer_queue"]["backend"]["SimpleStorage"]["required_node_resource"] = None
    assert check(composed({"trainer.default_local_dir": f"{HOME}/ckpt"}, base=base))[2] == [
        "transfer_queue.backend.SimpleStorage.required_node_resource=worker_node"]
    # A verl without TransferQueue (0.6.1, the SFT trainer) gets nothing.
    assert check(composed({"trainer.default_local_dir": f"{HOME}/ckpt"}))[2] == []
