#!/usr/bin/env python3
"""Benchmark of the admission webhook (issue 5: it must add at most a few milliseconds per apply).

    python bench/bench_webhook.py [--n 200] [--rounds 2] [--kubectl-n 200] [--keep]

Starts the testbed's control plane (kube-apiserver + etcd on loopback, as the integration
tests do), installs the CRD, onboards a namespace for ``alice`` and runs the operator as a
subprocess (no Ray needed: the tasks are created with ``spec.cancel: true``, so the operator
closes each one once and the queue stays empty). Then, with the webhook OFF (operator
without ``--webhook``) and ON (``--webhook``, failure policy Ignore), alternating in
``--rounds`` blocks (off-on, on-off, ...) so that drift and order affect both alike, it times:

* ``API create``: ``--n`` creates of a typical advanced PPO task (about 1 KiB command)
  through the kubernetes client, one at a time: the API server's latency, which is what
  the webhook adds to;
* ``kubectl apply``: ``--kubectl-n`` ``kubectl apply -f -`` of the same manifest (what a
  user waits for, dominated by kubectl's own start-up);

and, with the webhook on, ``webhook direct``: the same AdmissionReview POSTed straight to
the webhook over HTTPS (the handler's own cost plus TLS, without the API server).

Prints a table of p50/p99/mean in milliseconds and the on/off ratio of each. A benchmark,
not a test: run it on a quiet machine. Every create makes a new task (names are unique);
the control plane is thrown away at the end.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import math
import os
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from argus_testbed import ControlPlane
from argus_testbed.ports import free_port
from argus_testbed.private_tree import make_private_tree

REPO = Path(__file__).resolve().parents[1]

NAMESPACE = "bench"
COMMAND = """\
# PPO on GSM8K with a custom reward (the v3.5 advanced example)
python3 -m verl.trainer.main_ppo \\
  algorithm.adv_estimator=gae \\
  data.train_files=$HOME/common/datasets/gsm8k/train.parquet \\
  data.val_files=$HOME/datasets/gsm8k/test.parquet \\
  data.train_batch_size=256 \\
  data.max_prompt_length=512 \\
  data.max_response_length=256 \\
  actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct \\
  actor_rollout_ref.actor.optim.lr=1e-6 \\
  actor_rollout_ref.rollout.name=vllm \\
  critic.model.path=Qwen/Qwen2.5-0.5B-Instruct \\
  critic.optim.lr=1e-5 \\
  custom_reward_function.path=$HOME/code/reward.py \\
  custom_reward_function.name=compute_score \\
  +custom_reward_function.reward_kwargs.format_bonus=0.1 \\
  trainer.logger=console \\
  trainer.project_name=argus \\
  trainer.experiment_name=bench \\
  trainer.nnodes=1 \\
  trainer.n_gpus_per_node=1 \\
  trainer.total_epochs=1 \\
  trainer.default_local_dir=$HOME/checkpoints/bench \\
  +ray_kwargs.ray_init.address=auto
"""


def manifest(name: str) -> dict[str, Any]:
    return {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "cancel": True, "command": COMMAND}}


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]  # nearest rank


class Bench:
    def __init__(self, workdir: Path, settle: float = 5.0) -> None:
        self.workdir = workdir
        self.settle = settle
        self.cp = ControlPlane.start(workdir / "control-plane")
        self.cp.kubectl("apply", "--server-side", "-f", str(REPO / "crds" / "argus.io_argustasks.yaml"))
        self.cp.wait_established("argustasks.argus.io")
        self.cp.kubectl("create", "namespace", NAMESPACE)
        self.cp.kubectl("label", "namespace", NAMESPACE, "argus.io/user=alice")
        self.root = make_private_tree(workdir / "private")
        self.op: subprocess.Popen[bytes] | None = None
        self.port = free_port()
        self.config_name = f"argus-bench-{uuid.uuid4().hex[:6]}"
        os.environ["KUBECONFIG"] = str(self.cp.kubeconfig)
        from kubernetes import client, config
        config.load_kube_config(str(self.cp.kubeconfig))
        self.custom = client.CustomObjectsApi()
        self.admission = client.AdmissionregistrationV1Api()

    # -- the operator ---------------------------------------------------------------
    def start_operator(self, webhook: bool) -> None:
        self.stop_operator()
        argv = [sys.executable, "-m", "argus", "--kubeconfig", str(self.cp.kubeconfig), "--ray-address", "http://127.0.0.1:9",
                "--root", str(self.root), "--namespace", NAMESPACE]
        if webhook:
            argv += ["--webhook", "--webhook-listen-host", "127.0.0.1", "--webhook-port", str(self.port),
                     "--webhook-url", f"https://127.0.0.1:{self.port}", "--webhook-config-name", self.config_name]
        log = open(self.workdir / "operator.log", "ab")
        self.op = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        if webhook:
            self._wait(lambda: self._denied_dry_run(), "the webhook to answer")
        else:
            # No webhook configuration may be left over from an ON block.
            self.cp.kubectl("delete", "validatingwebhookconfiguration", self.config_name, "--ignore-not-found")
        # Either way, let the new operator get through its start-up (listing and resuming
        # every task so far) before timing, so that neither mode pays for it.
        time.sleep(self.settle)

    def stop_operator(self) -> None:
        if self.op and self.op.poll() is None:
            self.op.terminate()
            try:
                self.op.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.op.kill()
                self.op.wait()
        self.op = None

    def _denied_dry_run(self) -> bool:
        bad = manifest("probe")
        bad["spec"]["command"] = "echo python3 -m verl.trainer.main_ppo"
        out = self.cp.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(bad), check=False)
        return out.returncode != 0 and "denied the request" in out.stderr

    @staticmethod
    def _wait(predicate: Callable[[], bool], what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.3)
        raise TimeoutError(f"timed out waiting for {what}")

    # -- measurements ---------------------------------------------------------------
    def api_creates(self, n: int, tag: str) -> list[float]:
        out = []
        for i in range(n):
            body = manifest(f"api-{tag}-{i}")
            t0 = time.perf_counter()
            self.custom.create_namespaced_custom_object("argus.io", "v1alpha1", NAMESPACE, "argustasks", body)
            out.append((time.perf_counter() - t0) * 1000)
        return out

    def kubectl_applies(self, n: int, tag: str) -> list[float]:
        out = []
        for i in range(n):
            text = json.dumps(manifest(f"kubectl-{tag}-{i}"))
            t0 = time.perf_counter()
            self.cp.kubectl("apply", "-f", "-", input=text)
            out.append((time.perf_counter() - t0) * 1000)
        return out

    def direct_reviews(self, n: int) -> list[float]:
        vwc = self.admission.read_validating_webhook_configuration(self.config_name)
        ca = base64.b64decode(vwc.webhooks[0].client_config.ca_bundle).decode()
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=ssl.create_default_context(cadata=ca), timeout=10)
        out = []
        for i in range(n):
            obj = manifest(f"direct-{i}")
            review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
                "uid": str(uuid.uuid4()), "kind": {"group": "argus.io", "version": "v1alpha1", "kind": "ArgusTask"},
                "resource": {"group": "argus.io", "version": "v1alpha1", "resource": "argustasks"},
                "namespace": NAMESPACE, "name": obj["metadata"]["name"], "operation": "CREATE",
                "userInfo": {"username": "bench"}, "object": obj, "dryRun": False}}
            data = json.dumps(review).encode()
            t0 = time.perf_counter()
            conn.request("POST", "/validate-argustask", body=data, headers={"Content-Type": "application/json"})
            answer = json.loads(conn.getresponse().read())
            out.append((time.perf_counter() - t0) * 1000)
            assert answer["response"]["allowed"], answer
        conn.close()
        return out

    def stop(self) -> None:
        self.stop_operator()
        try:
            self.cp.kubectl("delete", "validatingwebhookconfiguration", self.config_name, "--ignore-not-found", check=False)
        finally:
            self.cp.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200, help="API creates per mode (default 200)")
    parser.add_argument("--kubectl-n", type=int, default=200, help="kubectl applies per mode (default 200; 0 to skip)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating off/on blocks (default 2)")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds to let a (re)started operator settle before timing (default 5)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    workdir = Path(tempfile.mkdtemp(prefix="argus-bench-webhook-"))
    results: dict[tuple[str, str], list[float]] = {}
    bench = Bench(workdir, settle=args.settle)
    try:
        # Warm-up (not timed): the API server's caches, kubectl's discovery cache.
        bench.start_operator(webhook=False)
        bench.api_creates(20, "warm")
        bench.kubectl_applies(3, "warm")
        for r in range(args.rounds):
            for mode in (("off", "on") if r % 2 == 0 else ("on", "off")):  # ABBA: neither mode always goes first
                bench.start_operator(webhook=mode == "on")
                per_round = lambda total: total // args.rounds + (1 if r < total % args.rounds else 0)  # noqa: E731, B023 - used in this round only
                results.setdefault(("API create", mode), []).extend(bench.api_creates(per_round(args.n), f"{mode}{r}"))
                if args.kubectl_n:
                    results.setdefault(("kubectl apply", mode), []).extend(bench.kubectl_applies(per_round(args.kubectl_n), f"{mode}{r}"))
                if mode == "on":
                    results.setdefault(("webhook direct", "on"), []).extend(bench.direct_reviews(per_round(args.n)))
    finally:
        bench.stop()
        if args.keep:
            print(f"work directory: {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    print(f"{os.cpu_count()} CPUs, load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after "
          "(p99 on a busy machine mostly measures the machine)")
    print(f"{'method':<16}{'webhook':<9}{'n':>5}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}")
    for (method, mode), samples in results.items():
        print(f"{method:<16}{mode:<9}{len(samples):>5}{pct(samples, 50):>10.2f}{pct(samples, 99):>10.2f}{statistics.fmean(samples):>10.2f}")
    print()
    for method in ("API create", "kubectl apply"):
        off, on = results.get((method, "off")), results.get((method, "on"))
        if not off or not on:
            continue
        for q in (50, 99):
            a, b = pct(off, q), pct(on, q)
            print(f"{method:<14} p{q}: on/off = {b / a:.2f}x  ({b - a:+.2f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
