"""Status writes for a long queue (issue 26, item 1): N tasks wait behind a few running ones
for M minutes while the queue moves (each admission moves every waiting task up one
place), counted by the real kube-apiserver's audit log as bench/api_writes.py counts them.

    .venv/bin/python bench/waiting_writes.py                       # 1,000 tasks, 30 minutes
    ARGUS_BENCH_OPERATOR_PYTHONPATH=/tmp/before/operator .venv/bin/python bench/waiting_writes.py
                                              # another checkout's operator (with its CRD)

The queue: ``--running`` slots (``--max-running``), every task a stand-in run of
``--run-seconds``, so a slot frees and the head of the queue is admitted about every
run-seconds / running seconds. Before issue 26 the operator wrote each waiting task's place
into its status and refreshed the places that moved; since, places are served on demand
(``pendingtasks``) and a waiting task's status is written when it is queued and again only
when its reason or message changes.

Reported: status patches (``argustasks/status``) the operator sent in the window, in all and
for the tasks that waited the whole window, per minute; the waiting tasks' metadata patches
and Events; the operator's RSS and CPU.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchlib import TaskWatch, Testbed, cpu_seconds, log, machine_info, memory, parallel, ppo_command, task_body

NS = "waiting"
CHECKPOINTS = "trainer.default_local_dir=$HOME/models/checkpoints"  # no WeakCheck Event (see api_writes.py)


def operator_writes(audit_log: Path, ns: str, since: float) -> list[dict[str, Any]]:
    """Every successful write about an ArgusTask of `ns` (or an Event about one) the operator
    sent after `since` (epoch seconds): (task, kind, seconds since `since`)."""
    out = []
    with audit_log.open() as f:
        for line in f:
            event = json.loads(line)
            if event.get("stage") != "ResponseComplete" or event.get("userAgent", "").startswith(("kubectl", "argus-bench")):
                continue
            ref = event.get("objectRef") or {}
            if ref.get("namespace") != ns or event.get("verb") not in ("create", "update", "patch"):
                continue
            if not 200 <= (event.get("responseStatus") or {}).get("code", 0) < 300:
                continue
            at = dt.datetime.fromisoformat(event["stageTimestamp"].replace("Z", "+00:00")).timestamp()
            if at < since:
                continue
            if ref.get("resource") == "argustasks":
                kind = "status" if ref.get("subresource") == "status" else "metadata"
                task = ref.get("name") or ""
            elif ref.get("resource") == "events":
                body = event.get("requestObject") or {}
                task = (body.get("involvedObject") or body.get("regarding") or {}).get("name", "")
                kind = f"event {body.get('reason', '?')}"
            else:
                continue
            out.append({"task": task, "kind": kind, "t": at - since})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=1000, help="tasks created at once (default 1000)")
    parser.add_argument("--minutes", type=float, default=30, help="the window, from the moment all are queued (default 30)")
    parser.add_argument("--max-running", type=int, default=2, help="slots (default 2)")
    parser.add_argument("--run-seconds", type=int, default=60, help="each task's run (default 60)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    operator = os.environ.get("ARGUS_BENCH_OPERATOR_PYTHONPATH") or "this checkout"
    machine = machine_info()
    log(f"machine: {machine}; operator: {operator}")
    work = Path(tempfile.mkdtemp(prefix="argus-waiting-"))
    tb = Testbed(work, audit=True)
    watch = TaskWatch(tb.kube).start()
    try:
        tb.start_ray("ray", {"VERL_STANDIN_STEP_SECONDS": "1"}, worker_gpus=max(4, args.max_running))
        tb.kube.namespace(NS, "alice")
        op = tb.start_operator("operator", namespaces=[NS], max_running=args.max_running, poll_interval=2.0)
        command = ppo_command(steps=args.run_seconds, extra=CHECKPOINTS)
        names = [f"t{i:04d}" for i in range(args.tasks)]
        log(f"creating {args.tasks} tasks")
        parallel(lambda n: tb.kube.create(NS, task_body(n, command)), names, workers=8)
        watch.wait(lambda: sum(1 for p in watch.phases(NS).values() if p) >= args.tasks, 600, "every task to have a phase")
        since = time.time()
        c0 = cpu_seconds(op.proc.pid)
        log(f"all {args.tasks} have a phase; the window runs {args.minutes:g} min")
        time.sleep(args.minutes * 60)
        window = time.time() - since
        cpu = (cpu_seconds(op.proc.pid) - c0) / window
        rss = memory(op.proc.pid)
        phases = Counter(watch.phases(NS).values())
        # The tasks still waiting at the end waited the whole window (the queue is FIFO).
        still_waiting = {n for n, p in watch.phases(NS).items() if p == "Queued"}
        time.sleep(3)  # events are posted in the background
        assert tb.cp.audit_log is not None
        writes = operator_writes(tb.cp.audit_log, NS, since)
    finally:
        watch.stop()
        tb.close()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    status = [w for w in writes if w["kind"] == "status"]
    waiting = [w for w in writes if w["task"] in still_waiting]
    per_minute = Counter(int(w["t"] // 60) for w in status)
    result = {
        "machine": machine, "operator": operator, "tasks": args.tasks, "window_minutes": round(window / 60, 1),
        "max_running": args.max_running, "run_seconds": args.run_seconds, "phases_at_end": dict(phases),
        "admitted_by_the_end": args.tasks - len(still_waiting),
        "status_patches": len(status), "status_patches_per_task": len(status) / args.tasks,
        "waited_throughout": len(still_waiting),
        "their_writes": dict(Counter(w["kind"] for w in waiting)),
        "writes_by_kind": dict(Counter(w["kind"] for w in writes)),
        "status_patches_per_minute": [per_minute.get(m, 0) for m in range(int(window // 60) + 1)],
        "operator_cpu_percent": round(100 * cpu, 1), "operator_rss_mib": round(rss["rss_mib"]), "operator_peak_rss_mib": round(rss["peak_rss_mib"]),
    }
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
