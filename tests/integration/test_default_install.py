"""Issue 36, item 3: the chart's default install serves the researcher, proven on the real API
server. ``helm install`` with no values at all, then the admission webhook refuses an invalid
task at ``kubectl apply`` and a task's log is read through the log API (``argus logs``, the
caller's own identity), both through the chart's Services and certificates.

Then the price of those defaults, measured: with no replica answering (the operator stopped,
so the Services have no ready backend, as when every pod is down), the time and outcome of
``kubectl api-resources`` (client-go's discovery, as Argo CD's cluster cache and controllers'
REST mappers read it), the aggregated discovery document's view of the group, the group's own
discovery request (what clients without aggregated discovery make), ``kubectl get
argustasks``, a task ``kubectl apply`` (the webhook's failurePolicy Ignore), and ``helm upgrade
--set logsApi.enabled=false``, the documented way out. The figures are written to
``outage.json`` in the module's work folder; docs/logs.md and docs/webhook.md quote them.
Times are not asserted (docs/testing.md), outcomes are.

The operator runs here as a process, as the chart's ServiceAccount with the Deployment's own
flags and the Secrets' files (as tests/integration/test_chart.py does); the testbed's service
network plays kube-proxy for the two Services. Like envtest, the testbed has no
kube-controller-manager, so namespace deletion (the namespace controller's work) is not
measured here.
"""

from __future__ import annotations

import json
import os
import re
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_chart import CHART, chart_flags, flag_value, helm, render, sa_kubeconfig, secret_files  # noqa: F401 - helm: a fixture

from argus_testbed import Backend, ControlPlane, KubeCluster, RayCluster, ServiceNetwork
from argus_testbed.controlplane import find_kubectl
from argus_testbed.harness import OperatorProcess, advanced_task, apply_text, get_task, ppo_command, task_gone, wait_for, wait_phase
from argus_testbed.logsapi import API_SERVICE, api_service_available, ready_endpoint_slice

pytestmark = pytest.mark.integration
RELEASE, RELEASE_NS = "argus", "argus-system"
DENIED = 'admission webhook "validate-argustask.argus.io" denied the request'
# The stand-in's pace here: a 3-step run lasts 45 s. The README's quick start suspends
# grpo-basic after its log's step 1, and the run must not end first: at 6 s a step, CI's load
# (load average 18-23) delayed `argus suspend` past the run's end.
STEP_SECONDS = "15"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory, service_network: ServiceNetwork) -> Iterator[KubeCluster]:
    cp = ControlPlane.start(tmp_path_factory.mktemp("default-install-control-plane"), service_network=service_network)
    try:
        yield cp
    finally:
        cp.stop()


class Install:
    """The default release, the operator serving it, and how to stop and start that operator."""

    def __init__(self, cp: ControlPlane, net: ServiceNetwork, work: Path, flags: list[str], kubeconfig: Path, ray: Any, root: Path) -> None:
        self.cp, self.net, self.work, self.flags, self.kubeconfig, self.ray, self.root = cp, net, work, flags, kubeconfig, ray, root
        self.op: OperatorProcess | None = None
        self.routes: list[tuple[str, int]] = []

    def start(self) -> None:
        self.op = OperatorProcess.start(self.work / "operator", kubeconfig=self.kubeconfig, ray_address=self.ray.dashboard_url,
                                        root=self.root, namespaces=[], extra_args=[*self.flags, "--progress-interval", "1"])
        ready = f"http://127.0.0.1:{flag_value(self.flags, '--health-port')}/readyz"
        for service, flag in (("webhook", "--webhook-port"), ("logs-api", "--logs-api-port")):
            svc = json.loads(self.cp.kubectl("get", "service", f"{RELEASE}-{service}", "-n", RELEASE_NS, "-o", "json").stdout)
            self.net.route(svc["spec"]["clusterIP"], 443, [Backend(int(flag_value(self.flags, flag)), ready)])
            self.routes.append((svc["spec"]["clusterIP"], 443))

    def stop(self) -> None:
        if self.op is not None:
            self.op.stop()


@pytest.fixture(scope="module")
def paced_ray(tmp_path_factory: pytest.TempPathFactory, ray_cluster_options: dict[str, Any]) -> Iterator[RayCluster]:
    """A Ray cluster whose stand-in trainer takes STEP_SECONDS a step: the README's quick start
    reads a running task's log and suspends it, which a run of a fraction of a second (the
    session cluster's pace) does not allow."""
    options = {**ray_cluster_options, "extra_env": {**ray_cluster_options.get("extra_env", {}), "VERL_STANDIN_STEP_SECONDS": STEP_SECONDS}}
    cluster = RayCluster.start(tmp_path_factory.mktemp("paced-ray"), **options)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def install(helm: Any, control_plane: ControlPlane, service_network: ServiceNetwork, paced_ray: RayCluster, argus_root: Path,  # noqa: F811 - helm: the fixture imported above
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Install]:
    cp = control_plane
    helm("install", RELEASE, str(CHART), "--namespace", RELEASE_NS, "--create-namespace", cluster=True)  # no values: the defaults
    objs = render(helm)
    kinds = {o["kind"] for o in objs}
    assert {"ValidatingWebhookConfiguration", "APIService"} <= kinds, kinds
    work = tmp_path_factory.mktemp("default-install")
    flags = chart_flags(objs, tls_dir=secret_files(cp, RELEASE_NS, f"{RELEASE}-webhook-tls", work / "webhook-tls"),
                        logs_tls_dir=secret_files(cp, RELEASE_NS, f"{RELEASE}-logs-api-tls", work / "logs-api-tls"))
    ready_endpoint_slice(cp, RELEASE_NS, f"{RELEASE}-logs-api")  # the endpoint slice controller's part (never dialled)
    it = Install(cp, service_network, work, flags, sa_kubeconfig(cp, RELEASE, RELEASE_NS), paced_ray, argus_root)
    it.start()
    try:
        assert it.op is not None
        wait_for(lambda: api_service_available(cp), 90, f"{API_SERVICE} to be Available",
                 on_timeout=lambda: cp.kubectl("get", "apiservice", API_SERVICE, "-o", "yaml").stdout + it.op.log_tail(60))
        yield it
    finally:
        it.stop()


def namespace(cp: KubeCluster, user: str) -> str:
    ns = f"{user}-{uuid.uuid4().hex[:6]}"
    cp.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": ns, "labels": {"argus.io/user": user}}}))
    return ns


def argus(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "argus.cli", *argv], capture_output=True, text=True, timeout=timeout)


def test_an_invalid_task_is_refused_at_apply_and_a_log_is_read_through_the_log_api(install: Install, control_plane: ControlPlane) -> None:
    cp = control_plane
    ns = namespace(cp, "alice")
    alice = cp.mint_user("alice")
    cp.kubectl("create", "rolebinding", "alice-edit", "-n", ns, "--clusterrole=argus-edit", "--user=alice")

    # The webhook (chart-made certificate, chart's Service): refused at apply, never created.
    def refused() -> str | None:
        out = apply_text(cp, ns, advanced_task("bad", "echo python3 -m verl.trainer.main_ppo"), check=False)
        return out.stderr if out.returncode != 0 and DENIED in out.stderr else None
    message = wait_for(refused, 60, "the webhook to refuse an invalid task", on_timeout=lambda: install.op.log_tail(60) if install.op else "")
    assert "does not run an allowed entrypoint" in message, message
    assert not cp.kubectl("get", "argustask", "bad", "-n", ns, "--ignore-not-found", "-o", "name").stdout.strip()

    # A valid task runs; alice reads its log through logs.argus.io with her own identity.
    apply_text(cp, ns, advanced_task("good", ppo_command(steps=3)))
    done = wait_phase(cp, ns, "good", ("Succeeded", "Failed", "Rejected"), timeout=120, op=install.op)["status"]
    assert done["phase"] == "Succeeded", done
    out = argus("logs", "good", "-n", ns, "--kubeconfig", str(alice))
    assert out.returncode == 0, out.stderr
    assert "step:3" in out.stdout, out.stdout[-2000:]
    # And `argus get` shows it in one line, with the same identity.
    got = argus("get", "good", "-n", ns, "--kubeconfig", str(alice))
    assert got.returncode == 0 and got.stdout.splitlines()[1].split()[:2] == ["good", "Succeeded"], got.stdout + got.stderr


def readme_commands(section: str) -> list[str]:
    """The shell lines of one README section's ```sh blocks, in order, without their comments."""
    body = (REPO / "README.md").read_text().split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    lines = [re.sub(r"\s+#.*$", "", line).strip() for block in re.findall(r"```sh\n(.*?)```", body, flags=re.S)
             for line in block.splitlines()]
    return [line for line in lines if line]


def shell(line: str, kubeconfig: Path, until: str | None = None, timeout: float = 180) -> str:
    """Run a README line as a user types it (bash, the argus and kubectl on PATH, KUBECONFIG);
    with ``until``, a command that runs until stopped (-w, -f) is read until a line holds
    ``until`` and then interrupted, as the user's Ctrl-C. Its output."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "KUBECACHEDIR": str(Path(kubeconfig).parent / "kube-cache"),
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), str(Path(find_kubectl()).parent), os.environ.get("PATH", "")])}
    if until is None:
        done = subprocess.run(["bash", "-c", line], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, f"{line}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done.stdout
    proc = subprocess.Popen(["bash", "-c", f"exec {line}"], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    seen: list[str] = []
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        assert proc.stdout is not None
        for out in proc.stdout:
            seen.append(out)
            if until in out:
                break
    finally:
        timer.cancel()
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert any(until in out for out in seen), f"{line}: no line with {until!r} in {timeout:.0f} s:\n{''.join(seen)[-3000:]}"
    return "".join(seen)


def test_the_readme_quick_starts_work_as_written(install: Install, control_plane: ControlPlane) -> None:
    """The README's quick starts on the default install, line by line as written: the admin
    onboards alice (its first `argus onboard`), and alice, with her own identity, validates,
    submits, watches, describes, reads the log of, suspends, resumes, cancels and deletes
    examples/grpo-basic.yaml in the namespace alice."""
    cp = control_plane
    onboard = "argus onboard alice"
    assert onboard in readme_commands("Quick start: an admin installs Argus")
    shell(onboard, cp.kubeconfig)
    alice = cp.mint_user("alice")
    lines = readme_commands("Quick start: a researcher's first task")
    verbs = [" ".join(line.split()[:2]) for line in lines]
    assert verbs == ["argus validate", "kubectl apply", "kubectl get", "kubectl describe", "argus queue", "argus logs",
                     "argus suspend", "argus resume", "argus cancel", "kubectl delete"], lines
    phase = lambda: (get_task(cp, "alice", "grpo-basic").get("status") or {}).get("phase", "")  # noqa: E731
    watch_until = {"kubectl get": "Running", "argus logs": "step:1"}
    after = {"argus suspend": ("Suspended",), "argus resume": ("Queued", "Submitted", "Running"), "argus cancel": ("Stopped",)}
    for line, verb in zip(lines, verbs, strict=True):
        out = shell(line, alice, until=watch_until.get(verb))
        if verb == "kubectl apply":
            assert "argustask.argus.io/grpo-basic created" in out, out
        if verb in after:
            wait_for(lambda verb=verb: phase() in after[verb], 120, f"grpo-basic to be {'/'.join(after[verb])} after {verb}",
                     on_timeout=lambda: phase() + (install.op.log_tail(40) if install.op else ""))
    wait_for(lambda: task_gone(cp, "alice", "grpo-basic"), 120, "grpo-basic to be deleted (its finalizer released)")


def _timed(run: Any) -> tuple[float, Any]:
    t0 = time.monotonic()
    out = run()
    return round(time.monotonic() - t0, 3), out


def _kubectl(cp: ControlPlane, *argv: str) -> subprocess.CompletedProcess[str]:
    """kubectl with an empty discovery cache of its own, as a client that starts cold."""
    cache = Path(cp.kubeconfig).parent / f"kubectl-cache-{uuid.uuid4().hex[:8]}"
    return cp.kubectl(f"--cache-dir={cache}", *argv, check=False)


def _aggregated_discovery(cp: ControlPlane) -> Any:
    """logs.argus.io in the aggregated discovery document (/apis as kubectl and client-go >= 1.30
    read it): its versions' freshness ("Current" or "Stale"), or None when the group is absent."""
    ctx = ssl.create_default_context(cafile=str(cp.cert_dir / "ca.crt"))
    ctx.load_cert_chain(cp.cert_dir / "admin.crt", cp.cert_dir / "admin.key")
    req = urllib.request.Request(f"{cp.server}/apis", headers={
        "Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"})
    with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
        doc = json.loads(resp.read())
    for group in doc.get("items") or []:
        if group["metadata"]["name"] == "logs.argus.io":
            return [v.get("freshness", "Current") for v in group.get("versions") or []]
    return None


def _discovery_figures(cp: ControlPlane, ns: str, label: str, figures: dict[str, Any]) -> None:
    """The clients that read discovery, timed (each a fresh kubectl: no discovery cache)."""
    for name, argv in (("kubectl api-resources", ["api-resources", "-o", "name"]),
                       ("kubectl get argustasks", ["get", "argustasks", "-n", ns, "-o", "name"]),
                       ("kubectl get --raw /apis/logs.argus.io/v1alpha1 (per-group discovery)", ["get", "--raw", "/apis/logs.argus.io/v1alpha1"])):
        seconds, out = _timed(lambda argv=argv: _kubectl(cp, *argv))
        figures[f"{label}: {name}"] = {"seconds": seconds, "exit": out.returncode, "stderr": out.stderr.strip()[-300:],
                                       "lists logs.argus.io": "logs.argus.io" in out.stdout}
    seconds, freshness = _timed(lambda: _aggregated_discovery(cp))
    figures[f"{label}: aggregated discovery /apis, logs.argus.io freshness"] = {"seconds": seconds, "freshness": freshness}


def _until_api_resources_fails(cp: ControlPlane, limit: float = 90, every: float = 10) -> dict[str, Any]:
    """How long after the APIService went unavailable `kubectl api-resources` reports it,
    asked every ``every`` seconds and once more at ``limit``: each ask is a kubectl with a cold
    discovery cache (about half a second of CPU), so every 2 s over the 90 s was 45 of them."""
    t0 = time.monotonic()
    while True:
        out = _kubectl(cp, "api-resources", "-o", "name")
        if out.returncode != 0 or "logs.argus.io" in out.stderr:
            return {"seconds": round(time.monotonic() - t0, 1), "exit": out.returncode, "stderr": out.stderr.strip()[-300:]}
        left = limit - (time.monotonic() - t0)
        if left <= 0:
            return {"seconds": None, "note": f"no error in {limit:.0f} s (asked every {every:.0f} s)"}
        time.sleep(min(every, left))


def test_what_the_defaults_cost_while_no_replica_answers(install: Install, control_plane: ControlPlane, helm: Any) -> None:  # noqa: F811
    cp = control_plane
    ns = namespace(cp, "bob")
    figures: dict[str, Any] = {}
    _discovery_figures(cp, ns, "served", figures)
    install.stop()  # no replica answers: the Services have no ready backend
    seconds, _ = _timed(lambda: wait_for(lambda: not api_service_available(cp), 120, f"{API_SERVICE} to be unavailable", interval=0.2))
    figures["APIService Available=False after the last replica stopped"] = {"seconds": seconds}
    conditions = json.loads(cp.kubectl("get", "apiservice", API_SERVICE, "-o", "json").stdout)["status"]["conditions"]
    figures["APIService condition"] = [{k: c.get(k) for k in ("type", "status", "reason")} for c in conditions]
    _discovery_figures(cp, ns, "down", figures)
    figures["down: kubectl api-resources first reports the group"] = _until_api_resources_fails(cp)
    _discovery_figures(cp, ns, "down, later", figures)
    (install.work / "outage.json").write_text(json.dumps(figures, indent=1))

    # The group's own discovery fails; reads of tasks (another group) still work.
    assert figures["down: kubectl get --raw /apis/logs.argus.io/v1alpha1 (per-group discovery)"]["exit"] != 0, figures
    assert figures["down: kubectl get argustasks"]["exit"] == 0, figures

    # The webhook's failurePolicy Ignore: a valid task is admitted (the operator validates it when back).
    seconds, out = _timed(lambda: apply_text(cp, ns, advanced_task("while-down", ppo_command(steps=2)), check=False))
    figures["down: kubectl apply of a task (webhook Ignore)"] = {"seconds": seconds, "exit": out.returncode,
                                                                 "stderr": out.stderr.strip()[-300:]}
    assert out.returncode == 0, out.stderr

    # Back: a replica answers again.
    install.start()
    seconds, _ = _timed(lambda: wait_for(lambda: api_service_available(cp), 120, f"{API_SERVICE} to be Available again", interval=0.2))
    figures["APIService Available again after the operator started"] = {"seconds": seconds}
    wait_phase(cp, ns, "while-down", ("Succeeded", "Failed", "Rejected"), timeout=120, op=install.op)

    # The way out while down: turn the log API off; discovery is whole again at once.
    install.stop()
    wait_for(lambda: not api_service_available(cp), 120, f"{API_SERVICE} to be unavailable", interval=0.2)
    seconds, out = _timed(lambda: helm("upgrade", RELEASE, str(CHART), "--namespace", RELEASE_NS, "--reuse-values",
                                       "--set", "logsApi.enabled=false", check=False, cluster=True))
    figures["down: helm upgrade --set logsApi.enabled=false"] = {"seconds": seconds, "exit": out.returncode,
                                                                 "stderr": out.stderr.strip()[-300:]}
    assert out.returncode == 0, out.stderr
    assert not cp.kubectl("get", "apiservice", API_SERVICE, "--ignore-not-found", "-o", "name").stdout.strip()
    _discovery_figures(cp, ns, "log API turned off", figures)
    off = figures["log API turned off: kubectl api-resources"]
    assert off["exit"] == 0 and not off["lists logs.argus.io"], figures

    (install.work / "outage.json").write_text(json.dumps(figures, indent=1))
    print(json.dumps(figures, indent=1))
