#!/usr/bin/env python3
"""Argus at scale (issue 26, item 4): one operator over 1,000 and then 10,000 ArgusTasks on a
real testbed (kube-apiserver + etcd, a Ray head and a worker on loopback), with a tenth of
them queued and --running of them running for real.

    .venv/bin/python bench/scale.py                  # 1,000 then 10,000; writes docs/benchmarks-scale.{md,json}
    .venv/bin/python bench/scale.py --render         # the .md again from the .json (no run)

The objects grow as a cluster's do, in two steps, each a first start over tasks no operator
has handled (created while none runs):

1. 1,000: the operator starts (--max-running R/2) over 1,000 never-handled tasks (R of
   priority 10 that run until cancelled, a tenth queued, the rest created cancelled: they end
   without Ray); window A with R/2 running; a restart with --max-running R (the time until it
   handles a task created right after); window B with R running.
2. 10,000: the operator stops; 9,000 more never-handled tasks (900 queued, 8,100 cancelled);
   a first start over all 10,000; window C with R running; a restart.

In each window (--window seconds, the operator quiet first): the operator's CPU and RSS, its
Ray API calls per minute (``argus_ray_api_calls_total``), and the admission pass's p50 and p99
from the bucket deltas of ``argus_admission_pass_seconds`` over the window (interpolated in
the bucket, as Prometheus's histogram_quantile). A first start: the time until every new task
has a phase, and the operator's peak RSS (VmHWM) meanwhile.

Why R is not 200 here: every running job is a JobSupervisor actor and the stand-in trainer,
two Python processes of about 110 MiB together; 200 of them want 22 GiB, this machine's whole
memory. The Ray calls' growth is measured with R/2 and R running instead, and the objects'
with 1,000 and 10,000 at the same R.

Ray's processes, and so every running job, are pinned to their own CPU(s) and the control
plane, the operator and the benchmark to the others (--ray-cpus, as bench/run.py does): the
running jobs' own work does not slow the operator's figures down.

A benchmark, not a test: the figures depend on the machine and its load (recorded).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchlib import (
    REPO,
    TaskWatch,
    Testbed,
    affinities,
    cpu_seconds,
    cpu_split,
    free_port,
    loadavg,
    log,
    machine_info,
    memory,
    parallel,
    pinned_to,
    ppo_command,
    scrape,
    task_body,
    wait_metrics,
)

OUT = REPO / "docs" / "benchmarks-scale.md"
PASS = "argus_admission_pass_seconds"
USERS = [f"u{i}" for i in range(10)]
TARGETS = {"rss_mib": 400, "admission_p99_ms": 50, "restart_seconds": 10}


# --------------------------------------------------------------------------- measuring

class RssSampler:
    """Samples a process's RSS every second in a thread; keeps the highest."""

    def __init__(self, pid: int):
        self.pid, self.peak, self._stop = pid, 0.0, threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self.peak = max(self.peak, memory(self.pid)["rss_mib"])
            except OSError:
                return

    def stop(self) -> float:
        self._stop.set()
        try:
            return max(self.peak, memory(self.pid)["peak_rss_mib"])
        except OSError:
            return self.peak


def quiet(pid: int, threshold: float, window: float = 5.0, timeout: float = 180) -> float:
    """Wait until the process uses less than `threshold` of a core over `window` seconds."""
    t_end = time.monotonic() + timeout
    while True:
        c0 = cpu_seconds(pid)
        time.sleep(window)
        used = (cpu_seconds(pid) - c0) / window
        if used < threshold or time.monotonic() > t_end:
            return used


def buckets(metrics: dict[str, float], name: str) -> list[tuple[float, float]]:
    """A histogram's cumulative buckets (upper bound, count), +Inf last."""
    out = []
    for key, value in metrics.items():
        if key.startswith(f"{name}_bucket{{"):
            le = key.split('le="', 1)[1].split('"', 1)[0]
            out.append((math.inf if le == "+Inf" else float(le), value))
    return sorted(out)


def quantile(q: float, before: list[tuple[float, float]], after: list[tuple[float, float]]) -> float | None:
    """The q-quantile (0..1) of the observations between two scrapes of a histogram,
    interpolated linearly inside its bucket as Prometheus's histogram_quantile does; None
    without observations. Above the last finite bound: that bound."""
    counts = [(le, a - b) for (le, a), (_, b) in zip(after, before, strict=True)]
    total = counts[-1][1] if counts else 0
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for le, cumulative in counts:
        if cumulative >= rank:
            if math.isinf(le):
                return lower
            inside = cumulative - below
            return lower + (le - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = le, cumulative
    return lower


def ray_calls(metrics: dict[str, float]) -> float:
    return sum(v for k, v in metrics.items() if k.startswith("argus_ray_api_calls_total"))


def measure(op: Any, seconds: float, label: str) -> dict[str, Any]:
    """One window over a running operator."""
    pid, port = op.proc.pid, op.metrics_port
    quiet(pid, 0.25, timeout=90)
    m0, c0, t0 = scrape(port), cpu_seconds(pid), time.monotonic()
    rss = []
    while time.monotonic() - t0 < seconds:
        time.sleep(min(5.0, max(0.0, seconds - (time.monotonic() - t0))))
        rss.append(memory(pid)["rss_mib"])
    m1, c1, t1 = scrape(port), cpu_seconds(pid), time.monotonic()
    elapsed = t1 - t0
    b0, b1 = buckets(m0, PASS), buckets(m1, PASS)
    p50, p99 = quantile(0.5, b0, b1), quantile(0.99, b0, b1)
    phases = {k.split('"')[1]: int(v) for k, v in m1.items() if k.startswith("argus_tasks{") and v}
    out = {"label": label, "objects": sum(phases.values()), "tasks_by_phase": phases, "window_s": round(elapsed, 1),
           "cpu_percent_of_one_core": round(100 * (c1 - c0) / elapsed, 1), "rss_mib": max(rss),
           "ray_calls_per_min": round((ray_calls(m1) - ray_calls(m0)) * 60 / elapsed, 1),
           "admission_passes": int((b1[-1][1] - b0[-1][1]) if b1 else 0),
           "admission_p50_ms": round(p50 * 1e3, 2) if p50 is not None else None,
           "admission_p99_ms": round(p99 * 1e3, 2) if p99 is not None else None, "load": loadavg()}
    log(f"window {label}: {json.dumps(out)}")
    return out


# --------------------------------------------------------------------------- the run

class Scale:
    def __init__(self, tb: Testbed, watch: TaskWatch, running: int, poll: float):
        self.tb, self.watch, self.running, self.poll = tb, watch, running, poll
        self.op: Any = None
        self.names: dict[str, list[tuple[str, str]]] = {"run": [], "queued": [], "done": []}

    def start(self, name: str, max_running: int) -> Any:
        self.op = self.tb.start_operator(name, max_running=max_running, poll_interval=self.poll, metrics_port=free_port())
        return self.op

    def create(self, kind: str, n: int, **kw: Any) -> None:
        first = len(self.names[kind])
        items = [(f"scale-{USERS[i % len(USERS)]}", f"{kind}-{i:05d}") for i in range(first, first + n)]
        self.names[kind] += items
        command = ppo_command(steps=1_000_000)
        parallel(lambda it: self.tb.kube.create(it[0], task_body(it[1], command, **kw)), items, workers=8)

    def handled(self) -> int:
        """Tasks with a phase."""
        with self.watch.cond:
            return sum(1 for items in self.names.values() for key in items
                       if ((self.watch.objects.get(key) or {}).get("status") or {}).get("phase"))

    def count(self, kind: str, phase: str) -> int:
        with self.watch.cond:
            return sum(1 for key in self.names[kind] if ((self.watch.objects.get(key) or {}).get("status") or {}).get("phase") == phase)

    def total(self) -> int:
        return sum(len(v) for v in self.names.values())

    def first_start(self, name: str, max_running: int, timeout: float) -> dict[str, Any]:
        """Start an operator over the objects there are, some never handled: the time until
        every task has a phase, and its peak RSS meanwhile."""
        before = self.handled()
        t0 = time.monotonic()
        op = self.start(name, max_running)
        sampler = RssSampler(op.proc.pid)
        objects = self.total()
        try:
            self.watch.wait(lambda: self.handled() >= objects, timeout, f"{objects} tasks to have a phase")
            done = True
        except TimeoutError:
            done = False
        seconds = time.monotonic() - t0
        out = {"objects": objects, "never_handled": objects - before, "done": done, "handled_new": self.handled() - before,
               "seconds": round(seconds, 1), "peak_rss_mib": sampler.stop(), "cpu_seconds": round(cpu_seconds(op.proc.pid), 1),
               "load": loadavg()}
        log(f"first start: {json.dumps(out)}")
        return out

    def restart(self, name: str, max_running: int, timeout: float) -> dict[str, Any]:
        """Restart the operator (an upgrade, a crash, a leader change): the time until it has
        handled a task created right after the restart."""
        self.op.stop()
        t0, wall0 = time.monotonic(), time.time()
        op = self.start(name, max_running)
        sampler = RssSampler(op.proc.pid)
        wait_metrics(op.metrics_port)
        metrics_after = time.monotonic() - t0
        ns, probe = f"scale-{USERS[0]}", f"probe-{name}"
        self.tb.kube.create(ns, task_body(probe, ppo_command(), cancel=True))
        self.watch.wait(lambda: self.watch.phase(ns, probe) == "Stopped", timeout, "the probe task to be handled")
        seconds = time.monotonic() - t0
        self.names["done"].append((ns, probe))
        out = {"objects": self.total(), "seconds": round(seconds, 1), "metrics_after_s": round(metrics_after, 1),
               "listed_after_s": listed_after(op.log_path, wall0), "peak_rss_mib": sampler.stop(), "load": loadavg()}
        log(f"restart: {json.dumps(out)}")
        return out


def listed_after(log_path: Path, wall0: float) -> float | None:
    """Seconds from ``wall0`` (the operator's start, time.time()) to its log's "listed N
    ArgusTasks" line: where a restart's time goes (start-up, then the LIST, then the tick)."""
    try:
        for line in log_path.read_text(errors="replace").splitlines():
            if "argus.adapters.taskcache: listed" in line:
                stamp = dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")  # logging's asctime: local time
                return round(stamp.timestamp() - wall0, 1)
    except (OSError, ValueError):
        pass
    return None


def first_start_timeout(args: argparse.Namespace, never_handled: int) -> float:
    """--timeout, or by default 300 s plus 0.3 s per never-handled task (each is validated:
    its command parsed, its verl configuration composed)."""
    return args.timeout if args.timeout else 300 + 0.3 * never_handled


def run(args: argparse.Namespace, save: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """The run; ``save`` keeps what is measured so far after each step (an unfinished run
    still leaves its figures)."""
    small, large, r = args.small, args.large, args.running
    split = cpu_split(args.ray_cpus)
    res: dict[str, Any] = {"machine": machine_info(), "small": small, "large": large, "running": r, "window_s": args.window,
                           "poll_interval": args.poll_interval, "notes": [],
                           "pinning": {"ray": sorted(split[0]), "rest": sorted(split[1])} if split else None}
    work = Path(tempfile.mkdtemp(prefix="argus-scale-"))
    tb = watch = None
    started = time.monotonic()
    try:
        if split:  # the control plane, the operators and this benchmark: off Ray's CPUs
            os.sched_setaffinity(0, split[1])
        tb = Testbed(work, users=("alice", *USERS))
        for u in USERS:
            tb.kube.namespace(f"scale-{u}", u)
        watch = TaskWatch(tb.kube).start()
        with pinned_to(split[0] if split else None):
            tb.start_ray("ray-long", {"VERL_STANDIN_STEP_SECONDS": "5"}, worker_gpus=max(r, 8), worker_resource_amount=1000)
        s = Scale(tb, watch, r, args.poll_interval)

        queued = small // 10
        log(f"{small}: creating {r} long tasks, {queued} queued, {small - r - queued} cancelled, while no operator runs")
        s.create("run", r, priority=10)
        s.create("queued", queued, priority=0)
        s.create("done", small - r - queued, cancel=True)
        res["first_start_small"] = s.first_start("operator-1", r // 2, first_start_timeout(args, small))
        if split:  # read back from /proc: the pinning's evidence
            res["affinity"] = affinities(tb, s.op)
        save(res)
        if not res["first_start_small"]["done"]:
            res["notes"].append(f"the first start over {small} tasks did not end within its timeout: the run stopped there")
            return res
        watch.wait(lambda: s.count("run", "Running") >= r // 2, 600, f"{r // 2} tasks Running")
        res["window_small_half"] = measure(s.op, args.window, f"{small} objects, {r // 2} running")
        res["restart_small"] = s.restart("operator-2", r, args.timeout or 300)
        watch.wait(lambda: s.count("run", "Running") >= r, 600, f"{r} tasks Running")
        res["window_small"] = measure(s.op, args.window, f"{small} objects, {r} running")
        save(res)

        s.op.stop()
        more_queued = large // 10 - queued
        more_done = large - small - more_queued
        log(f"{large}: creating {more_queued} more queued and {more_done} more cancelled, while no operator runs")
        t0 = time.monotonic()
        s.create("queued", more_queued, priority=0)
        s.create("done", more_done, cancel=True)
        res["create_seconds_large"] = round(time.monotonic() - t0, 1)
        res["first_start_large"] = s.first_start("operator-3", r, first_start_timeout(args, more_queued + more_done))
        save(res)
        if not res["first_start_large"]["done"]:
            res["notes"].append(f"the first start over {large} tasks did not end within its timeout: the run stopped there")
            return res
        res["window_large"] = measure(s.op, args.window, f"{large} objects, {r} running")
        res["restart_large"] = s.restart("operator-4", r, args.timeout or 300)
        s.op.stop()
    finally:
        res["wall_minutes"] = round((time.monotonic() - started) / 60, 1)
        if watch:
            watch.stop()
        if tb:
            tb.close()
        shutil.rmtree(work, ignore_errors=True)
    res["wall_minutes"] = round((time.monotonic() - started) / 60, 1)
    save(res)
    return res


# --------------------------------------------------------------------------- the report

def growth(a: float | None, b: float | None) -> str:
    return f"×{b / a:.2f}" if a and b is not None else "n/a"


def table(res: dict[str, Any]) -> list[str]:
    """The growth table (docs/benchmarks-scale.md, and docs/benchmarks.md through bench/run.py)."""
    small, large, r = res["small"], res["large"], res["running"]
    missing: dict[str, Any] = {"rss_mib": None, "cpu_percent_of_one_core": None, "admission_p50_ms": None, "admission_p99_ms": None,
                               "ray_calls_per_min": None, "seconds": None, "peak_rss_mib": None, "never_handled": 0}
    ws, wl, wh = (res.get(k) or missing for k in ("window_small", "window_large", "window_small_half"))
    fs, fl = res.get("first_start_small") or missing, res.get("first_start_large") or missing
    rs, rl = res.get("restart_small") or missing, res.get("restart_large") or missing

    def ms(v: float | None) -> str:
        return f"{v:.1f} ms" if v is not None else "n/a"

    def n(v: float | None, fmt: str = ".0f") -> str:
        return "not measured" if v is None else format(v, fmt)

    def first(f: dict[str, Any]) -> str:
        if f["seconds"] is None:
            return "not measured"
        if f.get("done", True):
            return f"{f['seconds']:.0f} ({f['never_handled']:,} new)"
        return f"not done: {f['handled_new']:,} of {f['never_handled']:,} new in {f['seconds']:.0f}"

    def ok(value: float | None, target: float) -> str:
        return "n/a" if value is None else ("yes" if value < target else "**no**")

    rows = [
        ("Operator RSS, steady (MiB)", n(ws["rss_mib"]), n(wl["rss_mib"]), growth(ws["rss_mib"], wl["rss_mib"]),
         f"< {TARGETS['rss_mib']}: {ok(wl['rss_mib'], TARGETS['rss_mib'])}"),
        ("Operator CPU, steady (% of a core)", n(ws["cpu_percent_of_one_core"], ".1f"), n(wl["cpu_percent_of_one_core"], ".1f"),
         growth(ws["cpu_percent_of_one_core"], wl["cpu_percent_of_one_core"]), ""),
        ("Admission pass p50", ms(ws["admission_p50_ms"]), ms(wl["admission_p50_ms"]), growth(ws["admission_p50_ms"], wl["admission_p50_ms"]), ""),
        ("Admission pass p99", ms(ws["admission_p99_ms"]), ms(wl["admission_p99_ms"]), growth(ws["admission_p99_ms"], wl["admission_p99_ms"]),
         f"< {TARGETS['admission_p99_ms']} ms: {ok(wl['admission_p99_ms'], TARGETS['admission_p99_ms'])}"),
        (f"Ray API calls per minute ({r} running)", n(ws["ray_calls_per_min"]), n(wl["ray_calls_per_min"]),
         growth(ws["ray_calls_per_min"], wl["ray_calls_per_min"]), f"{r // 2} running at {small:,}: {n(wh['ray_calls_per_min'])}"),
        ("Restart: a new task handled after (s)", n(rs["seconds"], ".1f"), n(rl["seconds"], ".1f"), growth(rs["seconds"], rl["seconds"]),
         f"< {TARGETS['restart_seconds']} s: {ok(rl['seconds'], TARGETS['restart_seconds'])}"),
        ("Restart: of which until the operator had listed the tasks (s)", n(rs.get("listed_after_s"), ".1f"),
         n(rl.get("listed_after_s"), ".1f"), growth(rs.get("listed_after_s"), rl.get("listed_after_s")), ""),
        ("Restart: peak RSS (MiB)", n(rs["peak_rss_mib"]), n(rl["peak_rss_mib"]), growth(rs["peak_rss_mib"], rl["peak_rss_mib"]), ""),
        ("First start: all tasks have a phase (s)", first(fs), first(fl),
         growth(fs["seconds"], fl["seconds"]) if fl.get("done", True) else "n/a", ""),
        ("First start: peak RSS (MiB)", n(fs["peak_rss_mib"]), n(fl["peak_rss_mib"]), growth(fs["peak_rss_mib"], fl["peak_rss_mib"]),
         f"< {TARGETS['rss_mib']}: {ok(fl['peak_rss_mib'], TARGETS['rss_mib']) if fl.get('done', True) else 'n/a (not done)'}"),
    ]
    out = [f"| | {small:,} objects | {large:,} objects | growth (objects ×{large / small:g}) | target |", "|---|---:|---:|---:|---|"]
    out += [f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in rows]
    return out


def render(res: dict[str, Any]) -> str:
    m = res["machine"]
    windows = [w for w in (res.get("window_small_half"), res.get("window_small"), res.get("window_large")) if w]
    calls = {w["label"]: w["ray_calls_per_min"] for w in windows}
    lines = [
        "# Argus at scale: 1,000 and 10,000 tasks",
        "",
        "Generated by `bench/scale.py`; `bench/scale.py --render` rewrites this page from",
        "`docs/benchmarks-scale.json`. A benchmark, not a test: the figures depend on the machine and its load.",
        "",
        f"Machine: {m.get('nproc')} CPUs ({m.get('cpu_model')}), {m.get('memory_gib', '?')} GiB, {m.get('date')}, Python "
        f"{m.get('python')}, Ray {m.get('ray')}, kube-apiserver {m.get('kube_apiserver')}; load average at the start "
        f"{m.get('load_average_at_start')}. Whole run {res['wall_minutes']} min.",
        "",
        f"Each size: a tenth of the tasks queued, {res['running']} running for real (stand-in jobs that print a step every 5 s, "
        "followed for progress), the rest ended. Windows of "
        f"{res['window_s']:.0f} s with the operator quiet first; operator `--poll-interval {res['poll_interval']:g}`.",
        "",
        *([f"CPUs pinned (`--ray-cpus`): Ray's processes, and so the running jobs, on CPU(s) {res['pinning']['ray']}; the "
           f"control plane, the operator and the benchmark on {res['pinning']['rest']} (read back from /proc: "
           + ", ".join(f"{k} {'/'.join(v)}" for k, v in (res.get("affinity") or {}).items()) + ").", ""]
          if res.get("pinning") else ["CPUs not pinned: the running jobs shared the CPUs with the operator.", ""]),
        *table(res),
        "",
        "Phases in each window (the operator's `argus_tasks` gauge):",
        "",
        *[f"- {w['label']}: {w['tasks_by_phase']} (load {w['load']})" for w in windows],
        "",
        *([f"**This run is incomplete**: {'; '.join(res['notes'])}.", ""] if res.get("notes") else []),
        *[line for c in res.get("caveats", []) for line in (f"**Caveat**: {c}", "")],
        "How to read it:",
        "",
        "- **Ray calls follow the running tasks, not the objects**: per minute, "
        + "; ".join(f"{v:.0f} with {k}" for k, v in calls.items())
        + ". Each running job's status is read every poll interval and its log followed; a queued or ended task costs Ray nothing.",
        "- **The tick follows the tasks that live**: an ended task is looked at once, then passed by until it changes or its "
        "time to live runs out (`operator/argus/controller/idle.py`), and a waiting task is stepped again only when its "
        "view or its answer changes. Every watch event and every poll interval runs a tick; what one costs before and after "
        "that change is measured over the in-memory fakes by `bench/tick_cost.py` (docs/benchmarks.md). What still grows "
        "with the objects is one pass over the cache's views per tick (the overlay of recent writes, the phase gauge, "
        "the settled check): linear, a few milliseconds per thousand objects, and the steady CPU grows less than the "
        "objects do.",
        "- **The admission pass grows with the queue, not the objects**: each size queues a tenth of its tasks, so the "
        "larger size's pass decides over ten times as many waiting tasks (sorted by priority and policy, each fitted "
        "to the nodes).",
        "- **A first start** validates every never-handled task (each command parsed and its verl configuration composed) "
        "and writes each one's first status: its time grows with the new tasks, its memory with the objects held.",
        f"- **Why {res['running']} running, not 200**: each running job is a JobSupervisor actor and the stand-in trainer, "
        "about 110 MiB together; 200 would want this machine's whole memory. The Ray calls' growth is measured with half "
        "and all of them instead.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=1000, help="objects at the first size (default 1000)")
    parser.add_argument("--large", type=int, default=10000, help="objects at the second size (default 10000)")
    parser.add_argument("--running", type=int, default=40, help="tasks running for real at each size (default 40; half of them in the first window)")
    parser.add_argument("--window", type=float, default=60, help="seconds each window is measured (default 60)")
    parser.add_argument("--poll-interval", type=float, default=2.0, help="operator --poll-interval (default 2, its default)")
    parser.add_argument("--timeout", type=float, default=0, help="seconds a first start or restart may take (default: 300 s for a "
                        "restart; for a first start, 300 s plus 0.3 s per never-handled task)")
    parser.add_argument("--ray-cpus", default="auto", help="the CPU(s) Ray's processes (and so the running jobs) are pinned to, the "
                        "control plane, the operator and this benchmark to the others: auto (the last CPU), none, or a list such as 1 or 2,3")
    parser.add_argument("--out", type=Path, default=OUT, help="the report (default docs/benchmarks-scale.md; the .json beside it)")
    parser.add_argument("--render", action="store_true", help="rewrite the report from its .json, without a run")
    args = parser.parse_args()
    if args.running < 2 or args.small <= args.running + args.small // 10 or args.large <= args.small:
        parser.error("needs --running >= 2, --small > --running + a tenth of it, --large > --small")
    data = args.out.with_suffix(".json")
    def save(res: dict[str, Any]) -> None:
        data.write_text(json.dumps(res, indent=1, default=str) + "\n")

    res = json.loads(data.read_text()) if args.render else run(args, save)
    args.out.write_text(render(res))
    print("\n".join(table(res)))
    log(f"wrote {args.out} and {data}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
