"""A scheduling simulator: the operator's pure queue decision (``argus.core.queue.decide``)
driven through a seeded trace, no processes. It compares ``fifo`` and ``fair`` on:

- 10 users, 64 GPUs on 8 worker nodes of 8;
- tasks of 1, 2, 4, 8 and 16 GPUs (16 = two nodes of 8), heavy-tailed durations
  (log-normal), arriving over time from 9 users, while one user bursts 100 tasks at once;

and reports GPU utilisation over the busy period, Jain's fairness index of GPU-seconds per
user, the waits per task size (p50 / p95 / max) and the longest wait of a 16-GPU task. It
also times one admission pass over 1,000 queued tasks and 100 nodes, and prints the
preemption comparison of ``preemption_sim`` (no preemption, by priority, by priority and
fair share).

    .venv/bin/python bench/schedule_sim.py [--seed 7] [--markdown]
"""

from __future__ import annotations

import argparse
import datetime as dt
import heapq
import random
import statistics
import time
from dataclasses import dataclass, field

from argus.core.queue import Capacity, QueuedTask, QueueSettings, UsageRecord, WorkerNode, decayed_usage, decide
from preemption_sim import table as preemption_table

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
SIZES = {1: (1, 1), 2: (1, 2), 4: (1, 4), 8: (1, 8), 16: (2, 8)}  # GPUs -> (nnodes, per node)


@dataclass
class SimTask:
    name: str
    user: str
    gpus: int
    arrival: float
    duration: float
    start: float | None = None
    nodes: list[int] = field(default_factory=list)


def trace(seed: int, users: int = 10, per_user: int = 30, burst: int = 100, spread: float = 3600) -> list[SimTask]:
    """9 users each submit ``per_user`` tasks over the first ``spread`` seconds; user0 submits
    ``burst`` tasks at once a minute in. Every user has work waiting for the first hours
    (the cluster is contended), which is when a policy's fairness shows."""
    rng = random.Random(seed)
    tasks: list[SimTask] = []
    for u in range(1, users):
        t = 0.0
        for i in range(per_user):
            t += rng.expovariate(per_user / spread)
            size = rng.choices(list(SIZES), weights=[30, 25, 20, 15, 10])[0]
            tasks.append(SimTask(f"u{u}-{i}", f"user{u}", size, t, min(6 * 3600, rng.lognormvariate(6.8, 1.0))))
    for i in range(burst):  # user0: 100 tasks at once, mostly small and long
        size = rng.choices(list(SIZES), weights=[40, 30, 20, 10, 0])[0]
        tasks.append(SimTask(f"u0-{i}", "user0", size, 60.0, min(6 * 3600, rng.lognormvariate(7.5, 0.8))))
    return sorted(tasks, key=lambda x: x.arrival)


def simulate(tasks: list[SimTask], policy: str, nodes: int = 8, per_node: int = 8, max_running: int = 1000,
             half_life: float = 3600, max_wait: float = 24 * 3600) -> dict[str, object]:
    tasks = [SimTask(t.name, t.user, t.gpus, t.arrival, t.duration) for t in tasks]
    settings = QueueSettings(max_running=max_running, policy=policy, half_life=half_life, max_wait=max_wait)  # type: ignore[arg-type]
    used = [0.0] * nodes
    queue: list[SimTask] = []
    running: list[tuple[float, int, SimTask]] = []
    arrivals = list(tasks)
    usage: list[UsageRecord] = []
    now = 0.0
    busy_gpu_seconds = 0.0
    first_arrival, last_end = arrivals[0].arrival, 0.0
    seq = 0
    backlog_seconds = backlog_gpu_seconds = 0.0
    all_users = sorted({t.user for t in tasks})
    contended: list[tuple[float, float]] = []  # intervals in which every user had a task waiting
    was_contended_since: float | None = None
    while arrivals or queue or running:
        next_arrival = arrivals[0].arrival if arrivals else float("inf")
        next_end = running[0][0] if running else float("inf")
        t_next = min(next_arrival, next_end)
        busy_gpu_seconds += sum(used) * (t_next - now) if now >= first_arrival else 0.0
        if queue and t_next > now:  # work waits: every idle GPU now is a GPU the policy left idle
            backlog_seconds += t_next - now
            backlog_gpu_seconds += sum(used) * (t_next - now)
        now = t_next
        while arrivals and arrivals[0].arrival <= now:
            queue.append(arrivals.pop(0))
        while running and running[0][0] <= now:
            _, _, done = heapq.heappop(running)
            for i in done.nodes:
                used[i] -= SIZES[done.gpus][1]
            last_end = now
        waiting_users = {t.user for t in queue}
        if was_contended_since is None and waiting_users >= set(all_users):
            was_contended_since = now
        elif was_contended_since is not None and not waiting_users >= set(all_users):
            contended.append((was_contended_since, now))
            was_contended_since = None
        wall = T0 + dt.timedelta(seconds=now)
        fair_usage = decayed_usage(usage, wall, half_life) if policy == "fair" else {}
        queued = [QueuedTask("sim", t.name, 0, (T0 + dt.timedelta(seconds=t.arrival)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                             SIZES[t.gpus][1], SIZES[t.gpus][0], t.user) for t in queue]
        capacity = Capacity(tuple(WorkerNode(f"n{i}", per_node, used[i]) for i in range(nodes)))
        decision = decide(queued, running=len(running), capacity=capacity, settings=settings, usage=fair_usage, now=wall)
        by_name = {t.name: t for t in queue}
        for admitted in decision.admit:
            task = by_name[admitted.name]
            nnodes, size = SIZES[task.gpus]
            free = [per_node - u for u in used]
            chosen = sorted((f, i) for i, f in enumerate(free) if f >= size)[:nnodes]  # best fit, as decide did
            task.nodes = [i for _, i in chosen]
            for i in task.nodes:
                used[i] += size
            task.start = now
            queue.remove(task)
            seq += 1
            heapq.heappush(running, (now + task.duration, seq, task))
            usage.append(UsageRecord(task.user, task.gpus, wall, wall + dt.timedelta(seconds=task.duration)))
    span = last_end - first_arrival
    utilisation = busy_gpu_seconds / (nodes * per_node * span)
    per_user: dict[str, float] = {}
    for t in tasks:
        per_user[t.user] = per_user.get(t.user, 0.0) + t.gpus * t.duration
    # Jain over the GPU-seconds each user got while every user had work waiting (the
    # contended time): over the whole run every user gets all they asked for, whatever the
    # policy; what a policy decides is who gets the GPUs while all want more.
    got: dict[str, float] = {u: 0.0 for u in per_user}
    for a, b in contended:
        for t in tasks:
            assert t.start is not None
            got[t.user] += t.gpus * max(0.0, min(t.start + t.duration, b) - max(t.start, a))
    xs = list(got.values())
    jain = sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if any(xs) else float("nan")
    waits: dict[int, list[float]] = {}
    for t in tasks:
        waits.setdefault(t.gpus, []).append(t.start - t.arrival)  # type: ignore[operator]
    return {"policy": policy, "utilisation": utilisation, "utilisation_backlogged": backlog_gpu_seconds / (nodes * per_node * backlog_seconds), "jain": jain, "contended_h": sum(b - a for a, b in contended) / 3600, "span_h": span / 3600,
            "waits": {g: (statistics.median(w), sorted(w)[int(0.95 * (len(w) - 1))], max(w)) for g, w in sorted(waits.items())}}


def admission_pass(queued_n: int = 1000, nodes_n: int = 100, runs: int = 20) -> float:
    rng = random.Random(1)
    queued = [QueuedTask("ns", f"t{i}", rng.randint(0, 2), f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z", *reversed(SIZES[rng.choice(list(SIZES))]),
                         user=f"user{i % 10}") for i in range(queued_n)]
    capacity = Capacity(tuple(WorkerNode(f"n{i}", 8, rng.choice([0, 2, 4, 8])) for i in range(nodes_n)))
    settings = QueueSettings(max_running=1000, policy="fair")
    usage = {f"user{i}": rng.uniform(0, 1e6) for i in range(10)}
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        decide(queued, running=50, capacity=capacity, settings=settings, usage=usage, quotas={"user3": 16}, in_use={"user3": 8}, now=T0)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--markdown", action="store_true", help="print the tables for docs/queue.md")
    args = parser.parse_args()
    tasks = trace(args.seed)
    results = [simulate(tasks, "fifo"), simulate(tasks, "fair")]
    print(f"trace: seed {args.seed}, {len(tasks)} tasks, 10 users (user0 bursts 100 at once), 64 GPUs on 8 nodes of 8\n")
    print("| Policy | GPU utilisation while tasks wait | GPU utilisation, whole busy period | Busy period (makespan) "
          "| Jain index of GPU-seconds per user, while every user had work waiting | That time |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['policy']} | {100 * r['utilisation_backlogged']:.1f} % | {100 * r['utilisation']:.1f} % | {r['span_h']:.1f} h "
              f"| {r['jain']:.3f} | {r['contended_h']:.1f} h |")
    print()
    print("| Policy | Task size (GPUs) | Wait p50 | Wait p95 | Wait max |")
    print("|---|---|---|---|---|")
    for r in results:
        for g, (p50, p95, mx) in r["waits"].items():  # type: ignore[union-attr]
            print(f"| {r['policy']} | {g} | {p50 / 60:.0f} min | {p95 / 60:.0f} min | {mx / 60:.0f} min |")
    print()
    print(f"Admission pass, 1,000 queued tasks over 100 nodes (fair, quotas): {admission_pass() * 1000:.1f} ms (median of 20)")
    print()
    print(f"Preemption (bench/preemption_sim.py), seed {args.seed}: long runs and urgent evaluations, fair order\n")
    print("\n".join(preemption_table(args.seed)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
