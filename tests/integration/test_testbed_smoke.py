"""Smoke test of the testbed: the real API server enforces the ArgusTask CRD (CEL immutability),
RBAC and ServiceAccount tokens, the real Ray cluster runs a job's driver on the worker, and a
testbed process dies with a test run that is killed (procs.py's watchdog)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from argus_testbed import ControlPlane, KubeCluster, KubectlError, RayCluster

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CRD_PATH = REPO / "crds" / "argus.io_argustasks.yaml"
CRD_NAME = "argustasks.argus.io"


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def _immutability_message(field: str) -> str:
    """The message of the CRD's CEL rule that compares `field` with oldSelf (the field's own rule)."""
    crd = yaml.safe_load(CRD_PATH.read_text())
    for d in _walk(crd):
        for v in d.get("x-kubernetes-validations", []) or []:
            if "oldSelf" in v.get("rule", "") and v.get("message", "").startswith(f"spec.{field} is immutable"):
                return v["message"]
    raise AssertionError(f"{CRD_PATH} has no x-kubernetes-validations transition rule saying spec.{field} is immutable")


def _task_yaml(name: str, namespace: str, workload: str) -> str:
    return f"""\
apiVersion: argus.io/v1alpha1
kind: ArgusTask
metadata:
  name: {name}
  namespace: {namespace}
spec:
  kind: advanced
  workload: {workload}
  nnodes: 1
  nGpusPerNode: 1
  command: "python3 -m verl.trainer.main_ppo trainer.nnodes=1"
"""


@pytest.fixture(scope="module")
def argustask_crd(control_plane: KubeCluster) -> str:
    assert CRD_PATH.is_file(), f"{CRD_PATH} is missing"
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD_PATH))
    control_plane.wait_established(CRD_NAME)
    # Established can come a moment before the resource is served: wait until a list works.
    deadline = time.monotonic() + 30
    while True:
        r = control_plane.kubectl("get", "argustasks", "-A", check=False)
        if r.returncode == 0:
            return CRD_NAME
        if time.monotonic() > deadline:
            raise AssertionError(f"argustasks not served: {r.stderr}")
        time.sleep(0.2)


def test_argustask_crd_and_cel_immutability(control_plane: KubeCluster, argustask_crd: str, kube_namespace: str) -> None:
    ns = kube_namespace
    control_plane.kubectl("apply", "-f", "-", input=_task_yaml("smoke", ns, "ppo"))
    got = json.loads(control_plane.kubectl("get", "argustask", "smoke", "-n", ns, "-o", "json").stdout)
    assert got["spec"]["workload"] == "ppo"
    assert got["spec"]["kind"] == "advanced"
    assert got["spec"]["nnodes"] == 1 and got["spec"]["nGpusPerNode"] == 1
    assert got["spec"]["command"] == "python3 -m verl.trainer.main_ppo trainer.nnodes=1"
    assert got["spec"]["cancel"] is False  # the CRD default was applied

    message = _immutability_message("workload")
    r = control_plane.kubectl("apply", "-f", "-", input=_task_yaml("smoke", ns, "grpo"), check=False)
    assert r.returncode != 0, f"changing spec.workload was accepted: {r.stdout}"
    assert message in r.stderr, r.stderr
    assert f'spec.workload: Invalid value: "string": {message}' in r.stderr, r.stderr  # as docs/argocd.md shows it
    still = json.loads(control_plane.kubectl("get", "argustask", "smoke", "-n", ns, "-o", "json").stdout)
    assert still["spec"]["workload"] == "ppo"

    def patch(spec: dict[str, object]) -> subprocess.CompletedProcess[str]:
        return control_plane.kubectl("patch", "argustask", "smoke", "-n", ns, "--type=merge", "-p", json.dumps({"spec": spec}), check=False)
    # An optional field added is a change too (the spec's has() rule), and so is one removed.
    r = patch({"activeDeadlineSeconds": 60})
    assert r.returncode != 0 and _immutability_message("activeDeadlineSeconds") in r.stderr, r.stderr
    r = patch({"command": None})
    assert r.returncode != 0 and _immutability_message("command") in r.stderr, r.stderr
    # suspend goes both ways; cancel only to true.
    assert patch({"suspend": True}).returncode == 0 and patch({"suspend": False}).returncode == 0
    assert patch({"cancel": True}).returncode == 0
    r = patch({"cancel": False})
    assert r.returncode != 0 and "spec.cancel cannot go back from true to false" in r.stderr, r.stderr
    # A status patch leaves the spec alone: every rule passes.
    control_plane.kubectl("patch", "argustask", "smoke", "-n", ns, "--subresource=status", "--type=merge", "-p", '{"status": {"phase": "Queued"}}')


def test_user_without_bindings_is_forbidden(control_plane: KubeCluster, argustask_crd: str, kube_namespace: str) -> None:
    user = control_plane.mint_user(f"nobody-{uuid.uuid4().hex[:6]}", groups=["argus-smoke"])
    r = control_plane.kubectl("get", "argustasks", "-n", kube_namespace, kubeconfig=user, check=False)
    assert r.returncode != 0
    assert "Forbidden" in r.stderr or "forbidden" in r.stderr, r.stderr
    # The admin can.
    control_plane.kubectl("get", "argustasks", "-n", kube_namespace)


def test_serviceaccount_token(control_plane: KubeCluster, kube_namespace: str) -> None:
    ns = kube_namespace
    control_plane.kubectl("create", "serviceaccount", "smoke-bot", "-n", ns)
    token = control_plane.kubectl("create", "token", "smoke-bot", "-n", ns, "--duration=10m").stdout.strip()
    assert token.count(".") == 2, token  # a JWT
    if isinstance(control_plane, ControlPlane):
        kubeconfig = control_plane.token_kubeconfig(token, "smoke-bot", namespace=ns)
        who = control_plane.kubectl("auth", "whoami", "-o", "json", kubeconfig=kubeconfig)
        assert json.loads(who.stdout)["status"]["userInfo"]["username"] == f"system:serviceaccount:{ns}:smoke-bot"
        # ... and it has no permissions.
        with pytest.raises(KubectlError, match="[Ff]orbidden"):
            control_plane.kubectl("get", "configmaps", kubeconfig=kubeconfig)


def test_ray_job_runs_on_the_worker(ray_cluster: RayCluster) -> None:
    from ray.job_submission import JobStatus, JobSubmissionClient

    client = JobSubmissionClient(ray_cluster.dashboard_url)
    job_id = client.submit_job(
        entrypoint='python -c "print(42)"',
        entrypoint_resources={ray_cluster.worker_resource: 1},
    )
    deadline = time.monotonic() + 120
    while (status := client.get_job_status(job_id)) not in {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}:
        assert time.monotonic() < deadline, f"job {job_id} still {status}"
        time.sleep(0.2)
    info = client.get_job_info(job_id)
    assert status == JobStatus.SUCCEEDED, info
    assert info.driver_node_id in ray_cluster.worker_node_ids
    assert info.driver_node_id != ray_cluster.head_node_id
    assert "42" in client.get_job_logs(job_id)


def test_a_killed_test_run_takes_its_testbed_processes_along(tmp_path: Path) -> None:
    # A test run SIGKILLed (no atexit): each process it started dies by its watchdog.
    script = ("import sys, time; from argus_testbed.procs import ManagedProcess; "
              f"p = ManagedProcess('sleeper', ['sleep', '600'], {str(tmp_path / 'sleeper.log')!r}).start(); "
              "print(p.pid, flush=True); time.sleep(600)")
    run = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert run.stdout is not None
    sleeper = int(run.stdout.readline())
    assert os.path.exists(f"/proc/{sleeper}")
    run.send_signal(signal.SIGKILL)
    run.wait(timeout=10)

    def gone() -> bool:
        try:
            with open(f"/proc/{sleeper}/stat") as f:
                return f.read().rsplit(")", 1)[-1].split()[0] in ("Z", "X")  # killed, not yet reaped
        except OSError:
            return True
    deadline = time.monotonic() + 30
    while not gone():
        assert time.monotonic() < deadline, f"process {sleeper} outlived the killed test run"
        time.sleep(0.1)
