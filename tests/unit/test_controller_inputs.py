"""Existence checks before the wait (issue 36, item 5; controller/inputcheck.py), over the
fakes: a task whose data file, reward function or model folder is not in the shared tree is
held (Queued/InputMissing, one line naming the field, the path and the rule), blocks nobody,
and goes once the file exists; each path is looked for once per pass; a task found complete
is not looked at again; a tree not mounted here is not checked, said once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from argus.adapters.verlcompose import HydraComposer
from argus.controller.inputcheck import InputChecks
from argus.controller.loop import ControlLoop
from argus.controller.metrics import Metrics
from argus.controller.view import TaskView
from argus.core.config import PlatformConfig
from argus.core.inputs import InputPath
from argus.core.verlchoice import Composers
from argus.core.verlconfig import ConfigTree
from fakes import FakeSharedTree
from test_controller import NS, World, close_worlds  # noqa: F401 - close_worlds: the autouse fixture that closes them
from test_controller_clusters import Fleet
from verltrees import verl_tree

pytestmark = pytest.mark.unit

COMPOSER = HydraComposer(ConfigTree("0.9.1", verl_tree("0.9.1"), "release"))
HOME = "/private/users/alice"
TRAIN, VAL, REWARD = f"{HOME}/datasets/train.parquet", f"{HOME}/datasets/val.parquet", f"{HOME}/code/reward.py"
CMD = ("python3 -m verl.trainer.main_ppo data.train_files=$HOME/datasets/{train} data.val_files=$HOME/datasets/val.parquet "
       "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 "
       "actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.tensor_model_parallel_size=1 "
       "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 critic.ppo_micro_batch_size_per_gpu=4 "
       "reward.custom_reward_function.path=$HOME/code/reward.py trainer.nnodes=1 trainer.n_gpus_per_node=1 "
       "+ray_kwargs.ray_init.address=auto")


def spec(train: str = "train.parquet", **extra: Any) -> dict[str, Any]:
    return {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "command": CMD.format(train=train), **extra}


@pytest.fixture
def tree() -> FakeSharedTree:
    return FakeSharedTree(VAL, REWARD)


@pytest.fixture
def world(tree: FakeSharedTree) -> World:
    w = World(gpus=1)
    w.control_loop = ControlLoop(w.config, w.ray, w.cluster, w.cluster, clock=w.clock, metrics=Metrics(w.clock), composers=Composers(COMPOSER),
                              shared_tree=tree)
    w.control_loop.task_reconciler.strict_transitions = True
    return w


def test_a_missing_data_file_holds_the_task_with_one_line_and_it_goes_once_the_file_exists(world: World,
                                                                                           tree: FakeSharedTree) -> None:
    key = world.cluster.create("t", spec(), NS)
    world.settle()
    status = world.cluster.status(key)
    assert (status["phase"], status["reason"]) == ("Queued", "InputMissing")
    assert status["message"].splitlines()[0] == (f"data.train_files: {TRAIN} does not exist in the shared tree (the file verl reads "
                                                 "at start)")
    assert world.ray.jobs == {}  # not admitted to Ray
    writes = len(world.cluster.writes.status)
    world.settle()  # looked at again each pass, the same message: nothing more written
    assert len(world.cluster.writes.status) == writes
    tree.paths.add(TRAIN)  # uploaded after kubectl apply
    world.tick(2.0)
    assert world.phase(key) == "Submitted" and len(world.ray.jobs) == 1


def test_a_held_task_blocks_nobody_behind_it(world: World, tree: FakeSharedTree) -> None:
    first = world.cluster.create("first", spec("missing.parquet"), NS)
    second = world.cluster.create("second", spec(), NS)
    tree.paths.add(TRAIN)
    world.settle()
    assert world.cluster.status(first)["reason"] == "InputMissing"
    assert f"{HOME}/datasets/missing.parquet does not exist" in world.cluster.status(first)["message"]
    assert world.phase(second) == "Submitted"


def test_each_path_is_looked_for_once_a_pass_and_a_complete_task_not_again(world: World, tree: FakeSharedTree) -> None:
    tree.paths.add(TRAIN)
    held = [world.cluster.create(f"h{i}", spec("missing.parquet"), NS) for i in range(3)]
    world.tick(2.0)
    looked = list(tree.looks)
    # three tasks name the same three paths and the one missing: each looked for once
    assert sorted(looked) == sorted({f"{HOME}/datasets/missing.parquet", VAL, REWARD})
    tree.looks.clear()
    tree.paths.add(f"{HOME}/datasets/missing.parquet")
    world.settle(ticks=1)
    assert world.phase(held[0]) == "Submitted"
    tree.looks.clear()
    world.settle(ticks=2)  # the others wait for the one GPU: complete, not looked at again
    assert tree.looks == [] and {world.cluster.status(k)["reason"] for k in held[1:]} == {"Queued"}


def test_a_tree_not_mounted_here_is_not_checked_and_said_once(world: World, tree: FakeSharedTree,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    tree.unmounted.add("/private")
    caplog.set_level(logging.WARNING, logger="argus")
    first = world.cluster.create("a", spec("missing.parquet", priority=1), NS)
    world.cluster.create("b", spec("missing.parquet"), NS)
    world.settle()
    assert world.phase(first) == "Submitted" and tree.looks == []
    said = [r.getMessage() for r in caplog.records if "is not mounted here" in r.getMessage()]
    assert len(said) == 1 and "cluster --ray-address (/private)" in said[0]


def test_a_path_the_tree_cannot_answer_for_is_not_held_against_the_task(world: World, tree: FakeSharedTree) -> None:
    tree.unreadable.add(TRAIN)
    key = world.cluster.create("t", spec(), NS)
    world.settle()
    assert world.phase(key) == "Submitted"


@pytest.fixture
def made() -> Iterator[list[Fleet]]:
    fleets: list[Fleet] = []
    yield fleets
    for f in fleets:
        f.close()


def test_a_task_goes_only_to_the_clusters_whose_tree_holds_its_inputs(made: list[Fleet]) -> None:
    tree = FakeSharedTree(*(p.replace("/private/", "/private-b/") for p in (TRAIN, VAL, REWARD)), VAL.replace("/private/", "/private-a/"))
    f = Fleet(gpus={"a": 1, "b": 1})
    made.append(f)
    f.control_loop = ControlLoop(f.config, f.implicit, f.api, f.api, clock=f.clock, metrics=Metrics(f.clock), clusters=f.api,
                              connect=f.connect, token_namespace="argus-system", composers=Composers(COMPOSER), shared_tree=tree)
    f.api.add_cluster("a", address="http://ray-a:8265", root="/private-a", preference=10)
    f.api.add_cluster("b", address="http://ray-b:8265", root="/private-b")
    key = f.api.create("t", spec(), NS)
    f.tick()
    # a is preferred, but its tree lacks the data and the reward: b's has them
    assert f.status(key)["cluster"] == "b" and f.status(key)["phase"] == "Submitted"


def test_the_webhooks_look_is_at_the_operators_own_tree() -> None:
    tree = FakeSharedTree(VAL)
    checks = InputChecks(PlatformConfig(), Composers(COMPOSER), tree, lambda cluster: "/private")
    found = [InputPath("data.train_files", TRAIN, "data"), InputPath("data.val_files", VAL, "data")]
    assert asyncio.run(checks.absent(found)) == [found[0]]
    tree.unmounted.add("/private")
    assert asyncio.run(checks.absent(found)) == []


def test_inputs_are_computed_once_per_task_from_its_spec_after_a_restart() -> None:
    checks = InputChecks(PlatformConfig(), Composers(COMPOSER), FakeSharedTree(), lambda cluster: "/private")
    view = TaskView(namespace=NS, name="t", uid="0000-1", generation=1, created="2026-12-06T10:00:00Z", spec=spec(),
                    status={"phase": "Queued", "user": "alice"})
    first = checks.inputs_of(view)
    assert {i.path for i in first} == {TRAIN, VAL, REWARD} and checks.inputs_of(view) is first


def test_its_missing_files_say_more_than_an_unreachable_ray(world: World) -> None:
    world.ray.reachable = False
    key = world.cluster.create("t", spec(), NS)
    world.settle()
    assert (world.cluster.status(key)["phase"], world.cluster.status(key)["reason"]) == ("Queued", "InputMissing")
