"""A first start over many never-handled tasks (issue 39, item 4): the time from the
operator's start until every task has a phase, on the real kube-apiserver + etcd, with the
CPU the operator, the API server and etcd spent, and the machine's load.

Each round creates ``--tasks`` ArgusTasks in namespaces of its own while no operator runs (a
tenth of them valid PPO tasks that queue, the rest created cancelled, as bench/scale.py
does; ``--valid`` changes the share), then starts an operator watching only those
namespaces with ``--max-running 1`` (one task is admitted: the figure is intake, validation
and the first status write, not Ray). The operator runs alone on its own CPU (``--operator-cpus``,
default the last one), and the API server, etcd, Ray and this benchmark on the others: in a
real cluster the API server does not share the operator's CPU, and on this 2-core machine the
two would otherwise take turns on one. With ``--before DIR`` (another checkout's
``operator/``, e.g. ``git worktree add /tmp/before <commit>``) the rounds alternate
after/before/before/after (ABBA), so both see the same machine.

    .venv/bin/python bench/first_start.py [--tasks 10000] [--before /tmp/before/operator] [--operator-cpus auto]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib import (
    TaskWatch,
    Testbed,
    cpu_of,
    cpu_seconds,
    cpu_split,
    loadavg,
    log,
    machine_info,
    parallel,
    pinned_to,
    ppo_command,
    task_body,
)

USERS = [f"u{i}" for i in range(10)]


def one_round(tb: Testbed, watch: TaskWatch, label: str, index: int, tasks: int, valid: float, pythonpath: str | None,
              operator_cpus: set[int] | None) -> dict[str, Any]:
    namespaces = [f"fs{index}-{u}" for u in USERS]
    for ns, user in zip(namespaces, USERS, strict=True):
        tb.kube.namespace(ns, user)
    n_valid = int(tasks * valid)
    command = ppo_command(steps=1_000_000)
    items = [(namespaces[i % len(namespaces)], f"t{i:05d}", i < n_valid) for i in range(tasks)]
    t0 = time.monotonic()
    parallel(lambda it: tb.kube.create(it[0], task_body(it[1], command, cancel=not it[2])), items, workers=8)
    created_s = time.monotonic() - t0

    def handled() -> int:
        # The watch's own count, not a scan: the waiter is woken on every event, and a scan of
        # 10,000 objects per event (under the watch's lock) slowed the watch it waits on.
        return watch.count_with_phase(namespaces)

    control_plane = [p.popen.pid for p in (tb.cp._apiserver, tb.cp._etcd) if p is not None and p.popen is not None]
    cp0, load0, bench0 = cpu_of(control_plane), loadavg(), cpu_seconds(os.getpid())
    t0 = time.monotonic()
    with pinned_to(operator_cpus):
        op = tb.start_operator(f"operator-{index}", namespaces=namespaces, max_running=1,
                               extra_env={"PYTHONPATH": pythonpath} if pythonpath else None)
    try:
        watch.wait(lambda: handled() >= tasks, 300 + 0.3 * tasks, f"{tasks} tasks to have a phase")
    except TimeoutError:
        log(f"{handled()} of {tasks} handled; the operator's log ends:\n" + "\n".join(op.log_path.read_text(errors="replace").splitlines()[-30:]))
        raise
    seconds = time.monotonic() - t0
    out = {"label": label, "tasks": tasks, "valid": n_valid, "seconds": round(seconds, 1),
           "operator_cpu_s": round(cpu_seconds(op.proc.pid), 1), "control_plane_cpu_s": round(cpu_of(control_plane) - cp0, 1),
           "bench_cpu_s": round(cpu_seconds(os.getpid()) - bench0, 1), "load": [load0, loadavg()], "created_in_s": round(created_s, 1)}
    op.stop()
    log(f"round {index} ({label}): {json.dumps(out)}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--valid", type=float, default=0.1, help="the share of valid tasks that queue (the rest are created cancelled)")
    parser.add_argument("--before", help="another checkout's operator/ directory: rounds alternate after/before/before/after")
    parser.add_argument("--rounds", type=int, default=0, help="rounds (default 4 with --before, else 1)")
    parser.add_argument("--operator-cpus", default="auto",
                        help="the operator's CPU(s), its alone (auto: the last); the control plane, Ray and this benchmark on the others; none: no pinning")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    rounds = args.rounds or (4 if args.before else 1)
    plan = [("after", None), ("before", args.before), ("before", args.before), ("after", None)] if args.before else [("after", None)]
    plan = [plan[i % len(plan)] for i in range(rounds)]
    split = cpu_split(args.operator_cpus)
    work = Path(tempfile.mkdtemp(prefix="argus-first-start-"))
    results: list[dict[str, Any]] = []
    tb = watch = None
    try:
        if split:
            os.sched_setaffinity(0, split[1])
        tb = Testbed(work, users=("alice", *USERS))
        watch = TaskWatch(tb.kube).start()
        # Steps of a few seconds, as scale.py: the admitted task prints a line per step, as verl
        # does, not a million lines as fast as it can (that would measure log parsing).
        tb.start_ray("ray", {"VERL_STANDIN_STEP_SECONDS": "5"})
        for i, (label, pythonpath) in enumerate(plan):
            results.append(one_round(tb, watch, label, i, args.tasks, args.valid, pythonpath, split[0] if split else None))
    finally:
        if watch:
            watch.stop()
        if tb:
            tb.close()
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nFirst start over {args.tasks} never-handled tasks ({int(args.tasks * args.valid)} valid), "
          f"{os.cpu_count()} CPUs, pinning {'the operator alone on ' + str(sorted(split[0])) if split else 'none'}")
    print("| Round | Operator | Seconds | Operator CPU (s) | kube-apiserver + etcd CPU (s) | Benchmark CPU (s) | Load (start -> end) |")
    print("|---|---|---:|---:|---:|---:|---|")
    for i, r in enumerate(results):
        print(f"| {i} | {r['label']} | {r['seconds']} | {r['operator_cpu_s']} | {r['control_plane_cpu_s']} | {r['bench_cpu_s']} "
              f"| {r['load'][0]} -> {r['load'][1]} |")
    for label in ("before", "after"):
        mine = [r["seconds"] for r in results if r["label"] == label]
        if mine:
            print(f"{label}: median {statistics.median(mine)} s over {len(mine)} round(s)")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine_info(), "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
