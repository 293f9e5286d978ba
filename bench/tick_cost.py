#!/usr/bin/env python3
"""What one controller tick costs at N tasks (issue 26, item 4), over the in-memory fakes of
the API server and Ray (tests/unit/fakes.py), so that only the controller's own work is
measured: no HTTP, no watch threads, no other process.

    .venv/bin/python bench/tick_cost.py                       # 1,000 and 10,000 tasks
    .venv/bin/python bench/tick_cost.py --side after --json docs/benchmarks-tick.json
    PYTHONPATH=/tmp/before/operator .venv/bin/python bench/tick_cost.py --side before --json docs/benchmarks-tick.json
                                       # another checkout's controller, the same fakes; bench/run.py
                                       # shows the two sides in docs/benchmarks.md

Each size: a tenth queued behind --running running tasks (max running = --running), the rest
ended; then --ticks ticks two seconds apart on the fake clock (nothing changes in between, as
between two poll intervals), each timed in CPU seconds of this process. The fake cluster keeps
one view per resourceVersion, as the operator's real cache does (adapters/taskcache.py).

A tick runs on every watch event and at least every poll interval: its cost times their rate
is the operator's CPU with nothing to do.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "unit"))

from argus.controller.loop import ControlLoop  # noqa: E402
from argus.controller.metrics import Metrics  # noqa: E402
from argus.controller.settings import OperatorConfig  # noqa: E402
from argus.core.config import PlatformConfig  # noqa: E402
from fakes import FakeClock, FakeCluster, FakeRay  # noqa: E402

CMD = ("python3 -m verl.trainer.main_ppo data.train_files=$HOME/datasets/a.parquet data.val_files=$HOME/datasets/b.parquet "
       "+ray_kwargs.ray_init.address=auto trainer.nnodes=1 trainer.n_gpus_per_node=1")


def spec(**extra: Any) -> dict[str, Any]:
    return {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "command": CMD, **extra}


def measure(objects: int, running: int, ticks: int, ending: int = 0) -> dict[str, Any]:
    clock = FakeClock()
    cluster = FakeCluster(clock)
    ray = FakeRay(clock, worker_gpus=running)
    config = OperatorConfig(platform=PlatformConfig(), ray_address="http://ray-head:8265", max_running=running, poll_interval=2.0)
    control_loop = ControlLoop(config, ray, cluster, cluster, clock=clock, metrics=Metrics(clock))
    cluster.onboard("team", "alice")
    loop = asyncio.new_event_loop()

    def tick(after: float) -> None:
        clock.advance(after)

        async def go() -> None:
            await control_loop.tick()
            await control_loop.idle()
        loop.run_until_complete(go())

    def settle() -> None:
        """Tick until every task has a phase (new tasks are validated a batch per tick)."""
        for _ in range(1000):
            tick(0.05)
            if all((o.get("status") or {}).get("phase") for o in cluster.objects.values()):
                return

    queued = objects // 10
    for i in range(objects - queued - running):
        cluster.create(f"done-{i:05d}", spec(cancel=True))
        clock.advance(-0.999)  # creation times a millisecond apart, not a second (fakes.create)
    settle()
    for i in range(queued + running):
        cluster.create(f"task-{i:05d}", spec())
        clock.advance(-0.999)
    settle()
    for key in list(ray.jobs):
        ray.run(key)
    for _ in range(3):
        tick(1.0)
    phases: dict[str, int] = {}
    for obj in cluster.objects.values():
        phase = (obj.get("status") or {}).get("phase") or "New"
        phases[phase] = phases.get(phase, 0) + 1
    times, decide = [], []
    snapshot = control_loop.scheduler.snapshot
    decide_once = snapshot.decide
    spent = [0.0]

    async def timed_decide(*args: Any, **kwargs: Any) -> Any:
        """The queue pass (its reads of the fakes, its decisions) in CPU seconds: the fakes
        answer at once, so little else runs while it awaits."""
        t0 = time.process_time()
        try:
            return await decide_once(*args, **kwargs)
        finally:
            spent[0] += time.process_time() - t0
    snapshot.decide = timed_decide  # type: ignore[method-assign]
    followed = sorted(k for k in cluster.objects if k[1].startswith("task-") and (cluster.objects[k].get("status") or {}).get("phase") == "Running")
    for _ in range(ticks):
        clock.advance(2.0)
        for key in followed[:ending]:
            control_loop.jobs.hurry(key)  # its log said its job ended just now; Ray still says it runs
        spent[0] = 0.0
        t0 = time.process_time()
        tick(0.0)
        times.append(time.process_time() - t0)
        decide.append(spent[0])
    control_loop.logs.close()
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()
    return {"objects": objects, "ending": ending, "phases": phases, "tick_ms_median": round(statistics.median(times) * 1e3, 2),
            "tick_ms_max": round(max(times) * 1e3, 2), "queue_pass_ms_median": round(statistics.median(decide) * 1e3, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000", help="task counts (default 1000,10000)")
    parser.add_argument("--running", type=int, default=40, help="running tasks at each size (default 40)")
    parser.add_argument("--ticks", type=int, default=20, help="ticks timed at each size (default 20)")
    parser.add_argument("--json", type=Path, help="also write the figures into this file, under --side")
    parser.add_argument("--side", default="after", help="the key the figures go under in --json (default after)")
    parser.add_argument("--ending", type=int, default=0,
                        help="running jobs whose log says they ended before each timed tick, Ray not yet (default 0): "
                             "the queue is then also decided as if they had ended (QueueSnapshot.next_up)")
    args = parser.parse_args()
    out = {"controller": str(Path(sys.modules["argus"].__file__ or "").parent), "load_at_start": [round(x, 2) for x in os.getloadavg()],
           "sizes": [measure(int(n), args.running, args.ticks, args.ending) for n in args.sizes.split(",")]}
    out["load_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out, indent=1))
    if args.json:
        kept = json.loads(args.json.read_text()) if args.json.exists() else {}
        kept[args.side] = out
        kept["load"] = max((v["load_at_start"][0] for k, v in kept.items() if isinstance(v, dict) and "load_at_start" in v), default=None)
        args.json.write_text(json.dumps(kept, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
