"""API writes per task, counted by the real kube-apiserver's audit log (every create,
update, patch and delete it receives), for a task that validates, runs and succeeds:

- ``at once``: created while the queue has room;
- ``queued``: created while another task holds the only slot, then run.

Writes counted per task: status patches (``argustasks/status``), metadata patches of the
object (finalizers, annotations), Events about it; everything the operator sends, nothing
the benchmark itself sends (kubectl, and its own client, have user agents of their own).

    .venv/bin/python bench/api_writes.py [--operator-pythonpath OLD/operator] [--json FILE]

``--operator-pythonpath`` runs another checkout's operator (``git worktree add /tmp/old
<commit>``) against the same testbed: the before/after figure of issue 12.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchlib import Testbed, machine_info, ppo_command, task_body

NS = "writes"
# The checkpoints in an absolute folder of the user's: verl's default is relative, which
# Argus makes absolute and says so in a WeakCheck Event (one more write, per warning).
CHECKPOINTS = "trainer.default_local_dir=$HOME/models/checkpoints"


def writes_by_task(audit_log: Path, ns: str, tasks: list[str]) -> dict[str, Counter[str]]:
    """What the operator wrote about each task, from the API server's audit log."""
    counts: dict[str, Counter[str]] = {t: Counter() for t in tasks}
    for line in audit_log.read_text().splitlines():
        event = json.loads(line)
        agent = event.get("userAgent", "")
        if event.get("stage") != "ResponseComplete" or agent.startswith(("kubectl", "argus-bench")):
            continue
        ref = event.get("objectRef") or {}
        if ref.get("namespace") != ns or event.get("verb") not in ("create", "update", "patch"):
            continue
        code = (event.get("responseStatus") or {}).get("code", 0)
        if not 200 <= code < 300:
            continue
        name = ref.get("name") or ""
        if ref.get("resource") == "argustasks" and name in counts:
            counts[name]["status patches" if ref.get("subresource") == "status" else "metadata patches"] += 1
        elif ref.get("resource") == "events":
            body = event.get("requestObject") or {}
            task = (body.get("involvedObject") or body.get("regarding") or {}).get("name")
            if task in counts:
                counts[task]["events"] += 1
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--operator-pythonpath", help="PYTHONPATH for the operator subprocess (another checkout's operator/)")
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="argus-writes-"))
    tb = Testbed(work, audit=True)
    try:
        tb.start_ray("ray", {"VERL_STANDIN_STEP_SECONDS": "0.3"})
        tb.kube.namespace(NS, "alice")
        env = {"PYTHONPATH": args.operator_pythonpath} if args.operator_pythonpath else None
        op = tb.start_operator("operator", namespaces=[NS], max_running=1, poll_interval=2.0, extra_env=env)
        apply = lambda body: tb.cp.kubectl("apply", "-n", NS, "-f", "-", input=json.dumps(body))  # noqa: E731
        # 1. Admitted at once, run to the end.
        apply(task_body("at-once", ppo_command(steps=3, extra=CHECKPOINTS)))
        wait_phase(tb, "at-once", "Succeeded", op)
        # 2. Created behind a running task (the only slot), then run to the end.
        apply(task_body("blocker", ppo_command(steps=20)))
        wait_phase(tb, "blocker", "Running", op)
        apply(task_body("queued", ppo_command(steps=3, extra=CHECKPOINTS)))
        wait_phase(tb, "queued", "Succeeded", op, timeout=180)
        time.sleep(3)  # events are posted in the background: let the last ones land
        assert tb.cp.audit_log is not None
        counts = writes_by_task(tb.cp.audit_log, NS, ["at-once", "queued"])
    finally:
        tb.close()
        if not args.keep:
            import shutil
            shutil.rmtree(work, ignore_errors=True)
    rows = {task: {**{k: c.get(k, 0) for k in ("status patches", "metadata patches", "events")}, "total": sum(c.values())}
            for task, c in counts.items()}
    print(f"\nAPI writes per task (operator: {args.operator_pythonpath or 'this checkout'})")
    print(f"{'task':10} {'status':>7} {'metadata':>9} {'events':>7} {'total':>6}")
    for task, r in rows.items():
        print(f"{task:10} {r['status patches']:>7} {r['metadata patches']:>9} {r['events']:>7} {r['total']:>6}")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine_info(), "operator": args.operator_pythonpath or "this checkout",
                                               "writes": rows}, indent=2))
    return 0


def wait_phase(tb: Testbed, name: str, phase: str, op: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        obj = tb.kube.get(NS, name)
        if (obj.get("status") or {}).get("phase") == phase:
            return
        time.sleep(0.2)
    raise TimeoutError(f"{name} did not reach {phase}; operator log:\n{op.log_tail(40)}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
