#!/usr/bin/env python3
"""What several Ray clusters cost the operator, over the in-memory fakes of the API
server and Ray (tests/unit/fakes.py), so that only the controller's own work is measured: no
HTTP, no watch threads, no other process.

    .venv/bin/python bench/clusters_cost.py                   # implicit cluster, 1 and 4 ArgusClusters
    .venv/bin/python bench/clusters_cost.py --json docs/benchmarks-clusters.json

Three configurations with the same tasks and the same GPUs in all:
- implicit: no ArgusCluster, the ControlLoop's own Ray (--ray-address) with --running GPUs;
- 1 cluster: one ArgusCluster with --running GPUs;
- 4 clusters: four ArgusClusters with --running/4 GPUs and maxRunning --running/4 each.
Each ArgusCluster's Ray is a FakeRay made by the ``connect`` factory the ControlLoop is given;
every FakeRay's calls are counted (the implicit one's too, in every configuration).

Each: --objects tasks, a tenth queued behind --running running ones (max running = --running,
every task one GPU), the rest ended (as bench/tick_cost.py). Then the fake clock moves as the
operator's loop would: the next tick after ``ControlLoop.next_wait()``, or 0.05 s after a tick
that wrote to the API server (the watch would wake the loop at once). --warmup seconds first
(the jobs grow older than 32 s: read every poll interval), then --minutes measured. Every
--churn seconds the oldest running job ends (SUCCEEDED) in its fake Ray; the operator sees it,
admits the next queued task, places and submits it; a submitted job runs after one second.

Measured over the window: Ray calls per simulated minute, by operation and by cluster; the
CPU seconds (``time.process_time``) of each tick and of each queue pass (``Scheduler.run``
wrapped: the decision with its cached reads, telling the waiting tasks, the submissions;
``Scheduler.last_seconds`` is on the fake clock and stays 0 here) and of each decision alone
(``QueueSnapshot.decide``). The fake Ray's log streams poll every millisecond while the
event loop runs (fakes.FakeRay.tail_logs), a little CPU in every tick that the real stream
does not cost: the same --running streams in every configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "unit"))

from argus.controller.loop import ControlLoop  # noqa: E402
from argus.controller.metrics import Metrics  # noqa: E402
from argus.controller.ports import RayJobs  # noqa: E402
from argus.controller.settings import OperatorConfig  # noqa: E402
from argus.core.clusters import ClusterConfig  # noqa: E402
from argus.core.config import PlatformConfig  # noqa: E402
from argus.core.progress import ProgressSource  # noqa: E402
from fakes import FakeClock, FakeCluster, FakeRay  # noqa: E402

CMD = ("python3 -m verl.trainer.main_ppo data.train_files=$HOME/datasets/a.parquet data.val_files=$HOME/datasets/b.parquet "
       "+ray_kwargs.ray_init.address=auto trainer.nnodes=1 trainer.n_gpus_per_node=1")
IMPLICIT = "(implicit)"
WOKEN_AFTER = 0.05  # a tick that wrote: the watch shows the write and wakes the loop (the loop's shortest wait)
STARTS_AFTER = 1.0  # a submitted job runs this long after Ray accepted it


def spec(**extra: Any) -> dict[str, Any]:
    return {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "command": CMD, **extra}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def ms(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values) * 1e3, 3), "p99": round(pct(values, 0.99) * 1e3, 3),
            "max": round(max(values) * 1e3, 3)}


class Simulation:
    """One configuration (0 clusters: the implicit cluster only), its fakes and its event loop,
    stepped a slice of fake time at a time so that main() can interleave the configurations."""

    def __init__(self, clusters: int, objects: int, running: int, churn: float, progress: str, refs: bool = False):
        self.clusters, self.objects, self.running, self.churn, self.refs = clusters, objects, running, churn, refs
        self.clock = clock = FakeClock()
        self.cluster = cluster = FakeCluster(clock)
        self.rays: dict[str, FakeRay] = {IMPLICIT: FakeRay(clock, worker_gpus=0 if clusters else running)}
        self.share = share = running // clusters if clusters else running
        for i in range(clusters):
            if refs:  # a KubeRay RayCluster and its head Service, as KubeRay keeps them
                cluster.rayclusters[("ray", f"ray-{i}")] = {"metadata": {"name": f"ray-{i}"}, "status": {"head": {"serviceName": f"ray-{i}-head-svc"}}}
                cluster.services[("ray", f"ray-{i}-head-svc")] = {"spec": {"ports": [{"name": "dashboard", "port": 8265}]}}
                cluster.add_cluster(f"ray-{i}", rayClusterRef={"name": f"ray-{i}", "namespace": "ray"}, maxRunning=share)
            else:
                cluster.add_cluster(f"ray-{i}", address=f"http://ray-{i}-head:8265", maxRunning=share)

        def connect(config: ClusterConfig, token: Callable[[], str | None]) -> RayJobs:
            assert config.name not in self.rays, f"a second client for {config.name}"
            self.rays[config.name] = FakeRay(clock, worker_gpus=share)
            return self.rays[config.name]

        config = OperatorConfig(platform=PlatformConfig(), ray_address="http://ray-head:8265", max_running=running, poll_interval=2.0,
                                progress_source=ProgressSource(progress))
        self.control_loop = control_loop = ControlLoop(config, self.rays[IMPLICIT], cluster, cluster, clock=clock, metrics=Metrics(clock),
                                                  clusters=cluster if clusters else None, connect=connect if clusters else None)
        cluster.onboard("team", "alice")
        self.loop = asyncio.new_event_loop()
        self.timing = False
        self.ticks: list[float] = []
        self.passes = self._timed(control_loop.scheduler, "run")
        self.decisions = self._timed(control_loop.scheduler.snapshot, "decide")
        self.reports = self._timed(control_loop.cluster_reports, "write") if control_loop.cluster_reports is not None else []
        self.pending_since: dict[tuple[str, str], float] = {}
        self.ended = 0
        self.next_tick = 0.0  # monotonic, of the fake clock
        self.next_end = float("inf")
        self.marks: dict[str, int] = {}
        self.at_start: dict[str, int] = {}

    def _timed(self, obj: Any, method: str) -> list[float]:
        """Wrap ``obj.method`` (a coroutine function): each call's CPU seconds while timing."""
        times: list[float] = []
        inner = getattr(obj, method)

        async def timed(*a: Any) -> Any:
            t0 = time.process_time()
            try:
                return await inner(*a)
            finally:
                if self.timing:
                    times.append(time.process_time() - t0)

        setattr(obj, method, timed)
        return times

    def tick(self, after: float) -> None:
        self.clock.advance(after)

        async def go() -> None:
            await self.control_loop.tick()
            await self.control_loop.idle()
        self.loop.run_until_complete(go())

    def settle(self) -> None:
        """Tick until every task has a phase (new tasks are validated a batch per tick)."""
        for _ in range(1000):
            self.tick(0.05)
            if all((o.get("status") or {}).get("phase") for o in self.cluster.objects.values()):
                return

    def setup(self) -> None:
        """The tasks (as bench/tick_cost.py), and the admitted ones' jobs running."""
        cluster, clock = self.cluster, self.clock
        queued = self.objects // 10
        for i in range(self.objects - queued - self.running):
            cluster.create(f"done-{i:05d}", spec(cancel=True))
            clock.advance(-0.999)  # creation times a millisecond apart, not a second (fakes.create)
        self.settle()
        for i in range(queued + self.running):
            cluster.create(f"task-{i:05d}", spec())
            clock.advance(-0.999)
        self.settle()
        for ray in self.rays.values():
            for sid in list(ray.jobs):
                ray.run(sid)
        self.next_end = clock.monotonic() + self.churn if self.churn > 0 else float("inf")
        self.next_tick = clock.monotonic() + 0.05

    def ray_acts(self) -> None:
        """What the fake Rays do on their own: the oldest running job ends every --churn
        seconds; a submitted job runs STARTS_AFTER seconds after Ray accepted it."""
        now = self.clock.monotonic()
        if now >= self.next_end:
            self.next_end += self.churn
            live = [(job.start_time_ms or 0, sid, ray) for ray in self.rays.values() for sid, job in ray.jobs.items() if job.status == "RUNNING"]
            if live:
                _, sid, ray = min(live, key=lambda t: t[:2])
                ray.finish(sid)
                if self.timing:
                    self.ended += 1
        for name, ray in self.rays.items():
            for sid in ray.active():
                if ray.jobs[sid].status == "PENDING":
                    since = self.pending_since.setdefault((name, sid), now)
                    if now - since >= STARTS_AFTER - 1e-9:
                        ray.run(sid)

    def writes(self) -> int:
        w = self.cluster.writes
        return len(w.status) + len(w.metadata) + len(w.cluster_status) + len(self.cluster.deletions)

    def run_for(self, seconds: float) -> None:
        """The operator's loop for ``seconds`` of fake time: the next tick after next_wait(),
        or WOKEN_AFTER after a tick that wrote (the watch wakes the loop)."""
        end = self.clock.monotonic() + seconds
        while self.next_tick <= end + 1e-9:
            self.clock.advance(self.next_tick - self.clock.monotonic())
            self.ray_acts()
            before = self.writes()
            t0 = time.process_time()
            self.tick(0.0)
            if self.timing:
                self.ticks.append(time.process_time() - t0)
            wait = self.control_loop.next_wait()
            self.next_tick = self.clock.monotonic() + (min(WOKEN_AFTER, wait) if self.writes() != before else wait)
        self.clock.advance(end - self.clock.monotonic())  # to the slice's end; the next tick stays where it was due

    def start_window(self) -> None:
        self.marks = {name: len(ray.calls) for name, ray in self.rays.items()}
        self.at_start = {"status": len(self.cluster.writes.status), "cluster_status": len(self.cluster.writes.cluster_status), "all": self.writes(),
                         "ref_reads": self.cluster.ref_reads}
        self.timing = True

    def result(self, minutes: float, warmup: float) -> dict[str, Any]:
        self.timing = False
        by_op: Counter[str] = Counter()
        by_cluster: dict[str, dict[str, float]] = {}
        for name, ray in self.rays.items():
            ops = Counter(op for op, _ in ray.calls[self.marks.get(name, 0):])
            by_op.update(ops)
            by_cluster[name] = {op: round(n / minutes, 1) for op, n in sorted(ops.items())}
        objects = self.cluster.objects.values()
        phases: Counter[str] = Counter((o.get("status") or {}).get("phase") or "New" for o in objects)
        placed: Counter[str] = Counter((o.get("status") or {}).get("cluster") or IMPLICIT for o in objects
                                       if (o.get("status") or {}).get("phase") in ("Submitted", "Running"))
        on_ray = {name: len(ray.active()) for name, ray in self.rays.items()}
        self.control_loop.logs.close()
        self.loop.run_until_complete(asyncio.sleep(0))
        self.loop.close()
        w = self.cluster.writes
        n = self.clusters
        return {
            "configuration": "implicit" if not n else f"{n} cluster{'s' if n > 1 else ''}" + (" (rayClusterRef)" if self.refs else ""),
            "argus_clusters": n, "refs": self.refs,
            "kuberay_reads_per_minute": round((self.cluster.ref_reads - self.at_start["ref_reads"]) / minutes, 1), "gpus_per_cluster": self.share, "objects": self.objects, "running": self.running, "minutes": minutes,
            "warmup_seconds": warmup, "churn_seconds": self.churn, "jobs_ended_in_window": self.ended,
            "phases_at_end": dict(sorted(phases.items())), "active_tasks_by_cluster_at_end": dict(sorted(placed.items())),
            "active_ray_jobs_by_cluster_at_end": on_ray,
            "ray_calls_per_minute": {"total": round(sum(by_op.values()) / minutes, 1), **{op: round(k / minutes, 1) for op, k in sorted(by_op.items())}},
            "ray_calls_per_minute_by_cluster": by_cluster,
            "status_patches_per_minute": round((len(w.status) - self.at_start["status"]) / minutes, 1),
            "argus_cluster_status_patches_per_minute": round((len(w.cluster_status) - self.at_start["cluster_status"]) / minutes, 1),
            "argus_cluster_status_patches_per_minute_by_cluster": {
                name: round(k / minutes, 1) for name, k in sorted(Counter(name for name, _ in w.cluster_status[self.at_start["cluster_status"]:]).items())},
            "api_writes_in_window": self.writes() - self.at_start["all"],
            "ticks": len(self.ticks), "tick_ms": ms(self.ticks),
            "cpu_seconds_per_minute": round(sum(self.ticks) / minutes, 3),
            "queue_passes": len(self.passes), "queue_pass_ms": ms(self.passes) if self.passes else None,
            "decisions": len(self.decisions), "decide_ms": ms(self.decisions) if self.decisions else None,
            "cluster_reports": len(self.reports), "cluster_reports_ms": ms(self.reports) if self.reports else None,
            "cluster_reports_cpu_seconds_per_minute": round(sum(self.reports) / minutes, 3),
        }


def measure(counts: list[str], objects: int, running: int, minutes: float, warmup: float, churn: float, progress: str,
            slice_seconds: float) -> list[dict[str, Any]]:
    """Every configuration set up and warmed up, then their windows interleaved a slice of
    fake time at a time (the order turning each slice), so that the machine's load weighs on
    all alike."""
    sims = [Simulation(int(n.rstrip("r")), objects, running, churn, progress, refs=n.endswith("r")) for n in counts]
    for sim in sims:
        sim.setup()
        sim.run_for(warmup)
        sim.start_window()
    slices = max(1, round(minutes * 60 / slice_seconds))
    for i in range(slices):
        for sim in sims[i % len(sims):] + sims[:i % len(sims)]:
            sim.run_for(minutes * 60 / slices)
    return [sim.result(minutes, warmup) for sim in sims]


def table(res: dict[str, Any]) -> list[str]:
    """The figures as a markdown table (also what docs/benchmarks.md shows)."""
    configs = res["configurations"]
    ops = sorted({op for c in configs for op in c["ray_calls_per_minute"] if op != "total"})
    head = ["", *(c["configuration"] for c in configs)]
    rows = [["Ray calls per minute, all", *(f"{c['ray_calls_per_minute']['total']:.0f}" for c in configs)]]
    rows += [[f"… {op}", *(f"{c['ray_calls_per_minute'].get(op, 0):.1f}" for c in configs)] for op in ops]
    rows += [["`nodes` calls per minute, per cluster", *(
        ", ".join(f"{n.strip('()') or 'implicit'} {v.get('nodes', 0):.0f}" for n, v in c["ray_calls_per_minute_by_cluster"].items()
                  if v.get("nodes") or (n == IMPLICIT and not c["argus_clusters"])) for c in configs)]]
    rows += [["Queue pass CPU, median / p99 (ms)", *(f"{c['queue_pass_ms']['median']:.2f} / {c['queue_pass_ms']['p99']:.2f}" for c in configs)],
             ["… of which the decision, median / p99 (ms)", *(f"{c['decide_ms']['median']:.2f} / {c['decide_ms']['p99']:.2f}" for c in configs)],
             ["ArgusClusters' status and finalizers (`ClusterReports.write`, its work at most once per poll interval), median / p99 (ms)", *(
                 f"{c['cluster_reports_ms']['median']:.2f} / {c['cluster_reports_ms']['p99']:.2f}" if c["cluster_reports_ms"] else "(none)"
                 for c in configs)],
             ["Tick CPU, median / p99 (ms)", *(f"{c['tick_ms']['median']:.2f} / {c['tick_ms']['p99']:.2f}" for c in configs)],
             ["Ticks (queue passes) per minute", *(f"{c['ticks'] / c['minutes']:.0f} ({c['queue_passes'] / c['minutes']:.0f})" for c in configs)],
             ["Controller CPU per minute (s)", *(f"{c['cpu_seconds_per_minute']:.2f}" for c in configs)],
             ["Task status patches per minute", *(f"{c['status_patches_per_minute']:.1f}" for c in configs)],
             ["ArgusCluster status patches per minute", *(f"{c['argus_cluster_status_patches_per_minute']:.1f}" for c in configs)],
             ["RayCluster and head Service reads per minute (rayClusterRef)", *(f"{c.get('kuberay_reads_per_minute', 0):.1f}" for c in configs)],
             ["Jobs ended (churn) / active at end by cluster", *(
                 f"{c['jobs_ended_in_window']} / " + ", ".join(f"{k.strip('()')} {v}" for k, v in c["active_tasks_by_cluster_at_end"].items())
                 for c in configs)]]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * len(configs)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def section(res: dict[str, Any]) -> list[str]:
    """The section of docs/benchmarks.md (bench/run.py shows it from docs/benchmarks-clusters.json):
    every figure from ``res``."""
    by = {c["argus_clusters"]: c for c in res["configurations"] if not c.get("refs")}
    refs = next((c for c in res["configurations"] if c.get("refs")), None)
    one, four, implicit = by.get(1), by.get(4), by.get(0)
    lines = ["## Several clusters: 1 vs 4", "",
             "What several Ray clusters cost the operator, over the in-memory fakes of the API server and Ray "
             "(`bench/clusters_cost.py`: the controller's own Ray calls and CPU, nothing else), from one run of", "",
             f"    PYTHONPATH=operator .venv/bin/python {res['command']}", "",
             f"on {res['nproc']} CPUs, {res['date']}; `/proc/loadavg` before: `{res['loadavg_at_start']}`, after: `{res['loadavg_at_end']}` "
             f"({res['wall_seconds']} s). The configurations ran interleaved, {res['slice_seconds']:g} simulated seconds each in turn, "
             "so the machine's load weighed on all alike; the Ray calls are counted, not timed, and do not depend on the load."
             + (" The load was above the CPU count (other work shared the machine): the CPU figures are noisy, their ratios matter more."
                if max(float(res["loadavg_at_start"].split()[0]), float(res["loadavg_at_end"].split()[0])) > (res["nproc"] or 1) else ""), ""]
    c0 = res["configurations"][0]
    lines += [f"The same tasks and GPUs in each: {c0['objects']:,} tasks, {c0['running']} running (`--max-running {c0['running']}`, one GPU "
              f"each), {c0['objects'] // 10} queued, the rest ended; {c0['running']} GPUs in all: the implicit cluster (no ArgusCluster), "
              f"one ArgusCluster, or four with {c0['running'] // 4} GPUs and `maxRunning: {c0['running'] // 4}` each. "
              f"{c0['minutes']:g} simulated minutes after {c0['warmup_seconds']:g} s (every job then older than 32 s); "
              f"every {c0['churn_seconds']:g} s the oldest job ends ({c0['jobs_ended_in_window']} in the window) and the next queued "
              "task is placed and submitted. The loop ticks when `next_wait()` says, or 0.05 s after a tick that wrote. "
              "CPU is `time.process_time()` around each tick, each queue pass (`Scheduler.run`: the decision with its cached reads, "
              "telling the waiting tasks, the submissions), each decision (`QueueSnapshot.decide`) and each `ClusterReports.write`.", "",
              *table(res), ""]
    if one and four:
        per = four["ray_calls_per_minute_by_cluster"]
        named = [n for n in per if n != IMPLICIT]
        status4 = ", ".join(f"{per[n].get('status', 0):.0f}" for n in named)
        nodes4 = ", ".join(f"{per[n].get('nodes', 0):.0f}" for n in named)
        patches4 = ", ".join(f"{v:g}" for v in four["argus_cluster_status_patches_per_minute_by_cluster"].values())
        lines += ["What it means:", "",
                  f"- **Job reads grow with running tasks, not with clusters times tasks.** {one['ray_calls_per_minute'].get('status', 0):.0f} "
                  f"status reads a minute with one cluster, {four['ray_calls_per_minute'].get('status', 0):.0f} with four ({status4} on each): "
                  f"each of the {c0['running']} running jobs is read on its own cluster once per poll interval (2 s; `core.polling`: with 40 "
                  "or more active jobs every one is read every poll interval). Submissions and log streams follow the admissions "
                  f"({one['ray_calls_per_minute'].get('submit', 0):g} and {four['ray_calls_per_minute'].get('submit', 0):g} submissions a "
                  "minute), wherever they are placed.",
                  f"- **Node reads are per cluster per poll interval, so 4 clusters cost 4 node reads per poll interval.** Each cluster's "
                  "node cache reads its nodes and its placement groups (two calls, both counted as `nodes`) once per poll interval: "
                  f"{one['ray_calls_per_minute'].get('nodes', 0):.0f} a minute with one cluster, {four['ray_calls_per_minute'].get('nodes', 0):.0f} "
                  f"with four ({nodes4} on each), whatever runs on them. "
                  f"With {c0['running']} running that takes all Ray calls from {one['ray_calls_per_minute']['total']:.0f} to "
                  f"{four['ray_calls_per_minute']['total']:.0f} a minute (x{four['ray_calls_per_minute']['total'] / one['ray_calls_per_minute']['total']:.2f}); "
                  f"the Ray version is read once per 10 minutes per cluster ({four['ray_calls_per_minute'].get('version', 0):g} a minute with four). "
                  f"Calls to the implicit cluster's client once ArgusClusters exist: {sum(per.get(IMPLICIT, {}).values()):g} a minute.",
                  f"- **The controller's CPU per tick.** Median {one['tick_ms']['median']:.1f} ms with one cluster, "
                  f"{four['tick_ms']['median']:.1f} ms with four" + (f" ({implicit['tick_ms']['median']:.1f} ms with the implicit cluster)" if implicit else "") +
                  f"; the queue pass {one['queue_pass_ms']['median']:.1f} -> {four['queue_pass_ms']['median']:.1f} ms, of which the decision "
                  f"{one['decide_ms']['median']:.1f} -> {four['decide_ms']['median']:.1f} ms; the ArgusClusters' reports "
                  f"{one['cluster_reports_ms']['median']:.1f} -> {four['cluster_reports_ms']['median']:.1f} ms a tick. None of this waits on Ray (the fakes answer at once): "
                  "`ClusterReports.write` looks through the tasks in the cache once per poll interval (ended ones too, which the rest "
                  "of the tick passes by), working out each queued task's clusters (`clusters_for`) once; the decision works them out "
                  "once per queued task per pass. So this part grows with the tasks in the cache and the queue, not with the running "
                  "tasks, and not with clusters times tasks.",
                  f"- **ArgusCluster status patches grow with clusters.** {one['argus_cluster_status_patches_per_minute']:g} a minute with one "
                  f"cluster, {four['argus_cluster_status_patches_per_minute']:g} with four ({patches4} on each, with "
                  f"{four['ray_calls_per_minute'].get('submit', 0):g} admissions a minute): each status holds the queued tasks that may go "
                  "there, which every admission changes on every cluster, so each admission rewrites every cluster's status "
                  "(at most once per poll interval each). The tasks' own status patches: "
                  f"{one['status_patches_per_minute']:g} and {four['status_patches_per_minute']:g} a minute.",
                  ""]
    if refs and four:
        lines += [f"- **KubeRay references.** With the four clusters named by `rayClusterRef` instead of `address`, the operator "
                  f"reads each one's RayCluster and head Service {refs['kuberay_reads_per_minute']:g} times a minute in all "
                  f"({refs['kuberay_reads_per_minute'] / 4:g} per cluster: both objects once per 30 s while its Ray answers); Ray calls "
                  f"{refs['ray_calls_per_minute']['total']:.0f} a minute against {four['ray_calls_per_minute']['total']:.0f} with "
                  f"addresses, tick median {refs['tick_ms']['median']:.1f} ms against {four['tick_ms']['median']:.1f} ms.", ""]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=2000, help="tasks in all (default 2000)")
    parser.add_argument("--running", type=int, default=40, help="running tasks, and the GPUs in all (default 40; a multiple of 4)")
    parser.add_argument("--minutes", type=float, default=10.0, help="simulated minutes measured (default 10)")
    parser.add_argument("--warmup", type=float, default=60.0, help="simulated seconds before the window (default 60)")
    parser.add_argument("--churn", type=float, default=10.0, help="one running job ends every this many simulated seconds (0: none; default 10)")
    parser.add_argument("--progress-source", default="stream", choices=[p.value for p in ProgressSource],
                        help="the operator's --progress-source (default stream, the operator's default)")
    parser.add_argument("--configurations", default="0,1,4,4r", help="ArgusClusters per configuration, 0 = the implicit cluster; "
                        "an r: each through a KubeRay rayClusterRef instead of an address (default 0,1,4,4r)")
    parser.add_argument("--slice", type=float, default=10.0, help="simulated seconds each configuration runs before the next's turn (default 10)")
    parser.add_argument("--json", type=Path, help="also write the figures into this file")
    parser.add_argument("--render", action="store_true", help="print docs/benchmarks.md's section from --json's figures; measure nothing")
    args = parser.parse_args()
    if args.render:
        if args.json is None:
            parser.error("--render reads --json")
        print("\n".join(section(json.loads(args.json.read_text()))))
        return 0
    counts = [n.strip() for n in args.configurations.split(",")]
    if any(not n.rstrip("r").isdigit() for n in counts):
        parser.error(f"--configurations {args.configurations}: each a number of ArgusClusters, with r for rayClusterRef")
    if any(int(n.rstrip("r")) and args.running % int(n.rstrip("r")) for n in counts):
        parser.error(f"--running {args.running} does not split evenly over {counts}")
    started = time.monotonic()
    out: dict[str, Any] = {
        "controller": str(Path(sys.modules["argus"].__file__ or "").parent), "nproc": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "loadavg_at_start": Path("/proc/loadavg").read_text().strip(),
        "command": "bench/clusters_cost.py " + " ".join(sys.argv[1:]),
        "slice_seconds": args.slice,
        "configurations": measure(counts, args.objects, args.running, args.minutes, args.warmup, args.churn, args.progress_source, args.slice),
    }
    out["loadavg_at_end"] = Path("/proc/loadavg").read_text().strip()
    out["wall_seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(out, indent=1))
    print()
    print("\n".join(table(out)))
    print(f"\nload: {out['loadavg_at_start']} -> {out['loadavg_at_end']}; {out['nproc']} CPUs; {out['wall_seconds']} s")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
