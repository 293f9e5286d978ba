"""Issue 13's measurements, on the real testbed (kube-apiserver + etcd with an audit log, a
Ray head + worker, the operator as a subprocess; only the trainer is the verl stand-in):

1. **Progress writes**: `--running` tasks (default 50) that print a verl step line every
   `--step-seconds` (0.5 s) run for `--window` seconds (60); the status patches the operator
   makes during the window are counted from the API server's audit log (per minute, and per
   task per minute), next to the bound `--progress-interval` promises (60 / interval).
2. **Cleanup**: `--cleanup-tasks` short tasks (default 1,000) with
   `ttlSecondsAfterFinished` (`--ttl`, 5 s): when all have ended, how many ArgusTasks and how
   many of their Ray jobs are left, how long it took, and the operator's calls for it (Ray
   calls by operation from its metrics; Kubernetes deletes and finalizer patches from the
   audit log).

    .venv/bin/python bench/lifecycle.py [--skip progress|cleanup] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from argus.core.times import parse_time
from benchlib import Testbed, free_port, log, machine_info, parallel, ppo_command, ray_jobs, scrape, task_body, wait_metrics


def audit_writes(audit_log: Path, since: float, until: float, ns_prefix: str) -> Counter[str]:
    """The operator's successful writes in a time window, by kind."""
    counts: Counter[str] = Counter()
    for line in audit_log.read_text().splitlines():
        e = json.loads(line)
        if e.get("stage") != "ResponseComplete" or e.get("userAgent", "").startswith(("kubectl", "argus-bench")):
            continue
        ref = e.get("objectRef") or {}
        if not (ref.get("namespace") or "").startswith(ns_prefix) or not 200 <= (e.get("responseStatus") or {}).get("code", 0) < 300:
            continue
        t = parse_time(e["stageTimestamp"]).timestamp()  # type: ignore[union-attr]
        if since <= t <= until:
            kind = ref.get("resource", "") + ("/" + ref["subresource"] if ref.get("subresource") else "")
            counts[f"{e['verb']} {kind}"] += 1
    return counts


def bench_progress(tb: Testbed, running: int, step_seconds: float, window: float, interval: float) -> dict[str, Any]:
    ns = "progress"
    tb.kube.namespace(ns, "alice")
    port = free_port()
    op = tb.start_operator("operator-progress", namespaces=[ns], max_running=running, metrics_port=port,
                           extra_args=["--progress-interval", str(interval)])
    wait_metrics(port)
    steps = int((window + 120) / step_seconds)
    parallel(lambda i: tb.kube.create(ns, task_body(f"p-{i:03d}", ppo_command(steps=steps))), range(running), workers=8)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        progressed = sum(1 for o in tb.kube.list(ns) if ((o.get("status") or {}).get("progress") or {}).get("step"))
        if progressed >= running:
            break
        time.sleep(2)
    log(f"progress: {running} tasks running and reporting steps; measuring {window:.0f} s")
    t0 = time.time()
    time.sleep(window)
    t1 = time.time()
    assert tb.cp.audit_log is not None
    writes = audit_writes(tb.cp.audit_log, t0, t1, ns)
    patches = writes.get("patch argustasks/status", 0)
    per_min = patches * 60 / (t1 - t0)
    out = {"running": running, "step_seconds": step_seconds, "window_s": round(t1 - t0, 1), "progress_interval": interval,
           "status_patches": patches, "status_patches_per_min": round(per_min, 1),
           "per_task_per_min": round(per_min / running, 2), "bound_per_task_per_min": round(60 / interval, 2),
           "other_writes": {k: v for k, v in writes.items() if k != "patch argustasks/status"}}
    log(f"progress: {patches} status patches in {t1 - t0:.0f} s: {per_min:.0f}/min, {per_min / running:.2f} per task per minute "
        f"(bound {60 / interval:.2f})")
    parallel(lambda o: tb.kube.patch_spec(ns, o["metadata"]["name"], {"cancel": True}), tb.kube.list(ns), workers=8)
    op.stop()
    return out


def bench_cleanup(tb: Testbed, n: int, ttl: int, max_running: int) -> dict[str, Any]:
    ns = "cleanup"
    tb.kube.namespace(ns, "alice")
    port = free_port()
    op = tb.start_operator("operator-cleanup", namespaces=[ns], max_running=max_running, metrics_port=port)
    wait_metrics(port)
    before = scrape(port)
    t0 = time.time()
    log(f"cleanup: {n} short tasks with ttlSecondsAfterFinished={ttl}")
    def body(i: int) -> dict[str, Any]:
        b = task_body(f"c-{i:04d}", ppo_command(steps=1))
        b["spec"]["ttlSecondsAfterFinished"] = ttl
        return b
    parallel(lambda i: tb.kube.create(ns, body(i)), range(n), workers=8)
    peak_jobs = peak_tasks = 0
    deadline = time.monotonic() + 3 * 3600
    while time.monotonic() < deadline:
        tasks = len(tb.kube.list(ns))
        jobs = sum(1 for j in ray_jobs(tb.ray.dashboard_url) if (j.submission_id or "").startswith(f"argus-{ns}-"))
        peak_jobs, peak_tasks = max(peak_jobs, jobs), max(peak_tasks, tasks)
        if tasks == 0 and jobs == 0:
            break
        time.sleep(5)
    t1 = time.time()
    after = scrape(port)
    ray_calls = {k.split('"')[1]: after.get(k, 0) - before.get(k, 0) for k in after if k.startswith("argus_ray_api_calls_total{")}
    assert tb.cp.audit_log is not None
    writes = audit_writes(tb.cp.audit_log, t0, t1 + 5, ns)
    tasks_left = len(tb.kube.list(ns))
    jobs_left = sum(1 for j in ray_jobs(tb.ray.dashboard_url) if (j.submission_id or "").startswith(f"argus-{ns}-"))
    out = {"tasks": n, "ttl_s": ttl, "max_running": max_running, "seconds": round(t1 - t0), "tasks_left": tasks_left, "ray_jobs_left": jobs_left,
           "peak_ray_jobs_in_history": peak_jobs, "peak_tasks": peak_tasks, "ray_calls": {k: int(v) for k, v in ray_calls.items() if v},
           "kubernetes_writes": dict(writes)}
    log(f"cleanup: after {t1 - t0:.0f} s: {tasks_left} ArgusTasks and {jobs_left} Ray jobs left (peak {peak_jobs} jobs in Ray's history); "
        f"Ray calls {out['ray_calls']}; writes {dict(writes)}")
    op.stop()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--running", type=int, default=50)
    parser.add_argument("--step-seconds", type=float, default=0.5)
    parser.add_argument("--window", type=float, default=60)
    parser.add_argument("--progress-interval", type=float, default=15)
    parser.add_argument("--cleanup-tasks", type=int, default=1000)
    parser.add_argument("--ttl", type=int, default=5)
    parser.add_argument("--max-running", type=int, default=8, help="for the cleanup run")
    parser.add_argument("--skip", action="append", default=[], choices=["progress", "cleanup"])
    parser.add_argument("--json")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="argus-lifecycle-"))
    tb = Testbed(work, audit=True)
    results: dict[str, Any] = {"machine": machine_info()}
    try:
        if "progress" not in args.skip:
            tb.start_ray("ray-progress", {"VERL_STANDIN_STEP_SECONDS": str(args.step_seconds)}, worker_gpus=args.running + 4)
            results["progress"] = bench_progress(tb, args.running, args.step_seconds, args.window, args.progress_interval)
            tb.stop_ray()
        if "cleanup" not in args.skip:
            tb.start_ray("ray-cleanup", {"VERL_STANDIN_INSTANT": "1"}, worker_gpus=args.max_running + 4)
            results["cleanup"] = bench_cleanup(tb, args.cleanup_tasks, args.ttl, args.max_running)
    finally:
        tb.close()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({k: v for k, v in results.items() if k != "machine"}, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
