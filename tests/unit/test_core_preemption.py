"""core.preemption: who may preempt whom, what stopping a task loses (verl's checkpoint rule),
and the cheapest set of victims, held to a brute force over every set (property tests)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from argus.core.preemption import PreemptionPolicy, RunningTask, Waiting, choose_victims, lost_steps, may_preempt

ON = PreemptionPolicy(enabled=True)
NODES = ("n0", "n1", "n2")


def running(i: int, priority: int, holds: dict[str, float], *, step: int | None = 10, save_freq: int | None = 5, resumable: bool = True,
            preemptible: bool = True, user: str = "u", started: str = "2026-01-01T00:00:00Z") -> RunningTask:
    return RunningTask(("ns", f"r{i}"), priority, user, started, tuple(holds.items()), step=step, save_freq=save_freq,
                       resumable=resumable, preemptible=preemptible)


def waiting(priority: int = 10, nnodes: int = 1, per_node: int = 4) -> Waiting:
    return Waiting(("ns", "w"), priority, "w", nnodes, per_node)


# --------------------------------------------------------------------------- lost work

def verl_checkpoints(step: int, save_freq: int | None, start: int) -> list[int]:
    """The checkpoints verl has written by ``step`` in an attempt that started at ``start``:
    ray_trainer.py/sft_trainer.py save when save_freq > 0 and global_step % save_freq == 0."""
    return [s for s in range(start + 1, step + 1) if save_freq and save_freq > 0 and s % save_freq == 0]


@given(st.integers(0, 500), st.one_of(st.none(), st.integers(-1, 50)), st.integers(0, 100), st.booleans())
def test_lost_steps_are_the_steps_since_verls_last_checkpoint(step: int, save_freq: int | None, start: int, resumable: bool) -> None:
    step = max(step, start)
    done = verl_checkpoints(step, save_freq, start)
    resumes = resumable and save_freq is not None and save_freq > 0
    expected = step - (done[-1] if resumes and done else start)  # without a resume, the whole attempt
    assert lost_steps(step, save_freq, resumable=resumable, resumed_from=start) == expected


def test_lost_steps_examples() -> None:
    assert lost_steps(12, 5) == 2          # checkpoint at 10
    assert lost_steps(10, 5) == 0          # just checkpointed
    assert lost_steps(12, -1) == 12        # never checkpoints: everything
    assert lost_steps(12, 5, resumable=False) == 12
    assert lost_steps(12, 20, resumed_from=8) == 4  # no checkpoint since the one it resumed from
    assert lost_steps(None, 5) == 0        # no step yet


# --------------------------------------------------------------------------- who may preempt whom

def test_only_strictly_lower_priority_is_preempted_and_only_when_enabled() -> None:
    task = waiting(priority=10)
    assert may_preempt(task, running(1, 9, {"n0": 4}), ON)
    assert not may_preempt(task, running(1, 10, {"n0": 4}), ON)
    assert not may_preempt(task, running(1, 11, {"n0": 4}), ON)
    assert not may_preempt(task, running(1, 9, {"n0": 4}), PreemptionPolicy())  # off by default
    assert not may_preempt(task, running(1, 9, {"n0": 4}, preemptible=False), ON)


def test_fair_share_preempts_within_a_priority_only_when_on_and_far_above_the_mean() -> None:
    fair = PreemptionPolicy(enabled=True, fair_share_ratio=2.0, fair_share_min_runtime=600)
    task = waiting(priority=5)
    hog = running(1, 5, {"n0": 4}, user="hog", started="2026-01-01T00:00:00Z")
    now = 1767225600.0 + 3600  # an hour after it started
    usage = {"w": 10.0, "hog": 500.0, "other": 90.0}   # mean 200: hog at 2.5x, w below
    assert may_preempt(task, hog, fair, usage=usage, now_seconds=now)
    assert not may_preempt(task, hog, ON, usage=usage, now_seconds=now)                    # fair share off
    assert not may_preempt(task, hog, fair, usage={**usage, "hog": 150.0}, now_seconds=now)  # 1.8x the mean (83)
    assert not may_preempt(task, hog, fair, usage=usage, now_seconds=1767225600.0 + 60)   # ran a minute only


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.floats(0, 1000), min_size=2), st.floats(1.01, 4))
def test_fair_share_cannot_swap_back_at_once(usage: dict[str, float], ratio: float) -> None:
    """Hysteresis: if a's task may take b's, b's may not take a's at the same usage."""
    fair = PreemptionPolicy(enabled=True, fair_share_ratio=ratio, fair_share_min_runtime=0)
    users = sorted(usage)
    for a, b in itertools.permutations(users, 2):
        a_takes_b = may_preempt(Waiting(("ns", "x"), 5, a, 1, 1), running(1, 5, {"n0": 1}, user=b), fair, usage=usage, now_seconds=2e9)
        b_takes_a = may_preempt(Waiting(("ns", "y"), 5, b, 1, 1), running(2, 5, {"n0": 1}, user=a), fair, usage=usage, now_seconds=2e9)
        assert not (a_takes_b and b_takes_a)


# --------------------------------------------------------------------------- the choice

def test_the_set_that_loses_least_is_chosen() -> None:
    free = {"n0": 0.0, "n1": 0.0}
    fresh = running(1, 1, {"n0": 4}, step=10, save_freq=5)   # checkpointed at 10: loses 0
    stale = running(2, 1, {"n1": 4}, step=14, save_freq=5)   # loses 4 steps x 4 GPUs
    chosen = choose_victims(waiting(per_node=4), free, [stale, fresh], ON)
    assert chosen is not None and [v.key for v in chosen.victims] == [fresh.key] and chosen.gpu_steps == 0


def test_a_task_that_cannot_resume_is_taken_last() -> None:
    free = {"n0": 0.0, "n1": 0.0}
    no_resume = running(1, 1, {"n0": 4}, step=1, resumable=False)          # loses 1 step, but from scratch
    costly = running(2, 1, {"n1": 4}, step=14, save_freq=5)                # loses 16 GPU-steps, resumes
    chosen = choose_victims(waiting(per_node=4), free, [no_resume, costly], ON)
    assert chosen is not None and [v.key for v in chosen.victims] == [costly.key] and chosen.from_scratch == ()
    only = choose_victims(waiting(per_node=4), free, [no_resume], ON)
    assert only is not None and only.from_scratch == (no_resume.key,)


def test_ties_go_to_the_lowest_priority_then_the_newest() -> None:
    free = {"n0": 0.0, "n1": 0.0, "n2": 0.0}
    old_low = running(1, 1, {"n0": 4}, started="2026-01-01T00:00:00Z")
    new_low = running(2, 1, {"n1": 4}, started="2026-01-02T00:00:00Z")
    higher = running(3, 2, {"n2": 4}, started="2026-01-03T00:00:00Z")
    chosen = choose_victims(waiting(per_node=4), free, [old_low, higher, new_low], ON)
    assert chosen is not None and [v.key for v in chosen.victims] == [new_low.key]


def test_nothing_is_chosen_when_it_fits_or_when_nothing_would_do() -> None:
    assert choose_victims(waiting(per_node=4), {"n0": 4.0}, [running(1, 1, {"n0": 4})], ON) is None
    assert choose_victims(waiting(per_node=8), {"n0": 0.0}, [running(1, 1, {"n0": 4})], ON) is None  # a 4-GPU node...
    assert choose_victims(waiting(per_node=4), {"n0": 0.0}, [running(1, 10, {"n0": 4})], ON) is None  # equal priority


def test_a_multi_node_task_needs_room_on_distinct_nodes() -> None:
    free = {"n0": 0.0, "n1": 0.0, "n2": 4.0}
    both_on_n0 = [running(1, 1, {"n0": 2}), running(2, 1, {"n0": 2})]
    on_n1 = running(3, 1, {"n1": 4}, step=13)  # loses 3 x 4
    chosen = choose_victims(waiting(nnodes=2, per_node=4), free, [*both_on_n0, on_n1], ON)
    assert chosen is not None and sorted(v.key for v in chosen.victims) in ([v.key for v in both_on_n0], [on_n1.key])
    assert chosen.gpu_steps == 0 and len(chosen.victims) == 2  # the two cheap ones on n0 beat the one that loses 12


# --------------------------------------------------------------------------- property: the brute force agrees

def cost(vs: tuple[RunningTask, ...]) -> tuple[int, float, int]:
    return (sum(1 for v in vs if not v.can_resume), sum(v.lost_steps * v.gpus for v in vs), len(vs))


def fits(free: dict[str, float], vs: tuple[RunningTask, ...], task: Waiting) -> bool:
    after = dict(free)
    for v in vs:
        for node, gpus in v.holds:
            after[node] += gpus
    return sum(1 for f in after.values() if f >= task.gpus_per_node) >= task.nnodes


@st.composite
def clusters(draw: st.DrawFn) -> tuple[Waiting, dict[str, float], list[RunningTask]]:
    free = {n: float(draw(st.integers(0, 3))) for n in NODES}
    tasks = []
    for i in range(draw(st.integers(0, 7))):
        node = draw(st.sampled_from(NODES))
        tasks.append(running(i, draw(st.integers(0, 12)), {node: float(draw(st.integers(1, 4)))},
                             step=draw(st.one_of(st.none(), st.integers(0, 30))), save_freq=draw(st.sampled_from([None, -1, 3, 5, 10])),
                             resumable=draw(st.booleans()), preemptible=draw(st.booleans()),
                             started=f"2026-01-{draw(st.integers(1, 28)):02d}T00:00:00Z"))
    task = waiting(priority=draw(st.integers(0, 12)), nnodes=draw(st.integers(1, 2)), per_node=draw(st.integers(1, 6)))
    return task, free, tasks


@settings(max_examples=400, deadline=None)
@given(clusters())
def test_the_choice_is_the_cheapest_allowed_set_that_fits(case: tuple[Waiting, dict[str, float], list[RunningTask]]) -> None:
    task, free, tasks = case
    chosen = choose_victims(task, free, tasks, ON)
    allowed = [v for v in tasks if may_preempt(task, v, ON)]
    fitting = [vs for n in range(1, len(allowed) + 1) for vs in itertools.combinations(allowed, n) if fits(free, vs, task)]
    if fits(free, (), task) or not fitting:
        assert chosen is None
        return
    assert chosen is not None
    # Never a task of equal or higher priority, never one that opted out.
    assert all(v.priority < task.priority and v.preemptible for v in chosen.victims)
    assert fits(free, chosen.victims, task)
    # No cheaper set fits: fewer that cannot resume, then fewer GPU-steps, then fewer victims.
    assert cost(chosen.victims) == min(cost(vs) for vs in fitting)


def test_many_running_tasks_are_searched_until_a_set_fits() -> None:
    """Sixty one-GPU victims on one node, none enough alone: the search still answers (a
    benchmark measures how fast: bench/schedule_sim.py)."""
    tasks = [running(i, 1, {"n0": 1}, step=i % 7, save_freq=7) for i in range(60)]
    chosen = choose_victims(waiting(per_node=8), {"n0": 0.0}, tasks, ON)
    assert chosen is not None and len(chosen.victims) == 8 and chosen.gpu_steps == 0  # 9 of them just checkpointed
