"""``bench/chaos.py``'s ``preempt-restart`` scenario (issue 38): the operator SIGKILLed at
seeded random moments in the middle of a preemption, and restarted each time.

Its own Ray cluster (one worker, 4 GPUs) whose stand-in trainers hold their GPUs in Ray
placement groups (``VERL_STANDIN_PLACEMENT_GROUP=1``, as verl's resource pools do and as
tests/integration/test_operator_preemption.py runs it): the preemptor sees where each task's
GPUs are, and a stopped job's GPUs come free only once Ray has removed its groups.

Each round: two low-priority tasks (2 GPUs each, checkpointing every ``SAVE_FREQ`` steps)
hold every GPU; once both have passed a checkpoint, an urgent task (priority 10, 2 GPUs)
arrives. The operator (``--preemption``) is then killed at each stage of the preemption, a
seeded random delay after the stage is first seen: the victim's ``status.preemptedBy``
written (its job stopping), the victim back in the queue (``Queued``/``Preempted``), the
urgent task submitted, the victim's attempt 2 submitted. It is restarted at once each time;
besides, it dies with ``--crash-after-submit``'s chance right after each Ray submission.

Checked after every round has ended: every task Succeeded; each urgent task ran once (one
Ray job, one attempt); each round preempted exactly one task, whose attempts list holds two
attempts, the first Preempted (by its urgent task), and whose attempt 2 resumed from a
checkpoint; the other low task ran once, unpreempted; Ray's jobs per task are exactly those
its attempts list names (no duplicate submission, no job of an attempt the status does not
know), and none is still running (no orphan).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from argus_testbed import RayCluster
from argus_testbed.harness import ppo_command
from benchlib import STANDIN, jobs_by_task, log, ray_jobs, task_body

if TYPE_CHECKING:
    from chaos import Chaos, Check

SAVE_FREQ = 5
LOW_STEPS = 150     # a low task's run: ~30 s at 0.2 s a step, long enough to be preempted mid-run
URGENT_STEPS = 10
STAGES = ("victim told (preemptedBy written, its job stopping)", "victim back in the queue (Queued/Preempted)",
          "urgent task submitted", "victim's attempt 2 submitted")


def _status(chaos: Chaos, ns: str, name: str) -> dict[str, Any]:
    obj = chaos.watch.objects.get((ns, name)) or {}
    return obj.get("status") or {}


def _victim(chaos: Chaos, ns: str, lows: tuple[str, str]) -> str | None:
    for name in lows:
        s = _status(chaos, ns, name)
        if s.get("preemptedBy") or any(a.get("outcome") == "Preempted" for a in s.get("attempts") or ()):
            return name
    return None


def _stage_seen(chaos: Chaos, ns: str, lows: tuple[str, str], urgent: str, stage: int) -> bool:
    victim = _victim(chaos, ns, lows)
    if victim is None:
        return False
    s = _status(chaos, ns, victim)
    if stage == 0:
        return True
    if stage == 1:
        return (s.get("attempt") or 1) >= 2
    if stage == 2:
        return _status(chaos, ns, urgent).get("phase") in ("Submitted", "Running", "Succeeded", "Failed")
    return (s.get("attempt") or 1) >= 2 and s.get("phase") in ("Submitted", "Running", "Succeeded", "Failed")


def _wait(chaos: Chaos, op: Any, until: Callable[[], bool], timeout: float, what: str, crashes: list[int]) -> None:
    """Wait for ``until``, starting the operator again whenever it died at its fault point."""
    deadline = time.monotonic() + timeout
    while not until():
        if op.proc is not None and op.proc.poll() is not None:
            crashes[0] += 1
            op.launch()
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}\n{op.log_tail()}")
        time.sleep(0.05)


def preempt_restart(chaos: Chaos, rep: Check) -> None:
    a = chaos.args
    ns = "chaos-preempt"
    chaos.tb.kube.namespace(ns, "alice")
    env = {"HOME": str(chaos.tb.home), "VERL_STANDIN_STEP_SECONDS": "0.2", "VERL_STANDIN_PLACEMENT_GROUP": "1"}
    t0 = time.monotonic()
    ray = RayCluster.start(chaos.tb.work / "ray-preempt", extra_path=[STANDIN / "bin"], extra_env=env, worker_gpus=4)
    log(f"  Ray for preemption {ray.dashboard_url} ready in {time.monotonic() - t0:.1f} s")
    op = None
    try:
        op = chaos.tb.start_operator(f"operator-preempt-{ns}", ray_address=ray.dashboard_url, namespaces=[ns], max_running=8,
                                     poll_interval=a.poll_interval, crash_after_submit=a.crash_after_submit,
                                     extra_args=["--preemption", "--progress-interval", "1"])
        _rounds(chaos, rep, op, ns, ray.dashboard_url)
    finally:
        if op is not None:
            op.stop()
        ray.stop()


def _rounds(chaos: Chaos, rep: Check, op: Any, ns: str, url: str) -> None:
    a = chaos.args
    crashes = [0]
    low = ppo_command(steps=LOW_STEPS, gpus=2, extra=f"trainer.save_freq={SAVE_FREQ}")
    rep.fact(f"{a.preempt_rounds} round(s) on a Ray cluster of its own (one worker, 4 GPUs; the stand-in holds its GPUs in placement "
             f"groups): two low tasks of 2 GPUs ({LOW_STEPS} steps, a checkpoint every {SAVE_FREQ}) hold every GPU, then an urgent "
             f"one (priority 10, 2 GPUs, {URGENT_STEPS} steps) arrives; --preemption, --poll-interval {a.poll_interval:g}, "
             f"--crash-after-submit {a.crash_after_submit:g}; each kill {a.preempt_kill_max:g} s at most (uniform, seed {a.seed}) "
             "after its stage is first seen")
    t0 = time.monotonic()
    hits: list[str] = []
    for r in range(a.preempt_rounds):
        _round(chaos, rep, op, ns, r, low, crashes, hits)
    rep.fact(f"{rep.times} SIGKILLs over {time.monotonic() - t0:.0f} s, and {crashes[0]} crash(es) right after a submission; "
             "what each kill hit: " + "; ".join(hits))
    time.sleep(2 * a.poll_interval)  # a few more ticks: nothing may change any more
    _check(chaos, rep, ns, url)


def _round(chaos: Chaos, rep: Check, op: Any, ns: str, r: int, low: str, crashes: list[int], hits: list[str]) -> None:
    """One preemption: the low tasks hold every GPU, the urgent one arrives, a kill at each stage."""
    a = chaos.args
    lows, urgent = (f"low-a-{r}", f"low-b-{r}"), f"urgent-{r}"
    chaos.create(ns, [task_body(n, low, gpus=2) for n in lows])
    _wait(chaos, op, lambda: all((_status(chaos, ns, n).get("progress") or {}).get("step", 0) > SAVE_FREQ + 1 for n in lows), 180,
          f"round {r}'s low tasks to pass a checkpoint", crashes)
    chaos.create(ns, [task_body(urgent, ppo_command(steps=URGENT_STEPS, gpus=2), gpus=2, priority=10)])
    for stage, what in enumerate(STAGES):
        _wait(chaos, op, lambda stage=stage: _stage_seen(chaos, ns, lows, urgent, stage), 240, f"round {r}: {what}", crashes)
        time.sleep(chaos.rng.uniform(0, a.preempt_kill_max))
        victim = _victim(chaos, ns, lows) or "?"
        s = _status(chaos, ns, victim)
        hits.append(f"r{r} {what}: victim {s.get('phase')}/{s.get('reason')} attempt {s.get('attempt')}, "
                    f"urgent {_status(chaos, ns, urgent).get('phase')}")
        op.kill()
        rep.times += 1
        op.launch()
    _wait(chaos, op, lambda: all(_status(chaos, ns, n).get("phase") in ("Succeeded", "Failed", "Stopped", "Rejected")
                                 for n in (*lows, urgent)), 300, f"round {r}'s tasks to end", crashes)


def _check(chaos: Chaos, rep: Check, ns: str, url: str) -> None:
    a = chaos.args
    tasks = {name: (obj.get("status") or {}) for name, obj in chaos.watch.in_namespace(ns).items()}
    jobs = jobs_by_task(ray_jobs(url), ns)
    wrong = {n: s.get("phase") for n, s in tasks.items() if s.get("phase") != "Succeeded"}
    rep.check("every task Succeeded", len(tasks) == 3 * a.preempt_rounds and not wrong,
              f"{len(tasks) - len(wrong)}/{3 * a.preempt_rounds}" + (f"; not: {wrong}" if wrong else ""))
    urgent = {n: (len(jobs.get(n, [])), len(s.get("attempts") or [])) for n, s in tasks.items() if n.startswith("urgent-")}
    rep.check("each urgent task ran exactly once (one Ray job, one attempt)", all(v == (1, 1) for v in urgent.values()),
              str({n: f"{j} job(s), {at} attempt(s)" for n, (j, at) in urgent.items() if (j, at) != (1, 1)}) or f"{len(urgent)} urgent tasks")
    per_round: dict[int, list[str]] = {}
    for n, s in tasks.items():
        if n.startswith("low-") and any(x.get("outcome") == "Preempted" for x in s.get("attempts") or ()):
            per_round.setdefault(int(n.rsplit("-", 1)[1]), []).append(n)
    rep.check("each round preempted exactly one task (a restart took no second victim)",
              all(len(per_round.get(r, [])) == 1 for r in range(a.preempt_rounds)), str(per_round))
    victims = [v[0] for v in per_round.values() if len(v) == 1]
    shapes = {v: [(x.get("attempt"), x.get("outcome"), x.get("preemptedBy")) for x in tasks[v].get("attempts") or ()] for v in victims}
    good = {v: sh for v, sh in shapes.items()
            if len(sh) == 2 and sh[0][1] == "Preempted" and sh[0][2] == f"{ns}/urgent-{v.rsplit('-', 1)[1]}" and sh[1][0] == 2}
    rep.check("each victim: attempt 1 Preempted by its urgent task, then attempt 2", len(good) == a.preempt_rounds and good == shapes,
              "; ".join(f"{v}: {sh}" for v, sh in shapes.items() if v not in good))
    resumed = {v: (tasks[v].get("progress") or {}).get("resumedFromStep") for v in victims}
    rep.check(f"each victim's attempt 2 resumed from a checkpoint (a multiple of {SAVE_FREQ})",
              len(resumed) == a.preempt_rounds and all(isinstance(s, int) and s > 0 and s % SAVE_FREQ == 0 for s in resumed.values()),
              ", ".join(f"{v} from step {s}" for v, s in sorted(resumed.items())))
    others = {n: len(s.get("attempts") or []) for n, s in tasks.items() if n.startswith("low-") and n not in victims}
    rep.check("the other low task of each round ran once, unpreempted", all(v == 1 for v in others.values()), str(others))
    mismatch = {}
    for n, s in tasks.items():
        listed = sorted(x.get("submissionId") for x in s.get("attempts") or ())
        in_ray = sorted(j.submission_id for j in jobs.get(n, []))
        if listed != in_ray:
            mismatch[n] = (listed, in_ray)
    rep.check("Ray's jobs per task are exactly those its attempts list names (no duplicate submission, no unknown job)",
              not mismatch and not set(jobs) - set(tasks), f"{sum(len(j) for j in jobs.values())} jobs for {len(tasks)} tasks" +
              (f"; differ: {mismatch}" if mismatch else "") + (f"; jobs of no task: {sorted(set(jobs) - set(tasks))}" if set(jobs) - set(tasks) else ""))
    active = {j.submission_id: j.status.value for js in jobs.values() for j in js if j.status.value in ("PENDING", "RUNNING")}
    rep.check("no Ray job still running (no orphan)", not active, str(active) if active else "")
