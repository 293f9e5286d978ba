"""The Hydra adapter (argus.adapters.verlcompose) on the real config trees of the pinned
verl releases (hack/fetch-verl.sh caches them): the entry points' primary configs, the
cached composition proved equal to a full compose on a corpus of overrides, resolution
with the job's environment, and the issue 21 red-team classes refused at apply time
through ``validate_task`` (the path ``argus validate``, the operator and the webhook share)."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import pytest

from argus.adapters.verlcompose import HydraComposer, find_tree, pinned_releases
from argus.core.config import PlatformConfig
from argus.core.plan import validate_task
from argus.core.verlconfig import ComposeRequest, ConfigTree
from verltrees import verl_tree

pytestmark = pytest.mark.unit

VERSIONS = [r.version for r in pinned_releases()]
JOB = "/private/users/alice/jobs/alice-t-12345678"


@functools.cache
def shared(version: str) -> HydraComposer:
    """One composer per release for the whole module, as the operator keeps one per tree (its
    caches are what makes a validation cheap; a test that needs a cold one makes its own)."""
    return HydraComposer(ConfigTree(version, verl_tree(version), "release"))


@pytest.fixture(scope="module", params=VERSIONS)
def composer(request: pytest.FixtureRequest) -> HydraComposer:
    return shared(request.param)


def compose(c: HydraComposer, *overrides: str, module: str = "verl.trainer.main_ppo", env: dict[str, str] | None = None) -> Any:
    return c.compose(ComposeRequest(module, overrides, env or {}, JOB))


def test_the_release_list_is_the_packages_and_the_newest_comes_first() -> None:
    assert VERSIONS[:2] == ["0.9.1", "0.6.1"]
    text = (Path(__file__).parents[2] / "hack" / "fetch-verl.sh").read_text()
    assert "operator/argus/verl-releases.txt" in text  # one list, read by the script and the product


def test_find_tree_prefers_the_clusters_snapshot(tmp_path: Path) -> None:
    tree = find_tree(None, PlatformConfig(verl_code_path=verl_tree("0.6.1")))
    assert (tree.version, tree.source) == ("0.6.1", "cluster")
    tree = find_tree(None, PlatformConfig(verl_code_path=str(tmp_path)))  # not readable here: the newest pinned release
    assert (tree.version, tree.source) == ("0.9.1", "release")
    tree = find_tree(os.path.join(verl_tree("0.6.1"), "verl", "trainer", "config"), PlatformConfig())
    assert (tree.version, tree.source) == ("0.6.1", "folder")


@pytest.mark.parametrize("version, module, primary", [
    ("0.9.1", "verl.trainer.main_ppo", "ppo_trainer"), ("0.9.1", "verl.trainer.sft_trainer", "sft_trainer_engine"),
    ("0.9.1", "verl.trainer.sft_trainer_ray", "sft_trainer_engine"), ("0.6.1", "verl.trainer.main_ppo", "ppo_trainer"),
    ("0.6.1", "verl.trainer.fsdp_sft_trainer", "sft_trainer"),
])
def test_the_module_decides_the_primary_config(version: str, module: str, primary: str) -> None:
    result = compose(HydraComposer(ConfigTree(version, verl_tree(version), "release")), module=module)
    assert result.error is None and result.primary == primary
    assert result.hydra["job"]["name"] == module.rsplit(".", 1)[-1]  # Hydra's task name for python -m


def test_one_composer_names_each_modules_job_after_it() -> None:
    """Two modules with one primary config: a long-lived composer (the operator's) must not
    hand the second the first one's cached composition, job name included."""
    composer = HydraComposer(ConfigTree("0.9.1", verl_tree("0.9.1"), "release"))
    for module in ("verl.trainer.sft_trainer", "verl.trainer.sft_trainer_ray", "verl.trainer.sft_trainer"):
        result = compose(composer, module=module)
        assert result.error is None and result.hydra["job"]["name"] == module.rsplit(".", 1)[-1]


def test_a_module_the_version_does_not_have_is_refused() -> None:
    assert compose(shared("0.9.1"), module="verl.trainer.fsdp_sft_trainer").error == (
        f"verl 0.9.1 has no module verl.trainer.fsdp_sft_trainer with a Hydra entry point (@hydra.main) in {verl_tree('0.9.1')}")


def test_an_override_typo_is_refused_in_hydras_words(composer: HydraComposer) -> None:
    assert compose(composer, "trainer.n_gpus_per_nod=1").error == (
        "trainer.n_gpus_per_nod=1: Could not override 'trainer.n_gpus_per_nod'. To append to your config use +trainer.n_gpus_per_nod=1")


# --- the cached composition equals a full compose ------------------------------------------

CORPUS = [
    (),
    ("data.train_files=/private/users/alice/datasets/a.parquet", "trainer.n_gpus_per_node=1", "+ray_kwargs.ray_init.address=auto"),
    ("data.train_files=[/a/x.parquet,/a/y.parquet]", "actor_rollout_ref.rollout.n=4", "algorithm.adv_estimator=grpo"),
    ("++trainer.nnodes=2", "+trainer.extra={a: 1, b: [x, y]}", "trainer.logger=[console,wandb]"),
    ("actor_rollout_ref.actor.optim={lr: 0.001}", "trainer.experiment_name=run_20240102"),
    ("~trainer.val_before_train", "trainer.project_name='my project'"),
    ("hydra.run.dir=/private/users/alice/runs/x", "hydra.job.name=mine", "hydra.output_subdir=null"),
    ("trainer.default_local_dir=${trainer.project_name}/ckpt", "+x.y=${trainer.nnodes}"),
    ("critic.optim.lr=1e-5", "data.max_prompt_length=1024", "data.max_response_length=2048", "actor_rollout_ref.model.path=Qwen/Q"),
    ("+custom_reward_function.reward_kwargs.alpha=0.5", "custom_reward_function.path=/private/users/alice/code/r.py"),
    ("hydra/job_logging=disabled", "trainer.total_epochs=3"),
    ("hydra.job.chdir=True", "hydra.verbose=true", "trainer.save_freq=10"),
    # Keys that verl's own interpolations read (${oc.select:...}): what follows them must follow.
    ("trainer.n_gpus_per_node=4", "data.max_prompt_length=1024", "actor_rollout_ref.actor.use_dynamic_bsz=true"),
    ("actor_rollout_ref.actor.ppo_max_token_len_per_gpu=1000", "global_profiler.save_path=/private/users/alice/prof"),
    ("actor_rollout_ref.model.path=/private/users/alice/m", "+actor_rollout_ref.model.external_lib=mylib"),
    ("actor_rollout_ref.actor={use_dynamic_bsz: true}", "trainer={project_name: q}"),
    # A long list of plain values (most of a 64 KiB command), and lists of other kinds.
    ("data.train_files=[" + ",".join(f"/private/users/alice/datasets/p-{i}.parquet" for i in range(300)) + "]",
     "trainer.logger=[console,1,2.5,true,null]", "+x.l=[a,[b,c]]"),
]


def _full(c: HydraComposer, overrides: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The configuration as Hydra's own load_configuration composes it in one go."""
    from hydra.core.utils import JobRuntime
    from hydra.types import RunMode
    from omegaconf import OmegaConf, open_dict

    from argus.adapters.verlresolve import hydra_settings

    loader = c._loader(c._search_dir("verl.trainer.main_ppo", "config"), None)
    # As @hydra.main does before it composes (create_main_hydra2): the job is named after the
    # module, in Hydra's process-wide JobRuntime, which load_configuration reads. Whatever an
    # earlier Hydra run in this process left there is put back afterwards.
    runtime = JobRuntime.instance()
    before = runtime.get("name")
    runtime.set("name", "main_ppo")
    try:
        cfg = loader.load_configuration(config_name="ppo_trainer", overrides=list(overrides), run_mode=RunMode.RUN)
    finally:
        runtime.set("name", before)
    cfg.hydra.runtime.cwd = JOB
    with c._resolution({}, cfg.hydra):
        hydra = hydra_settings(cfg, JOB)
        overrides_seen = {"task": OmegaConf.to_container(cfg.hydra.overrides.task, resolve=False)}
        with open_dict(cfg):
            del cfg["hydra"]
        config = OmegaConf.to_container(cfg, resolve=True)
    hydra["_overrides"] = overrides_seen
    return config, hydra  # type: ignore[return-value]


def _differences(ours: Any, hydras: Any, path: str = "") -> list[str]:
    """Where two nested values differ (the assertion's message: a whole config is too long to read)."""
    if isinstance(ours, dict) and isinstance(hydras, dict):
        return [d for k in sorted(set(ours) | set(hydras), key=str)
                for d in _differences(ours.get(k, "<missing>"), hydras.get(k, "<missing>"), f"{path}.{k}")]
    return [] if ours == hydras else [f"{path}: ours {ours!r:.200} != Hydra's {hydras!r:.200}"]


def _without_times(hydra: dict[str, Any]) -> dict[str, Any]:
    out = dict(hydra)
    for key in ("run", "sweep"):
        out.pop(key, None)  # ${now:...}: the two composes run a moment apart
    out.pop("job_logging", None)  # its file name follows the run folder
    return out


@pytest.mark.parametrize("overrides", CORPUS, ids=[str(i) for i in range(len(CORPUS))])
def test_the_cached_composition_equals_hydras_full_compose(composer: HydraComposer, overrides: tuple[str, ...]) -> None:
    ours = compose(composer, *overrides)
    assert ours.error is None, ours.error
    config, hydra = _full(composer, overrides)
    assert ours.config == config, _differences(ours.config, config)
    seen = hydra.pop("_overrides")
    assert _without_times(dict(ours.hydra)) == _without_times(hydra), _differences(_without_times(dict(ours.hydra)), _without_times(hydra))
    # Twice from the cache: the first composition did not leak into the cached base.
    assert compose(composer, *overrides).config == config
    assert seen["task"] == [o for o in overrides if not o.startswith(("hydra.", "hydra/"))]


def test_a_job_name_left_by_an_earlier_hydra_run_in_the_process_does_not_leak(composer: HydraComposer) -> None:
    """Hydra keeps the job's name in a process-wide singleton (JobRuntime) that
    load_configuration reads; a CLI or test process that ran @hydra.main before must not
    change the name a task's run gets (it decides its log file and run folder)."""
    from hydra.core.utils import JobRuntime

    runtime = JobRuntime.instance()
    before = runtime.get("name")
    runtime.set("name", "some_other_app")
    try:
        fresh = HydraComposer(composer._tree)
        assert compose(fresh, "trainer.total_epochs=2").hydra["job"]["name"] == "main_ppo"
        assert compose(fresh, "hydra.job.name=mine").hydra["job"]["name"] == "mine"
    finally:
        runtime.set("name", before)


def test_errors_match_hydras_too(composer: HydraComposer) -> None:
    for bad in ("trainer.n_gpus_per_nod=1", "+trainer.nnodes=2", "~trainer.no_such_key"):
        ours = compose(composer, bad).error
        with pytest.raises(Exception) as exc:
            _full(composer, (bad,))
        assert ours is not None and str(exc.value).splitlines()[0].strip() in ours, (bad, ours, str(exc.value))


# --- resolution: the job's environment, Hydra's resolvers, nothing else ------------------------


def test_oc_env_reads_the_jobs_environment_only(composer: HydraComposer) -> None:
    assert compose(composer, "+x.a=${oc.env:ARGUS_JOB_DIR}", env={"ARGUS_JOB_DIR": JOB}).config["x"] == {"a": JOB}
    error = compose(composer, "+x.a=${oc.env:HOME}", env={"ARGUS_JOB_DIR": JOB}).error
    assert error is not None and "oc.env:HOME reads HOME, which verl's TaskRunner (the Ray actor where verl resolves the config) does not have" in error
    assert os.environ.get("HOME")  # ... whatever this process has


def test_unknown_resolvers_are_refused(composer: HydraComposer) -> None:
    error = compose(composer, "+x.a=${mine:1}").error
    assert error is not None and "Unsupported interpolation type mine" in error


# --- the red-team classes, at apply time (argus validate, the operator, the webhook) -------------

# With what verl requires before training (its start-up checks run on every composed config).
GOOD = ("python3 -m verl.trainer.main_ppo data.train_files=$HOME/datasets/a.parquet data.val_files=$HOME/datasets/b.parquet "
        "trainer.nnodes=1 trainer.n_gpus_per_node=1 +ray_kwargs.ray_init.address=auto trainer.default_local_dir=$HOME/ckpt "
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 actor_rollout_ref.rollout.tensor_model_parallel_size=1 actor_rollout_ref.rollout.name=vllm critic.ppo_micro_batch_size_per_gpu=4")


def task(command: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask",
            "metadata": {"name": "t", "namespace": "alice", "uid": "12345678-0000-0000-0000-000000000000"},
            "spec": {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "command": command, **spec}}


def verdict(command: str, version: str = "0.9.1", config: PlatformConfig | None = None) -> Any:
    # A user's own config folder (config.root): a composer of its own, as its files change between the test's steps.
    composer = shared(version) if config is None else HydraComposer(ConfigTree(version, verl_tree(version), "release"))
    return validate_task(task(command), "alice", config or PlatformConfig(), composer)


def refused(command: str, *needles: str, version: str = "0.9.1", config: PlatformConfig | None = None) -> list[str]:
    v = verdict(command, version, config)
    lines = v.error_lines()
    assert not v.valid and v.plan is None, v.warning_lines()
    for needle in needles:
        assert any(needle in line for line in lines), (needle, lines)
    assert all("\n" not in line for line in lines)
    return lines


@pytest.mark.parametrize("version", VERSIONS)
def test_the_good_command_passes(version: str) -> None:
    v = verdict(GOOD, version)
    assert v.valid, v.error_lines()


def test_class1_instantiation_in_a_list_value() -> None:
    refused(GOOD + " '+actor_rollout_ref.actor.x=[{_target_: os.system, _args_: [id]}]'", "(actor_rollout_ref.actor.x[0]._target_)")


def test_class1_instantiation_built_by_oc_create() -> None:
    refused(GOOD + """ '+x.y="${oc.create:{_target_: runpy.run_path}}"'""", "(x.y._target_)")


def test_class2_hydra_job_name_with_a_folder() -> None:
    refused(GOOD + " hydra.job.name=logs/x", "(hydra.job.name)")


def test_class3_hydra_output_subdir_outside_the_home_through_an_interpolation() -> None:
    refused(GOOD + " +x.d=/priv 'hydra.output_subdir=${x.d}ate/users/bob/y'", "(hydra.output_subdir)")


def test_class4_a_path_assembled_in_a_helper_key() -> None:
    refused(GOOD + " +x.p=/priv '+x.q=${x.p}ate/users/bob/data.parquet'", "(x.q)", "another user's home (bob)")


def test_class4_oc_select_default() -> None:
    refused(GOOD + " '+x.q=${oc.select:no.such.key,/priv}ate/users/bob/ckpt'", "(x.q)", "another user's home (bob)")


def test_class4_oc_env_of_a_variable_the_command_sets() -> None:
    """verl resolves the config in its TaskRunner, a Ray actor without the command's exports (issue 34)."""
    refused("export HF_ENDPOINT=/priv\n" + GOOD + " '+x.q=${oc.env:HF_ENDPOINT}ate/users/bob/f'",
            "oc.env:HF_ENDPOINT reads HF_ENDPOINT, which verl's TaskRunner", "the command's own exports reach the driver only")
    # A tracker's variable is in the TaskRunner's runtime env (issue 36): resolved, and checked.
    refused("export WANDB_NOTES=/priv\n" + GOOD + " '+x.q=${oc.env:WANDB_NOTES}ate/users/bob/f'", "(x.q)", "another user's home (bob)")


def test_class4_oc_env_default_applies_and_is_checked() -> None:
    refused(GOOD + " '+x.q=${oc.env:NOT_SET,/priv}ate/users/bob/f'", "(x.q)", "another user's home (bob)")


def test_class5_ray_runtime_env() -> None:
    refused(GOOD + " +ray_kwargs.ray_init.runtime_env.env_vars.LD_PRELOAD=$HOME/x.so", "(ray_kwargs.ray_init.runtime_env.env_vars.LD_PRELOAD)")
    refused(GOOD + " +ray_kwargs.ray_init.runtime_env.py_executable=$HOME/code/x.sh", "(ray_kwargs.ray_init.runtime_env.py_executable)")


def test_class6_environment_names_ray_and_hydra_read() -> None:
    refused("export HYDRA_MAIN_MODULE=mylab\n" + GOOD, "setting HYDRA_MAIN_MODULE is not allowed")
    refused("RAY_ADDRESS=local " + GOOD, "setting RAY_ADDRESS is not allowed")


def test_class7_and_own_config_a_gpu_pool_set_in_a_config_of_the_users_own(tmp_path: Path) -> None:
    config = PlatformConfig(root=str(tmp_path))
    conf = tmp_path / "users" / "alice" / "conf"
    conf.mkdir(parents=True)
    (conf / "mine.yaml").write_text("defaults:\n  - ppo_trainer\n  - _self_\n"
                                    "reward:\n  reward_model:\n    enable: true\n    enable_resource_pool: true\n"
                                    "    n_gpus_per_node: 8\n    nnodes: 1\n")
    command = GOOD.replace("$HOME/datasets/", f"{tmp_path}/users/alice/datasets/") + " --config-dir=$HOME/conf --config-name=mine"
    refused(command, "(reward.reward_model)", "pool of its own", config=config)
    (conf / "mine.yaml").write_text("defaults:\n  - ppo_trainer\n  - _self_\ntrainer:\n  default_local_dir: "
                                    f"{tmp_path}/users/bob/ckpt\n")
    refused(command.replace(" trainer.default_local_dir=$HOME/ckpt", ""), "(trainer.default_local_dir)", config=config)


# --- item 7: the keys each version reads ----------------------------------------------------------


def test_legacy_reward_keys_reach_the_key_main_ppo_reads_on_0_9() -> None:
    command = GOOD + " custom_reward_function.path=$HOME/code/r.py custom_reward_function.name=f"
    v = verdict(command)
    assert v.valid, v.error_lines()
    text = v.expanded_command or ""
    assert "'++reward.custom_reward_function.path=${custom_reward_function.path}'" in text
    assert any("main_ppo reads reward.custom_reward_function.*" in w for w in v.warning_lines())
    # What verl then reads: the user's file and function.
    seen = compose(shared("0.9.1"), "custom_reward_function.path=/p/r.py", "custom_reward_function.name=f",
                   "++reward.custom_reward_function.path=${custom_reward_function.path}",
                   "++reward.custom_reward_function.name=${custom_reward_function.name}")
    assert seen.config["reward"]["custom_reward_function"] == {"path": "/p/r.py", "name": "f"}


def test_legacy_reward_keys_are_read_as_they_are_on_0_6() -> None:
    v = verdict(GOOD + " custom_reward_function.path=$HOME/code/r.py custom_reward_function.name=f", "0.6.1")
    assert v.valid and "reward.custom_reward_function" not in (v.expanded_command or "")


def test_the_new_reward_key_is_checked_as_code() -> None:
    refused(GOOD + " reward.custom_reward_function.path=$HOME/datasets/r.py", "(reward.custom_reward_function.path)",
            "under /private/users/alice/code/")


# --- item 5: outputs in the job folder --------------------------------------------------------------


def test_a_task_without_a_checkpoint_folder_gets_one_in_its_job_folder() -> None:
    v = verdict(GOOD.replace(" trainer.default_local_dir=$HOME/ckpt", ""))
    assert v.valid, v.error_lines()
    assert f"'trainer.default_local_dir={JOB}/checkpoints/${{trainer.project_name}}/${{trainer.experiment_name}}'" in (v.expanded_command or "")
    assert any("absolute under the job folder" in w for w in v.warning_lines())


def test_a_torchrun_sft_launch_takes_its_counts_from_torchrun() -> None:
    # 0.6.1's sft_trainer config says trainer.n_gpus_per_node: 8; torchrun's options decide.
    command = ("torchrun --standalone --nnodes=1 --nproc_per_node=1 -m verl.trainer.fsdp_sft_trainer "
               "data.train_files=$HOME/datasets/sft/train.parquet data.val_files=$HOME/datasets/sft/test.parquet "
               "model.partial_pretrain=Qwen/Qwen2.5-0.5B-Instruct trainer.default_local_dir=$HOME/ckpt")
    v = validate_task(task(command, workload="sft"), "alice", PlatformConfig(), shared("0.6.1"))
    assert v.valid, v.error_lines()


SFT_ENGINE = ("torchrun --standalone --nnodes=1 --nproc_per_node={n} -m verl.trainer.sft_trainer "
              "data.train_files=$HOME/datasets/sft/train.parquet data.val_files=$HOME/datasets/sft/test.parquet "
              "model.path=Qwen/Qwen2.5-0.5B-Instruct trainer.default_local_dir=$HOME/ckpt")


def test_verl_0_6_sft_trainer_starts_without_the_trainer_gpu_counts() -> None:
    """0.6.1's sft_trainer_engine.yaml declares no trainer.nnodes or n_gpus_per_node, and its
    trainer never reads them (the data-parallel ranks are torch's world): recorded training on
    CPU without them, tests/unit/verl_logs/0.6.1/sft_trainer.log."""
    v = validate_task(task(SFT_ENGINE.format(n=1), workload="sft"), "alice", PlatformConfig(), shared("0.6.1"))
    assert v.valid, v.error_lines()


@pytest.mark.parametrize("version", ["0.9.1", "0.6.1"])
def test_an_sft_batch_is_split_over_torchruns_processes_not_the_trainer_counts(version: str) -> None:
    """verl's SFT trainer gives each of torchrun's processes train_batch_size // world: two
    processes and a batch of 1 is a per-rank batch of 0 (refused), whatever trainer.* says."""
    command = SFT_ENGINE.format(n=2) + " data.train_batch_size=1"
    v = validate_task(task(command, workload="sft", nGpusPerNode=2), "alice", PlatformConfig(), shared(version))
    assert not v.valid and any("per-rank batch size of 0" in line for line in v.error_lines()), v.error_lines()
    v = validate_task(task(command.replace("data.train_batch_size=1", "data.train_batch_size=2"), workload="sft", nGpusPerNode=2),
                      "alice", PlatformConfig(), shared(version))
    assert v.valid, v.error_lines()


# --- interpolations the text check cannot resolve are resolved by the composed check ---------

@pytest.mark.parametrize("override", [
    "'trainer.validation_data_dir=${oc.env:ARGUS_JOB_DIR}/val'",       # the job's own environment
    "'trainer.experiment_name=${trainer.project_name}-x'",             # verl's default project name
    "'trainer.experiment_name=run-${now:%Y%m%d}'",                     # Hydra's own resolver
])
def test_an_interpolation_of_what_the_job_will_have_is_resolved_not_refused(override: str) -> None:
    v = verdict(GOOD + " " + override)
    assert v.valid, v.error_lines()


@pytest.mark.parametrize("override, needle", [
    ("'trainer.validation_data_dir=${oc.env:ARGUS_JOB_DIR}/../../bob'", "climbs"),
    ("'+x.p=/private/users/bob/code/r.py' 'custom_reward_function.path=${x.p}'", "(bob)"),
    ("'trainer.validation_data_dir=${oc.select:nope,/private/users/bob/x}'", "(bob)"),
    ("'+x.n=2' 'trainer.n_gpus_per_node=${x.n}'", "nGpusPerNode"),
])
def test_an_interpolation_that_resolves_outside_the_rules_is_still_refused(override: str, needle: str) -> None:
    command = GOOD.replace("trainer.n_gpus_per_node=1 ", "") if "n_gpus_per_node" in override else GOOD
    refused(command + " " + override, needle)
