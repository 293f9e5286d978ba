"""The local demo (hack/demo.sh): everything real, on this machine's loopback.

control plane + Ray head/worker -> CRD -> namespace 'alice' onboarded for user alice ->
a /private-like tree in a temp dir -> the operator, serving the log API logs.argus.io
(registered as an APIService; the API server reaches it through the testbed's service network)
-> kubectl apply of three examples (advanced PPO with a custom reward, basic GRPO, a hostile
task) -> watch them -> show the reward function's log line, read by alice with her own
identity through the Kubernetes API (`argus logs`), and the rejected task's message -> tear
down (or --keep).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from argus_testbed import ControlPlane, RayCluster, ServiceNetwork, find_binaries, find_kubectl
from argus_testbed.logsapi import register_logs_api
from argus_testbed.ports import free_ports
from argus_testbed.private_tree import STANDIN, login_home, make_private_tree

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = ["ppo-advanced-custom-reward", "grpo-basic", "hostile-other-user"]
TERMINAL = {"Succeeded", "Failed", "Stopped", "Rejected"}


def say(text: str) -> None:
    print(f"\n\033[1m==> {text}\033[0m", flush=True)


def done(status: dict) -> bool:
    """Ended, and (for a task that ran) its last progress line is in the status."""
    progress = status.get("progress") or {}
    return status.get("phase") in TERMINAL and progress.get("step") == progress.get("totalSteps")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true", help="leave the cluster, Ray and the operator running")
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="argus-demo-"))
    say(f"working in {work}")
    cp = ray = operator = None
    net = ServiceNetwork()
    try:
        t0 = time.monotonic()
        cp = ControlPlane.start(work / "k8s", service_network=net)
        say(f"kube-apiserver ready at {cp.server} in {time.monotonic() - t0:.1f} s")
        t0 = time.monotonic()
        ray = RayCluster.start(work / "ray", extra_path=[STANDIN / "bin"],
                               extra_env={"HOME": str(login_home(work / "ray-home")), "VERL_STANDIN_STEP_SECONDS": "1.0"})
        say(f"Ray head {ray.dashboard_url} (no worker_node resource) + 1 worker with 4 GPUs, ready in {time.monotonic() - t0:.1f} s")
        cp.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
        cp.wait_established("argustasks.argus.io")
        cp.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": "alice", "labels": {"argus.io/user": "alice"}}}))
        # The chart's user roles (argus-edit, argus-view), rendered from the chart itself; alice
        # gets argus-edit in her namespace, as `argus onboard alice` binds it.
        roles = subprocess.run([str(find_binaries() / "helm"), "template", "argus", str(REPO / "charts" / "argus"), "--kube-version", "1.34.4",
                                "--show-only", "templates/user-roles.yaml"], capture_output=True, text=True, check=True).stdout
        cp.kubectl("apply", "-f", "-", input=roles)
        cp.kubectl("create", "rolebinding", "argus-edit", "-n", "alice", "--clusterrole=argus-edit", "--user=alice")
        alice = cp.mint_user("alice")
        root = make_private_tree(work / "private")
        say(f"namespace alice onboarded (label argus.io/user=alice); /private tree at {root}")
        logs_port, health_port = free_ports(2)
        logs_api = register_logs_api(cp, net, work / "logs-api", logs_port)
        log = open(work / "operator.log", "wb")
        operator = subprocess.Popen([sys.executable, "-m", "argus", "--kubeconfig", str(cp.kubeconfig), "--ray-address", ray.dashboard_url,
                                     "--root", str(root), "--verl-code-path", str(STANDIN), "--poll-interval", "1", "--progress-interval", "1",
                                     "--health-host", "127.0.0.1", "--health-port", str(health_port),
                                     *logs_api.operator_flags(), "--logs-api-shared-tree"],
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        logs_api.route(f"http://127.0.0.1:{health_port}/readyz")
        say(f"operator running (log: {work / 'operator.log'}); log API logs.argus.io served through the API server")
        for name in EXAMPLES:
            out = cp.kubectl("apply", "-n", "alice", "-f", str(REPO / "examples" / f"{name}.yaml"))
            print(out.stdout.strip())
        say("kubectl get argustasks -n alice -o wide  (until all are done)")
        deadline = time.monotonic() + args.timeout
        last = ""
        while time.monotonic() < deadline:
            table = cp.kubectl("get", "argustasks", "-n", "alice", "-o", "wide").stdout
            if table != last:
                print(table, flush=True)
                last = table
            items = json.loads(cp.kubectl("get", "argustasks", "-n", "alice", "-o", "json").stdout)["items"]
            if items and all(done(i.get("status") or {}) for i in items):
                break
            time.sleep(1)
        # alice reads her log with her own identity, through the API server (never the dashboard).
        logs_api.wait_available()
        say("the custom reward function, from the PPO job's log, as alice reads it: argus logs ppo-custom-reward -n alice "
            "(through the Kubernetes API, logs.argus.io)")
        logs = subprocess.run([sys.executable, "-m", "argus.cli", "logs", "ppo-custom-reward", "-n", "alice", "--kubeconfig", str(alice)],
                              capture_output=True, text=True)
        lines = logs.stdout.splitlines()
        print("\n".join([line for line in lines if "using customized reward function" in line] + [line for line in lines if line.startswith("step:")][-3:]) or logs.stderr)
        say("why the hostile task was rejected (kubectl get argustask hostile-other-user -o jsonpath='{.status.message}')")
        print(cp.kubectl("get", "argustask", "hostile-other-user", "-n", "alice", "-o", "jsonpath={.status.message}").stdout)
        items = json.loads(cp.kubectl("get", "argustasks", "-n", "alice", "-o", "json").stdout)["items"]
        say("where each task's log is, as the file browser shows it and on disk (kubectl get argustask NAME -o jsonpath='{.status.logFile}')")
        for i in items:
            log_file = (i.get("status") or {}).get("logFile")
            where = f"{log_file['userPath']}  ({log_file['jobPath']})" if log_file else "no log: it never ran"
            print(f"{i['metadata']['name']}: {where}")
        phases = {i["metadata"]["name"]: (i.get("status") or {}).get("phase") for i in items}
        expected = {"ppo-custom-reward": "Succeeded", "grpo-basic": "Succeeded", "hostile-other-user": "Rejected"}
        read = logs.returncode == 0 and any("using customized reward function" in line for line in lines)
        ok = phases == expected and read
        say(f"result: {phases}, alice's log read {'through the API server' if read else 'FAILED'} -> "
            f"{'as expected' if ok else 'NOT as expected: ' + str(expected)}")
        if args.keep:
            say(f"left running. export KUBECONFIG={cp.kubeconfig}  (Ray dashboard: {ray.dashboard_url}); stop with: kill {os.getpid()}")
            say(f"alice's own kubeconfig (argus-edit in namespace alice): {alice}")
            say(f"kubectl: {find_kubectl()}  (built with the testbed from the API server's release; a kubectl on PATH works too)")
            # `kill PID` (SIGTERM) tears down as Ctrl-C does: through the finally below.
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            signal.pause()
        return 0 if ok else 1
    finally:
        if operator and operator.poll() is None:
            os.killpg(operator.pid, signal.SIGTERM)
            operator.wait(timeout=15)
        if ray:
            ray.stop()
        if cp:
            cp.stop()
        net.stop()


if __name__ == "__main__":
    sys.exit(main())
