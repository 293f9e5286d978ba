"""Issue 6: the Helm chart on a real API server with RBAC on.

- ``helm lint``; ``helm template`` over a matrix of values, every object parsed, checked by the
  API server (``kubectl apply --dry-run=server``) and its operator flags parsed by the operator's
  own argument parser; a misspelt value fails ``helm install`` with the schema's message.
- ``helm install`` into the API server: every object accepted.
- RBAC proof: the operator, run here but authenticated as the chart's ServiceAccount (a token from
  ``kubectl create token``), takes tasks through create -> Succeeded, cancel -> Stopped and
  delete -> finalizer released; the same with the single-namespace Roles; and with any one task
  rule removed from the ClusterRole it fails loudly (Forbidden in its log, the task stuck).
- Users: ``argus onboard alice`` binds argus-edit in namespace alice; alice (a client-certificate
  identity) can create tasks there, is Forbidden in bob, and cannot write argustasks/status.

The module runs on its own API server (unless ARGUS_TEST_KUBECONFIG names a cluster), so the
operator can watch every namespace, as the chart's default does, without meeting other tests'
tasks. Like envtest, that server has no controller-manager: no ClusterRole aggregation (we bind
argus-edit directly and check the aggregation labels statically), no pods (the Deployment is
accepted but never runs), and namespaces never finish deleting.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from argus_testbed import ControlPlane, ExternalCluster, KubeCluster, find_binaries
from argus_testbed.ports import free_port
from argus_testbed.harness import REPO, advanced_task, apply_text, get_task, ppo_command, ray_jobs_for, wait_for, wait_phase

pytestmark = pytest.mark.integration

CHART = REPO / "charts" / "argus"
RELEASE, RELEASE_NS = "argus", "argus-system"
SA = "argus"  # the chart's fullname: the release name, as it contains the chart name
# How a refusal shows in the operator's log: the HTTP reason phrase or the API server's
# "... is forbidden: User ..." message. Not a bare "403": timestamps (",403"), latencies and
# hex ids contain it about once in a thousand lines.
FORBIDDEN = ("Forbidden", "forbidden")

# name -> extra helm arguments. Each is rendered, parsed and dry-run applied on the server.
MATRIX: dict[str, list[str]] = {
    "defaults": [],
    "webhook-on": ["--set", "webhook.enabled=true"],
    "webhook-secret": ["--set", "webhook.enabled=true", "--set", "webhook.certificate.source=secret",
                       "--set", "webhook.certificate.secretName=argus-webhook-tls", "--set", "webhook.certificate.caKey=ca.crt",
                       "--set", "webhook.failurePolicy=Fail"],
    "webhook-cert-manager": ["--set", "webhook.enabled=true", "--set", "webhook.certificate.source=cert-manager"],
    "metrics-off": ["--set", "metrics.enabled=false"],
    "leader-election-off": ["--set", "leaderElection.enabled=false"],
    "single-namespace": ["--set", "operator.watchNamespaces={team-a}"],
    "single-namespace-peering": ["--set", "operator.watchNamespaces={team-a,team-b}", "--set", "peering.enabled=true"],
    "peering": ["--set", "peering.enabled=true", "--set", "peering.priority=10"],
    "everything": ["--set", "operator.verlCodePath=/private/common/code/verl/v1", "--set", "operator.maxRunning=16",
                   "--set", "operator.pollInterval=0.5", "--set-json", 'operator.entrypointAllowlist=["python3 -m verl.trainer.*","torchrun -m verl.*"]',
                   "--set", "operator.verbose=true", "--set-json", 'nodeSelector={"node-role.kubernetes.io/control-plane":""}',
                   "--set-json", 'tolerations=[{"key":"dedicated","operator":"Equal","value":"argus","effect":"NoSchedule"}]'],
}
# Kinds whose CRDs this API server does not have (cert-manager): rendered and parsed only.
NOT_ON_TESTBED = {"cert-manager.io/v1"}


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    """This module's own API server (overrides the session one for this module only)."""
    external = os.environ.get("ARGUS_TEST_KUBECONFIG")
    if external:
        yield ExternalCluster(external)
        return
    cp = ControlPlane.start(tmp_path_factory.mktemp("chart-control-plane"))
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="module")
def helm(control_plane: KubeCluster, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Run helm (built by hack/build-testbed-bins.sh) against this module's cluster."""
    binary = find_binaries() / "helm"
    home = tmp_path_factory.mktemp("helm-home")
    env = {**os.environ, "HELM_CACHE_HOME": str(home / "cache"), "HELM_CONFIG_HOME": str(home / "config"),
           "HELM_DATA_HOME": str(home / "data")}
    env.pop("KUBECONFIG", None)

    def run(*args: str, check: bool = True, cluster: bool = False) -> subprocess.CompletedProcess[str]:
        argv = [str(binary), *args] + (["--kubeconfig", str(control_plane.kubeconfig)] if cluster else [])
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=180)
        if check and proc.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}\n{proc.stdout[-2000:]}")
        return proc
    return run


def render(helm: Any, *extra: str, release: str = RELEASE, namespace: str = RELEASE_NS) -> list[dict[str, Any]]:
    text = helm("template", release, str(CHART), "--namespace", namespace, *extra).stdout
    return [d for d in yaml.safe_load_all(text) if d]


def one(objs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"{kind} {name}: found {len(found)} in {[(o['kind'], o['metadata']['name']) for o in objs]}"
    return found[0]


def ensure_namespace(cp: KubeCluster, name: str, labels: dict[str, str] | None = None) -> str:
    cp.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": name, "labels": labels or {}}}))
    return name


@pytest.fixture(scope="module")
def chart_crds(control_plane: KubeCluster) -> None:
    """The chart's crds/ (helm install applies them too; the dry-runs need them first)."""
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds"))
    names = [d["metadata"]["name"] for f in sorted((CHART / "crds").glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    control_plane.wait_established(*names)


@pytest.fixture(scope="module")
def installed(helm: Any, control_plane: KubeCluster, chart_crds: None) -> list[dict[str, Any]]:
    """The chart installed with its defaults (cluster-wide). Returns the rendered objects."""
    helm("upgrade", "--install", RELEASE, str(CHART), "--namespace", RELEASE_NS, "--create-namespace", cluster=True)
    return render(helm)


def sa_kubeconfig(cp: KubeCluster, sa: str, namespace: str) -> Path:
    """A kubeconfig that authenticates as the ServiceAccount (a TokenRequest token)."""
    token = cp.kubectl("create", "token", sa, "-n", namespace, "--duration=2h").stdout.strip()
    if isinstance(cp, ControlPlane):
        return cp.token_kubeconfig(token, f"sa-{namespace}-{sa}")
    pytest.skip("needs the local control plane to build a token kubeconfig")


def operator_namespaces(cp: KubeCluster, namespaces: list[str]) -> list[str]:
    """Every namespace (the chart's default) on our own API server; only the test's own on a
    shared cluster, where other tasks may live."""
    return namespaces if isinstance(cp, ExternalCluster) else []


def onboard(cp: KubeCluster, user: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "argus.cli", "onboard", user, "--kubeconfig", str(cp.kubeconfig), *extra],
                          capture_output=True, text=True, timeout=60)


def events_for(cp: KubeCluster, ns: str, name: str) -> list[dict[str, Any]]:
    items = json.loads(cp.kubectl("get", "events", "-n", ns, "-o", "json").stdout)["items"]
    return [e for e in items if e["involvedObject"].get("name") == name]


def operator_roles(objs: list[dict[str, Any]], fullname: str = SA) -> list[dict[str, Any]]:
    """The operator's ClusterRoles and Roles in a rendering: those bound to its ServiceAccount."""
    def ours(binding: dict[str, Any]) -> bool:
        return any(sub.get("kind") == "ServiceAccount" and sub.get("name") == fullname for sub in binding.get("subjects", []))
    bound = {(b["roleRef"]["kind"], b["roleRef"]["name"], b["metadata"].get("namespace") if b["kind"] == "RoleBinding" else None)
             for b in objs if b["kind"] in ("ClusterRoleBinding", "RoleBinding") and ours(b)}
    return [o for o in objs if o["kind"] in ("ClusterRole", "Role") and (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) in bound]


# Flags the harness sets itself (test Ray, paths, fast polling, the namespaces to watch).
HARNESS_FLAGS = {"--ray-address", "--root", "--verl-code-path", "--max-running", "--poll-interval", "--standalone", "--namespace"}


def chart_flags(objs: list[dict[str, Any]]) -> list[str]:
    """The rendered Deployment's operator flags, for an operator run here: the harness's own
    flags left out, the pod's fixed ports moved to free loopback ports."""
    out = []
    for arg in _operator_argv(one(objs, "Deployment")):
        flag = arg.split("=", 1)[0]
        if flag in HARNESS_FLAGS:
            continue
        if flag == "--liveness":
            arg = f"--liveness=http://127.0.0.1:{free_port()}/healthz"
        elif flag == "--metrics-port":
            arg = f"--metrics-port={free_port()}"
        out.append(arg)
    return out


# --------------------------------------------------------------------------- lint, template

def test_helm_lint_is_clean(helm: Any) -> None:
    out = helm("lint", "--strict", str(CHART))
    assert "0 chart(s) failed" in out.stdout
    assert "[WARNING]" not in out.stdout and "[ERROR]" not in out.stdout, out.stdout


def test_chart_crd_is_the_generated_one() -> None:
    # tests/unit/test_crd.py checks byte equality; here: the chart ships exactly these CRDs.
    assert (CHART / "crds" / "argus.io_argustasks.yaml").read_text() == (REPO / "crds" / "argus.io_argustasks.yaml").read_text()
    names = {d["metadata"]["name"] for f in sorted((CHART / "crds").glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d}
    assert names == {"argustasks.argus.io", "clusterkopfpeerings.kopf.dev", "kopfpeerings.kopf.dev"}


def _operator_argv(deployment: dict[str, Any]) -> list[str]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "command" not in container  # the image's entrypoint is argus-operator
    return container["args"]


def _parse_operator_args(argv: list[str]) -> Any:
    """Parse with the operator's own parser: a flag the chart renders that the operator does
    not know, or a bad value, fails here."""
    from argus.controller.main import build_parser
    args, unknown = build_parser().parse_known_args(argv)
    assert not unknown, unknown
    return args


@pytest.mark.parametrize("case", list(MATRIX))
def test_template_matrix_is_accepted_by_the_api_server(case: str, helm: Any, control_plane: KubeCluster, chart_crds: None) -> None:
    objs = render(helm, *MATRIX[case])
    for o in objs:
        assert o.get("apiVersion") and o.get("kind") and o.get("metadata", {}).get("name"), o
        cluster_scoped = o["kind"] in ("ClusterRole", "ClusterRoleBinding", "ClusterKopfPeering", "CustomResourceDefinition")
        assert cluster_scoped or o["metadata"].get("namespace"), f"{o['kind']} {o['metadata']['name']} has no namespace"
    for o in objs:
        ns = o["metadata"].get("namespace")
        if ns:
            ensure_namespace(control_plane, ns)
    on_server = [o for o in objs if o["apiVersion"] not in NOT_ON_TESTBED]
    text = "\n---\n".join(yaml.safe_dump(o) for o in on_server)
    out = control_plane.kubectl("apply", "--dry-run=server", "-f", "-", input=text)
    assert len([ln for ln in out.stdout.splitlines() if "(server dry run)" in ln]) == len(on_server), out.stdout

    deployment = one(objs, "Deployment")
    argv = _operator_argv(deployment)
    args = _parse_operator_args(argv)
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    rbac = json.dumps(operator_roles(objs))
    if case == "metrics-off":
        assert args.metrics_port is None and not [o for o in objs if o["kind"] == "Service"]
    else:
        assert args.metrics_port == values["metrics"]["port"]
        assert one(objs, "Service", f"{RELEASE}-metrics")["spec"]["ports"][0]["port"] == args.metrics_port
    if case == "leader-election-off":
        assert not args.leader_elect and "leases" not in rbac
    else:
        assert args.leader_elect and args.leader_election_namespace == RELEASE_NS and args.leader_lease_seconds == 15
        lease_role = one(objs, "Role", f"{RELEASE}-leader-election")
        assert lease_role["metadata"]["namespace"] == RELEASE_NS
        assert {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["argus-operator"],
                "verbs": ["get", "update"]} in lease_role["rules"]
    if "single-namespace" in case:
        watched = ["team-a"] if case == "single-namespace" else ["team-a", "team-b"]
        assert args.namespaces == watched
        role = one(objs, "ClusterRole", SA)
        assert {r["resources"][0] for r in role["rules"]} == {"namespaces", "customresourcedefinitions"}
        for ns in watched:
            (task_role,) = [o for o in objs if o["kind"] == "Role" and o["metadata"]["namespace"] == ns]
            assert {r["resources"][0] for r in task_role["rules"]} >= {"argustasks", "argustasks/status", "events"}
            assert [o for o in objs if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == ns]
    else:
        assert args.namespaces == []
        assert not [o for o in objs if o["kind"] == "Role" and "leader-election" not in o["metadata"]["name"]]
    if "peering" in case:
        assert args.peering_name == "argus" and not args.standalone
        assert [o for o in objs if o["kind"] in ("ClusterKopfPeering", "KopfPeering")]
        assert "kopf.dev" in rbac
    else:
        assert args.standalone and args.peering_name is None
        assert "kopf.dev" not in json.dumps(objs)
    if case.startswith("webhook"):
        assert args.webhook and args.webhook_service == f"{RELEASE}-webhook" and args.webhook_service_namespace == RELEASE_NS
        assert args.webhook_service_port == 443 and args.webhook_config_name == values["webhook"]["configName"]
        svc = one(objs, "Service", f"{RELEASE}-webhook")
        assert svc["spec"]["ports"] == [{"name": "https-webhook", "port": 443, "targetPort": "webhook", "protocol": "TCP"}]
        assert "validatingwebhookconfigurations" in rbac and '"resourceNames": ["argus.io"]' in rbac
        mounts_secret = case != "webhook-on"
        assert (args.webhook_cert_file == "/etc/argus/webhook-tls/tls.crt") == mounts_secret
        assert (args.webhook_ca_file == "/etc/argus/webhook-tls/ca.crt") == mounts_secret
        assert args.webhook_failure_policy == ("Fail" if case == "webhook-secret" else "Ignore")
        if case == "webhook-cert-manager":
            cert = one(objs, "Certificate")
            assert cert["spec"]["secretName"] == f"{RELEASE}-webhook-tls" and one(objs, "Issuer")
    else:
        assert not args.webhook and "validatingwebhookconfigurations" not in json.dumps(objs)
    if case == "everything":
        assert args.verl_code_path == "/private/common/code/verl/v1" and args.max_running == 16 and args.poll_interval == 0.5
        assert args.allowlist == ["python3 -m verl.trainer.*", "torchrun -m verl.*"] and args.verbose
        pod = deployment["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""} and pod["tolerations"][0]["key"] == "dedicated"


def test_deployment_is_locked_down(helm: Any) -> None:
    objs = render(helm)
    deployment = one(objs, "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (c,) = pod["containers"]
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]} and sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "healthz"}
    assert "--liveness=http://0.0.0.0:8080/healthz" in c["args"]
    assert {p["name"]: p["containerPort"] for p in c["ports"]}["healthz"] == 8080
    assert c["resources"]["requests"] and c["resources"]["limits"]
    assert pod["serviceAccountName"] == SA
    args = _parse_operator_args(c["args"])
    assert (args.ray_address, args.worker_resource, args.root, args.max_running, args.poll_interval) == (
        "http://ray-head:8265", "worker_node", "/private", 4, 2.0)


def test_user_roles_aggregate_and_never_write_status(helm: Any) -> None:
    objs = render(helm)
    edit, view = one(objs, "ClusterRole", "argus-edit"), one(objs, "ClusterRole", "argus-view")
    labels = edit["metadata"]["labels"]
    assert labels["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert labels["rbac.authorization.k8s.io/aggregate-to-admin"] == "true"
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert edit["rules"] == [{"apiGroups": ["argus.io"], "resources": ["argustasks"],
                              "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"]}]
    assert view["rules"] == [{"apiGroups": ["argus.io"], "resources": ["argustasks"], "verbs": ["get", "list", "watch"]}]
    assert "argustasks/status" not in json.dumps([edit, view])
    assert not [o for o in render(helm, "--set", "rbac.userRoles=false") if o["metadata"]["name"] in ("argus-edit", "argus-view")]


@pytest.mark.parametrize("values,message", [
    (["--set", "operator.maxRuning=3"], "additional properties 'maxRuning' not allowed"),
    (["--set", "metrcs.enabled=false"], "additional properties 'metrcs' not allowed"),
    (["--set", "webhook.failurePolicy=Sometimes"], "failurePolicy"),
    (["--set", "operator.maxRunning=0"], "maxRunning"),
    (["--set", "webhook.enabled=true", "--set", "webhook.certificate.source=secret"], "secretName"),
])
def test_values_mistake_fails_helm_install(values: list[str], message: str, helm: Any, control_plane: KubeCluster) -> None:
    out = helm("install", "typo", str(CHART), "--namespace", "typo-system", "--create-namespace", *values, check=False, cluster=True)
    assert out.returncode != 0
    assert "values don't meet the specifications of the schema" in out.stderr and message in out.stderr, out.stderr
    assert helm("status", "typo", "--namespace", "typo-system", check=False, cluster=True).returncode != 0


def test_helm_install_every_object_accepted(installed: list[dict[str, Any]], helm: Any, control_plane: KubeCluster) -> None:
    status = json.loads(helm("status", RELEASE, "--namespace", RELEASE_NS, "-o", "json", cluster=True).stdout)
    assert status["info"]["status"] == "deployed"
    for o in installed:
        args = ["get", f"{o['kind'].lower()}.{o['apiVersion'].split('/')[0]}" if "/" in o["apiVersion"] else o["kind"].lower(),
                o["metadata"]["name"], "-o", "json"]
        if o["metadata"].get("namespace"):
            args += ["-n", o["metadata"]["namespace"]]
        live = json.loads(control_plane.kubectl(*args).stdout)
        assert live["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE
    crds = control_plane.kubectl("get", "crd", "-o", "name").stdout
    assert "argustasks.argus.io" in crds and "clusterkopfpeerings.kopf.dev" in crds


def test_kind_ray_manifest_is_accepted(control_plane: KubeCluster) -> None:
    """deploy/kind/ray-cluster.yaml (hack/kind-e2e.sh's Ray cluster) passes the API server's checks."""
    text = (REPO / "deploy" / "kind" / "ray-cluster.yaml").read_text().replace("__RAY_IMAGE__", "rayproject/ray:2.40.0-py311")
    docs = [d for d in yaml.safe_load_all(text) if d]
    ensure_namespace(control_plane, "ray")
    out = control_plane.kubectl("apply", "--dry-run=server", "-f", "-", input=text)
    assert out.stdout.count("(server dry run)") == len(docs), out.stdout
    worker = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "ray-worker")
    args = worker["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert "--num-gpus=4" in args and '"worker_node"' in args
    head = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "ray-head")
    assert "--num-cpus=0" in head["spec"]["template"]["spec"]["containers"][0]["args"][0]


# --------------------------------------------------------------------------- RBAC proof

def test_operator_as_the_chart_service_account_runs_the_whole_lifecycle(
        installed: list[dict[str, Any]], control_plane: KubeCluster, ray_cluster: Any, run_operator: Any) -> None:
    """The chart's defaults: cluster-wide ClusterRole, leader election on its Lease. The
    operator runs with the Deployment's own flags (Ray, paths and ports swapped for the test's)."""
    cp = control_plane
    ns = ensure_namespace(cp, f"rbac-{uuid.uuid4().hex[:6]}", {"argus.io/user": "alice"})
    kubeconfig = sa_kubeconfig(cp, SA, RELEASE_NS)
    whoami = cp.kubectl("auth", "whoami", "-o", "json", kubeconfig=kubeconfig).stdout
    assert f"system:serviceaccount:{RELEASE_NS}:{SA}" in whoami
    # Sanity: the identity really is limited (RBAC is enforced).
    assert cp.kubectl("get", "secrets", "-n", RELEASE_NS, kubeconfig=kubeconfig, check=False).returncode != 0
    flags = chart_flags(installed)
    assert "--leader-elect" in flags
    op = run_operator(operator_namespaces(cp, [ns]), kubeconfig=kubeconfig, extra_args=flags)

    long = ppo_command(steps=2000)
    apply_text(cp, ns, advanced_task("quick", ppo_command(steps=3)))
    apply_text(cp, ns, advanced_task("to-cancel", long))
    apply_text(cp, ns, advanced_task("to-delete", long))
    done = wait_phase(cp, ns, "quick", ("Succeeded", "Failed", "Rejected"), timeout=120, op=op)["status"]
    assert done["phase"] == "Succeeded", done
    assert "is now the leader" in op.log_path.read_text()
    for name in ("to-cancel", "to-delete"):
        wait_phase(cp, ns, name, "Running", timeout=60, op=op)
    cp.kubectl("patch", "argustask", "to-cancel", "-n", ns, "--type=merge", "-p", '{"spec":{"cancel":true}}')
    stopped = wait_phase(cp, ns, "to-cancel", ("Stopped", "Failed", "Succeeded"), timeout=60, op=op)["status"]
    assert (stopped["phase"], stopped["reason"]) == ("Stopped", "Cancelled")

    from ray.job_submission import JobSubmissionClient
    task = get_task(cp, ns, "to-delete")
    sid = task["status"]["rayJob"]["submissionId"]
    assert "argus.io/stop-ray-job" in task["metadata"]["finalizers"]
    cp.kubectl("delete", "argustask", "to-delete", "-n", ns, "--timeout=60s")  # returns once the finalizer is released
    assert cp.kubectl("get", "argustask", "to-delete", "-n", ns, check=False).returncode != 0
    assert JobSubmissionClient(ray_cluster.dashboard_url).get_job_info(sid).status.value == "STOPPED"

    # Events were posted (one per phase change).
    reasons = {e["reason"] for e in events_for(cp, ns, "quick")}
    assert {"Admitted", "RayJobSucceeded"} <= reasons, reasons
    lease = json.loads(cp.kubectl("get", "lease", "argus-operator", "-n", RELEASE_NS, "-o", "json").stdout)
    assert lease["spec"]["holderIdentity"]
    log = op.log_path.read_text()
    assert not any(word in log for word in FORBIDDEN), op.log_tail(80)


def test_single_namespace_roles_are_enough(helm: Any, control_plane: KubeCluster, chart_crds: None, installed: list[dict[str, Any]],
                                           ray_cluster: Any, run_operator: Any) -> None:
    """operator.watchNamespaces: the task rules are a Role in the namespace; the operator,
    authenticated as that release's ServiceAccount, runs a task there and can read nothing
    elsewhere."""
    cp = control_plane
    ns = ensure_namespace(cp, f"single-{uuid.uuid4().hex[:6]}", {"argus.io/user": "alice"})
    release, release_ns = "argus-single", "argus-single-system"
    values = ["--set", f"operator.watchNamespaces={{{ns}}}", "--set", "rbac.userRoles=false"]
    helm("upgrade", "--install", release, str(CHART), "--namespace", release_ns, "--create-namespace", *values, cluster=True)
    objs = render(helm, *values, release=release, namespace=release_ns)
    assert [o["metadata"]["namespace"] for o in objs if o["kind"] == "Role"] == [release_ns, ns]  # the Lease, the tasks
    kubeconfig = sa_kubeconfig(cp, release, release_ns)
    other = ensure_namespace(cp, f"other-{uuid.uuid4().hex[:6]}", {"argus.io/user": "alice"})
    assert cp.kubectl("get", "argustasks", "-n", other, kubeconfig=kubeconfig, check=False).returncode != 0
    op = run_operator([ns], kubeconfig=kubeconfig, extra_args=chart_flags(objs))
    apply_text(cp, ns, advanced_task("single", ppo_command(steps=3)))
    status = wait_phase(cp, ns, "single", ("Succeeded", "Failed", "Rejected"), timeout=120, op=op)["status"]
    assert status["phase"] == "Succeeded", status
    assert not any(word in op.log_path.read_text() for word in FORBIDDEN), op.log_tail(80)


def test_webhook_rules_are_enough(helm: Any, control_plane: KubeCluster, chart_crds: None, installed: list[dict[str, Any]],
                                  ray_cluster: Any, run_operator: Any) -> None:
    """webhook.enabled: as that release's ServiceAccount, the operator writes its
    ValidatingWebhookConfiguration, and the API server denies a
    bad task at apply time. (On loopback: the operator's --webhook-url replaces the chart's
    Service, which the API server could not reach here; the webhook itself is tested in
    test_webhook.py.)"""
    cp = control_plane
    suffix = uuid.uuid4().hex[:6]
    release, release_ns, config = f"argus-wh-{suffix}", f"argus-wh-{suffix}", f"argus-rbac-{suffix}.argus.io"
    values = ["--set", "webhook.enabled=true", "--set", f"webhook.configName={config}", "--set", "rbac.userRoles=false",
              "--set", "leaderElection.enabled=false"]
    helm("upgrade", "--install", release, str(CHART), "--namespace", release_ns, "--create-namespace", *values, cluster=True)
    objs = render(helm, *values, release=release, namespace=release_ns)
    kubeconfig = sa_kubeconfig(cp, release, release_ns)
    ns = ensure_namespace(cp, f"wh-{suffix}", {"argus.io/user": "alice"})
    port = free_port()
    flags = [f for f in chart_flags(objs) if not f.startswith(("--webhook-service", "--webhook-port"))]
    flags += [f"--webhook-port={port}", f"--webhook-url=https://127.0.0.1:{port}", "--webhook-listen-host=127.0.0.1"]
    op = run_operator([ns], kubeconfig=kubeconfig, extra_args=flags)
    try:
        def denied() -> str | None:
            out = cp.kubectl("apply", "--dry-run=server", "-n", ns, "-f", "-", check=False,
                             input=advanced_task("bad", "echo python3 -m verl.trainer.main_ppo"))
            return out.stderr if out.returncode != 0 and "denied the request" in out.stderr else None
        message = wait_for(denied, 60, "the webhook to deny a bad task", on_timeout=lambda: op.log_tail(60))
        assert "does not run an allowed entrypoint" in message
        live = json.loads(cp.kubectl("get", "validatingwebhookconfiguration", config, "-o", "json").stdout)
        assert live["webhooks"][0]["failurePolicy"] == "Ignore"
        # A namespace labelled a moment ago: the webhook reads it live (namespaces get).
        fresh = ensure_namespace(cp, f"wh-fresh-{suffix}", {"argus.io/user": "alice"})
        ok = cp.kubectl("apply", "--dry-run=server", "-n", fresh, "-f", "-", input=advanced_task("good", ppo_command()), check=False)
        assert ok.returncode == 0, ok.stderr
        assert not any(word in op.log_path.read_text() for word in FORBIDDEN), op.log_tail(80)
    finally:
        op.stop()
        cp.kubectl("delete", "validatingwebhookconfiguration", config, "--ignore-not-found")


def _rule_for(resource: str, verb: str | None = None) -> Any:
    """Select the rule on ``resource`` (and holding ``verb``)."""
    return lambda rule: rule["resources"] == [resource] and (verb is None or verb in rule["verbs"])


# Without each rule of the operator's roles (defaults: the ClusterRole and the Lease Role), what
# happens and what its log says. "stuck": the task never gets a phase; "queued": it is
# validated and queued but never submitted (no finalizer, so no Ray job); "no-events": it runs, but
# kubectl describe shows nothing (the lifecycle test above asserts events, so it would catch
# that); "runs": kopf cannot follow CRD changes (it retries, then warns), tasks still run.
# A "verb:" case removes one verb from the rule instead of the whole rule.
TRIMMED = {
    "argustasks/status patch": (_rule_for("argustasks/status"), None, "stuck", 'cannot patch resource "argustasks/status"'),
    "argustasks list/watch/patch": (_rule_for("argustasks"), None, "stuck", 'cannot list resource "argustasks"'),
    "argustasks patch (verb)": (_rule_for("argustasks"), "patch", "queued", 'cannot patch resource "argustasks"'),
    "namespaces get/list/watch": (_rule_for("namespaces"), None, "stuck", 'cannot list resource "namespaces"'),
    "namespaces get (verb)": (_rule_for("namespaces"), "get", "stuck", 'cannot get resource "namespaces"'),
    "events create": (_rule_for("events"), None, "no-events", 'cannot create resource "events"'),
    "leases create": (_rule_for("leases", "create"), None, "stuck", 'cannot create resource "leases"'),
    "leases get/update": (_rule_for("leases", "get"), None, "stuck", 'cannot get resource "leases"'),
    "customresourcedefinitions list/watch": (_rule_for("customresourcedefinitions"), None, "runs",
                                             'cannot list resource "customresourcedefinitions"'),
}


@pytest.mark.parametrize("case", list(TRIMMED))
def test_operator_without_one_rule_fails_loudly(case: str, helm: Any, installed: list[dict[str, Any]], control_plane: KubeCluster,
                                                ray_cluster: Any, run_operator: Any) -> None:
    """A copy of the chart's operator roles, bound to a new ServiceAccount, with one rule (or
    verb) removed: the operator, run with the chart's flags, fails loudly."""
    cp = control_plane
    which, verb, symptom, complaint = TRIMMED[case]
    roles = copy.deepcopy(operator_roles(installed))
    matches = [(role, rule) for role in roles for rule in role["rules"] if which(rule)]
    assert len(matches) == 1, (case, matches)
    role, rule = matches[0]
    if verb:
        rule["verbs"] = [v for v in rule["verbs"] if v != verb]
    else:
        role["rules"] = [r for r in role["rules"] if r is not rule]
    suffix = uuid.uuid4().hex[:6]
    name = f"argus-trimmed-{suffix}"
    ns = ensure_namespace(cp, f"trim-{suffix}", {"argus.io/user": "alice"})
    lease_ns = ensure_namespace(cp, f"trim-lease-{suffix}")  # its own Lease: never waits for another test's
    objects: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": RELEASE_NS}}]
    for r in roles:
        meta = {"name": name} if r["kind"] == "ClusterRole" else {"name": name, "namespace": lease_ns}
        objects.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": r["kind"], "metadata": meta, "rules": r["rules"]})
        objects.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{r['kind']}Binding", "metadata": meta,
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": r["kind"], "name": name},
                        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": RELEASE_NS}]})
    assert [r["metadata"].get("namespace") for r in roles if r["kind"] == "Role"] == [RELEASE_NS]  # only the Lease Role
    cp.kubectl("apply", "-f", "-", input="\n---\n".join(yaml.safe_dump(o) for o in objects))
    kubeconfig = sa_kubeconfig(cp, name, RELEASE_NS)
    apply_text(cp, ns, advanced_task("victim", ppo_command(steps=3)))
    flags = [f"--leader-election-namespace={lease_ns}" if f.startswith("--leader-election-namespace") else f for f in chart_flags(installed)]
    op = run_operator([ns], kubeconfig=kubeconfig, extra_args=flags)
    log = lambda: op.log_path.read_text(errors="replace").replace('\\"', '"')  # noqa: E731 - JSON bodies escape quotes
    try:
        # Loud: kopf logs an ERROR naming the refused request, or our code a WARNING.
        wait_for(lambda: complaint in log(), 60, f"{complaint!r} in the operator log", on_timeout=lambda: op.log_tail(60))
        assert "forbidden" in log().lower()
        if symptom == "stuck":
            # A positive sign that time passed inside the operator (it met the refusal again on
            # a retry), then the negative: the task got nothing.
            wait_for(lambda: log().count(complaint) >= 2, 60, f"the operator to retry and meet {complaint!r} again",
                     on_timeout=lambda: op.log_tail(60))
            status = get_task(cp, ns, "victim").get("status") or {}
            assert not status.get("phase"), status
        elif symptom == "queued":
            wait_for(lambda: log().count(complaint) >= 2, 60, f"the operator to retry and meet {complaint!r} again",
                     on_timeout=lambda: op.log_tail(60))
            status = get_task(cp, ns, "victim").get("status") or {}
            assert status.get("phase") == "Queued", status
            assert ray_jobs_for(ray_cluster.dashboard_url, ns) == []
        else:
            status = wait_phase(cp, ns, "victim", ("Succeeded", "Failed", "Rejected"), timeout=120, op=op)["status"]
            assert status["phase"] == "Succeeded", status
            if symptom == "no-events":
                assert events_for(cp, ns, "victim") == []
                assert "could not post event" in log()
    finally:
        op.stop()
        # Leave nothing for a later operator: drop the finalizer a half-working operator may have added.
        cp.kubectl("patch", "argustask", "victim", "-n", ns, "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False)
        cp.kubectl("delete", "argustask", "victim", "-n", ns, "--wait=false", check=False)


# --------------------------------------------------------------------------- users

def test_onboarded_user_can_use_her_namespace_only(installed: list[dict[str, Any]], control_plane: KubeCluster) -> None:
    cp = control_plane
    first = onboard(cp, "alice")
    assert first.returncode == 0, first.stderr
    assert "namespace/alice created" in first.stdout and "rolebinding/argus-edit-alice created" in first.stdout, first.stdout
    again = onboard(cp, "alice")
    assert again.returncode == 0 and again.stdout.strip().endswith("nothing changed"), again.stdout
    assert "namespace/alice unchanged" in again.stdout and "rolebinding/argus-edit-alice unchanged" in again.stdout
    ns = json.loads(cp.kubectl("get", "namespace", "alice", "-o", "json").stdout)
    assert ns["metadata"]["labels"]["argus.io/user"] == "alice"
    binding = json.loads(cp.kubectl("get", "rolebinding", "argus-edit-alice", "-n", "alice", "-o", "json").stdout)
    # No controller-manager here, so no aggregation into the built-in edit role: the binding
    # names argus-edit itself, which is what `argus onboard` does anyway.
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "argus-edit"}
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]
    ensure_namespace(cp, "bob", {"argus.io/user": "bob"})

    alice = cp.mint_user("alice")
    task = advanced_task("mine", ppo_command())
    assert apply_text_as(cp, alice, "alice", task).returncode == 0
    assert "mine" in cp.kubectl("get", "argustasks", "-n", "alice", kubeconfig=alice).stdout
    denied = apply_text_as(cp, alice, "bob", task)
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower(), denied.stderr
    status = cp.kubectl("patch", "argustask", "mine", "-n", "alice", "--subresource=status", "--type=merge",
                        "-p", '{"status":{"phase":"Succeeded"}}', kubeconfig=alice, check=False)
    assert status.returncode != 0 and "forbidden" in status.stderr.lower(), status.stderr
    for verb, resource, ns_, allowed in [("create", "argustasks", "alice", "yes"), ("delete", "argustasks", "alice", "yes"),
                                         ("patch", "argustasks", "alice", "yes"), ("patch", "argustasks/status", "alice", "no"),
                                         ("update", "argustasks/status", "alice", "no"), ("list", "argustasks", "bob", "no"),
                                         ("create", "secrets", "alice", "no")]:
        r, sub = (resource.split("/") + [""])[:2]
        argv = ["auth", "can-i", verb, f"{r}.argus.io" if r == "argustasks" else r, "-n", ns_]
        if sub:
            argv.append(f"--subresource={sub}")
        got = cp.kubectl(*argv, kubeconfig=alice, check=False).stdout.strip()
        assert got == allowed, (verb, resource, ns_, got)
    cp.kubectl("delete", "argustask", "mine", "-n", "alice", "--wait=false", kubeconfig=alice)


def apply_text_as(cp: KubeCluster, kubeconfig: Path, ns: str, text: str) -> subprocess.CompletedProcess[str]:
    return cp.kubectl("apply", "-n", ns, "-f", "-", input=text, kubeconfig=kubeconfig, check=False)


def test_onboard_dry_run_touches_nothing_and_refuses_another_users_namespace(installed: list[dict[str, Any]], control_plane: KubeCluster) -> None:
    cp = control_plane
    dry = onboard(cp, "carol", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    docs = list(yaml.safe_load_all(dry.stdout))
    assert [d["kind"] for d in docs] == ["Namespace", "RoleBinding"]
    assert docs[0]["metadata"]["labels"] == {"argus.io/user": "carol"}
    assert cp.kubectl("get", "namespace", "carol", check=False).returncode != 0
    # An existing, unlabelled namespace is labelled (the user's namespace need not be named after them).
    ensure_namespace(cp, "team-dave")
    out = onboard(cp, "dave", "--namespace", "team-dave")
    assert out.returncode == 0 and "namespace/team-dave labelled argus.io/user=dave" in out.stdout, out.stdout + out.stderr
    # A namespace that belongs to another user is not handed over.
    ensure_namespace(cp, "erin", {"argus.io/user": "erin"})
    taken = onboard(cp, "mallory", "--namespace", "erin")
    assert taken.returncode == 1 and "already onboarded for user 'erin'" in taken.stderr
    assert len(taken.stderr.strip().splitlines()) == 1
    assert json.loads(cp.kubectl("get", "namespace", "erin", "-o", "json").stdout)["metadata"]["labels"]["argus.io/user"] == "erin"
    bad = onboard(cp, "Not_A_User!")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "must match" in bad.stderr
