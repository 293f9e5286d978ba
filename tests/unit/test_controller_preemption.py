"""Preemption through the controller over the fakes (``controller.preemptor``): a waiting task
of higher priority takes the GPUs of the running task that loses least, which is stopped,
goes back to the queue with reason Preempted and runs again as attempt 2 once GPUs free up;
nothing is preempted without --preemption, for a task of equal priority, or from a task that
opted out; while a victim stops, nothing more is taken."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import generate_latest

from argus.controller.loop import ControlLoop
from argus.controller.metrics import Metrics
from argus.core.preemption import PreemptionPolicy
from argus.core.rayjobs import PlacementGroup
from argus.core.verlchoice import Composers
from test_controller import CMD, NS, World, spec
from test_controller_inputs import COMPOSER

pytestmark = pytest.mark.unit

ON = PreemptionPolicy(enabled=True)


def running(world: World, name: str, gpus: int, step: int, **extra: Any) -> tuple[str, str]:
    """A task that Ray runs on w1, its verl workers' placement group holding ``gpus`` there,
    at training step ``step``."""
    key = world.cluster.create(name, spec(gpus, **extra))
    world.tick()
    sid = world.sid(key)
    world.ray.run(sid)
    world.ray.groups.append(PlacementGroup(creator_job_id=f"job-{sid}", gpus=gpus, nodes=(("w1", float(gpus)),)))
    world.ray.use_gpus("w1", gpus)
    world.ray.say(sid, "Total training steps: 100\n" + "".join(f"step:{i} - critic/score/mean:0.1\n" for i in range(1, step + 1)))
    world.tick(0.2)
    return key


def stop_frees(world: World, key: tuple[str, str], gpus: int) -> None:
    """What Ray does once a stopped job's workers are gone: its GPUs are free again."""
    sid = world.sid(key)
    world.ray.groups = [g for g in world.ray.groups if g.creator_job_id != f"job-{sid}"]
    world.ray.use_gpus("w1", -gpus)


def test_the_victim_that_loses_least_gives_its_gpus_and_runs_again_later() -> None:
    world = World(gpus=4, preemption=ON)
    long_run = running(world, "long", 2, step=7)   # would lose 7 steps x 2 GPUs (no checkpoint known here)
    short_run = running(world, "short", 2, step=3)  # would lose 3 x 2
    world.settle(2)
    assert world.phase(long_run) == world.phase(short_run) == "Running"

    urgent = world.cluster.create("urgent", spec(2, priority=10))
    world.tick()
    status = world.cluster.status(short_run)
    assert (status["phase"], status["reason"], status["preemptedBy"]) == ("Running", "Preempting", f"{NS}/urgent")
    assert f"preempted for {NS}/urgent (priority 10, above its own 0)" in status["message"]
    assert world.ray.jobs[world.sid(short_run)].status == "STOPPED"  # stopped in the same pass
    assert world.cluster.status(long_run)["reason"] == "RayJobRunning"
    waiting = world.cluster.status(urgent)
    assert waiting["phase"] == "Queued" and f"waiting for the GPUs of {NS}/short" in waiting["message"]
    assert waiting["preempts"] == [f"{NS}/short"]  # typed, for argus queue's PREEMPTS column
    assert "preempts" not in world.cluster.status(long_run)
    assert [e.name for e in world.cluster.events if e.reason == "Preempted"] == ["short"]

    stop_frees(world, short_run, 2)
    world.settle(3)
    status = world.cluster.status(short_run)
    assert (status["phase"], status["reason"], status["attempt"]) == ("Queued", "Preempted", 2)
    assert [(a["attempt"], a.get("outcome")) for a in status["attempts"]] == [(1, "Preempted")]
    assert world.phase(urgent) in ("Submitted", "Running")
    assert "preempts" not in world.cluster.status(urgent)  # its victims' GPUs are its own now
    metrics = generate_latest(world.control_loop.scheduler.preemptor.metrics.registry).decode()  # type: ignore[union-attr]
    assert 'argus_preemptions_total{cluster=""} 1.0' in metrics
    assert "argus_preemption_lost_gpu_steps_total{cluster=\"\"} 6.0" in metrics, [m for m in metrics.splitlines() if "preemption" in m]

    # The urgent task ends; its GPUs go to the preempted task's attempt 2.
    world.ray.finish(world.sid(urgent))
    world.ray.use_gpus("w1", -2)
    world.settle(3)
    assert world.phase(urgent) == "Succeeded"
    assert world.phase(short_run) in ("Submitted", "Running") and world.cluster.status(short_run)["attempt"] == 2


@pytest.mark.parametrize("policy,priority,extra", [
    (PreemptionPolicy(), 10, {}),                       # --preemption off (the default)
    (ON, 0, {}),                                        # equal priority
    (ON, 10, {"preemptible": False}),                  # the running task opted out
], ids=["off", "equal-priority", "opted-out"])
def test_nothing_is_preempted_unless_the_policy_allows_it(policy: PreemptionPolicy, priority: int, extra: dict[str, Any]) -> None:
    world = World(gpus=2, preemption=policy)
    victim = running(world, "victim", 2, step=3, **extra)
    world.settle(2)
    waiting = world.cluster.create("waiting", spec(2, priority=priority))
    world.settle(3)
    assert world.phase(victim) == "Running" and world.cluster.status(victim)["reason"] == "RayJobRunning"
    assert world.phase(waiting) == "Queued"
    assert world.ray.jobs[world.sid(victim)].status == "RUNNING"


def test_while_a_victim_stops_nothing_more_is_taken() -> None:
    world = World(gpus=4, preemption=ON)
    first = running(world, "first", 2, step=1)
    second = running(world, "second", 2, step=1)
    world.settle(2)
    world.cluster.create("urgent-a", spec(2, priority=10))
    world.tick()
    world.cluster.create("urgent-b", spec(2, priority=10))
    world.settle(3)  # the first victim stops, but Ray still shows its workers' GPUs in use
    victims = [k for k in (first, second) if world.cluster.status(k).get("preemptedBy")
               or any(a.get("outcome") == "Preempted" for a in world.cluster.status(k).get("attempts") or ())]
    assert len(victims) == 1
    assert "waiting for the GPUs of" in world.cluster.status((NS, "urgent-a"))["message"]



def composing(world: World) -> World:
    """``world`` with an operator that composes each task's configuration, as the real one
    does (trainer.save_freq and resume_mode come from it), over the same API server and Ray."""
    world.control_loop.logs.close()
    world.control_loop = ControlLoop(world.config, world.ray, world.cluster, world.cluster, clock=world.clock, metrics=Metrics(world.clock),
                                     log_files=world.files, secrets=world.cluster, composers=Composers(COMPOSER))
    world.control_loop.task_reconciler.strict_transitions = True
    return world


def with_checkpoints(gpus: int, extra: str = "") -> str:
    """The command of a run that checkpoints every 5 steps (and resumes, unless ``extra`` turns
    it off), complete enough for verl's start-up checks that the composition runs."""
    return (CMD.format(n=1, g=gpus) + " actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct actor_rollout_ref.rollout.name=vllm"
            " actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4"
            " critic.ppo_micro_batch_size_per_gpu=4 trainer.save_freq=5" + extra)


def test_a_task_that_cannot_resume_is_taken_last_even_when_it_would_lose_less() -> None:
    world = composing(World(gpus=4, preemption=ON))
    resumes = running(world, "resumes", 2, step=9, command=with_checkpoints(2))  # loses 4 steps x 2 GPUs
    starts_over = running(world, "starts-over", 2, step=1, command=with_checkpoints(2, " trainer.resume_mode=disable"))  # 1 x 2
    world.settle(2)
    world.cluster.create("urgent", spec(2, priority=10, command=with_checkpoints(2)))
    world.tick()
    assert world.cluster.status(resumes).get("preemptedBy") == f"{NS}/urgent"
    assert "preemptedBy" not in world.cluster.status(starts_over)
    assert "it loses 4 step(s) since its last checkpoint" in world.cluster.status(resumes)["message"]


def test_a_victim_that_cannot_resume_is_told_it_starts_over_and_so_is_the_task_waiting_for_it() -> None:
    world = composing(World(gpus=2, preemption=ON))
    victim = running(world, "victim", 2, step=7, command=with_checkpoints(2, " trainer.resume_mode=disable"))
    world.settle(2)
    urgent = world.cluster.create("urgent", spec(2, priority=10, command=with_checkpoints(2)))
    world.tick()
    told = world.cluster.status(victim)["message"]
    assert "it cannot resume (no checkpoint to resume from, or trainer.resume_mode=disable), so it loses all 7 step(s)" in told
    assert "its next attempt starts over from the first step" in told and "resumes from" not in told
    assert [e.message for e in world.cluster.events if e.reason == "Preempted"] == [told]
    assert world.cluster.status(urgent)["message"] == (f"waiting for the GPUs of {NS}/victim, stopped for it (preemption); "
                                                       f"{NS}/victim cannot resume and start(s) over from the first step")
    world.settle(2)
    requeued = world.cluster.status(victim)
    assert (requeued["phase"], requeued["reason"]) == ("Queued", "Preempted")
    assert "attempt 2 waits in the queue and starts over from the first step: it cannot resume" in requeued["message"]


def restart_operator(world: World) -> None:
    """A new operator process over the same API server and Ray: nothing in memory survives."""
    world.control_loop.logs.close()
    world.control_loop = ControlLoop(world.config, world.ray, world.cluster, world.cluster, clock=world.clock, metrics=Metrics(world.clock),
                                     log_files=world.files, secrets=world.cluster)
    world.control_loop.task_reconciler.strict_transitions = True


def test_a_restart_while_a_victims_gpus_are_on_their_way_takes_no_second_victim() -> None:
    """The victim is back in the queue, but Ray still shows its workers' GPUs in use: the new
    process learns from the victim's attempt record whom they are for, names it on the
    waiting task and preempts nobody else meanwhile."""
    world = World(gpus=4, preemption=ON)
    first = running(world, "first", 2, step=3)
    second = running(world, "second", 2, step=5)
    world.settle(2)
    urgent = world.cluster.create("urgent", spec(2, priority=10))
    world.settle(2)
    assert world.phase(first) == "Queued" and world.cluster.status(first)["reason"] == "Preempted"
    assert world.cluster.status(first)["attempts"][0]["preemptedBy"] == f"{NS}/urgent"
    assert world.cluster.status(urgent)["preempts"] == [f"{NS}/first"]
    restart_operator(world)
    world.settle(3)
    assert world.phase(second) == "Running" and "preemptedBy" not in world.cluster.status(second), "no second victim"
    assert world.cluster.status(urgent)["preempts"] == [f"{NS}/first"]
    assert world.phase(urgent) == "Queued"
    stop_frees(world, first, 2)
    world.settle(3)
    assert world.phase(urgent) in ("Submitted", "Running") and "preempts" not in world.cluster.status(urgent)
    assert world.phase(second) == "Running" and world.phase(first) == "Queued"
    assert world.ray.count("submit") == 3  # first, second, urgent: each once


@pytest.mark.parametrize("restart", [False, True], ids=["same-process", "restarted"])
def test_while_rays_gpu_use_lags_the_victims_groups_no_second_victim_is_taken(restart: bool) -> None:
    """Ray removes a stopped job's placement groups before its GPU use per node shows them
    free (the dashboard's cluster status lags): the chaos benchmark's preempt-restart found a
    second victim taken in that window. The GPUs count as on their way until the waiting task
    is admitted, for USAGE_LAG_SECONDS at most."""
    world = World(gpus=4, preemption=ON)
    first = running(world, "first", 2, step=3)
    second = running(world, "second", 2, step=5)
    world.settle(2)
    urgent = world.cluster.create("urgent", spec(2, priority=10))
    world.tick()
    sid = world.sid(first)
    world.ray.groups = [g for g in world.ray.groups if g.creator_job_id != f"job-{sid}"]  # gone; its GPUs still shown in use
    if restart:
        world.tick(2)  # back in the queue
        restart_operator(world)
    world.settle(4)
    assert world.phase(first) == "Queued" and world.phase(urgent) == "Queued"
    assert world.phase(second) == "Running" and "preemptedBy" not in world.cluster.status(second), "no second victim"
    assert world.cluster.status(urgent)["preempts"] == [f"{NS}/first"]
    world.ray.use_gpus("w1", -2)  # Ray's use catches up
    world.settle(2)
    assert world.phase(urgent) in ("Submitted", "Running") and "preempts" not in world.cluster.status(urgent)
    assert world.phase(second) == "Running" and world.ray.count("submit") == 3
