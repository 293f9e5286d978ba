"""The local demo (hack/demo.sh): everything real, on this machine's loopback.

control plane + two Ray clusters (each a head and a worker) -> CRDs -> namespaces 'alice' and
'alice-verl' onboarded for user alice -> a /private-like tree in a temp dir, alice's home with
a tiny model and data -> two ArgusClusters: 'standin' (the verl stand-in, for namespace alice)
and 'cpu-verl' (real verl 0.9.1 on CPU, through verl's plugin hook; for namespace alice-verl)
-> the operator, serving the log API logs.argus.io (registered as an APIService; the API
server reaches it through the testbed's service network) -> kubectl apply of three examples
in alice (advanced PPO with a custom reward, basic GRPO, a hostile task) and the two real-verl
examples in alice-verl (SFT, GRPO with alice's reward function) -> watch them -> show, as
alice reads them with her own identity through the Kubernetes API (`argus logs`), the reward
functions' own lines and real verl's loss and reward lines, and the rejected task's message
-> tear down (or --keep).
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

from argus.core.progress import verl_lines
from argus_testbed import ControlPlane, RayCluster, ServiceNetwork, find_binaries, find_kubectl, realverl
from argus_testbed.logsapi import register_logs_api
from argus_testbed.ports import free_ports
from argus_testbed.private_tree import STANDIN, login_home, make_private_tree

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = ["ppo-advanced-custom-reward", "grpo-basic", "hostile-other-user"]
REAL_EXAMPLES = ["real-sft", "real-grpo"]  # examples/real-verl/{sft,grpo}.yaml, in namespace alice-verl
REAL_NS = "alice-verl"
REWARD_SAYS = "reward.py: compute_score"  # examples/data/reward.py's own line, one a call
TERMINAL = {"Succeeded", "Failed", "Stopped", "Rejected"}


def say(text: str) -> None:
    print(f"\n\033[1m==> {text}\033[0m", flush=True)


def done(status: dict) -> bool:
    """Ended, and (for a task that ran) its last progress line is in the status."""
    progress = status.get("progress") or {}
    return status.get("phase") in TERMINAL and progress.get("step") == progress.get("totalSteps")


def metrics_of(line: str, keys: tuple[str, ...]) -> str:
    """A verl step line cut to a few of its metrics: 'step:3 - train/loss:5.43 - ...'."""
    parts = line.split(" - ")
    kept = [p for p in parts[1:] if p.split(":", 1)[0] in keys]
    return " - ".join([parts[0], *kept])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true", help="leave the cluster, Ray and the operator running")
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="argus-demo-"))
    say(f"working in {work}")
    cp = ray = real = operator = None
    net = ServiceNetwork()
    try:
        t0 = time.monotonic()
        cp = ControlPlane.start(work / "k8s", service_network=net)
        say(f"kube-apiserver ready at {cp.server} in {time.monotonic() - t0:.1f} s")
        t0 = time.monotonic()
        # quiet=False: Ray's own settings, as people see its dashboard (the tests quiet them).
        ray = RayCluster.start(work / "ray", extra_path=[STANDIN / "bin"], quiet=False,
                               extra_env={"HOME": str(login_home(work / "ray-home")), "VERL_STANDIN_STEP_SECONDS": "1.0"})
        say(f"Ray head {ray.dashboard_url} (no worker_node resource) + 1 worker with 4 GPUs, ready in {time.monotonic() - t0:.1f} s")
        t0 = time.monotonic()
        runtime = realverl.runtime()
        real = RayCluster.start(work / "ray-real", python=runtime, worker_cpus=realverl.WORKER_CPUS, worker_gpus=realverl.WORKER_GPUS,
                                object_store_bytes=512 * 1024 * 1024, quiet=False,
                                extra_env={"HOME": str(login_home(work / "ray-real-home", python_dir=runtime.parent, standin=False)),
                                           **realverl.node_env()})
        say(f"Ray cluster for real verl {real.dashboard_url} (verl 0.9.1 and torch on CPU, verl's plugin hook "
            f"VERL_USE_EXTERNAL_MODULES=argus_verl_cpu), ready in {time.monotonic() - t0:.1f} s")
        cp.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
        cp.wait_established("argustasks.argus.io", "argusclusters.argus.io")
        for ns, labels in (("alice", {}), (REAL_NS, {"argus.io/runtime": "real-verl"})):
            cp.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Namespace",
                                                            "metadata": {"name": ns, "labels": {"argus.io/user": "alice", **labels}}}))
        # The chart's user roles (argus-edit, argus-view), rendered from the chart itself; alice
        # gets argus-edit in her namespace, as `argus onboard alice` binds it.
        roles = subprocess.run([str(find_binaries() / "helm"), "template", "argus", str(REPO / "charts" / "argus"), "--kube-version", "1.34.4",
                                "--show-only", "templates/user-roles.yaml"], capture_output=True, text=True, check=True).stdout
        cp.kubectl("apply", "-f", "-", input=roles)
        for ns in ("alice", REAL_NS):
            cp.kubectl("create", "rolebinding", "argus-edit", "-n", ns, "--clusterrole=argus-edit", "--user=alice")
        alice = cp.mint_user("alice")
        root = make_private_tree(work / "private")
        realverl.lay_out_home(root / "users" / "alice")
        say(f"namespaces alice and {REAL_NS} onboarded (label argus.io/user=alice); /private tree at {root}")
        # Two ArgusClusters: the stand-in's for namespace alice, real verl's for alice-verl.
        selector = {"matchExpressions": [{"key": "argus.io/runtime", "operator": "NotIn", "values": ["real-verl"]}]}
        clusters = [
            {"metadata": {"name": "standin"}, "spec": {"address": ray.dashboard_url, "namespaceSelector": selector}},
            {"metadata": {"name": "cpu-verl"}, "spec": {"address": real.dashboard_url, "verlCodePath": str(realverl.snapshot()),
                                                        "namespaceSelector": {"matchLabels": {"argus.io/runtime": "real-verl"}}}},
        ]
        for c in clusters:
            cp.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "argus.io/v1alpha1", "kind": "ArgusCluster", **c}))
        say("ArgusClusters: standin (namespace alice) and cpu-verl (namespace alice-verl, real verl): kubectl get argusclusters")
        logs_port, health_port = free_ports(2)
        logs_api = register_logs_api(cp, net, work / "logs-api", logs_port)
        log = open(work / "operator.log", "wb")
        operator = subprocess.Popen([sys.executable, "-m", "argus", "--kubeconfig", str(cp.kubeconfig), "--ray-address", ray.dashboard_url,
                                     "--root", str(root), "--verl-code-path", str(STANDIN), "--poll-interval", "1", "--progress-interval", "1",
                                     "--health-host", "127.0.0.1", "--health-port", str(health_port),
                                     *logs_api.operator_flags(), "--logs-api-shared-tree", "--verl-plugin-rollout", "hf"],
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        logs_api.route(f"http://127.0.0.1:{health_port}/readyz")
        say(f"operator running (log: {work / 'operator.log'}); log API logs.argus.io served through the API server")
        for name in EXAMPLES:
            out = cp.kubectl("apply", "-n", "alice", "-f", str(REPO / "examples" / f"{name}.yaml"))
            print(out.stdout.strip())
        for name in REAL_EXAMPLES:
            out = cp.kubectl("apply", "-n", REAL_NS, "-f", str(REPO / "examples" / "real-verl" / f"{name.removeprefix('real-')}.yaml"))
            print(out.stdout.strip())
        say("kubectl get argustasks -A -o wide  (until all are done; real verl's GRPO takes a few minutes on 2 cores)")
        deadline = time.monotonic() + args.timeout
        last = ""
        while time.monotonic() < deadline:
            items = json.loads(cp.kubectl("get", "argustasks", "-A", "-o", "json").stdout)["items"]
            # Printed again when a phase or a progress changes (not for the AGE column alone).
            seen = repr([(i["metadata"]["name"], (i.get("status") or {}).get("phase"),
                          ((i.get("status") or {}).get("progress") or {}).get("summary")) for i in items])
            if seen != last:
                print(cp.kubectl("get", "argustasks", "-A", "-o", "wide").stdout, flush=True)
                last = seen
            if items and all(done(i.get("status") or {}) for i in items):
                break
            time.sleep(1)
        # alice reads her log with her own identity, through the API server (never the dashboard).
        logs_api.wait_available()
        say("the custom reward function, from the PPO job's log, as alice reads it: argus logs ppo-custom-reward -n alice "
            "(through the Kubernetes API, logs.argus.io)")
        logs = subprocess.run([sys.executable, "-m", "argus.cli", "logs", "ppo-custom-reward", "-n", "alice", "--kubeconfig", str(alice)],
                              capture_output=True, text=True)
        said = verl_lines(logs.stdout)
        print("\n".join([line for line in said if line.startswith(REWARD_SAYS)][:3] + [line for line in said if line.startswith("step:")][-3:])
              or logs.stderr)
        say(f"real verl, as alice reads it: argus logs real-sft -n {REAL_NS} (the SFT loss, verl's own step lines)")
        sft = subprocess.run([sys.executable, "-m", "argus.cli", "logs", "real-sft", "-n", REAL_NS, "--kubeconfig", str(alice)],
                             capture_output=True, text=True)
        print("\n".join(metrics_of(line, ("train/loss", "train/grad_norm")) for line in verl_lines(sft.stdout)
                        if line.startswith("step:") and "train/loss:" in line) or sft.stderr)
        say(f"argus logs real-grpo -n {REAL_NS}: alice's reward function's own lines, and verl's reward and loss per step")
        grpo = subprocess.run([sys.executable, "-m", "argus.cli", "logs", "real-grpo", "-n", REAL_NS, "--kubeconfig", str(alice)],
                              capture_output=True, text=True)
        # Each line once: on this one-machine testbed both nodes' log monitors forward what an
        # actor prints (argus_testbed.realverl says why).
        real_said = list(dict.fromkeys(verl_lines(grpo.stdout)))
        print("\n".join([line for line in real_said if line.startswith(realverl.REWARD_MARKER)][:3]
                        + [metrics_of(line, ("critic/score/mean", "actor/pg_loss", "training/rollout_probs_diff_max"))
                           for line in real_said if line.startswith("step:")]) or grpo.stderr)
        say("why the hostile task was rejected (kubectl get argustask hostile-other-user -o jsonpath='{.status.message}')")
        print(cp.kubectl("get", "argustask", "hostile-other-user", "-n", "alice", "-o", "jsonpath={.status.message}").stdout)
        items = json.loads(cp.kubectl("get", "argustasks", "-A", "-o", "json").stdout)["items"]
        say("where each task's log is, as the file browser shows it and on disk (kubectl get argustask NAME -o jsonpath='{.status.logFile}')")
        for i in items:
            log_file = (i.get("status") or {}).get("logFile")
            where = f"{log_file['userPath']}  ({log_file['jobPath']})" if log_file else "no log: it never ran"
            print(f"{i['metadata']['name']}: {where}")
        phases = {i["metadata"]["name"]: (i.get("status") or {}).get("phase") for i in items}
        expected = {"ppo-custom-reward": "Succeeded", "grpo-basic": "Succeeded", "hostile-other-user": "Rejected",
                    "real-sft": "Succeeded", "real-grpo": "Succeeded"}
        read = (logs.returncode == 0 and any(line.startswith(REWARD_SAYS) for line in said)
                and any(line.startswith(realverl.REWARD_MARKER) for line in real_said))
        ok = phases == expected and read
        say(f"result: {phases}, alice's log read {'through the API server' if read else 'FAILED'} -> "
            f"{'as expected' if ok else 'NOT as expected: ' + str(expected)}")
        if args.keep:
            say(f"left running. export KUBECONFIG={cp.kubeconfig}  (Ray dashboard: {ray.dashboard_url}); stop with: kill {os.getpid()}")
            say(f"real verl's Ray cluster (ArgusCluster cpu-verl): {real.dashboard_url}")
            say(f"alice's own kubeconfig (argus-edit in namespaces alice and {REAL_NS}): {alice}")
            say(f"kubectl: {find_kubectl()}  (built with the testbed from the API server's release; a kubectl on PATH works too)")
            # `kill PID` (SIGTERM) tears down as Ctrl-C does: through the finally below.
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            signal.pause()
        return 0 if ok else 1
    finally:
        if operator and operator.poll() is None:
            os.killpg(operator.pid, signal.SIGTERM)
            operator.wait(timeout=15)
        for cluster in (ray, real):
            if cluster:
                cluster.stop()
        if cp:
            cp.stop()
        net.stop()


if __name__ == "__main__":
    sys.exit(main())
