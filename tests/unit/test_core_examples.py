"""The files in examples/: every ArgusTask there validates for user alice (the hostile
ones are refused with the other-user message), the v3.x TaskSpec converts into a valid
task, and the example reward function scores as documented."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from argus.core.config import PlatformConfig
from argus.core.convert import convert_taskspec
from argus.core.plan import validate_task

pytestmark = pytest.mark.unit

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TASK_FILES = sorted(p for p in EXAMPLES.glob("*.yaml") if p.name != "v3-taskspec.yaml")
EXPECTED_NAMES = {
    "ppo-advanced-custom-reward.yaml": "ppo-custom-reward",
    "ppo-advanced.yaml": "ppo-advanced",
    "grpo-basic.yaml": "grpo-basic",
    "ppo-basic.yaml": "ppo-basic",
    "sft-basic.yaml": "sft-basic",
    "hostile-other-user.yaml": "hostile-other-user",
}


def test_the_examples_are_there() -> None:
    assert {p.name for p in TASK_FILES} >= set(EXPECTED_NAMES)
    assert (EXAMPLES / "README.md").is_file() and (EXAMPLES / "data" / "reward.py").is_file()
    readme = (EXAMPLES / "README.md").read_text()
    for path in [*TASK_FILES, EXAMPLES / "v3-taskspec.yaml", EXAMPLES / "data" / "reward.py"]:
        assert path.name in readme, f"examples/README.md does not describe {path.name}"


@pytest.mark.parametrize("path", TASK_FILES, ids=[p.name for p in TASK_FILES])
def test_example_task(path: Path) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert docs, path
    for doc in docs:
        assert doc["apiVersion"] == "argus.io/v1alpha1" and doc["kind"] == "ArgusTask"
        assert "namespace" not in doc["metadata"], "examples are applied with kubectl apply -n <user>"
        if path.name in EXPECTED_NAMES:
            assert doc["metadata"]["name"] == EXPECTED_NAMES[path.name]
        verdict = validate_task(doc, "alice", PlatformConfig())
        if path.name.startswith("hostile-"):
            assert not verdict.valid and verdict.plan is None
            assert any("another user's home" in line for line in verdict.error_lines()), verdict.error_lines()
        else:
            assert verdict.valid, verdict.error_lines()
            assert verdict.warning_lines() == []
            assert verdict.plan is not None and "$HOME" not in verdict.plan.command


def test_the_argusclusters_example_parses_as_the_operator_reads_it() -> None:
    from argus.core.clusters import parse_cluster
    docs = [d for d in yaml.safe_load_all((EXAMPLES / "clusters" / "argusclusters.yaml").read_text()) if d]
    a, b = (parse_cluster(d) for d in docs)
    assert (a.name, a.address, a.token_secret is not None, a.ray_cluster_ref) == ("gpu-a", "http://ray-a-head-svc.ray-a.svc:8265", True, None)
    assert (b.name, b.address, str(b.ray_cluster_ref)) == ("gpu-b", "", "ray/ray")
    assert a.admits({"argus.io/team": "a"}) and not b.admits({"argus.io/team": "a"}) and b.admits({})


def test_custom_reward_example_is_the_v35_command() -> None:
    doc = yaml.safe_load((EXAMPLES / "ppo-advanced-custom-reward.yaml").read_text())
    spec = doc["spec"]
    assert (spec["kind"], spec["workload"], spec["nnodes"], spec["nGpusPerNode"]) == ("advanced", "ppo", 1, 1)
    for token in ("data.train_files=$HOME/common/datasets/gsm8k/train.parquet", "data.val_files=$HOME/datasets/gsm8k/test.parquet",
                  "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", "custom_reward_function.path=$HOME/code/reward.py",
                  "custom_reward_function.name=compute_score", "+custom_reward_function.reward_kwargs.format_bonus=0.1",
                  "trainer.nnodes=1", "trainer.n_gpus_per_node=1", "trainer.total_epochs=1", "+ray_kwargs.ray_init.address=auto",
                  "trainer.default_local_dir=$HOME/checkpoints/ppo-demo", " \\\n"):
        assert token in spec["command"], token
    plan = validate_task(doc, "alice", PlatformConfig()).plan
    assert plan is not None
    assert "custom_reward_function.path=/private/users/alice/code/reward.py" in plan.command
    assert "data.train_files=/private/datasets/gsm8k/train.parquet" in plan.command


def test_examples_work_for_any_user_and_root() -> None:
    """The files name no user: applied in bob's namespace, $HOME is bob's home."""
    doc = yaml.safe_load((EXAMPLES / "grpo-basic.yaml").read_text())
    verdict = validate_task(doc, "bob", PlatformConfig(root="/data/p"))
    assert verdict.valid and verdict.plan is not None
    assert "data.val_files=/data/p/users/bob/datasets/gsm8k/test.parquet" in verdict.plan.command


def test_v3_taskspec_converts_into_a_valid_task() -> None:
    old = yaml.safe_load((EXAMPLES / "v3-taskspec.yaml").read_text())
    assert "kind" not in old and "n_gpus_per_node" in old and "train_file" in old
    manifest = convert_taskspec(old, namespace="alice", name="grpo-from-v3")
    assert manifest["spec"]["kind"] == "basic"
    verdict = validate_task(manifest, "alice", PlatformConfig())
    assert verdict.valid, verdict.error_lines()


@pytest.fixture(scope="module")
def reward() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_reward", EXAMPLES / "data" / "reward.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("solution", "truth", "bonus", "score"),
    [
        ("so 3 + 4 = 7\n#### 7", "7", 0.0, 1.0),
        ("so 3 + 4 = 7\n#### 7", "7", 0.1, 1.1),
        ("#### 1,234", "1234", 0.0, 1.0),
        ("#### 8", "7", 0.1, 0.1),  # wrong answer, right format
        ("the answer is 7", "7", 0.1, 0.0),  # no #### marker
        ("#### -3.5.", "-3.5", 0.0, 1.0),
        ("#### #### 5", "5", 0.0, 1.0),
        ("####", "5", 0.5, 0.0),
    ],
)
def test_example_reward_function(reward: ModuleType, solution: str, truth: str, bonus: float, score: float) -> None:
    got = reward.compute_score(data_source="openai/gsm8k", solution_str=solution, ground_truth=truth, extra_info={"index": 0},
                               format_bonus=bonus)
    assert got == pytest.approx(score)


def test_example_reward_function_verl_call_shape(reward: ModuleType) -> None:
    # verl's naive reward manager passes keywords, plus the reward_kwargs; a keyword the
    # function does not use (a newer verl's, or another reward_kwargs entry) is no error.
    assert reward.compute_score(data_source="gsm8k", solution_str="#### 2", ground_truth="2", extra_info=None) == 1.0
    assert reward.compute_score(data_source="gsm8k", solution_str="#### 2", ground_truth="2", extra_info=None, alpha=0.2) == 1.0


def test_example_reward_function_has_the_designs_signature(reward: ModuleType) -> None:
    """Keyword-only, with **kwargs: def compute_score(*, data_source, solution_str, ground_truth,
    extra_info=None, **kwargs) (format_bonus is this example's own reward_kwargs entry)."""
    params = inspect.signature(reward.compute_score).parameters
    assert [n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY] == [
        "data_source", "solution_str", "ground_truth", "extra_info", "format_bonus"]
    assert [p.kind for p in params.values()][-1] is inspect.Parameter.VAR_KEYWORD
    assert not any(p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params.values())
    with pytest.raises(TypeError):
        reward.compute_score("gsm8k", "#### 2", "2")  # positional use is refused, as the design means


REAL_VERL = sorted((EXAMPLES / "real-verl").glob("*.yaml"))


@pytest.mark.parametrize("path", REAL_VERL, ids=[p.name for p in REAL_VERL])
def test_real_verl_examples_validate_on_a_cluster_with_the_cpu_rollout(path: Path) -> None:
    """examples/real-verl/ run on the real-verl CPU cluster (test_real_verl.py, the demo), whose
    verl plugins register the rollout 'hf': valid where the platform declares it, refused in
    verl's own words where it does not."""
    doc = yaml.safe_load(path.read_text())
    assert path.name in (EXAMPLES / "README.md").read_text().replace("real-verl/", "")
    from argus.adapters.verlcompose import HydraComposer
    from argus.core.verlconfig import ConfigTree
    from verltrees import verl_tree

    composer = HydraComposer(ConfigTree("0.9.1", verl_tree("0.9.1"), "release"))
    verdict = validate_task(doc, "alice", PlatformConfig(verl_plugin_rollouts=("hf",)), composer)
    assert verdict.valid, verdict.error_lines()
    assert verdict.plan is not None and "$HOME" not in verdict.plan.command
    if doc["spec"]["workload"] in ("grpo", "ppo"):  # main_ppo
        # Pinned to the workers (check.storage_on_workers), as the integration test found it must be.
        assert "+transfer_queue.backend.SimpleStorage.required_node_resource=worker_node" in verdict.plan.command
        refused = validate_task(doc, "alice", PlatformConfig(), composer)
        assert not refused.valid and any("Unknown rollout mode: hf" in line for line in refused.error_lines())
