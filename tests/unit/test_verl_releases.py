"""Each task composed for the verl release its cluster runs (issue 33, item 5): the choice
(core.verlchoice), the composers built on first use, the doctor's verdict against the releases
Argus has, and, over the control loop with real config trees of both pinned releases, a task
composed for its cluster's release, composed again when the cluster turns out to run another,
and rejected when that release refuses it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from argus.adapters.verlcompose import HydraComposer
from argus.core.clusters import doctor_summary
from argus.core.doctor import Check, Row, Status
from argus.core.verlchoice import Composers, VerlChoice, choose_verl
from argus.core.verlconfig import ConfigTree
from fakes import FakeComposer
from test_controller_clusters import Fleet, condition, verl_verdict
from verltrees import verl_tree

pytestmark = pytest.mark.unit

BOTH = ("0.9.1", "0.6.1")
# A command both releases compose and pass.
CMD = ("python3 -m verl.trainer.main_ppo data.train_files=$HOME/datasets/a.parquet data.val_files=$HOME/datasets/b.parquet "
       "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 "
       "actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.tensor_model_parallel_size=1 "
       "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 critic.ppo_micro_batch_size_per_gpu=4 "
       "trainer.nnodes=1 trainer.n_gpus_per_node={g} +ray_kwargs.ray_init.address=auto")


def spec(gpus: int = 1, extra: str = "", **fields: Any) -> dict[str, Any]:
    return {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": gpus, "command": CMD.format(g=gpus) + extra, **fields}


# --------------------------------------------------------------------------- the choice

def test_before_any_version_is_known_the_default_stands() -> None:
    assert choose_verl(("a", "b"), {}, BOTH, "0.9.1") == VerlChoice("0.9.1")
    # A cluster at a release Argus has no tree for, or at several, decides nothing.
    assert choose_verl(("a", "b"), {"a": ("0.5.0",), "b": ("0.9.1", "0.6.1")}, BOTH, "0.9.1") == VerlChoice("0.9.1")


def test_the_release_its_only_known_cluster_runs_is_chosen_and_said() -> None:
    choice = choose_verl(("a", "b"), {"b": ("0.6.1",)}, BOTH, "0.9.1")
    assert choice == VerlChoice("0.6.1", "composed for verl 0.6.1, the release cluster b runs")
    assert choose_verl(("",), {"": ("0.6.1",)}, BOTH, "0.9.1").why == \
        "composed for verl 0.6.1, the release the Ray cluster of --ray-address runs"


def test_when_clusters_disagree_most_of_them_win_then_the_preferred_one() -> None:
    runs = {"a": ("0.9.1",), "b": ("0.6.1",), "c": ("0.6.1",)}
    most = choose_verl(("a", "b", "c"), runs, BOTH, "0.9.1")
    assert most.version == "0.6.1"
    assert most.why == ("composed for verl 0.6.1, the release cluster b, cluster c run (most of the clusters it may use run it); "
                        "it does not go to cluster a (verl 0.9.1)")
    tie = choose_verl(("b", "a"), {"a": ("0.9.1",), "b": ("0.6.1",)}, BOTH, "0.9.1")
    assert tie.version == "0.6.1" and "(the most preferred of its clusters runs it); it does not go to cluster a (verl 0.9.1)" in tie.why
    # Only the releases Argus has count (--verl-config names one tree: today's single-tree meaning).
    assert choose_verl(("b", "a"), {"a": ("0.9.1",), "b": ("0.6.1",)}, ("0.9.1",), "0.9.1").version == "0.9.1"


def test_composers_are_built_on_first_use_and_only_for_releases_argus_has() -> None:
    default = FakeComposer({}, {}, tree=ConfigTree("0.9.1", "/t/0.9.1", "cluster"))
    built: list[str] = []

    def build(version: str) -> Any:
        built.append(version)
        return FakeComposer({}, {}, tree=ConfigTree(version, f"/t/{version}", "release"))

    composers = Composers(default, ["0.9.1", "0.6.1"], build)
    assert composers.supported == BOTH and built == []
    assert composers.get(None) is default and composers.get("0.9.1") is default
    old = composers.get("0.6.1")
    assert old is not None and old.tree.version == "0.6.1" and composers.get("0.6.1") is old and built == ["0.6.1"]
    assert composers.get("0.5.0") is None and composers.of("0.5.0") is default
    assert Composers(default, ["0.6.1"]).supported == ("0.9.1",)  # no builder: the one tree

    def unreadable(version: str) -> Any:
        raise OSError(f"/opt/argus/verl/{version}: gone")

    gone = Composers(default, ["0.6.1"], unreadable)
    assert gone.get("0.6.1") is None and gone.of("0.6.1") is default and gone.supported == ("0.9.1",)
    assert gone.broken == {"0.6.1": "/opt/argus/verl/0.6.1: gone"}


def test_the_doctor_passes_a_snapshot_at_any_release_argus_has_and_fails_another() -> None:
    def verdict(found: str) -> Any:
        status = Status.ok if found in BOTH else Status.fail
        return doctor_summary([Row("w1", Check.verl, status, f"verl {found}", found=found)], "2026-12-06T08:00:00Z", BOTH)

    assert verdict("0.6.1").verl_drift() == () and verdict("0.6.1").supported_verl == list(BOTH)
    assert verdict("0.5.0").verl_drift() == ("0.5.0",)
    several = doctor_summary([Row("w1", Check.verl, Status.ok, "", found="0.6.1"), Row("w2", Check.verl, Status.ok, "", found="0.9.1")],
                             "2026-12-06T08:00:00Z", BOTH)
    assert several.verl_drift() == ("0.6.1", "0.9.1")  # one task is composed for one release


# --------------------------------------------------------------------------- the control loop

def real_composers() -> Composers:
    """Hydra's composers over the real config trees of both pinned releases (the operator's)."""
    return Composers(HydraComposer(ConfigTree("0.9.1", verl_tree("0.9.1"), "release")), BOTH,
                     lambda version: HydraComposer(ConfigTree(version, verl_tree(version), "release")))


@pytest.fixture
def fleet() -> Iterator[Fleet]:
    f = Fleet(gpus={"a": 4, "b": 4}, composers=real_composers())
    yield f
    f.close()


def composed(f: Fleet, version: str) -> int:
    c = f.composers.get(version)
    return c.fast_composes + c.full_composes


def test_a_task_for_a_cluster_that_runs_the_older_release_is_composed_for_it_and_runs_there(fleet: Fleet) -> None:
    f = fleet
    f.api.add_cluster("a", address="http://ray-a:8265", preference=10)
    f.api.add_cluster("b", address="http://ray-b:8265")
    f.control_loop.doctor_verdicts["a"] = verl_verdict("0.9.1", BOTH)
    f.control_loop.doctor_verdicts["b"] = verl_verdict("0.6.1", BOTH)
    new = composed(f, "0.9.1")
    key = f.api.create("old", spec(cluster="b"))
    f.tick()
    status = f.status(key)
    assert (status["phase"], status["cluster"], status["verl"]["version"]) == ("Submitted", "b", "0.6.1"), status
    assert f.sid(key) in f.rays["b"].jobs
    assert composed(f, "0.9.1") == new  # checked and planned with 0.6.1's tree only
    # Neither cluster drifts: each runs a release Argus has.
    f.tick()
    for name in ("a", "b"):
        drift = condition(f.api.clusters[name]["status"], "VerlDrift")
        assert drift is not None and drift["status"] == "False", drift
        assert f.api.clusters[name]["status"]["doctor"]["verdict"] == "Passed"


def test_a_task_that_waits_for_a_cluster_found_at_another_release_is_composed_again_and_runs(fleet: Fleet) -> None:
    f = fleet
    f.api.add_cluster("a", address="http://ray-a:8265")
    f.control_loop.doctor_verdicts["a"] = verl_verdict("0.9.1", BOTH)
    blocker, key = f.api.create("blocker", spec(4)), f.api.create("t", spec(1))
    f.tick()
    f.rays["a"].run(f.sid(blocker))
    assert (f.status(key)["phase"], f.status(key)["verl"]["version"]) == ("Queued", "0.9.1")
    # The doctor now finds 0.6.1 there: the task is composed again for it rather than waiting for ever.
    f.control_loop.doctor_verdicts["a"] = verl_verdict("0.6.1", BOTH)
    f.tick()
    status = f.status(key)
    assert (status["phase"], status["reason"], status["verl"]["version"]) == ("Queued", "Queued", "0.6.1"), status
    assert status["message"] == "composed for verl 0.6.1, the release cluster a runs; waiting in the queue"
    f.tick()
    assert "waiting for 1 worker node(s) with 1 free GPUs each" in f.status(key)["message"]
    f.rays["a"].finish(f.sid(blocker))
    f.tick()
    f.tick()
    assert (f.status(key)["phase"], f.status(key)["cluster"]) == ("Submitted", "a")
    assert f.status(blocker)["phase"] == "Succeeded"  # the running one was left alone


def test_a_task_the_clusters_release_refuses_is_rejected_with_one_line(fleet: Fleet) -> None:
    f = fleet
    f.api.add_cluster("a", address="http://ray-a:8265")
    f.control_loop.doctor_verdicts["a"] = verl_verdict("0.9.1", BOTH)
    blocker = f.api.create("blocker", spec(4))
    # verl 0.9.1's reward block: 0.6.1 has the reward function at the top level.
    key = f.api.create("t", spec(1, " reward.custom_reward_function.path=$HOME/code/reward.py"))
    f.tick()
    assert (f.status(key)["phase"], f.status(key)["verl"]["version"]) == ("Queued", "0.9.1")
    f.control_loop.doctor_verdicts["a"] = verl_verdict("0.6.1", BOTH)
    f.tick()
    status = f.status(key)
    assert (status["phase"], status["reason"]) == ("Rejected", "InvalidSpec"), status
    assert "reward.custom_reward_function.path" in status["message"] and len(status["message"].splitlines()) == 1, status["message"]
    assert f.status(blocker)["phase"] == "Submitted"


def test_a_cluster_at_a_release_argus_has_no_tree_for_still_holds_tasks_back(fleet: Fleet) -> None:
    f = fleet
    f.api.add_cluster("a", address="http://ray-a:8265")
    f.control_loop.doctor_verdicts["a"] = verl_verdict("0.5.0", BOTH)
    key = f.api.create("t", spec())
    f.tick()
    f.tick()
    status = f.status(key)
    assert (status["phase"], status["reason"], status["verl"]["version"]) == ("Queued", "VerlDrift", "0.9.1"), status
    assert "cluster a runs verl 0.5.0" in status["message"]
    drift = condition(f.api.clusters["a"]["status"], "VerlDrift")
    assert drift is not None and drift["status"] == "True"
    assert "runs verl 0.5.0, but Argus composes with verl 0.9.1 and 0.6.1 only" in drift["message"], drift
    assert f.api.clusters["a"]["status"]["doctor"]["verdict"] == "Failed"


def test_the_operator_has_a_composer_per_pinned_release_unless_verl_config_names_one(tmp_path: Any) -> None:
    import argparse

    from argus.core.config import PlatformConfig
    from argus.platform import verl_composers

    platform = PlatformConfig(verl_code_path=str(tmp_path))  # no snapshot readable here: the newest pinned release
    every = verl_composers(argparse.Namespace(verl_config=None), platform)
    assert every.supported == BOTH and every.default.tree.source == "release"
    old = every.get("0.6.1")
    assert old is not None and old.tree.version == "0.6.1" and old.tree.root == verl_tree("0.6.1")
    assert verl_composers(argparse.Namespace(verl_config="0.6.1"), platform).supported == ("0.6.1",)
