#!/usr/bin/env python3
"""Argus benchmarks against raw Ray, on a real testbed, in one command (issue 7).

    .venv/bin/python bench/run.py            # defaults: see --help; writes docs/benchmarks.md
    .venv/bin/python bench/run.py --full     # the issue's sizes for every figure
    ARGUS_BENCH_OPERATOR_PYTHONPATH=/tmp/before/operator .venv/bin/python bench/run.py --out /tmp/before.md
                                             # another checkout's operator (before/after a change)

Starts its own kube-apiserver + etcd and Ray head + worker on loopback (argus_testbed) and
the operator as a subprocess (``python -m argus``), then measures, side by side:

1. makespan: N instant tasks (the verl stand-in with VERL_STANDIN_INSTANT=1) through the
   operator with --max-running 4, against the same N jobs (same entrypoint, runtime env and
   entrypoint_resources, built by the same code) submitted straight to the same Ray cluster
   by a 4-wide JobSubmissionClient loop. Run in ABBA order (raw, operator, operator, raw;
   N/2 each) so that drift on a shared machine weighs on both sides alike.
2. latency, over K tasks created one after the other by a few client streams (never more
   streams than --max-running, so no task waits in the queue): create (the API call
   returned) -> Ray accepted the job (the job's start_time, stamped by Ray's job manager),
   and Ray's end_time -> the terminal .status.phase seen on a watch of the API.
3. scale: not run here. bench/scale.py measures 1,000 and 10,000 tasks and bench/tick_cost.py
   one controller tick at each; this report shows their last figures (docs/benchmarks-scale.json,
   docs/benchmarks-tick.json).
4. validation throughput (bench/bench_validation.py's functions).

Prints a table and writes docs/benchmarks.md (with the machine it ran on). A benchmark, not
a test: the figures depend on the machine and on what else runs on it (the load average is
recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from argus.core.config import PlatformConfig
from argus.core.plan import validate_spec
from benchlib import (
    REPO,
    STANDIN,
    TERMINAL,
    TaskWatch,
    Testbed,
    affinities,
    cpu_of,
    cpu_seconds,
    cpu_split,
    free_port,
    jobs_by_task,
    loadavg,
    log,
    machine_info,
    parallel,
    pinned_to,
    ppo_command,
    ray_jobs,
    ray_processes,
    scrape,
    summary,
    task_body,
    wait_metrics,
)

ISSUE = {"makespan_tasks": 200, "latency_tasks": 100}
DEFAULTS = {"makespan_tasks": 100, "latency_tasks": 100}


# --------------------------------------------------------------------------- 4. validation

def bench_validation(runs: int) -> dict[str, Any]:
    import bench_validation as bv
    config = PlatformConfig()
    out = {}
    for label, command in (("typical", bv.TYPICAL), ("64KiB", bv.big_command())):
        times = bv.measure(bv.manifest(command), config, runs)
        med = statistics.median(times)
        out[label] = {"bytes": len(command.encode()), "median_ms": med * 1e3, "best_ms": min(times) * 1e3, "tasks_per_s": 1 / med}
    return out


# --------------------------------------------------------------------------- 1. makespan

def refill_gaps(jobs: list[Any]) -> dict[str, float] | None:
    """For every job but the first ones: its start_time minus the latest end_time before it
    (how long a freed slot stayed empty), from Ray's own timestamps."""
    ends = sorted(j.end_time for j in jobs if j.end_time)
    gaps = []
    for j in sorted(jobs, key=lambda j: j.start_time):
        before = [e for e in ends if e <= j.start_time]
        if before:
            gaps.append((j.start_time - before[-1]) / 1000)
    return summary(gaps) if gaps else None


def job_durations(jobs: list[Any]) -> dict[str, float] | None:
    """Ray's own start_time -> end_time of each job: the time Ray needs per job."""
    d = [(j.end_time - j.start_time) / 1000 for j in jobs if j.end_time and j.start_time]
    return summary(d) if d else None


class Makespan:
    def __init__(self, tb: Testbed, watch: TaskWatch, platform: PlatformConfig, raw_poll: float, max_running: int):
        self.tb, self.watch, self.platform, self.raw_poll, self.width = tb, watch, platform, raw_poll, max_running
        self.command = ppo_command()

    def raw(self, n: int, tag: str) -> dict[str, Any]:
        """n jobs straight to Ray: a width-wide loop, each lane submits a job and polls its
        status every raw_poll seconds until it ends, then takes the next."""
        from ray.job_submission import JobSubmissionClient
        ns = f"raw-{tag}"
        spec = {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "command": self.command}
        plans = []
        for i in range(n):
            verdict = validate_spec(spec, "alice", self.platform, namespace=ns, name=f"t{i:04d}", uid=str(uuid.uuid4()))
            assert verdict.valid and verdict.plan, verdict.error_lines()
            plans.append(verdict.plan)
        todo: queue.Queue[Any] = queue.Queue()
        for p in plans:
            todo.put(p)
        url = self.tb.ray.dashboard_url
        statuses: list[str] = []
        errors: list[str] = []

        def lane() -> None:
            client = JobSubmissionClient(url)
            while True:
                try:
                    p = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    client.submit_job(entrypoint=p.entrypoint, submission_id=p.submission_id, entrypoint_resources=p.entrypoint_resources,
                                      runtime_env=p.runtime_env, metadata=p.metadata)
                    while True:
                        status = client.get_job_status(p.submission_id)
                        if status.is_terminal():
                            statuses.append(str(status.value))
                            break
                        time.sleep(self.raw_poll)
                except Exception as exc:  # noqa: BLE001
                    errors.append(repr(exc))

        load0 = loadavg()
        t0 = time.time()
        lanes = [threading.Thread(target=lane) for _ in range(self.width)]
        for t in lanes:
            t.start()
        for t in lanes:
            t.join()
        t1 = time.time()
        jobs = [j for j in ray_jobs(url) if (j.metadata or {}).get("argus.io/namespace") == ns]
        return {"side": "raw", "batch": ns, "n": n, "seconds": t1 - t0, "ok": statuses.count("SUCCEEDED"), "errors": errors[:3],
                "ray_span": (max(j.end_time for j in jobs) - min(j.start_time for j in jobs)) / 1000 if jobs else None,
                "jobs": len(jobs), "gaps": refill_gaps(jobs), "durations": job_durations(jobs), "load": [load0, loadavg()]}

    def operator(self, n: int, tag: str) -> dict[str, Any]:
        """n ArgusTasks created at once (8 parallel API calls); the makespan ends when the
        watch sees the last one terminal."""
        ns = f"op-{tag}"
        self.tb.kube.namespace(ns, "alice")
        bodies = [task_body(f"t{i:04d}", self.command) for i in range(n)]
        load0 = loadavg()
        t0 = time.time()
        parallel(lambda b: self.tb.kube.create(ns, b), bodies, workers=8)
        created = time.time() - t0
        self.watch.wait(lambda: sum(1 for p in self.watch.phases(ns).values() if p in TERMINAL) >= n, 60 + n * 20, f"{n} tasks of {ns} to end")
        ends = [self.watch.first_seen[(ns, b["metadata"]["name"])].get(self.watch.phase(ns, b["metadata"]["name"]), 0) for b in bodies]
        phases = self.watch.phases(ns)
        jobs = jobs_by_task(ray_jobs(self.tb.ray.dashboard_url), ns)
        all_jobs = [j for js in jobs.values() for j in js]
        return {"side": "operator", "batch": ns, "n": n, "seconds": max(ends) - t0, "create_seconds": created,
                "ok": sum(1 for p in phases.values() if p == "Succeeded"), "duplicates": sum(len(v) - 1 for v in jobs.values()),
                "ray_span": (max(j.end_time for j in all_jobs) - min(j.start_time for j in all_jobs)) / 1000 if all_jobs else None,
                "jobs": len(all_jobs), "gaps": refill_gaps(all_jobs), "durations": job_durations(all_jobs), "load": [load0, loadavg()]}


# --------------------------------------------------------------------------- 2. latency

def bench_latency(tb: Testbed, watch: TaskWatch, n: int, streams: int) -> dict[str, Any]:
    ns = "latency"
    tb.kube.namespace(ns, "alice")
    created: dict[str, float] = {}
    names = [f"t{i:04d}" for i in range(n)]
    todo: queue.Queue[str] = queue.Queue()
    for name in names:
        todo.put(name)
    errors: list[str] = []

    def stream() -> None:
        while True:
            try:
                name = todo.get_nowait()
            except queue.Empty:
                return
            try:
                _, t = tb.kube.create(ns, task_body(name, ppo_command()))
                created[name] = t
                watch.wait(lambda: watch.phase(ns, name) in TERMINAL, 300, f"{ns}/{name} to end")  # noqa: B023 - waited for here
            except Exception as exc:  # noqa: BLE001
                errors.append(repr(exc))

    load0 = loadavg()
    threads = [threading.Thread(target=stream) for _ in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    jobs = jobs_by_task(ray_jobs(tb.ray.dashboard_url), ns)
    to_ray, to_status_submitted, end_to_status, queued_waits = [], [], [], 0
    phases = watch.phases(ns)
    for name in names:
        job = (jobs.get(name) or [None])[0]
        seen = watch.first_seen.get((ns, name), {})
        phase = phases.get(name)
        if job is None or name not in created or phase not in TERMINAL:
            continue
        to_ray.append(job.start_time / 1000 - created[name])
        if "Submitted" in seen:
            to_status_submitted.append(seen["Submitted"] - created[name])
        end_to_status.append(seen[phase] - job.end_time / 1000)
        history = watch.phase_history.get((ns, name), [])
        queued_waits += 0 if history.count("Queued") <= 1 else 1
    return {
        "n": n, "streams": streams, "completed": len(end_to_status), "errors": errors[:3],
        "succeeded": sum(1 for p in phases.values() if p == "Succeeded"),
        "create_to_ray_submitted": summary(to_ray), "create_to_status_submitted": summary(to_status_submitted),
        "ray_end_to_status_terminal": summary(end_to_status), "load": [load0, loadavg()],
        "duplicates": sum(len(v) - 1 for v in jobs.values()),
    }


# --------------------------------------------------------------------------- 1 and 2, per progress source

def makespan_abba(ms: Makespan, half: int, source: str) -> dict[str, Any]:
    batches = []
    for i, side in enumerate(("raw", "operator", "operator", "raw")):
        log(f"makespan ({source}) batch {i + 1}/4: {half} tasks, {side}")
        b = (ms.raw if side == "raw" else ms.operator)(half, f"{source}-b{i + 1}")
        log(f"  -> {b['seconds']:.1f} s ({b['ok']}/{half} succeeded, ray span {b['ray_span']:.1f} s, load {b['load']})")
        batches.append(b)
    raw_s = sum(b["seconds"] for b in batches if b["side"] == "raw")
    op_s = sum(b["seconds"] for b in batches if b["side"] == "operator")
    log(f"makespan ({source}): operator {op_s:.1f} s / raw {raw_s:.1f} s = {op_s / raw_s:.3f}")
    return {"n": half * 2, "raw_s": raw_s, "operator_s": op_s, "ratio": op_s / raw_s, "batches": batches, "source": source,
            "duplicates": sum(b.get("duplicates", 0) for b in batches)}


def run_makespan_and_latency(args: argparse.Namespace, tb: Testbed, watch: TaskWatch, platform: PlatformConfig, res: dict[str, Any]) -> None:
    """The makespan once per progress source (a fresh operator each, the same Ray cluster),
    the latency with the first source; the tasks of each are deleted before the next."""
    sources = args.progress_sources if "makespan" not in args.skip else args.progress_sources[:1]
    res["makespan_by_source"] = {}
    for n, source in enumerate(sources):
        port = free_port()
        op = tb.start_operator(f"operator-{source}", max_running=args.max_running, poll_interval=args.poll_interval, metrics_port=port,
                               extra_args=["--progress-source", source])
        wait_metrics(port)
        if n == 0:
            res["affinity"] = affinities(tb, op)
            log(f"CPUs allowed: {json.dumps(res['affinity'])}")
        ms = Makespan(tb, watch, platform, args.raw_poll, args.max_running)
        log(f"warm-up ({source}): 4 raw jobs and 4 tasks")
        ms.raw(4, f"warmup-{source}")
        ms.operator(4, f"warmup-{source}")
        if "makespan" not in args.skip:
            res["makespan_by_source"][source] = makespan_abba(ms, args.makespan_tasks // 2, source)
        if n == 0 and "latency" not in args.skip:
            log(f"latency: {args.latency_tasks} tasks, {args.latency_streams} streams (progress source {source})")
            res["latency"] = {**bench_latency(tb, watch, args.latency_tasks, args.latency_streams), "source": source}
            log(f"latency: {json.dumps({k: v for k, v in res['latency'].items() if isinstance(v, dict)})}")
        m = scrape(port)
        res.setdefault("operator_metrics", {})[source] = {k: v for k, v in m.items() if k.startswith(("argus_ray_api", "argus_reconcile_errors"))}
        log("cleaning up: deleting the tasks (the operator releases its finalizers), stopping the operator")
        for ns in {k[0] for k in watch.objects}:
            tb.kube.delete_all(ns)
        watch.wait(lambda: not watch.objects, 300, "the tasks to be deleted")
        op.stop()
    if res["makespan_by_source"]:
        res["makespan"] = next(iter(res["makespan_by_source"].values()))


# --------------------------------------------------------------------------- CPU pinning

# --------------------------------------------------------------------------- progress cost

def bench_progress_cost(tb: Testbed, watch: TaskWatch, sources: list[str], jobs: int, window: float, poll: float) -> dict[str, Any]:
    """The Ray side's CPU while `jobs` long jobs run (one progress line a second each), with
    the operator reading their progress from each source in turn: Ray's dashboard (head and
    module subprocesses), the nodes' agents, its core (GCS, raylets, log monitors), the job
    supervisors; and the operator's own CPU."""
    out: dict[str, Any] = {"jobs": jobs, "window_s": window, "by_source": {}}
    long_cmd = ppo_command(steps=1_000_000)
    for source in sources:
        ns = f"progress-{source}"
        tb.kube.namespace(ns, "alice")
        port = free_port()
        op = tb.start_operator(f"operator-progress-{source}", max_running=jobs, poll_interval=poll, metrics_port=port,
                               extra_args=["--progress-source", source])
        wait_metrics(port)
        names = [f"p{i:03d}" for i in range(jobs)]
        parallel(lambda n: tb.kube.create(ns, task_body(n, long_cmd)), names, workers=8)  # noqa: B023 - used at once
        watch.wait(lambda: sum(1 for p in watch.phases(ns).values() if p == "Running") >= jobs, 600, f"{jobs} tasks of {ns} Running")  # noqa: B023
        time.sleep(max(20.0, 2 * poll))  # past the jobs' start-up and the young-job reads
        procs = ray_processes(tb.ray)
        c0 = {role: cpu_of(pids) for role, pids in procs.items()}
        o0, t0 = cpu_seconds(op.proc.pid), time.monotonic()
        time.sleep(window)
        elapsed = time.monotonic() - t0
        cpu = {role: 100 * (cpu_of(pids) - c0[role]) / elapsed for role, pids in procs.items()}
        progress = [((watch.objects.get((ns, n)) or {}).get("status") or {}).get("progress") for n in names]
        steps = [p.get("step") for p in progress if p]
        result = {"cpu_percent": cpu, "operator_cpu_percent": 100 * (cpu_seconds(op.proc.pid) - o0) / elapsed,
                  "tasks_with_progress": len(steps), "load": loadavg()}
        out["by_source"][source] = result
        log(f"progress cost, source {source}: {json.dumps(result)}")
        tb.kube.delete_all(ns)
        watch.wait(lambda: not watch.in_namespace(ns), 300, f"the tasks of {ns} to be deleted")  # noqa: B023
        op.stop()
    return out


# --------------------------------------------------------------------------- report

def fmt_s(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f} s" if x >= 1 else f"{x * 1000:.0f} ms"


def report(args: argparse.Namespace, machine: dict[str, Any], res: dict[str, Any], wall: float) -> tuple[str, str]:
    rows: list[tuple[str, str, str, str]] = []  # measure, result, target, verdict
    pinned = bool(res.get("pinning"))
    # The headline: what the operator itself adds between a job's end and the next start on
    # its slot, and before its end shows in .status (Ray's own job duration swings more
    # between batches than the operator costs, so the makespan ratio hides it).
    for source, ms in (res.get("makespan_by_source") or {}).items():
        op_gap, raw_gap = (mean_of_medians(ms["batches"], side, "gaps") for side in ("operator", "raw"))
        if op_gap is not None and raw_gap is not None:
            met = op_gap <= 0.100 and op_gap <= raw_gap
            rows.append((f"Slot refill gap (Ray end -> next start on the slot), median, progress from {source}: operator / raw Ray",
                         f"**{fmt_s(op_gap)}** / {fmt_s(raw_gap)}", "<= 100 ms and <= raw", "met" if met else "NOT met"))
    lat = res.get("latency")
    if lat:
        b = lat["ray_end_to_status_terminal"]
        rows.append((f"Latency Ray job end -> `.status.phase` terminal (p50 / p99; poll interval {args.poll_interval:g} s, "
                     f"progress from {lat.get('source', 'stream')})", f"**{fmt_s(b['p50'])}** / {fmt_s(b['p99'])}", "p50 <= 150 ms",
                     "met" if b["p50"] <= 0.150 else "NOT met"))
    for source, ms in (res.get("makespan_by_source") or {}).items():
        target = 1.05 if pinned else 1.15
        rows.append((f"Makespan, {ms['n']} instant tasks, 4 at a time, progress from {source}{', CPUs pinned' if pinned else ''}: operator / raw Ray",
                     f"{ms['operator_s']:.1f} s / {ms['raw_s']:.1f} s = **{ms['ratio']:.3f}**", f"<= {target:g}",
                     "met" if ms["ratio"] <= target else "NOT met"))
    pc = res.get("progress_cost")
    if pc:
        for source, r in pc["by_source"].items():
            ray_cpu = r["cpu_percent"]["dashboard"] + r["cpu_percent"]["agents"]
            rows.append((f"Ray dashboard + agents CPU with {pc['jobs']} running jobs, progress from {source}",
                         f"{ray_cpu:.1f} % ({ray_cpu / pc['jobs']:.2f} % per job)", "", ""))
    lat = res.get("latency")
    if lat:
        a, c = lat["create_to_ray_submitted"], lat["create_to_status_submitted"]
        rows.append((f"Latency create -> Ray job submitted (p50 / p99, {a['n']} tasks)", f"{fmt_s(a['p50'])} / {fmt_s(a['p99'])}", "p50 < 1 s", "met" if a["p50"] < 1 else "NOT met"))
        rows.append(("Latency create -> `.status.phase` Submitted (p50 / p99)", f"{fmt_s(c['p50'])} / {fmt_s(c['p99'])}", "", ""))
    va = res.get("validation")
    if va:
        rows.append(("Validation, typical command (~1 KiB)", f"{va['typical']['tasks_per_s']:.0f} tasks/s ({va['typical']['median_ms']:.2f} ms)", "", ""))
        rows.append(("Validation, 64 KiB command", f"{va['64KiB']['tasks_per_s']:.0f} tasks/s ({va['64KiB']['median_ms']:.2f} ms)", "<= 10 ms", "met" if va["64KiB"]["median_ms"] <= 10 else "NOT met"))

    width = [max(len(r[i]) for r in rows + [("Measure", "Result", "Target", "")]) for i in range(4)]
    console = "\n".join(" | ".join(c.replace("**", "").ljust(width[i]) for i, c in enumerate(r)) for r in [("Measure", "Result", "Target", "Verdict")] + rows)
    md_table = "| Measure | Result | Target | |\n|---|---|---|---|\n" + "\n".join(f"| {' | '.join(r)} |" for r in rows)
    return console, md_table


def mean_of_medians(batches: list[dict[str, Any]], side: str, key: str) -> float | None:
    """The mean of one side's batch medians of ``key`` (gaps, durations)."""
    medians = [b[key]["p50"] for b in batches if b["side"] == side and b.get(key)]
    return statistics.mean(medians) if medians else None


def batch_table(ms: dict[str, Any]) -> list[str]:
    lines = ["| Batch | Side | Tasks | Makespan | Ray span (first job start -> last job end) | Ray job duration, median | Slot refill gap, median / p99 | Succeeded | Load avg before / after |",
             "|---|---|---|---|---|---|---|---|---|"]
    for b in ms["batches"]:
        g, d = b.get("gaps"), b.get("durations")
        gap = f"{fmt_s(g['p50'])} / {fmt_s(g['p99'])}" if g else "-"
        lines.append(f"| {b['batch']} | {b['side']} | {b['n']} | {b['seconds']:.1f} s | {b['ray_span']:.1f} s | {fmt_s(d['p50']) if d else '-'} | {gap} | {b['ok']} | {b['load'][0]} / {b['load'][1]} |")
    return lines


def pinning_section(res: dict[str, Any]) -> list[str]:
    pin = res.get("pinning")
    if not pin:
        return ["## CPUs", "", "Not pinned (`--ray-cpus none`, or one CPU): Ray, the control plane and the operator share every CPU.", ""]
    lines = ["## CPUs", "",
             f"Pinned (`--ray-cpus`): Ray's processes on both nodes, and so every job's supervisor and driver, on CPU(s) {pin['ray']};",
             f"kube-apiserver, etcd, the operator and this benchmark (the raw side's loop included) on CPU(s) {pin['rest']}. Both sides",
             "of the makespan run on the same split, so CPU sharing weighs on both alike. Read back from `/proc/<pid>/status`",
             "(`Cpus_allowed_list`) once the first operator ran:", "",
             "| Processes | CPUs allowed |", "|---|---|"]
    lines += [f"| {role} | {', '.join(v)} |" for role, v in (res.get("affinity") or {}).items()]
    return lines + [""]


def sources_section(res: dict[str, Any]) -> list[str]:
    """The makespan side by side for each progress source, and the progress cost."""
    by = res.get("makespan_by_source") or {}
    pc = res.get("progress_cost")
    lines: list[str] = []
    if len(by) > 1:
        def med(b: dict[str, Any], side: str, key: str) -> str:
            value = mean_of_medians(b["batches"], side, key)
            return fmt_s(value) if value is not None else "-"
        lines += ["## 1b. The makespan by progress source", "",
                  "The same ABBA run with a fresh operator for each `--progress-source` (the same Ray cluster):", "",
                  "| Progress source | Operator | Raw Ray | Ratio | Ray job duration, operator / raw (mean of batch medians) | Slot refill gap, operator / raw |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {src} | {b['operator_s']:.1f} s | {b['raw_s']:.1f} s | **{b['ratio']:.3f}** | {med(b, 'operator', 'durations')} / {med(b, 'raw', 'durations')} | "
                  f"{med(b, 'operator', 'gaps')} / {med(b, 'raw', 'gaps')} |" for src, b in by.items()]
        lines.append("")
    if pc:
        lines += ["## 1c. What following progress costs Ray", "",
                  f"{pc['jobs']} long stand-in jobs (one progress line a second each) run while the operator reads their progress from",
                  f"each source in turn (a fresh operator each); Ray's processes' CPU over {pc['window_s']:g} s, from `/proc`, by role: the",
                  "dashboard (the head's process and its module subprocesses; JobHead serves the Jobs API and the log streams), the",
                  "nodes' agents (the dashboard agent reads a job's log file for its stream), Ray's core (GCS, raylets, log monitors),",
                  "the jobs' supervisors. Percent of one core.", "",
                  "| Progress source | Dashboard | Agents | Core | Supervisors | Dashboard + agents per job | Operator | Tasks with progress | Load avg |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for src, r in pc["by_source"].items():
            c = r["cpu_percent"]
            lines.append(f"| {src} | {c['dashboard']:.1f} % | {c['agents']:.1f} % | {c['core']:.1f} % | {c['supervisors']:.1f} % | "
                         f"{(c['dashboard'] + c['agents']) / pc['jobs']:.2f} % | {r['operator_cpu_percent']:.1f} % | {r['tasks_with_progress']}/{pc['jobs']} | {r['load']} |")
        lines.append("")
    return lines


def makespan_reading(batches: list[dict[str, Any]], width: int, pinned: bool = False) -> list[str]:
    """Where the makespan difference comes from: per slot, a side's makespan is about
    (tasks / width) x (job duration + refill gap)."""
    d_op, d_raw, g_op, g_raw = (mean_of_medians(batches, "operator", "durations"), mean_of_medians(batches, "raw", "durations"),
                                mean_of_medians(batches, "operator", "gaps"), mean_of_medians(batches, "raw", "gaps"))
    if None in (d_op, d_raw, g_op, g_raw):
        return []
    n = sum(b["n"] for b in batches if b["side"] == "operator") / width
    return [
        f"Reading the table: per slot, a side's makespan is about (tasks / {width}) x (Ray job duration + slot refill gap).",
        f"The operator's refill gap (mean of the batch medians {fmt_s(g_op)}) against the raw loop's ({fmt_s(g_raw)}) accounts for",
        f"about {n * (g_op - g_raw):.0f} s of the difference; Ray's own job duration ({fmt_s(d_op)} against {fmt_s(d_raw)}) for about",
        f"{n * (d_op - d_raw):.0f} s. The jobs are the same.",
        *(["Ray's processes had CPUs of their own in this run (see CPUs), so the operator's work did not take CPU from Ray's."]
          if pinned else
          ["*Hypothesis, not measured here*: they run slower on the operator's side because its other processes (the",
           "operator, kube-apiserver, etcd) share the cores with Ray's per-job process start-up; `--ray-cpus` (the default,",
           "auto) pins Ray apart to test it."]),
        "",
    ]


def findings(res: dict[str, Any]) -> list[str]:
    return [
        "## Findings (history)",
        "",
        "What building and running this benchmark found in the operator in earlier runs, and what became of it. The",
        "figures in this section are from those earlier runs, not from the run this report describes (except where it",
        "says \"this run\"); the operator's design has changed since (a level-triggered loop: no kopf handlers or indexes at all).",
        "",
        "1. **Fixed: the operator hung at start-up when more than 64 ArgusTasks existed.** It set kopf's",
        "   `worker_limit = 64` and kept its view of the tasks in a kopf index; each per-object worker indexes its object",
        "   and then waits, holding its slot, until every listed object is indexed, which the objects without a slot never",
        "   are (nolar/kopf#1243). With 125 objects the operator handled nothing for 15 minutes.",
        "2. **Fixed: restart time grew with the square of the number of objects.** kopf's index-readiness barrier wakes every",
        "   waiting worker each time one more object is indexed: restarts over 1,000 and 5,000 objects took 13 s and 125 s",
        "   until a new task was handled. The operator now keeps its own cache (`adapters/taskcache.py`: one paged LIST, then a",
        "   WATCH, as controller-runtime's informers do) and declares no kopf index, so kopf handles events at once and the",
        "   worker limit (64, with workers leaving after 0.5 s idle) is back (restart figures: section 3).",
        "3. **Fixed: a first start over thousands of objects no operator had handled yet** (created while none ran) patched",
        "   all of them at once (no worker limit, one TLS connection each): 5,000 such objects took the operator to 2.4 GB",
        "   RSS. The worker limit of item 2 bounds the patches in flight to 64; section 3 measures a first start again.",
        "4. **Fixed: after a restart over 1,000 tasks, 75 ran with `--max-running 50`.** The first tick ran over a",
        "   half-filled view and did not count running tasks it had not seen yet. The first tick now waits for the LIST.",
        "5. **Fixed: freed slots stayed empty for about a second** (makespan ratio 1.2). Every admission moved every queued",
        "   task's place, and each move was a status patch (about 100 a second); Ray calls waited behind those writes in",
        "   asyncio's 6-thread default pool; and a job's end was seen only when Ray closed its log stream (1-2 s after the",
        "   end: Ray checks once a second and then waits a second more) or at the next 2 s poll. Now places that merely moved",
        "   are rewritten every 30 s in the background (now they are never written: served on demand, docs/queue.md),",
        "   Ray and Kubernetes calls have pools of their own, and a young job is",
        "   read every age/16 s (from 0.2 s; every poll interval from 32 s on), within a budget of 20 such reads a second",
        "   for all jobs (`core.polling.poll_delay`).",
        "",
    ]


def scale_section() -> list[str]:
    """Section 3 from the last runs of bench/scale.py and bench/tick_cost.py (their JSON in
    docs/): one page of results, each benchmark run on its own."""
    import scale  # bench/scale.py: its table is rendered in one place
    lines = ["## 3. Scale", ""]
    data = REPO / "docs" / "benchmarks-scale.json"
    if data.exists():
        res = json.loads(data.read_text())
        lines += [f"From the last run of `bench/scale.py` ({res['machine'].get('date')}, load average at its start "
                  f"{res['machine'].get('load_average_at_start')}; its page, [benchmarks-scale.md](benchmarks-scale.md), says how",
                  "each figure is measured). Not part of this run.", "", *scale.table(res), ""]
    else:
        lines += ["`bench/scale.py` has not been run: no docs/benchmarks-scale.json.", ""]
    ticks = REPO / "docs" / "benchmarks-tick.json"
    if ticks.exists():
        t = json.loads(ticks.read_text())
        lines += ["One controller tick over the in-memory fakes (`bench/tick_cost.py`: the controller's own CPU, nothing else), "
                  f"before and after ticks passed ended tasks by; load average {t.get('load')}:", "",
                  "| Objects | Before (ms) | After (ms) | After / before |", "|---:|---:|---:|---:|"]
        for before, after in zip(t["before"]["sizes"], t["after"]["sizes"], strict=True):
            lines.append(f"| {after['objects']:,} | {before['tick_ms_median']:.1f} | {after['tick_ms_median']:.1f} | "
                         f"{after['tick_ms_median'] / before['tick_ms_median']:.2f} |")
        lines.append("")
    clusters = REPO / "docs" / "benchmarks-clusters.json"
    if clusters.exists():
        import clusters_cost  # bench/clusters_cost.py: its section rendered in one place
        lines += clusters_cost.section(json.loads(clusters.read_text()))
    return lines


def headline(res: dict[str, Any]) -> dict[str, str]:
    """One run's headline figures, by name: each source's refill gaps and makespan ratio, and
    the end -> terminal latency."""
    out: dict[str, str] = {}
    for source, ms in (res.get("makespan_by_source") or {}).items():
        op_gap, raw_gap = (mean_of_medians(ms["batches"], side, "gaps") for side in ("operator", "raw"))
        out[f"Slot refill gap, median, progress from {source}: operator / raw"] = f"{fmt_s(op_gap)} / {fmt_s(raw_gap)}"
        out[f"Makespan ratio, progress from {source}"] = f"{ms['ratio']:.3f}"
        loads = [b["load"][0] for b in ms["batches"]] + [ms["batches"][-1]["load"][1]]
        out[f"Load average during the makespan, progress from {source}"] = f"{min(loads)}-{max(loads)}"
    lat = res.get("latency")
    if lat:
        b = lat["ray_end_to_status_terminal"]
        out[f"Ray end -> terminal phase, p50 / p99 (progress from {lat.get('source', 'stream')})"] = f"{fmt_s(b['p50'])} / {fmt_s(b['p99'])}"
    return out


def before_after_section(res: dict[str, Any]) -> list[str]:
    """The headline figures of a run before a change (``--before``) beside this run's."""
    before = res.get("before")
    if not before:
        return []
    was, now = headline(before["results"]), headline(res)
    lines = ["## Before and after", "", f"Before: {before['label']}. After: this run. The same sizes and machine; the load averages",
             "say how much else ran.", "", "| Figure | Before | After |", "|---|---|---|"]
    lines += [f"| {name} | {was.get(name, '-')} | {now.get(name, '-')} |" for name in dict.fromkeys([*was, *now])]
    return lines + [""]


def write_doc(path: Path, args: argparse.Namespace, argv: list[str], machine: dict[str, Any], res: dict[str, Any], table: str, wall: float) -> None:
    m = machine
    sizes = {k: getattr(args, k) for k in ISSUE}
    smaller = {k: (v, ISSUE[k]) for k, v in sizes.items() if v != ISSUE[k]}
    lines = [
        "# Benchmarks",
        "",
        "Written by `bench/run.py` (see [bench/README.md](../bench/README.md)); every figure below comes from one run of",
        "",
        f"    .venv/bin/python bench/run.py {' '.join(argv)}".rstrip(),
        "",
        f"on a real kube-apiserver {m.get('kube_apiserver')} + etcd and a real Ray {m['ray']} cluster (head + one worker) on loopback,",
        "with the operator as a subprocess (`python -m argus`). The training workload is the verl stand-in",
        f"(`hack/verl-standin`). Whole run: {wall / 60:.1f} min.",
        "",
        "## Machine",
        "",
        f"- {m['nproc']} CPUs ({m['cpu_model']}), {m['memory_gib']} GiB memory, Linux {m['kernel']}",
        f"- Python {m['python']}, Ray {m['ray']}, kopf {m['kopf']}, kubernetes client {m['kubernetes']}, pydantic {m['pydantic']}",
        f"- {m['date']}; load average at start {m['load_average_at_start']} (the machine was shared with other work: figures are noisy, ratios matter more than absolute times)",
        "",
        "## Results",
        "",
        table,
        "",
    ]
    if smaller:
        lines += ["Sizes that differ from the full run's (run `bench/run.py --full` for those): " +
                  ", ".join(f"{k.replace('_', ' ')} {v} (full: {i})" for k, (v, i) in smaller.items()) + ".", ""]
    lines += pinning_section(res)
    for k, ms in enumerate((res.get("makespan_by_source") or {}).values()):
        if k > 0:  # the set-up is the first source's; only the batches differ
            lines += [f"## 1. Makespan against raw Ray, progress from {ms['source']}", "", f"As above, with `--progress-source {ms['source']}`.", "",
                      *batch_table(ms), "", f"Ratio operator / raw: **{ms['ratio']:.3f}**. Duplicate Ray jobs on the operator side: {ms['duplicates']}.", ""]
            continue
        lines += [
            f"## 1. Makespan against raw Ray, progress from {ms['source']}",
            "",
            f"{ms['n']} tasks of the stand-in trainer with `VERL_STANDIN_INSTANT=1` (it prints one line and exits; the time is Ray's",
            "job start-up: a JobSupervisor actor, the runtime env, `bash -lc`, Python). Both sides submit the very same Ray job:",
            "the raw side builds each job's entrypoint, runtime env, metadata and `entrypoint_resources={\"worker_node\": 1}` with",
            "the operator's own code (`argus.core.plan.validate_spec`), so only the path differs:",
            "",
            f"- **raw Ray**: {args.max_running} threads, each with a `JobSubmissionClient`, submit a job and poll `get_job_status`",
            f"  every {args.raw_poll:g} s until it ends, then take the next. Makespan: first submit -> last job seen ended.",
            f"- **operator**: `--max-running {args.max_running} --poll-interval {args.poll_interval:g}`; the tasks are created at once",
            "  (8 parallel API creates). Makespan: first create call -> the watch sees the last `.status.phase` terminal.",
            "",
            f"ABBA order, {ms['n'] // 2} tasks per batch (raw, operator, operator, raw), so that drift of a shared machine weighs on",
            "both sides alike; each side's makespan is the sum of its two batches.",
            "",
            *batch_table(ms),
        ]
        lines += ["", "*Ray job duration*: Ray's `end_time - start_time` of each job (Ray's own work per job, slower when the machine is busier).",
                  "*Slot refill gap*: for each job, its Ray `start_time` minus the latest `end_time` of a job before it: how long a",
                  "slot freed by an ending job stayed empty. The raw loop notices an end within its poll period; the operator within",
                  "its next read of that job (a young job is read every age/16 s, from 0.2 s), or at once when the job's log says it",
                  "ended (with `--progress-source file`, its exit marker, looked for every 50 ms), then admits and submits in the same tick."]
        target = "1.05, CPUs pinned" if res.get("pinning") else "1.15"
        lines += ["", f"Ratio operator / raw: **{ms['ratio']:.3f}** (target <= {target}). Duplicate Ray jobs on the operator side: {ms['duplicates']}.", ""]
        lines += makespan_reading(ms["batches"], args.max_running, bool(res.get("pinning")))
    lines += sources_section(res)
    lines += before_after_section(res)
    lat = res.get("latency")
    if lat:
        def row(label: str, s: dict[str, float]) -> str:
            return f"| {label} | {s['n']} | {fmt_s(s['p50'])} | {fmt_s(s['p99'])} | {fmt_s(s['mean'])} | {fmt_s(s['min'])} | {fmt_s(s['max'])} |"
        lines += [
            "## 2. Latency",
            "",
            f"{lat['n']} instant tasks, created by {lat['streams']} client streams, each creating its next task when the watch shows",
            f"its previous one ended (fewer streams than `--max-running {args.max_running}`, so no task waits for a slot: this is the",
            f"operator's own latency, not queueing). Operator poll interval: **{args.poll_interval:g} s** (the default).",
            "",
            "What is measured, all on one host clock:",
            "",
            "- *create -> Ray job submitted*: from the moment the API create call returned to the job's `start_time`, which",
            "  Ray's job manager stamps when it accepts the submission.",
            "- *create -> `.status.phase` Submitted*: to the moment a watch on the API (a thread of this benchmark, streaming",
            "  events, no polling) received the status the operator writes after Ray accepted the job.",
            "- *Ray job end -> `.status.phase` terminal*: from the job's `end_time` as Ray records it to the moment the watch",
            "  received the terminal phase. A young job is read every age/16 s (0.2 s at first; every poll interval from an age",
            "  of 32 s on; 20 such reads a second for all jobs at most), so the end of a short job does not wait for the next poll.",
            "",
            "| Interval | Tasks | p50 | p99 | mean | min | max |",
            "|---|---|---|---|---|---|---|",
            row("create -> Ray job submitted", lat["create_to_ray_submitted"]),
            row("create -> `.status.phase` Submitted", lat["create_to_status_submitted"]),
            row("Ray job end -> `.status.phase` terminal", lat["ray_end_to_status_terminal"]),
            "",
            f"All {lat['succeeded']} of {lat['n']} tasks Succeeded; duplicate Ray jobs: {lat['duplicates']}; load average {lat['load'][0]} -> {lat['load'][1]}.",
            "",
        ]
    lines += scale_section()
    va = res.get("validation")
    if va:
        lines += [
            "## 4. Validation",
            "",
            f"`validate_task` (the path the operator, the webhook and `argus validate` share), {args.validation_runs} runs each,",
            "functions of `bench/bench_validation.py`, measured before any cluster starts:",
            "",
            "| Command | Bytes | Tasks/s (median) | ms per task, median / best |",
            "|---|---|---|---|",
            *[f"| {k} | {v['bytes']} | {v['tasks_per_s']:.0f} | {v['median_ms']:.3f} / {v['best_ms']:.3f} |" for k, v in va.items()],
            "",
            "With verl's configuration composed and checked as well (issue 39's fast path, before and after):",
            "[benchmarks-compose.md](benchmarks-compose.md).",
            "",
        ]
    lines += findings(res)
    if res.get("notes"):
        lines += ["## Notes", "", *[f"- {n}" for n in res["notes"]], ""]
    path.write_text("\n".join(lines))


# --------------------------------------------------------------------------- main

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="the issue's sizes: " + ", ".join(f"{k}={v}" for k, v in ISSUE.items()))
    parser.add_argument("--makespan-tasks", type=int, default=None, help=f"tasks per side for the makespan (default {DEFAULTS['makespan_tasks']}; issue {ISSUE['makespan_tasks']})")
    parser.add_argument("--latency-tasks", type=int, default=None, help=f"tasks for the latency (default {DEFAULTS['latency_tasks']})")
    parser.add_argument("--latency-streams", type=int, default=3, help="client streams creating latency tasks (< --max-running)")
    parser.add_argument("--validation-runs", type=int, default=200)
    parser.add_argument("--max-running", type=int, default=4)
    parser.add_argument("--poll-interval", type=float, default=2.0, help="operator --poll-interval (default 2, the operator's default)")
    parser.add_argument("--raw-poll", type=float, default=0.2, help="seconds between status reads of the raw-Ray loop (default 0.2)")
    parser.add_argument("--skip", action="append", default=[], choices=["validation", "makespan", "latency", "progress"])
    parser.add_argument("--ray-cpus", default="auto", help="CPUs for Ray's processes (both nodes and their jobs); the control plane, the operator "
                        "and this benchmark get the others, on both sides of the makespan alike. auto: the last CPU; none: no pinning; "
                        "or a list such as 1 or 2,3 (default auto)")
    parser.add_argument("--progress-sources", type=lambda t: [x for x in t.split(",") if x], default=["stream", "file", "off"],
                        help="the operator's --progress-source values the makespan and the progress cost are run with, in turn "
                             "(default stream,file,off)")
    parser.add_argument("--progress-jobs", type=int, default=8, help="long jobs running while the progress cost is measured (default 8)")
    parser.add_argument("--progress-window", type=float, default=30, help="seconds the progress cost is measured per source (default 30)")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks.md", help="the report (default docs/benchmarks.md)")
    parser.add_argument("--json", type=Path, default=None, help="also write the raw results as JSON here")
    parser.add_argument("--work", type=Path, default=None, help="work directory (default: a new temp dir, removed unless --keep)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs of every process)")
    parser.add_argument("--before", type=Path, default=None, help="the --json of a run before a change: its headline figures are "
                        "shown beside this run's (section Before and after)")
    parser.add_argument("--before-label", default="the run of --before", help="what the --before run was (e.g. its commit)")
    argv = sys.argv[1:]
    args = parser.parse_args()
    for k, v in DEFAULTS.items():
        if getattr(args, k) is None:
            setattr(args, k, ISSUE[k] if args.full else v)
    if args.latency_streams >= args.max_running:
        parser.error("--latency-streams must be below --max-running (no queueing in the latency figure)")
    args.users = [f"u{i}" for i in range(10)]

    split = cpu_split(args.ray_cpus)
    started = time.monotonic()
    machine = machine_info()
    log(f"machine: {machine}")
    res: dict[str, Any] = {"machine": machine, "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                           "pinning": {"ray": sorted(split[0]), "rest": sorted(split[1])} if split else None}
    if args.before is not None:
        res["before"] = {"label": args.before_label, "results": json.loads(args.before.read_text())}
    if "validation" not in args.skip:
        res["validation"] = bench_validation(args.validation_runs)
        log(f"validation: {json.dumps(res['validation'])}")

    work = args.work or Path(tempfile.mkdtemp(prefix="argus-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    tb = watch = None
    try:
        if not {"makespan", "latency", "progress"} <= set(args.skip):
            if split:  # the control plane, the operators and this benchmark: off Ray's CPUs
                os.sched_setaffinity(0, split[1])
            tb = Testbed(work, users=("alice", "bob", *args.users))
            watch = TaskWatch(tb.kube).start()
            platform = PlatformConfig(root=str(tb.root), verl_code_path=str(STANDIN))
        if not {"makespan", "latency"} <= set(args.skip):
            with pinned_to(split[0] if split else None):
                tb.start_ray("ray-instant", {"VERL_STANDIN_INSTANT": "1"}, worker_gpus=max(4, args.max_running))
            run_makespan_and_latency(args, tb, watch, platform, res)
            tb.stop_ray()
        if "progress" not in args.skip:
            with pinned_to(split[0] if split else None):
                tb.start_ray("ray-steps", {"VERL_STANDIN_STEP_SECONDS": "1"}, worker_gpus=max(4, args.progress_jobs))
            res["progress_cost"] = bench_progress_cost(tb, watch, args.progress_sources, args.progress_jobs, args.progress_window, args.poll_interval)
            tb.stop_ray()
    finally:
        if watch:
            watch.stop()
        if tb:
            tb.close()
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
        elif tb:
            log(f"work directory kept: {work}")
    wall = time.monotonic() - started
    console, md = report(args, machine, res, wall)
    print("\n" + console + "\n", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_doc(args.out, args, argv, machine, res, md, wall)
    log(f"wrote {args.out} (whole run {wall / 60:.1f} min)")
    if args.json:
        args.json.write_text(json.dumps(res, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
