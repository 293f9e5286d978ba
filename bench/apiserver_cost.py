"""What one write of the operator costs the real kube-apiserver + etcd, in CPU, measured apart
from everything else (issue 39): the denominator of docs/benchmarks-first-start.md's breakdown.

It starts a control plane of its own with a CRD (this checkout's, or ``--crd FILE``: e.g. the
CRD of another commit, to see what its CEL rules cost), creates ``--calls`` ArgusTasks as
bench/first_start.py does (advanced PPO specs), then sends, eight at a time, through the same
Kubernetes client the operator uses:

- ``status``: one status merge patch a task, the first status of a queued task as the operator
  writes it (phase, reason, six conditions, the generated command, a warning);
- ``event``: one Event a task, as the operator posts it.

and prints the API server's and etcd's CPU per call. ``--profile DIR`` also takes a Go CPU
profile of the API server during each (``go tool pprof -top DIR/status.pprof``).
``--identity`` says who sends them: the testbed's admin (a client certificate) or the chart's
ServiceAccount with its RBAC and a token, as the operator in a cluster; give both, with
``--rounds``, to compare them in alternated passes.

    .venv/bin/python bench/apiserver_cost.py [--calls 1500] [--crd crds/argus.io_argustasks.yaml] [--profile DIR]
        [--identity admin --identity serviceaccount --rounds 4]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from argus_testbed.controlplane import ControlPlane
from benchlib import GROUP, VERSION, Kube, cpu_of, loadavg, log, parallel, ppo_command, service_account_kubeconfig, task_body

REPO = Path(__file__).resolve().parents[1]
NS = "cost"
STAMP = "2026-01-01T00:00:00Z"
IDENTITIES = ("admin", "serviceaccount")
WARNING = ("spec.command: 'trainer.default_local_dir=checkpoints/verl_examples/gsm8k': is a relative path: verl's Ray actors "
           "run in the raylet's folder, not the job's, so Argus makes it absolute under the job folder; set an absolute path")


def first_status(command: str) -> dict[str, Any]:
    """A queued task's first status, the shape the operator writes (docs/benchmarks-first-start.md)."""
    said = "validated; waiting in the queue"
    conditions = [{"type": t, "status": "False", "observedGeneration": 1, "lastTransitionTime": STAMP, "reason": "Validated",
                   "message": said} for t in ("Admitted", "Running", "Complete", "Failed", "Finished")]
    conditions.append({"type": "RayReachable", "status": "True", "observedGeneration": 1, "lastTransitionTime": STAMP,
                       "reason": "RayReachable", "message": "the Ray dashboard answers"})
    return {"phase": "Queued", "reason": "Queued", "message": "waiting behind tasks ahead in the queue", "observedGeneration": 1,
            "user": "alice", "verl": {"source": "cluster", "version": "0.9.1"}, "command": command, "warnings": [WARNING],
            "conditions": conditions}


def measured(cp: ControlPlane, what: str, fn: Any, items: list[Any], profile: Path | None) -> float:
    """CPU seconds per call of the API server + etcd while ``fn`` runs over ``items``."""
    pids = [p.popen.pid for p in (cp._apiserver, cp._etcd) if p is not None and p.popen is not None]
    profiler = None
    if profile:
        # Long enough to cover the calls; stopped early when they are done is not possible, so
        # the profile's seconds are a fixed guess and its figures are shares, not totals.
        out = profile / f"{what}.pprof"
        profiler = threading.Thread(target=lambda: out.write_bytes(subprocess.run(
            ["kubectl", f"--kubeconfig={cp.kubeconfig}", "get", "--raw", "/debug/pprof/profile?seconds=20"],
            capture_output=True, check=True).stdout))
        profiler.start()
    c0, t0 = cpu_of(pids), time.monotonic()
    parallel(fn, items, workers=8)
    cpu, seconds = cpu_of(pids) - c0, time.monotonic() - t0
    if profiler:
        profiler.join()
    per_call = cpu / len(items) * 1000
    log(f"{what}: {len(items)} calls in {seconds:.1f} s, API server + etcd {cpu:.1f} s CPU: {per_call:.2f} ms a call")
    return per_call


def one_pass(cp: ControlPlane, admin: Kube, kube: Kube, label: str, calls: int, command: str,
             profile: Path | None) -> dict[str, float]:
    """Status patches and Events sent by ``kube`` over ``calls`` tasks of their own (created by
    the admin, as users would; each task patched once)."""
    names = [f"{label}-{i:05d}" for i in range(calls)]
    parallel(lambda n: admin.create(NS, task_body(n, command)), names, workers=8)
    status = first_status(command)
    return {
        "status": measured(cp, f"{label}-status", lambda n: kube.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, NS, "argustasks", n, {"status": status}, _preload_content=False), names, profile),
        "event": measured(cp, f"{label}-event", lambda n: kube.core.create_namespaced_event(NS, {
            "metadata": {"name": f"{n}.e"}, "involvedObject": {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ArgusTask",
                                                              "name": n, "namespace": NS},
            "type": "Warning", "reason": "WeakCheck", "message": WARNING, "firstTimestamp": STAMP, "lastTimestamp": STAMP,
            "count": 1, "source": {"component": "argus"}, "reportingComponent": "argus", "reportingInstance": "argus",
            "action": "WeakCheck"}, _preload_content=False), names, profile),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1500)
    parser.add_argument("--crd", default=str(REPO / "crds" / "argus.io_argustasks.yaml"))
    parser.add_argument("--profile", help="a folder for Go CPU profiles of the API server (needs ARGUS_TESTBED_PROFILING=1)")
    parser.add_argument("--identity", action="append", choices=IDENTITIES,
                        help="who sends the calls (repeat to compare; passes alternate ABBA): admin, the testbed's client "
                             "certificate; serviceaccount, the chart's ServiceAccount and RBAC with a token (default: admin)")
    parser.add_argument("--rounds", type=int, default=1, help="passes of each identity")
    args = parser.parse_args()
    identities = args.identity or ["admin"]
    profile = Path(args.profile) if args.profile else None
    if profile:
        profile.mkdir(parents=True, exist_ok=True)
        os.environ["ARGUS_TESTBED_PROFILING"] = "1"
    work = Path(tempfile.mkdtemp(prefix="argus-apiserver-cost-"))
    cp = ControlPlane.start(work / "k8s")
    try:
        cp.kubectl("apply", "--server-side", "-f", args.crd)
        cp.wait_established("argustasks.argus.io")
        admin = Kube(cp.kubeconfig)
        admin.namespace(NS, "alice")
        kubes = {"admin": admin}
        if "serviceaccount" in identities:
            kubes["serviceaccount"] = Kube(service_account_kubeconfig(cp))
        command = ppo_command(steps=1_000_000)
        load0 = loadavg()
        order = [ident for r in range(args.rounds) for ident in (identities if r % 2 == 0 else identities[::-1])]
        results: dict[str, dict[str, list[float]]] = {ident: {"status": [], "event": []} for ident in identities}
        for i, ident in enumerate(order):
            for what, per_call in one_pass(cp, admin, kubes[ident], f"{ident[:2]}{i}", args.calls, command, profile).items():
                results[ident][what].append(round(per_call, 2))
        print(json.dumps({"crd": args.crd, "calls": args.calls, "ms_per_call": results, "load": [load0, loadavg()]}))
    finally:
        cp.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
