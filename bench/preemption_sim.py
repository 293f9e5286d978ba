"""Preemption in the scheduling simulator (issue 38): the operator's own queue decision
(``argus.core.queue.decide``) and victim choice (``argus.core.preemption.choose_victims``)
driven through a seeded trace of long training runs and urgent evaluations, no processes.

The trace: 64 GPUs on 8 worker nodes of 8; nine users start long RL runs (priority 0; 1 to
16 GPUs; hours, log-normal) over the first two hours, user0 bursts 40 of them at once; 40
urgent evaluations (priority 10; 1 to 8 GPUs; 10 to 40 minutes) arrive over ten hours. A run
makes a step every STEP_SECONDS after STARTUP_SECONDS of loading, and checkpoints every
SAVE_FREQ steps (verl's ``trainer.save_freq``); a preempted run goes back to the queue and
its next attempt resumes from its last checkpoint, after loading again.

Compared, under the fair policy: no preemption; priority preemption (an evaluation takes
GPUs from runs) with victims chosen blind to lost work (Kueue's order: lowest priority, then
newest) and by lost work; and priority plus fair-share preemption (a user below
the mean takes from a user at twice the mean or more, after a run has had 30 minutes).
Reported: the evaluations' waits, the GPU-hours preemption loses (steps redone and loading
again), GPU utilisation and Jain's index of GPU-seconds per user while every user had work
waiting, as ``schedule_sim.simulate`` measures them.

    .venv/bin/python bench/schedule_sim.py --markdown     (prints this table too)
"""

from __future__ import annotations

import datetime as dt
import random
import statistics
from dataclasses import dataclass, field

from argus.core.preemption import PreemptionPolicy, RunningTask, Waiting, choose_victims
from argus.core.queue import Capacity, QueuedTask, QueueSettings, UsageRecord, WorkerNode, decayed_usage, decide

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
SIZES = {1: (1, 1), 2: (1, 2), 4: (1, 4), 8: (1, 8), 16: (2, 8)}  # GPUs -> (nnodes, per node)
STEP_SECONDS = 60.0
SAVE_FREQ = 10           # a checkpoint every 10 steps: every 10 minutes of training
STARTUP_SECONDS = 120.0  # loading the model and data again before the first step of an attempt
NODES, PER_NODE = 8, 8
# name -> (policy, whether the choice sees each run's lost work)
POLICIES = {
    "none": (PreemptionPolicy(), True),
    "priority, blind to lost work (Kueue's order: lowest priority, newest)": (PreemptionPolicy(enabled=True), False),
    "priority": (PreemptionPolicy(enabled=True), True),
    "priority + fair share": (PreemptionPolicy(enabled=True, fair_share_ratio=2.0, fair_share_min_runtime=1800.0), True),
}


@dataclass
class Run:
    name: str
    user: str
    gpus: int
    priority: int
    arrival: float
    steps: int                      # the steps the run needs in all
    done: int = 0                   # steps checkpointed (what a new attempt resumes from)
    started: float | None = None    # this attempt's start
    first_start: float | None = None
    nodes: list[int] = field(default_factory=list)
    preempted: int = 0
    attempts: list[tuple[float, float]] = field(default_factory=list)  # (start, end) of each attempt

    def step_at(self, now: float) -> int:
        """The last step finished by ``now`` in this attempt (counting from the checkpoint)."""
        assert self.started is not None
        return min(self.steps, self.done + max(0, int((now - self.started - STARTUP_SECONDS) // STEP_SECONDS)))

    def end_time(self) -> float:
        assert self.started is not None
        return self.started + STARTUP_SECONDS + (self.steps - self.done) * STEP_SECONDS


def trace(seed: int) -> list[Run]:
    rng = random.Random(seed)
    runs: list[Run] = []
    for u in range(1, 10):
        t = 0.0
        for i in range(6):
            t += rng.expovariate(6 / 7200)
            size = rng.choices(list(SIZES), weights=[25, 25, 20, 20, 10])[0]
            runs.append(Run(f"u{u}-{i}", f"user{u}", size, 0, t, int(min(12 * 3600, rng.lognormvariate(8.6, 0.7)) // STEP_SECONDS) + 1))
    for i in range(40):
        size = rng.choices(list(SIZES), weights=[30, 30, 25, 15, 0])[0]
        runs.append(Run(f"u0-{i}", "user0", size, 0, 60.0, int(min(12 * 3600, rng.lognormvariate(8.9, 0.6)) // STEP_SECONDS) + 1))
    for i in range(40):
        size = rng.choices([1, 2, 4, 8], weights=[30, 30, 25, 15])[0]
        user = f"user{rng.randrange(1, 10)}"
        runs.append(Run(f"eval-{i}", user, size, 10, rng.uniform(1800, 36000), int(rng.uniform(600, 2400) // STEP_SECONDS)))
    return sorted(runs, key=lambda r: r.arrival)


def _stamp(seconds: float) -> str:
    return (T0 + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Simulation:
    """One run of the trace under one preemption policy (fair queue order throughout)."""

    def __init__(self, runs: list[Run], policy: PreemptionPolicy, *, sees_lost_work: bool = True):
        self.runs = [Run(r.name, r.user, r.gpus, r.priority, r.arrival, r.steps) for r in runs]
        self.policy = policy
        self.sees_lost_work = sees_lost_work  # False: every run looks as if it had just checkpointed
        self.settings = QueueSettings(max_running=1000, policy="fair", half_life=3600)
        self.used = [0.0] * NODES
        self.queue: list[Run] = []
        self.running: dict[str, Run] = {}
        self.usage: list[UsageRecord] = []
        self.lost_gpu_seconds = 0.0
        self.preemptions = 0
        self.busy = 0.0
        self.contended: list[tuple[float, float]] = []

    def run(self, window: list[tuple[float, float]] | None = None) -> dict[str, object]:
        """Simulate; Jain's index over ``window`` (default: while every user had work waiting
        in this run; the table passes the run without preemption's, so all are compared over
        the same hours)."""
        arrivals = list(self.runs)
        now, since = 0.0, None
        users = {r.user for r in self.runs}
        while arrivals or self.queue or self.running:
            ends = [(r.end_time(), r.name) for r in self.running.values()]
            next_arrival = arrivals[0].arrival if arrivals else float("inf")
            t_next = min(next_arrival, min((e for e, _ in ends), default=float("inf")))
            self.busy += sum(self.used) * (t_next - now)
            now = t_next
            while arrivals and arrivals[0].arrival <= now:
                self.queue.append(arrivals.pop(0))
            for end, name in sorted(ends):
                if end <= now:
                    self._stop(self.running[name], now, finished=True)
            waiting_users = {r.user for r in self.queue}
            if since is None and waiting_users >= users:
                since = now
            elif since is not None and not waiting_users >= users:
                self.contended.append((since, now))
                since = None
            self._admit(now)
        return self._report(now, self.contended if window is None else window)

    def _admit(self, now: float) -> None:
        wall = T0 + dt.timedelta(seconds=now)
        usage = decayed_usage(self.usage + [UsageRecord(r.user, r.gpus, T0 + dt.timedelta(seconds=r.started or now), None)
                                            for r in self.running.values()], wall, 3600)
        for _ in range(len(self.queue) + 1):
            queued = [QueuedTask("sim", r.name, r.priority, _stamp(r.arrival), SIZES[r.gpus][1], SIZES[r.gpus][0], r.user) for r in self.queue]
            capacity = Capacity(tuple(WorkerNode(f"n{i}", PER_NODE, self.used[i]) for i in range(NODES)))
            decision = decide(queued, running=len(self.running), capacity=capacity, settings=self.settings, usage=usage, now=wall)
            by_name = {r.name: r for r in self.queue}
            for admitted in decision.admit:
                self._start(by_name[admitted.name], now)
            if not self.policy.enabled or not self._preempt_for_head(decision.waiting, by_name, usage, now):
                return

    def _preempt_for_head(self, waiting: dict, by_name: dict[str, Run], usage: dict[str, float], now: float) -> bool:
        """Preempt for the first waiting task (in queue order) that some set of victims makes
        fit; True when it did (the queue is decided again)."""
        free = {f"n{i}": PER_NODE - self.used[i] for i in range(NODES)}
        candidates = [self._as_running(r, now) for r in self.running.values()]
        order = sorted((by_name[name] for (_, name) in waiting), key=lambda r: (-r.priority, r.arrival))
        for task in order:
            nnodes, per_node = SIZES[task.gpus]
            chosen = choose_victims(Waiting(("sim", task.name), task.priority, task.user, nnodes, per_node), free, candidates,
                                    self.policy, usage=usage, now_seconds=(T0 + dt.timedelta(seconds=now)).timestamp())
            if chosen is not None:
                for victim in chosen.victims:
                    self._stop(self.running[victim.key[1]], now, finished=False)
                return True
        return False

    def _as_running(self, r: Run, now: float) -> RunningTask:
        per_node = SIZES[r.gpus][1]
        return RunningTask(("sim", r.name), r.priority, r.user, _stamp(r.started or now), tuple((f"n{i}", float(per_node)) for i in r.nodes),
                           step=r.step_at(now) if self.sees_lost_work else None, save_freq=SAVE_FREQ, resumed_from=r.done)

    def _start(self, r: Run, now: float) -> None:
        nnodes, size = SIZES[r.gpus]
        chosen = sorted((PER_NODE - u, i) for i, u in enumerate(self.used) if PER_NODE - u >= size)[:nnodes]
        r.nodes = [i for _, i in chosen]
        for i in r.nodes:
            self.used[i] += size
        r.started = now
        r.first_start = now if r.first_start is None else r.first_start
        self.queue.remove(r)
        self.running[r.name] = r

    def _stop(self, r: Run, now: float, *, finished: bool) -> None:
        assert r.started is not None
        for i in r.nodes:
            self.used[i] -= SIZES[r.gpus][1]
        del self.running[r.name]
        self.usage.append(UsageRecord(r.user, r.gpus, T0 + dt.timedelta(seconds=r.started), T0 + dt.timedelta(seconds=now)))
        r.attempts.append((r.started, now))
        if not finished:
            step = r.step_at(now)
            checkpoint = max(r.done, step - step % SAVE_FREQ)
            # Lost: the steps since the checkpoint, and the loading the next attempt does again.
            self.lost_gpu_seconds += r.gpus * ((step - checkpoint) * STEP_SECONDS + STARTUP_SECONDS)
            r.done, r.preempted = checkpoint, r.preempted + 1
            self.preemptions += 1
            self.queue.append(r)
        r.started, r.nodes = None, []

    def _report(self, end: float, window: list[tuple[float, float]]) -> dict[str, object]:
        first = min(r.arrival for r in self.runs)
        got = {u: 0.0 for u in {r.user for r in self.runs}}
        for a, b in window:
            for r in self.runs:
                for s, e in r.attempts:
                    got[r.user] += r.gpus * max(0.0, min(e, b) - max(s, a))
        xs = list(got.values())
        evals = [r.first_start - r.arrival for r in self.runs if r.priority > 0 and r.first_start is not None]
        return {
            "preemptions": self.preemptions, "lost_gpu_h": self.lost_gpu_seconds / 3600,
            "utilisation": self.busy / (NODES * PER_NODE * (end - first)), "span_h": (end - first) / 3600,
            "jain": sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if any(xs) else float("nan"),
            "contended_h": sum(b - a for a, b in window) / 3600, "contended": self.contended,
            "eval_wait": (statistics.median(evals), sorted(evals)[int(0.95 * (len(evals) - 1))], max(evals)),
        }


def table(seed: int) -> list[str]:
    """The before/after table for docs/queue.md."""
    runs = trace(seed)
    rows = ["| Preemption | Evaluations' wait p50 / p95 / max | Preemptions | GPU-hours lost | GPU utilisation | Busy period "
            "| Jain index while every user had work waiting (without preemption) | That time |", "|---|---|---|---|---|---|---|---|"]
    window = None
    for name, (policy, sees) in POLICIES.items():
        r = Simulation(runs, policy, sees_lost_work=sees).run(window)
        window = window if window is not None else r["contended"]  # type: ignore[assignment]
        p50, p95, mx = r["eval_wait"]  # type: ignore[misc]
        rows.append(f"| {name} | {p50 / 60:.0f} / {p95 / 60:.0f} / {mx / 60:.0f} min | {r['preemptions']} | {r['lost_gpu_h']:.1f} "
                    f"| {100 * r['utilisation']:.1f} % | {r['span_h']:.1f} h | {r['jain']:.3f} | {r['contended_h']:.1f} h |")
    return rows


if __name__ == "__main__":
    print("\n".join(table(7)))
