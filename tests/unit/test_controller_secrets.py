"""Environment variables from Secrets (``spec.env``) over the fakes: the value reaches the
Ray job's runtime env and nothing else (the task, its status, Events, the operator's log,
metrics); a missing Secret or key holds the task in the queue with one line naming the
variable, the Secret and the key, and nothing reaches Ray until it is there."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from prometheus_client import generate_latest

from argus.adapters.ray import RayJobsClient
from argus.controller.scheduler import SECRET_RECHECK_SECONDS
from argus.core.plan import validate_task
from argus.core.rayjobs import RayRefused
from fakes import forbidden
from test_controller import NS, World, spec

pytestmark = pytest.mark.unit

VALUE = "wandb-v1-0123456789abcdef-never-shown"


def env(*entries: tuple[str, str, str], optional: bool = False) -> list[dict[str, Any]]:
    return [{"name": n, "valueFrom": {"secretKeyRef": {"name": s, "key": k, **({"optional": True} if optional else {})}}}
            for n, s, k in entries]


WANDB = env(("WANDB_API_KEY", "wandb", "api_key"))


def everything_written(world: World) -> str:
    """Every text the operator put anywhere but Ray: objects, status patches, Events."""
    return repr((world.cluster.objects, world.cluster.writes, world.cluster.events))


def test_a_secrets_value_reaches_the_job_and_nothing_else(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    world = World()
    world.cluster.secrets[(NS, "wandb")] = {"api_key": VALUE}
    key = world.cluster.create("t", spec(env=WANDB))
    world.tick()
    assert world.phase(key) == "Submitted"
    plan = world.ray.jobs[world.sid(key)].plan
    assert plan is not None
    assert plan.submitted_runtime_env()["env_vars"]["WANDB_API_KEY"] == VALUE
    assert VALUE not in repr(plan) and VALUE not in plan.model_dump_json() and VALUE not in str(plan.runtime_env)
    assert plan.secret_env == {"WANDB_API_KEY": "<from secret wandb/api_key>"}
    world.ray.run(world.sid(key))
    world.ray.finish(world.sid(key))
    world.settle()
    assert world.phase(key) == "Succeeded"
    assert VALUE not in everything_written(world)
    assert VALUE not in caplog.text
    assert VALUE not in generate_latest(world.control_loop.writer.metrics.registry).decode()


def test_a_missing_secret_or_key_holds_the_task_and_says_which_then_it_runs() -> None:
    world = World()
    key = world.cluster.create("t", spec(env=WANDB))
    world.tick()
    status = world.cluster.status(key)
    assert (status["phase"], status["reason"]) == ("Queued", "SecretMissing")
    assert "WANDB_API_KEY" in status["message"] and f"Secret {NS}/wandb does not exist" in status["message"]
    assert "api_key" in status["message"] and "\n" not in status["message"]
    assert not world.ray.jobs  # nothing half-done in Ray
    world.cluster.secrets[(NS, "wandb")] = {"other": "x"}
    world.tick(SECRET_RECHECK_SECONDS)
    status = world.cluster.status(key)
    assert status["reason"] == "SecretMissing" and f"Secret {NS}/wandb has no key api_key" in status["message"]
    assert not world.ray.jobs
    world.cluster.secrets[(NS, "wandb")] = {"api_key": VALUE}
    world.tick(SECRET_RECHECK_SECONDS)
    assert world.phase(key) == "Submitted"
    assert VALUE not in everything_written(world)


def test_an_optional_secret_that_is_missing_leaves_the_variable_unset() -> None:
    world = World()
    key = world.cluster.create("t", spec(env=env(("HF_TOKEN", "hf", "token"), optional=True)))
    world.tick()
    assert world.phase(key) == "Submitted"
    plan = world.ray.jobs[world.sid(key)].plan
    assert plan is not None and "HF_TOKEN" not in plan.submitted_runtime_env()["env_vars"]


def test_without_get_on_secrets_a_task_with_env_waits_and_says_why() -> None:
    world = World()
    world.cluster.secrets[(NS, "wandb")] = {"api_key": VALUE}
    world.cluster.refused["secret_data"] = forbidden("get", "secrets", "wandb", NS)
    key = world.cluster.create("t", spec(env=WANDB))
    other = world.cluster.create("plain", spec())
    world.tick()
    status = world.cluster.status(key)
    assert status["reason"] == "SecretMissing" and "cannot be read" in status["message"] and "forbidden" in status["message"]
    assert world.phase(other) == "Submitted"  # tasks without spec.env run as before
    del world.cluster.refused["secret_data"]
    world.tick(SECRET_RECHECK_SECONDS)
    assert world.phase(key) == "Submitted"


class QuotingRay:
    """Ray's job client refusing a submission with a message that quotes its runtime env."""

    def __init__(self) -> None:
        self.runtime_env: dict[str, Any] | None = None

    def submit_job(self, **kwargs: Any) -> str:
        self.runtime_env = kwargs["runtime_env"]
        raise RuntimeError(f"Request failed with status code 400: runtime_env is invalid: {kwargs['runtime_env']}")


def test_the_ray_client_sends_the_value_and_cleans_it_from_a_refusal() -> None:
    world = World()
    key = world.cluster.create("t", spec(env=WANDB))
    plan = validate_task(world.cluster.objects[key], "alice", world.config.platform).plan
    assert plan is not None
    ray = QuotingRay()
    client = RayJobsClient("http://ray:8265", monotonic=world.clock.monotonic, client_factory=lambda _: ray, threads=1)
    with pytest.raises(RayRefused) as refused:
        asyncio.run(client.submit(plan.with_secrets({"WANDB_API_KEY": VALUE})))
    assert ray.runtime_env is not None and ray.runtime_env["env_vars"]["WANDB_API_KEY"] == VALUE
    # Ray's own message is cut (500 characters): cleaned before the cut, so not even a prefix is left.
    assert VALUE not in str(refused.value)
    assert VALUE not in str(refused.value.__cause__) and "<from secret wandb/api_key>" in str(refused.value.__cause__)


def test_a_task_waiting_for_its_secret_holds_no_gpus_nor_the_head_of_the_queue() -> None:
    world = World(gpus=1)
    waiting = world.cluster.create("first", spec(env=WANDB))
    behind = world.cluster.create("second", spec())
    world.tick()
    assert world.cluster.status(waiting)["reason"] == "SecretMissing"
    assert world.phase(behind) == "Submitted"  # the one GPU went to the task behind it
    reads = len(status_patches_of(world, waiting))
    for _ in range(5):  # while it waits: no status write per pass, its Secret read again every 30 s
        world.tick(2)
    assert len(status_patches_of(world, waiting)) == reads
    world.cluster.secrets[(NS, "wandb")] = {"api_key": VALUE}
    world.ray.finish(world.sid(behind))
    world.settle(ticks=20, every=2)
    assert world.phase(waiting) in ("Submitted", "Running", "Succeeded")


def status_patches_of(world: World, key: tuple[str, str]) -> list[dict[str, Any]]:
    return [p for name, p in world.cluster.writes.status if name == key[1]]
