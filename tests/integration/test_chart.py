"""Issues 6, 16 and 18: the Helm chart on a real API server with RBAC on.

- ``helm lint``; ``helm template`` over a matrix of values, every object parsed, checked by the
  API server (``kubectl apply --dry-run=server``; the Prometheus Operator's CRDs are on this
  server, generated from its Go API module), its operator flags parsed by the operator's own
  argument parser, and the operator's ClusterRole/Role rules compared with an exact list
  written here for each case; a misspelt value fails ``helm install`` with the schema's
  message; the pod template passes Pod Security ``restricted`` as a Pod (defaults and the
  OpenShift variant with the uid left to the platform); the chart as a subchart.
- ``helm install`` into the API server: every object accepted (with the two servers, the webhook
  and the log API, turned off: this module does not route their Services except where a test
  says so; the defaults with both on are installed and used by test_default_install.py).
- RBAC proof: the operator, run here but authenticated as the chart's ServiceAccount (a token from
  ``kubectl create token``), takes tasks through create -> Succeeded, cancel -> Stopped and
  delete -> finalizer released; the same with the single-namespace Roles; and with any one rule
  or verb removed it fails loudly (Forbidden in its log, the task stuck, or the symptom named).
- The chart-owned webhook: the API server calls the chart's ValidatingWebhookConfiguration
  through the chart's Service (the testbed's service network plays kube-proxy: servicenet.py),
  over TLS with the chart-made certificate; ``helm uninstall`` leaves nothing that blocks, and
  ``argus-operator --release-finalizers`` (the uninstall hook's command) stops the tasks' jobs
  and frees them.
- Users: ``argus onboard alice`` binds argus-edit in namespace alice; alice (a client-certificate
  identity) can create tasks there, is Forbidden in bob, and cannot write argustasks/status.

The module runs on its own API server (unless ARGUS_TEST_KUBECONFIG names a cluster), so the
operator can watch every namespace, as the chart's default does, without meeting other tests'
tasks. Like envtest, that server has no controller-manager: no ClusterRole aggregation (we bind
argus-edit directly and check the aggregation labels statically), no pods (the Deployment is
accepted but never runs; the operator runs here as a process), and namespaces never finish
deleting.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from argus_testbed import Backend, ControlPlane, ExternalCluster, KubeCluster, ServiceNetwork, find_binaries, find_monitoring_crds
from argus_testbed.harness import REPO, advanced_task, apply_text, get_task, ppo_command, ray_jobs_for, wait_for, wait_phase
from argus_testbed.ports import free_port

pytestmark = pytest.mark.integration

CHART = REPO / "charts" / "argus"
RELEASE, RELEASE_NS = "argus", "argus-system"
SA = "argus"  # the chart's fullname: the release name, as it contains the chart name
KUBE_VERSION = "1.34.4"  # what `helm template` is told (it assumes 1.20 otherwise; the chart needs >= 1.28)
# How a refusal shows in the operator's log: the HTTP reason phrase or the API server's
# "... is forbidden: User ..." message. Not a bare "403": timestamps (",403"), latencies and
# hex ids contain it about once in a thousand lines.
FORBIDDEN = ("Forbidden", "forbidden")
# The webhook and the log API are on by default; a release installed here for another purpose
# turns them off (an APIService nobody serves breaks discovery, and one per cluster).
SERVERS_OFF = ["--set", "webhook.enabled=false", "--set", "logsApi.enabled=false"]
CA_BUNDLE = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()

# values.clusters with two Ray clusters, as an admin would write them.
TWO_CLUSTERS: list[dict[str, Any]] = [
    {"name": "gpu-a", "address": "http://ray-a-head-svc.ray-a.svc:8265", "tokenSecret": {"name": "ray-a-token", "key": "auth_token"},
     "preference": 10, "namespaceSelector": {"matchLabels": {"argus.io/team": "a"}}, "root": "/private-a", "maxRunning": 8},
    {"name": "gpu-b.lab", "address": "https://ray-b.example.com/", "workerResource": "gpu_worker", "verlCodePath": "/private-b/verl",
     "namespaceSelector": {"matchExpressions": [{"key": "argus.io/team", "operator": "In", "values": ["b", "c"]}]}, "drain": True},
]

# name -> extra helm arguments. Each is rendered, parsed and dry-run applied on the server.
MATRIX: dict[str, list[str]] = {
    "defaults": [],  # the webhook and the log API on, with the chart's certificates
    "servers-off": SERVERS_OFF,
    "webhook-on": ["--set", "webhook.enabled=true"],
    "webhook-secret": ["--set", "webhook.enabled=true", "--set", "webhook.certificate.source=secret",
                       "--set", "webhook.certificate.secretName=my-webhook-tls", "--set", f"webhook.certificate.caBundle={CA_BUNDLE}",
                       "--set", "webhook.failurePolicy=Fail", "--set", "webhook.timeoutSeconds=5"],
    "webhook-cert-manager": ["--set", "webhook.enabled=true", "--set", "webhook.certificate.source=cert-manager"],
    "webhook-cert-manager-issuer": ["--set", "webhook.enabled=true", "--set", "webhook.certificate.source=cert-manager",
                                    "--set", "webhook.certificate.certManager.issuerRef.kind=ClusterIssuer",
                                    "--set", "webhook.certificate.certManager.issuerRef.name=corp-ca"],
    "metrics-off": ["--set", "metrics.enabled=false"],
    "leader-election-off": ["--set", "leaderElection.enabled=false"],
    "no-crd-watch": ["--set", "rbac.watchCRDs=false"],
    "single-namespace": ["--set", "operator.watchNamespaces={team-a}", "--set", "webhook.enabled=true"],
    "two-namespaces": ["--set", "operator.watchNamespaces={team-a,team-b}"],
    "service-monitor": ["--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.serviceMonitor.interval=30s",
                        "--set", "metrics.serviceMonitor.labels.release=kube-prometheus"],
    "pod-monitor": ["--set", "metrics.podMonitor.enabled=true", "--set", "metrics.podMonitor.scrapeTimeout=10s"],
    "queue-and-tasks": ["--set", "operator.queuePolicy=fair", "--set", "operator.fairShare.halfLifeSeconds=1800",
                        "--set", "operator.fairShare.maxWaitSeconds=0.5", "--set", "operator.defaultGpuQuota=8",
                        "--set", "operator.ttlSecondsAfterFinished=86400", "--set", "operator.rayJobRetentionSeconds=3600",
                        "--set", "operator.progress.intervalSeconds=30", "--set-json", 'operator.progress.metrics=["critic/score/mean","actor/entropy"]',
                        "--set", "operator.crdCheckIntervalSeconds=0", "--set", "operator.logFormat=json", "--set", "operator.logLevel=warning",
                        "--set", "operator.progress.source=file", "--set-json", 'sharedTree.volume={"nfs":{"server":"nas","path":"/private"}}',
                        "--set", "logsApi.enabled=false"],
    "network-policy": ["--set", "networkPolicy.enabled=true", "--set", "webhook.enabled=true",
                       "--set-json", 'networkPolicy.webhookFrom=[{"ipBlock":{"cidr":"192.0.2.0/24"}}]',
                       "--set", "networkPolicy.metricsNamespaces={monitoring,observability}"],
    "openshift": ["--set", "podSecurityContext.runAsUser=null", "--set", "podSecurityContext.runAsGroup=null",
                  "--set", "podSecurityContext.fsGroup=null"],
    "three-replicas": ["--set", "replicaCount=3", "--set", "podDisruptionBudget.minAvailable=2",
                       "--set-json", 'topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"DoNotSchedule"}]'],
    "one-replica": ["--set", "replicaCount=1"],
    "uninstall-hook": ["--set", "uninstall.releaseFinalizers=true", "--set", "uninstall.timeoutSeconds=60",
                       "--set", "operator.watchNamespaces={team-a}"],
    "logs-api": ["--set", "logsApi.enabled=true", "--set", "logsApi.maxFollowersPerUser=3", "--set", "networkPolicy.enabled=true",
                 "--set-json", 'logsApi.sharedTree.volume={"persistentVolumeClaim":{"claimName":"private","readOnly":true}}'],
    "logs-api-secret": ["--set", "logsApi.enabled=true", "--set", "logsApi.certificate.source=secret",
                        "--set", "logsApi.certificate.secretName=my-logs-api-tls", "--set", f"logsApi.certificate.caBundle={CA_BUNDLE}"],
    # Both servers from cert-manager's self-signed Issuer: one Issuer, a Certificate each.
    "logs-api-cert-manager": ["--set", "logsApi.enabled=true", "--set", "logsApi.certificate.source=cert-manager",
                              "--set", "webhook.enabled=true", "--set", "webhook.certificate.source=cert-manager"],
    "logs-api-cert-manager-issuer": ["--set", "logsApi.enabled=true", "--set", "logsApi.certificate.source=cert-manager",
                                     "--set", "logsApi.certificate.certManager.issuerRef.kind=ClusterIssuer",
                                     "--set", "logsApi.certificate.certManager.issuerRef.name=corp-ca"],
    # Two Ray clusters as ArgusClusters: the server's dry run checks them against the CRD.
    "clusters": ["--set-json", 'clusters=' + json.dumps(TWO_CLUSTERS)],
    "everything": ["--set", "operator.verlCodePath=/private/common/code/verl/v1", "--set-json", 'operator.hfHome=""', "--set", "operator.maxRunning=16",
                   "--set", "operator.pollInterval=0.5", "--set-json", 'operator.entrypointAllowlist=["python3 -m verl.trainer.*","torchrun -m verl.*"]',
                   "--set", "operator.logLevel=debug", "--set-json", 'nodeSelector={"node-role.kubernetes.io/control-plane":""}',
                   "--set-json", 'tolerations=[{"key":"dedicated","operator":"Equal","value":"argus","effect":"NoSchedule"}]',
                   "--set", "image.digest=sha256:" + "ab" * 32, "--set", "probes.watchStaleSeconds=600",
                   "--set", "leaderElection.leaseSeconds=30", "--set", "networkPolicy.enabled=true",
                   "--set-json", 'networkPolicy.metricsNamespaceSelector={"matchLabels":{"team":"observability"}}'],
}
# Kinds whose CRDs this API server does not have (cert-manager's: no source for them here but
# its whole repository): rendered and parsed only.
NOT_ON_TESTBED = {"cert-manager.io/v1"}

# The operator's rules, written out by hand (not from the chart) for each case: what the
# operator uses and nothing else. Key: (kind, name, namespace or None) of each role bound to
# the operator's ServiceAccount.
NAMESPACES_GET = {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list"]}
CRDS_WATCH = {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["list", "watch"]}
CRD_GET = {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
           "resourceNames": ["argustasks.argus.io", "argusclusters.argus.io"], "verbs": ["get"]}  # the CRD check (docs/deploy.md, "Upgrading")
TASK_RULES = [
    {"apiGroups": ["argus.io"], "resources": ["argustasks"], "verbs": ["list", "watch", "patch", "delete"]},
    {"apiGroups": ["argus.io"], "resources": ["argustasks/status"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    # The Secrets tasks' spec.env names (rbac.taskSecrets, on by default): get, where the tasks are.
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
]
# The ArgusClusters (cluster-scoped: in the ClusterRole in every mode) and their token Secrets
# (a Role in the release's namespace only: get, nothing cluster-wide).
ARGUSCLUSTER_RULES = [
    {"apiGroups": ["argus.io"], "resources": ["argusclusters"], "verbs": ["list", "patch"]},
    {"apiGroups": ["argus.io"], "resources": ["argusclusters/status"], "verbs": ["patch"]},
]
# spec.rayClusterRef (rbac.rayClusterRefs, on by default): the KubeRay RayCluster and its head Service, by name.
RAYCLUSTER_REF_RULES = [
    {"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["services"], "verbs": ["get"]},
]
TOKEN_SECRETS = {("Role", f"{SA}-cluster-tokens", RELEASE_NS): [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}
LEASE_RULES = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["argus-leader"], "verbs": ["get", "update"]},
]
CLUSTERWIDE = {("ClusterRole", SA, None): [NAMESPACES_GET, CRD_GET, CRDS_WATCH, *ARGUSCLUSTER_RULES, *RAYCLUSTER_REF_RULES, *TASK_RULES],
               **TOKEN_SECRETS, ("Role", f"{SA}-leader-election", RELEASE_NS): LEASE_RULES}


def namespaced(*namespaces: str) -> dict[tuple[str, str, str | None], list[dict[str, Any]]]:
    rules: dict[tuple[str, str, str | None], list[dict[str, Any]]] = {
        ("ClusterRole", SA, None): [NAMESPACES_GET, CRD_GET, CRDS_WATCH, *ARGUSCLUSTER_RULES, *RAYCLUSTER_REF_RULES], **TOKEN_SECRETS,
        ("Role", f"{SA}-leader-election", RELEASE_NS): LEASE_RULES}
    rules.update({("Role", SA, ns): TASK_RULES for ns in namespaces})
    return rules


EXPECTED_RULES: dict[str, dict[tuple[str, str, str | None], list[dict[str, Any]]]] = {
    case: CLUSTERWIDE for case in MATRIX
}
EXPECTED_RULES["leader-election-off"] = {("ClusterRole", SA, None): [NAMESPACES_GET, CRD_GET, CRDS_WATCH, *ARGUSCLUSTER_RULES, *RAYCLUSTER_REF_RULES, *TASK_RULES],
                                         **TOKEN_SECRETS}
EXPECTED_RULES["no-crd-watch"] = {("ClusterRole", SA, None): [NAMESPACES_GET, CRD_GET, *ARGUSCLUSTER_RULES, *RAYCLUSTER_REF_RULES, *TASK_RULES],
                                  **TOKEN_SECRETS, ("Role", f"{SA}-leader-election", RELEASE_NS): LEASE_RULES}
EXPECTED_RULES["single-namespace"] = namespaced("team-a")
EXPECTED_RULES["uninstall-hook"] = namespaced("team-a")
EXPECTED_RULES["two-namespaces"] = namespaced("team-a", "team-b")

# The operator's bindings to built-in roles (not rendered by the chart, so not in the rules
# above): only the log API needs them, to review its callers' access (SubjectAccessReview)
# and to read the front proxy's CA (kube-system/extension-apiserver-authentication).
LOGS_API_BINDINGS = {
    ("ClusterRoleBinding", f"{SA}-logs-api-auth-delegator", None): ("ClusterRole", "system:auth-delegator"),
    ("RoleBinding", f"{SA}-logs-api-auth-reader", "kube-system"): ("Role", "extension-apiserver-authentication-reader"),
}
EXPECTED_BUILTIN_BINDINGS: dict[str, dict[tuple[str, str, str | None], tuple[str, str]]] = {case: {} for case in MATRIX}


def logs_api_on(case: str) -> bool:
    return "logsApi.enabled=false" not in MATRIX[case]


def webhook_on(case: str) -> bool:
    return "webhook.enabled=false" not in MATRIX[case]


for _case in MATRIX:
    if logs_api_on(_case):
        EXPECTED_BUILTIN_BINDINGS[_case] = LOGS_API_BINDINGS
LOG_RULE = {"apiGroups": ["logs.argus.io"], "resources": ["argustasks/log"], "verbs": ["get"]}
QUEUE_RULE = {"apiGroups": ["logs.argus.io"], "resources": ["pendingtasks"], "verbs": ["list"]}  # the queue on demand


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory, service_network: ServiceNetwork) -> Iterator[KubeCluster]:
    """This module's own API server (overrides the session one for this module only), which
    reaches Services through the service network."""
    external = os.environ.get("ARGUS_TEST_KUBECONFIG")
    if external:
        yield ExternalCluster(external)
        return
    cp = ControlPlane.start(tmp_path_factory.mktemp("chart-control-plane"), service_network=service_network)
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


def render(helm: Any, *extra: str, release: str = RELEASE, namespace: str = RELEASE_NS, chart: Path = CHART) -> list[dict[str, Any]]:
    text = helm("template", release, str(chart), "--namespace", namespace, "--kube-version", KUBE_VERSION, *extra).stdout
    # libyaml's loader (the same documents as yaml.safe_load_all, a tenth of the CPU): the
    # module renders the chart about sixty times.
    return [d for d in yaml.load_all(text, Loader=yaml.CSafeLoader) if d]


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
    """The chart's crds/ (helm install applies them too; the dry-runs need them first) and the
    Prometheus Operator's ServiceMonitor and PodMonitor CRDs (for metrics.serviceMonitor/podMonitor)."""
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds"))
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(find_monitoring_crds()))
    names = [d["metadata"]["name"] for f in sorted((CHART / "crds").glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    control_plane.wait_established(*names, "servicemonitors.monitoring.coreos.com", "podmonitors.monitoring.coreos.com")


@pytest.fixture(scope="module")
def installed(helm: Any, control_plane: KubeCluster, chart_crds: None) -> list[dict[str, Any]]:
    """The chart installed with its defaults (cluster-wide), but for the webhook and the log API,
    whose Services this module does not route. Returns the rendered objects."""
    helm("upgrade", "--install", RELEASE, str(CHART), "--namespace", RELEASE_NS, "--create-namespace", *SERVERS_OFF, cluster=True)
    return render(helm, *SERVERS_OFF)


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
HARNESS_FLAGS = {"--ray-address", "--root", "--verl-code-path", "--max-running", "--poll-interval", "--namespace"}


def chart_flags(objs: list[dict[str, Any]], tls_dir: Path | None = None, logs_tls_dir: Path | None = None) -> list[str]:
    """The rendered Deployment's operator flags, for an operator run here: the harness's own
    flags left out, the pod's fixed ports moved to free loopback ports, and the mounted
    webhook Secret's files replaced by ``tls_dir`` (written from the same Secret)."""
    out = []
    for arg in _operator_argv(one(objs, "Deployment")):
        flag = arg.split("=", 1)[0]
        if flag in HARNESS_FLAGS:
            continue
        if flag == "--health-port":
            out += [f"--health-port={free_port()}", "--health-host=127.0.0.1"]
            continue
        if flag == "--metrics-port":
            arg = f"--metrics-port={free_port()}"
        elif flag == "--webhook-port":
            out += [f"--webhook-port={free_port()}", "--webhook-listen-host=127.0.0.1"]
            continue
        elif flag == "--logs-api-port":
            out += [f"--logs-api-port={free_port()}", "--logs-api-host=127.0.0.1"]
            continue
        elif flag in ("--logs-api-cert-file", "--logs-api-key-file"):
            assert logs_tls_dir is not None, "a log API rendering needs its Secret's files"
            arg = f"{flag}={logs_tls_dir / Path(arg.split('=', 1)[1]).name}"
        elif flag in ("--webhook-cert-file", "--webhook-key-file"):
            assert tls_dir is not None, "a webhook rendering needs the Secret's files"
            arg = f"{flag}={tls_dir / Path(arg.split('=', 1)[1]).name}"
        out.append(arg)
    return out


def flag_value(flags: list[str], name: str) -> str:
    return next(f.split("=", 1)[1] for f in flags if f.startswith(f"{name}="))


def secret_files(cp: KubeCluster, namespace: str, name: str, folder: Path) -> Path:
    """What the kubelet would mount for the Secret: one file per key."""
    secret = json.loads(cp.kubectl("get", "secret", name, "-n", namespace, "-o", "json").stdout)
    folder.mkdir(parents=True, exist_ok=True)
    for key, value in secret["data"].items():
        (folder / key).write_bytes(base64.b64decode(value))
    return folder


# --------------------------------------------------------------------------- lint, template

def test_helm_lint_is_clean(helm: Any) -> None:
    out = helm("lint", "--strict", "--kube-version", KUBE_VERSION, str(CHART))
    assert "0 chart(s) failed" in out.stdout
    assert "[WARNING]" not in out.stdout and "[ERROR]" not in out.stdout, out.stdout


def test_chart_crd_is_the_generated_one() -> None:
    # tests/unit/test_crd.py checks byte equality; here: the chart ships exactly these CRDs.
    files = ("argus.io_argustasks.yaml", "argus.io_argusclusters.yaml")
    for name in files:
        assert (CHART / "crds" / name).read_text() == (REPO / "crds" / name).read_text(), name
    assert sorted(p.name for p in (CHART / "crds").glob("*.yaml")) == sorted(files)
    names = {d["metadata"]["name"] for f in sorted((CHART / "crds").glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d}
    assert names == {"argustasks.argus.io", "argusclusters.argus.io"}  # no kopf peering CRDs: leader election guards the replicas
    # Chart.yaml names both files, and Artifact Hub both kinds.
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert all(f"crds/{name}" in chart["annotations"]["argus.io/crds"] for name in files)
    assert [c["name"] for c in yaml.safe_load(chart["annotations"]["artifacthub.io/crds"])] == ["argustasks.argus.io", "argusclusters.argus.io"]


def test_chart_needs_kubernetes_1_28(helm: Any) -> None:
    old = helm("template", RELEASE, str(CHART), "--kube-version", "1.27.9", check=False)
    assert old.returncode != 0 and "Kubernetes v1.27.9 is older than this chart needs (1.28 or newer" in old.stderr, old.stderr
    assert helm("template", RELEASE, str(CHART), "--kube-version", "1.28.0").returncode == 0
    assert render(helm)  # and KUBE_VERSION passes


def test_helm_template_without_kube_version_says_to_pass_it(helm: Any) -> None:
    """helm template asks no cluster and assumes v1.20.0: the refusal says what to do."""
    out = helm("template", RELEASE, str(CHART), check=False)
    assert out.returncode != 0 and "Kubernetes v1.20.0 is older than this chart needs" in out.stderr, out.stderr
    assert "pass the cluster's version with --kube-version" in out.stderr, out.stderr


def _operator_argv(deployment: dict[str, Any]) -> list[str]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "command" not in container  # the image's entrypoint is argus-operator
    return container["args"]


def _parse_operator_args(argv: list[str]) -> Any:
    """Parse with the operator's own parser: a flag the chart renders that the operator does
    not know, or a bad value, fails here."""
    from argus.host.main import build_parser
    args, unknown = build_parser().parse_known_args(argv)
    assert not unknown, unknown
    return args


def _rules_by_role(objs: list[dict[str, Any]]) -> dict[tuple[str, str, str | None], list[dict[str, Any]]]:
    return {(r["kind"], r["metadata"]["name"], r["metadata"].get("namespace")): r["rules"] for r in operator_roles(objs)}


def _builtin_bindings(objs: list[dict[str, Any]], fullname: str = SA) -> dict[tuple[str, str, str | None], tuple[str, str]]:
    """The operator's ServiceAccount's bindings to roles the chart does not render."""
    rendered = {(o["kind"], o["metadata"]["name"]) for o in objs if o["kind"] in ("ClusterRole", "Role")}
    return {(b["kind"], b["metadata"]["name"], b["metadata"].get("namespace")): (b["roleRef"]["kind"], b["roleRef"]["name"])
            for b in objs if b["kind"] in ("ClusterRoleBinding", "RoleBinding")
            and any(sub.get("kind") == "ServiceAccount" and sub.get("name") == fullname for sub in b.get("subjects", []))
            and (b["roleRef"]["kind"], b["roleRef"]["name"]) not in rendered}


@pytest.mark.parametrize("case", list(MATRIX))
def test_template_matrix_is_accepted_by_the_api_server(case: str, helm: Any, control_plane: KubeCluster, chart_crds: None) -> None:
    objs = render(helm, *MATRIX[case])
    for o in objs:
        assert o.get("apiVersion") and o.get("kind") and o.get("metadata", {}).get("name"), o
        cluster_scoped = o["kind"] in ("ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "ValidatingWebhookConfiguration",
                                       "APIService", "ArgusCluster")
        assert cluster_scoped or o["metadata"].get("namespace"), f"{o['kind']} {o['metadata']['name']} has no namespace"
    # Every namespace the objects name, in one kubectl call (a kubectl start costs about half
    # a second of CPU here, and most objects share one namespace).
    namespaces = sorted({o["metadata"]["namespace"] for o in objs if o["metadata"].get("namespace")})
    control_plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in namespaces]}))
    on_server = [o for o in objs if o["apiVersion"] not in NOT_ON_TESTBED]
    text = "\n---\n".join(yaml.dump(o, Dumper=yaml.CSafeDumper) for o in on_server)
    out = control_plane.kubectl("apply", "--dry-run=server", "-f", "-", input=text)
    assert len([ln for ln in out.stdout.splitlines() if "(server dry run)" in ln]) == len(on_server), out.stdout

    # Least privilege, pinned: the operator's roles hold exactly these rules, in this order.
    assert _rules_by_role(objs) == EXPECTED_RULES[case]
    assert _builtin_bindings(objs) == EXPECTED_BUILTIN_BINDINGS[case]

    deployment = one(objs, "Deployment")
    argv = _operator_argv(deployment)
    args = _parse_operator_args(argv)
    values = yaml.load((CHART / "values.yaml").read_text(), Loader=yaml.CSafeLoader)
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    if case == "metrics-off":
        assert args.metrics_port is None and not [o for o in objs if o["kind"] == "Service" and o["metadata"]["name"].endswith("-metrics")]
    else:
        assert args.metrics_port == values["metrics"]["port"]
        assert one(objs, "Service", f"{RELEASE}-metrics")["spec"]["ports"][0]["port"] == args.metrics_port
    if case == "leader-election-off":
        assert not args.leader_elect and deployment["spec"]["replicas"] == 1
        assert deployment["spec"]["strategy"] == {"type": "Recreate"}
        assert not [o for o in objs if o["kind"] == "PodDisruptionBudget"] and "topologySpreadConstraints" not in pod
    else:
        assert args.leader_elect and args.leader_election_namespace == RELEASE_NS and args.leader_election_name == f"{RELEASE}-leader"
        assert args.leader_lease_seconds == (30 if case == "everything" else 15)
    if case in ("single-namespace", "two-namespaces", "uninstall-hook"):
        assert args.namespaces == (["team-a", "team-b"] if case == "two-namespaces" else ["team-a"])
    else:
        assert args.namespaces == []
    assert "kopf.dev" not in json.dumps(objs)  # no kopf peering
    # The probes: our own server, liveness on the watch, readiness on cache + webhook.
    assert args.health_port == values["probes"]["port"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "probes"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "probes"}
    assert args.watch_stale_seconds == (600 if case == "everything" else 300)
    if case == "logs-api":
        assert (args.logs_api, args.logs_api_port, args.logs_api_max_followers, args.logs_api_shared_tree) == (True, 8443, 3, True)
        mounts = {m["name"]: m for m in container["volumeMounts"]}
        assert mounts["shared-tree"] == {"name": "shared-tree", "mountPath": values["operator"]["root"], "readOnly": True}
        assert {"name": "shared-tree", "persistentVolumeClaim": {"claimName": "private", "readOnly": True}} in pod["volumes"]
    if logs_api_on(case):
        _check_logs_api(case, objs, args, deployment, container)
    else:
        assert not args.logs_api and not [o for o in objs if o["kind"] == "APIService"] and "argustasks/log" not in json.dumps(
            [o for o in objs if o["kind"] not in ("ClusterRole",) or o["metadata"]["name"] not in ("argus-view", "argus-edit")])
    webhook_objs = [o for o in objs if o["kind"] == "ValidatingWebhookConfiguration"]
    if webhook_on(case):
        _check_webhook(case, objs, args, pod, container)
    else:
        assert not args.webhook and not webhook_objs and "validatingwebhookconfigurations" not in json.dumps(objs)
    if case == "service-monitor":
        sm = one(objs, "ServiceMonitor")
        assert sm["metadata"]["labels"]["release"] == "kube-prometheus"
        assert sm["spec"]["endpoints"] == [{"port": "http-metrics", "path": "/metrics", "interval": "30s"}]
        metrics_svc = one(objs, "Service", f"{RELEASE}-metrics")
        assert sm["spec"]["selector"]["matchLabels"].items() <= metrics_svc["metadata"]["labels"].items()
        assert not [o for o in objs if o["kind"] == "PodMonitor"]
    elif case == "pod-monitor":
        pm = one(objs, "PodMonitor")
        assert pm["spec"]["podMetricsEndpoints"] == [{"port": "http-metrics", "path": "/metrics", "scrapeTimeout": "10s"}]
        assert pm["spec"]["selector"]["matchLabels"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
        assert not [o for o in objs if o["kind"] == "ServiceMonitor"]
    else:
        assert not [o for o in objs if o["kind"] in ("ServiceMonitor", "PodMonitor")]
    if case == "queue-and-tasks":
        assert (args.queue_policy, args.fair_share_half_life, args.fair_share_max_wait) == ("fair", 1800, 0.5)
        assert (args.default_gpu_quota, args.ttl_seconds_after_finished, args.ray_job_retention) == (8, 86400, 3600)
        assert (args.progress_interval, args.progress_metrics) == (30, "critic/score/mean,actor/entropy")
        assert (args.crd_check_interval, args.log_format, args.log_level) == (0, "json", "warning")
        # Progress from the jobs' log files: the shared tree mounted read-only where the jobs see it, without the log API.
        assert args.progress_source == "file" and not args.logs_api and not args.logs_api_shared_tree
        assert {m["name"]: m for m in container["volumeMounts"]}["shared-tree"] == {
            "name": "shared-tree", "mountPath": values["operator"]["root"], "readOnly": True}
        assert {"name": "shared-tree", "nfs": {"server": "nas", "path": "/private"}} in pod["volumes"]
    else:  # the defaults, the operator's own
        from argus.host.main import build_parser
        defaults = build_parser().parse_args([])
        for name in ("queue_policy", "fair_share_half_life", "fair_share_max_wait", "default_gpu_quota", "ttl_seconds_after_finished",
                     "ray_job_retention", "progress_source", "progress_interval", "progress_metrics", "crd_check_interval", "log_format"):
            assert getattr(args, name) == getattr(defaults, name), name
    if case == "network-policy":
        policy = one(objs, "NetworkPolicy")
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        assert policy["spec"]["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "argus", "app.kubernetes.io/instance": RELEASE}}
        assert policy["spec"]["ingress"] == [
            {"ports": [{"port": "webhook", "protocol": "TCP"}], "from": [{"ipBlock": {"cidr": "192.0.2.0/24"}}]},
            {"ports": [{"port": "logs-api", "protocol": "TCP"}], "from": [{"ipBlock": {"cidr": "192.0.2.0/24"}}]},
            {"ports": [{"port": "http-metrics", "protocol": "TCP"}], "from": [{"namespaceSelector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["monitoring", "observability"]}]}}]},
        ]
    elif case == "logs-api":  # the log API's port, from anywhere (the API server calls it; it checks the caller's certificate)
        assert one(objs, "NetworkPolicy")["spec"]["ingress"][1] == {"ports": [{"port": "logs-api", "protocol": "TCP"}]}
    elif case == "everything":  # the two servers' ports from anywhere, the metrics port from the labelled namespaces
        assert one(objs, "NetworkPolicy")["spec"]["ingress"] == [
            {"ports": [{"port": "webhook", "protocol": "TCP"}]}, {"ports": [{"port": "logs-api", "protocol": "TCP"}]},
            {"ports": [{"port": "http-metrics", "protocol": "TCP"}], "from": [{"namespaceSelector": {"matchLabels": {"team": "observability"}}}]}]
    else:
        assert not [o for o in objs if o["kind"] == "NetworkPolicy"]
    replicas = {"leader-election-off": 1, "one-replica": 1, "three-replicas": 3}.get(case, 2)
    assert deployment["spec"]["replicas"] == replicas
    if replicas > 1:
        assert deployment["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
        pdb = one(objs, "PodDisruptionBudget")
        assert pdb["spec"] == {"minAvailable": 2 if case == "three-replicas" else 1,
                               "selector": {"matchLabels": {"app.kubernetes.io/name": "argus", "app.kubernetes.io/instance": RELEASE}}}
        (spread,) = pod["topologySpreadConstraints"]
        assert spread["labelSelector"] == {"matchLabels": {"app.kubernetes.io/name": "argus", "app.kubernetes.io/instance": RELEASE}}
        assert (spread["topologyKey"], spread["whenUnsatisfiable"]) == (
            ("topology.kubernetes.io/zone", "DoNotSchedule") if case == "three-replicas" else ("kubernetes.io/hostname", "ScheduleAnyway"))
    else:
        assert not [o for o in objs if o["kind"] == "PodDisruptionBudget"] and "topologySpreadConstraints" not in pod
    if case == "openshift":
        assert pod["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
        assert "runAsUser" not in json.dumps(pod)
    else:
        assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"], pod["securityContext"]["fsGroup"]) == (10001,) * 3
    hooks = [o for o in objs if o["kind"] == "Job"]
    if case == "uninstall-hook":
        (job,) = hooks
        assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete"
        jpod = job["spec"]["template"]["spec"]
        assert jpod["serviceAccountName"] == SA and jpod["securityContext"] == pod["securityContext"]
        hook_args = _parse_operator_args(jpod["containers"][0]["args"])
        assert hook_args.release_finalizers and not hook_args.keep_ray_jobs and hook_args.release_timeout == 60
        assert hook_args.ray_address == args.ray_address and hook_args.namespaces == ["team-a"]
    else:
        assert not hooks
    if case == "everything":
        assert args.verl_code_path == "/private/common/code/verl/v1" and args.max_running == 16 and args.poll_interval == 0.5
        assert args.allowlist == ["python3 -m verl.trainer.*", "torchrun -m verl.*"] and args.log_level == "debug"
        assert args.hf_home == ""  # the shared Hugging Face cache turned off: jobs get no HF_HOME
        assert pod["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""} and pod["tolerations"][0]["key"] == "dedicated"
        assert container["image"] == "localhost/argus-operator@sha256:" + "ab" * 32
    else:
        assert container["image"] == "localhost/argus-operator:0.1.0"
        assert args.hf_home is None  # the default: <root>/hf


def _check_webhook(case: str, objs: list[dict[str, Any]], args: Any, pod: dict[str, Any], container: dict[str, Any]) -> None:
    """The chart owns the configuration; the operator only serves, with the mounted files."""
    assert args.webhook and not args.webhook_manage_config
    assert (args.webhook_cert_file, args.webhook_key_file) == ("/etc/argus/webhook-tls/tls.crt", "/etc/argus/webhook-tls/tls.key")
    assert {"name": "webhook-tls", "mountPath": "/etc/argus/webhook-tls", "readOnly": True} in container["volumeMounts"]
    secret_name = "my-webhook-tls" if case == "webhook-secret" else f"{RELEASE}-webhook-tls"
    assert {"name": "webhook-tls", "secret": {"secretName": secret_name}} in pod["volumes"]
    svc = one(objs, "Service", f"{RELEASE}-webhook")
    assert svc["spec"]["ports"] == [{"name": "https-webhook", "port": 443, "targetPort": "webhook", "protocol": "TCP"}]
    config = one(objs, "ValidatingWebhookConfiguration")
    assert config["metadata"]["name"] == f"{RELEASE}.{RELEASE_NS}.argus.io"  # per release
    (hook,) = config["webhooks"]
    assert hook["name"] == "validate-argustask.argus.io"
    assert hook["clientConfig"]["service"] == {"name": f"{RELEASE}-webhook", "namespace": RELEASE_NS, "port": 443, "path": "/validate-argustask"}
    assert hook["rules"] == [{"apiGroups": ["argus.io"], "apiVersions": ["v1alpha1"], "resources": ["argustasks"],
                              "operations": ["CREATE", "UPDATE"], "scope": "Namespaced"}]
    assert hook["sideEffects"] == "None" and hook["admissionReviewVersions"] == ["v1"]
    assert hook["matchConditions"] == [{"name": "create-or-spec-change",
                                        "expression": "request.operation == 'CREATE' || object.spec != oldObject.spec"}]
    assert (hook["failurePolicy"], hook["timeoutSeconds"]) == (("Fail", 5) if case == "webhook-secret" else ("Ignore", 10))
    if case in ("single-namespace", "two-namespaces", "uninstall-hook"):
        watched = ["team-a", "team-b"] if case == "two-namespaces" else ["team-a"]
        assert hook["namespaceSelector"] == {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": watched}]}
    else:
        assert hook["namespaceSelector"] == {}
    if case.startswith("webhook-cert-manager") or case == "logs-api-cert-manager":
        assert config["metadata"]["annotations"] == {"cert-manager.io/inject-ca-from": f"{RELEASE_NS}/{RELEASE}-webhook"}
        assert "caBundle" not in hook["clientConfig"]
        cert = one(objs, "Certificate", f"{RELEASE}-webhook")
        assert cert["spec"]["secretName"] == f"{RELEASE}-webhook-tls"
        assert f"{RELEASE}-webhook.{RELEASE_NS}.svc" in cert["spec"]["dnsNames"]
        if case == "webhook-cert-manager-issuer":
            assert cert["spec"]["issuerRef"] == {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
            assert not [o for o in objs if o["kind"] == "Issuer"]
        else:
            assert one(objs, "Issuer")["spec"] == {"selfSigned": {}}
        assert not [o for o in objs if o["kind"] == "Secret" and "webhook" in o["metadata"]["name"]]
    elif case == "webhook-secret":
        assert hook["clientConfig"]["caBundle"] == CA_BUNDLE
        assert not [o for o in objs if o["kind"] in ("Secret", "Certificate") and "webhook" in o["metadata"]["name"]]
    else:  # the chart's own CA: the Secret holds a certificate for the Service that the caBundle verifies
        secret = one(objs, "Secret", f"{RELEASE}-webhook-tls")
        assert secret["type"] == "kubernetes.io/tls" and hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
        _verify_chain(secret["data"], f"{RELEASE}-webhook.{RELEASE_NS}.svc")


def _check_logs_api(case: str, objs: list[dict[str, Any]], args: Any, deployment: dict[str, Any], container: dict[str, Any]) -> None:
    """The APIService, its Service, and the serving certificate from each source; a chart-made
    one is named by a checksum on the pod template, so that a new one rolls the pods."""
    assert args.logs_api and (args.logs_api_cert_file, args.logs_api_key_file) == ("/etc/argus/logs-api-tls/tls.crt", "/etc/argus/logs-api-tls/tls.key")
    api_service = one(objs, "APIService", "v1alpha1.logs.argus.io")
    api = api_service["spec"]
    assert api["service"] == {"name": f"{RELEASE}-logs-api", "namespace": RELEASE_NS, "port": 443}
    assert one(objs, "Service", f"{RELEASE}-logs-api")["spec"]["ports"][0]["targetPort"] == "logs-api"
    assert {"name": "logs-api", "containerPort": 8443, "protocol": "TCP"} in container["ports"]
    assert {"name": "logs-api-tls", "mountPath": "/etc/argus/logs-api-tls", "readOnly": True} in container["volumeMounts"]
    secret_name = "my-logs-api-tls" if case == "logs-api-secret" else f"{RELEASE}-logs-api-tls"
    assert {"name": "logs-api-tls", "secret": {"secretName": secret_name}} in deployment["spec"]["template"]["spec"]["volumes"]
    annotations = deployment["spec"]["template"]["metadata"].get("annotations") or {}
    if case.startswith("logs-api-cert-manager"):
        assert api_service["metadata"]["annotations"] == {"cert-manager.io/inject-ca-from": f"{RELEASE_NS}/{RELEASE}-logs-api"}
        assert "caBundle" not in api
        cert = one(objs, "Certificate", f"{RELEASE}-logs-api")
        assert cert["spec"]["secretName"] == f"{RELEASE}-logs-api-tls"
        assert f"{RELEASE}-logs-api.{RELEASE_NS}.svc" in cert["spec"]["dnsNames"]
        if case == "logs-api-cert-manager-issuer":
            assert cert["spec"]["issuerRef"] == {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
            assert not [o for o in objs if o["kind"] == "Issuer"]
        else:  # the webhook's Certificate too, from the one self-signed Issuer
            assert one(objs, "Issuer")["spec"] == {"selfSigned": {}}
            assert cert["spec"]["issuerRef"] == one(objs, "Certificate", f"{RELEASE}-webhook")["spec"]["issuerRef"] == {
                "name": f"{RELEASE}-selfsigned", "kind": "Issuer", "group": "cert-manager.io"}
        assert not [o for o in objs if o["kind"] == "Secret" and "logs-api" in o["metadata"]["name"]]
        assert "checksum/logs-api-certificate" not in annotations
    elif case == "logs-api-secret":
        assert api["caBundle"] == CA_BUNDLE
        assert not [o for o in objs if o["kind"] in ("Secret", "Certificate") and "logs-api" in o["metadata"]["name"]]
        assert "checksum/logs-api-certificate" not in annotations
    else:  # the chart's own CA: the caBundle verifies the Secret's certificate, which the checksum names
        secret = one(objs, "Secret", f"{RELEASE}-logs-api-tls")
        assert secret["type"] == "kubernetes.io/tls" and api["caBundle"] == secret["data"]["ca.crt"]
        _verify_chain(secret["data"], f"{RELEASE}-logs-api.{RELEASE_NS}.svc")
        assert annotations["checksum/logs-api-certificate"] == hashlib.sha256(secret["data"]["tls.crt"].encode()).hexdigest()


def _verify_chain(data: dict[str, str], dns_name: str) -> None:
    """The serving certificate is signed by the CA, names the Service, and matches its key
    (checked with ``cryptography``, not with the chart's own template code)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import padding
    ca = x509.load_pem_x509_certificate(base64.b64decode(data["ca.crt"]))
    cert = x509.load_pem_x509_certificate(base64.b64decode(data["tls.crt"]))
    key = serialization.load_pem_private_key(base64.b64decode(data["tls.key"]), password=None)
    assert cert.issuer == ca.subject and ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    ca.public_key().verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), cert.signature_hash_algorithm)
    assert dns_name in cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert key.public_key().public_numbers() == cert.public_key().public_numbers()


@pytest.mark.parametrize("case", ["defaults", "openshift", "uninstall-hook"])
def test_pods_pass_pod_security_restricted(case: str, helm: Any, control_plane: KubeCluster) -> None:
    """The pod templates, sent as Pods (server-side dry run) into a namespace that enforces
    Pod Security "restricted": the API server's own admission accepts them, with no warning.
    The OpenShift variant (uid, gid and fsGroup left to the platform's SCC) too."""
    ns = ensure_namespace(control_plane, f"psa-{case}", {"pod-security.kubernetes.io/enforce": "restricted",
                                                         "pod-security.kubernetes.io/warn": "restricted"})
    objs = render(helm, *MATRIX[case])
    templates = [o["spec"]["template"] for o in objs if o["kind"] == "Deployment"] + \
                [o["spec"]["template"] for o in objs if o["kind"] == "Job"]
    assert len(templates) == (2 if case == "uninstall-hook" else 1)
    for i, template in enumerate(templates):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"psa-{i}", "namespace": ns, "labels": template["metadata"]["labels"]},
               "spec": {**template["spec"], "serviceAccountName": "default"}}
        out = control_plane.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(pod), check=False)
        assert out.returncode == 0 and "Warning" not in out.stderr, out.stderr
    # And the check bites: a container that may escalate is refused there.
    bad = copy.deepcopy(templates[0])
    bad["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "psa-bad", "namespace": ns}, "spec": {**bad["spec"], "serviceAccountName": "default"}}
    refused = control_plane.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(pod), check=False)
    assert refused.returncode != 0 and 'violates PodSecurity "restricted' in refused.stderr, refused.stderr


def test_deployment_is_locked_down(helm: Any) -> None:
    deployment = one(render(helm), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001, "fsGroup": 10001,
                                      "seccompProfile": {"type": "RuntimeDefault"}}
    (c,) = pod["containers"]
    assert c["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
                                    "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {"probes": 8080, "http-metrics": 9090, "webhook": 9443, "logs-api": 8443}
    assert c["resources"]["requests"] and c["resources"]["limits"]
    assert pod["serviceAccountName"] == SA
    args = _parse_operator_args(c["args"])
    assert (args.ray_address, args.worker_resource, args.root, args.max_running, args.poll_interval) == (
        "http://ray-head-svc.ray.svc:8265", "worker_node", "/private", 4, 2.0)
    # Each field can be overridden or dropped (null), e.g. for a platform with its own rules.
    custom = one(render(helm, "--set", "containerSecurityContext.readOnlyRootFilesystem=false",
                        "--set", "containerSecurityContext.seccompProfile=null"), "Deployment")
    assert custom["spec"]["template"]["spec"]["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": False, "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}


def test_user_roles_aggregate_and_never_write_status(helm: Any) -> None:
    objs = render(helm)
    edit, view = one(objs, "ClusterRole", "argus-edit"), one(objs, "ClusterRole", "argus-view")
    labels = edit["metadata"]["labels"]
    assert labels["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert labels["rbac.authorization.k8s.io/aggregate-to-admin"] == "true"
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert edit["rules"] == [{"apiGroups": ["argus.io"], "resources": ["argustasks"],
                              "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"]}, LOG_RULE, QUEUE_RULE]
    assert view["rules"] == [{"apiGroups": ["argus.io"], "resources": ["argustasks"], "verbs": ["get", "list", "watch"]}, LOG_RULE, QUEUE_RULE]
    # No other role the chart renders grants the log.
    assert [o["metadata"]["name"] for o in render(helm, "--set", "logsApi.enabled=true")
            if o["kind"] in ("ClusterRole", "Role") and "argustasks/log" in json.dumps(o.get("rules"))] == ["argus-edit", "argus-view"]
    assert "argustasks/status" not in json.dumps([edit, view])
    # The ArgusClusters are cluster-scoped: a namespace's RoleBinding to argus-view cannot grant
    # them, so reading them is a ClusterRole of its own (bound by an admin; aggregated into view).
    cluster_view = one(objs, "ClusterRole", f"{SA}-cluster-view")
    assert cluster_view["rules"] == [{"apiGroups": ["argus.io"], "resources": ["argusclusters"], "verbs": ["get", "list", "watch"]}]
    assert cluster_view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert "argusclusters" not in json.dumps([edit, view])
    assert [o["metadata"]["name"] for o in objs if "argusclusters" in json.dumps(o.get("rules"))] == [SA, f"{SA}-cluster-view"]
    assert not [o for o in render(helm, "--set", "rbac.userRoles=false")
                if o["metadata"]["name"] in ("argus-edit", "argus-view", f"{SA}-cluster-view")]


@pytest.mark.parametrize("values", [[], ["--set", "operator.watchNamespaces={team-a,team-b}"], ["--set", "leaderElection.enabled=false"]])
def test_operator_reads_argusclusters_cluster_wide_and_secrets_only_in_its_namespace(values: list[str], helm: Any) -> None:
    """ArgusClusters are cluster-scoped: their rules are in the operator's ClusterRole in every
    mode (watched namespaces too). Their token Secrets are read with `get` in the release's
    namespace only: one Role there. The only other Secret rule is `get` where the tasks are
    (tasks' spec.env, rbac.taskSecrets): in the task rules' ClusterRole or per-namespace Roles."""
    objs = render(helm, *values)
    roles = operator_roles(objs)
    (cluster_role,) = [r for r in roles if r["kind"] == "ClusterRole"]
    assert [r for r in cluster_role["rules"] if r["apiGroups"] == ["argus.io"] and r["resources"][0].startswith("argusclusters")] == \
        ARGUSCLUSTER_RULES
    assert [r for r in cluster_role["rules"] if r["resources"] in (["rayclusters"], ["services"])] == RAYCLUSTER_REF_RULES
    (without,) = [r for r in operator_roles(render(helm, *values, "--set", "rbac.rayClusterRefs=false")) if r["kind"] == "ClusterRole"]
    assert [r for r in without["rules"] if r["resources"] in (["rayclusters"], ["services"])] == []
    assert "argusclusters" not in json.dumps([r for r in roles if r["kind"] == "Role"])
    get_secrets = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}
    with_secrets = [r for r in roles if "secrets" in json.dumps(r["rules"])]
    tokens = [r for r in with_secrets if r["metadata"]["name"] == f"{SA}-cluster-tokens"]
    assert [(r["kind"], r["metadata"].get("namespace"), r["rules"]) for r in tokens] == [("Role", RELEASE_NS, [get_secrets])]
    task_roles = [r for r in roles if any(rule["resources"] == ["argustasks"] for rule in r["rules"])]
    def names(rs: list[dict[str, Any]]) -> set[tuple[str, str, str | None]]:
        return {(r["kind"], r["metadata"]["name"], r["metadata"].get("namespace")) for r in rs}
    assert names([r for r in with_secrets if r not in tokens]) == names(task_roles) and task_roles
    for role in task_roles:
        assert [r for r in role["rules"] if "secrets" in r["resources"]] == [get_secrets]
    off = [r for r in operator_roles(render(helm, *values, "--set", "rbac.taskSecrets=false")) if "secrets" in json.dumps(r["rules"])]
    assert [r["metadata"]["name"] for r in off] == [f"{SA}-cluster-tokens"]
    binding = one(objs, "RoleBinding", f"{SA}-cluster-tokens")
    assert binding["metadata"]["namespace"] == RELEASE_NS
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": SA, "namespace": RELEASE_NS}]
    assert not [o for o in render(helm, *values, "--set", "rbac.create=false") if o["kind"] in ("Role", "ClusterRole", "RoleBinding")
                and o["metadata"]["name"] == f"{SA}-cluster-tokens"]


@pytest.mark.parametrize("values,message", [
    (["--set", "operator.maxRuning=3"], "additional properties 'maxRuning' not allowed"),
    (["--set", "metrcs.enabled=false"], "additional properties 'metrcs' not allowed"),
    (["--set", "webhook.failurePolicy=Sometimes"], "failurePolicy"),
    (["--set", "operator.maxRunning=0"], "maxRunning"),
    (["--set", "webhook.enabled=true", "--set", "webhook.certificate.source=secret"], "secretName"),
    (["--set", "webhook.enabled=true", "--set", "webhook.certificate.source=secret", "--set", "webhook.certificate.secretName=x"], "caBundle"),
    (["--set", "webhook.certificate.source=self-signed"], "source"),
    (["--set", "logsApi.enabled=true", "--set", "logsApi.certificate.source=secret"], "secretName"),
    (["--set", "logsApi.enabled=true", "--set", "logsApi.certificate.source=secret", "--set", "logsApi.certificate.secretName=x"], "caBundle"),
    (["--set", "logsApi.certificateValidityDays=365"], "additional properties 'certificateValidityDays' not allowed"),
    (["--set", "probes.watchStaleSeconds=60"], "watchStaleSeconds"),
    (["--set", "image.digest=latest"], "digest"),
    (["--set", "operator.hfHome=hf"], "hfHome"),  # HF_HOME must be absolute (or empty: none)
    (["--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.podMonitor.enabled=true"],
     "metrics.serviceMonitor.enabled and metrics.podMonitor.enabled exclude each other"),
    (["--set", "operator.queuePolicy=lottery"], "queuePolicy"),
    (["--set", "operator.fairShare.halfLifeSeconds=0"], "halfLifeSeconds"),
    (["--set", "operator.defaultGpuQuota=-1"], "defaultGpuQuota"),
    (["--set", "operator.ttlSecondsAfterFinished=1.5"], "ttlSecondsAfterFinished"),
    (["--set-json", 'operator.progress.metrics=["a,b"]'], "metrics"),
    (["--set", "operator.logFormat=yaml"], "logFormat"),
    (["--set", "operator.progress.source=files"], "source"),
    (["--set", "operator.verbose=true"], "additional properties 'verbose' not allowed"),
    (["--set-json", 'clusters=[{"name":"gpu-a"}]'], "missing property 'address'"),
    (["--set-json", 'clusters=[{"name":"GPU_A","address":"http://ray-a:8265"}]'], "/clusters/0/name"),
    (["--set-json", 'clusters=[{"name":"gpu-a","address":"http://ray-a:8265","prefrence":3}]'], "additional properties 'prefrence' not allowed"),
    (["--set-json", 'clusters=[{"name":"gpu-a","address":"ray-a:8265"}]'], "/clusters/0/address"),
])
def test_values_mistake_fails_helm_install(values: list[str], message: str, helm: Any, control_plane: KubeCluster) -> None:
    out = helm("install", "typo", str(CHART), "--namespace", "typo-system", "--create-namespace", *values, check=False, cluster=True)
    assert out.returncode != 0
    assert "values don't meet the specifications of the schema" in out.stderr and message in out.stderr, out.stderr
    assert helm("status", "typo", "--namespace", "typo-system", check=False, cluster=True).returncode != 0


def test_clusters_values_become_argusclusters(helm: Any) -> None:
    """values.clusters: one cluster-scoped ArgusCluster per item, named by the item, its spec
    the item's other fields as given; none by default."""
    assert not [o for o in render(helm) if o["kind"] == "ArgusCluster"]
    objs = render(helm, "--set-json", "clusters=" + json.dumps(TWO_CLUSTERS))
    made = [o for o in objs if o["kind"] == "ArgusCluster"]
    assert [o["metadata"]["name"] for o in made] == ["gpu-a", "gpu-b.lab"]
    for obj, item in zip(made, TWO_CLUSTERS, strict=True):
        assert obj["apiVersion"] == "argus.io/v1alpha1" and "namespace" not in obj["metadata"]
        assert obj["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE
        assert obj["spec"] == {k: v for k, v in item.items() if k != "name"}
        assert set(obj) == {"apiVersion", "kind", "metadata", "spec"}  # no status: the operator writes it
    # The operator's own objects are unchanged by it: same flags (--ray-address stays the fallback).
    assert _operator_argv(one(objs, "Deployment")) == _operator_argv(one(render(helm), "Deployment"))


def test_clusters_schema_is_the_crds() -> None:
    """values.schema.json's clusters item: a name, and the CRD's spec fields with the CRD's own
    checks (types, patterns, bounds, required), unknown keys refused at every level."""
    schema = json.loads((CHART / "values.schema.json").read_text())["properties"]["clusters"]["items"]
    crd = yaml.safe_load((REPO / "crds" / "argus.io_argusclusters.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]

    def as_json_schema(node: Any) -> Any:  # the CRD's schema without Kubernetes' extensions, objects closed
        if isinstance(node, list):
            return [as_json_schema(v) for v in node]
        if not isinstance(node, dict):
            return node
        out = {k: as_json_schema(v) for k, v in node.items() if not k.startswith("x-kubernetes-")}
        if out.get("type") == "object" and "properties" in out:
            out["additionalProperties"] = False
        return out
    props = dict(schema["properties"])
    name = props.pop("name")
    assert props == as_json_schema(spec["properties"])
    assert schema["required"] == ["name", *spec.get("required", [])] and schema["additionalProperties"] is False
    # The CRD's CEL rule (exactly one of address and rayClusterRef), as JSON Schema says it.
    assert spec["x-kubernetes-validations"] == [{"rule": "has(self.address) != has(self.rayClusterRef)",
                                                 "message": "exactly one of address and rayClusterRef must be set"}]
    assert schema["oneOf"] == [{"required": ["address"]}, {"required": ["rayClusterRef"]}]
    assert (name["pattern"], name["maxLength"]) == (r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$", 253)


def test_each_clusters_own_tree_is_mounted_read_only_at_its_root(helm: Any) -> None:
    """sharedTree.clusterVolumes: an ArgusCluster's tree where its jobs see it (its spec.root),
    read-only, beside the operator's own; an item without its root is refused."""
    trees = [{"root": "/private-a", "volume": {"persistentVolumeClaim": {"claimName": "private-a", "readOnly": True}}},
             {"root": "/private-b", "volume": {"nfs": {"server": "nas-b", "path": "/export/b"}}}]
    pod = one(render(helm, "--set", "operator.progress.source=file", "--set-json", 'sharedTree.volume={"nfs":{"server":"nas","path":"/private"}}',
                     "--set-json", f"sharedTree.clusterVolumes={json.dumps(trees)}"), "Deployment")["spec"]["template"]["spec"]
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["shared-tree"]["mountPath"] == "/private"
    for i, tree in enumerate(trees):
        assert mounts[f"shared-tree-{i}"] == {"name": f"shared-tree-{i}", "mountPath": tree["root"], "readOnly": True}
        assert volumes[f"shared-tree-{i}"] == {"name": f"shared-tree-{i}", **tree["volume"]}
    out = helm("template", RELEASE, str(CHART), "--kube-version", KUBE_VERSION, "--set-json", 'sharedTree.clusterVolumes=[{"volume":{"nfs":{}}}]',
               check=False)
    assert out.returncode != 0 and "root" in out.stderr, out.stderr


def test_progress_from_files_without_the_shared_tree_is_refused(helm: Any) -> None:
    out = helm("template", RELEASE, str(CHART), "--kube-version", KUBE_VERSION, "--set", "operator.progress.source=file", check=False)
    assert out.returncode != 0 and "operator.progress.source=file reads the jobs' log files from the shared tree: set sharedTree.volume" in out.stderr


@pytest.mark.parametrize("repository", ["argus-operator", "argus/argus-operator", "library/argus-operator"])
def test_short_image_names_are_refused(repository: str, helm: Any) -> None:
    """A short name is resolved by the container runtime (docker.io, or a search list): the
    pod could run someone else's image of that name."""
    out = helm("template", RELEASE, str(CHART), "--kube-version", KUBE_VERSION, "--set", f"image.repository={repository}", check=False)
    assert out.returncode != 0 and f"image.repository={repository} is a short name" in out.stderr, out.stderr


@pytest.mark.parametrize("repository", ["registry.example.com/argus-operator", "registry:5000/argus-operator",
                                        "localhost/argus-operator", "docker.io/library/argus-operator"])
def test_qualified_image_names_are_used_as_given(repository: str, helm: Any) -> None:
    objs = render(helm, "--set", f"image.repository={repository}", "--set", "image.tag=1.2.3")
    assert one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"] == f"{repository}:1.2.3"


def test_no_selector_of_the_chart_takes_the_uninstall_hook_for_an_operator(helm: Any) -> None:
    """The hook's pod runs beside the operator's at uninstall: a Service that sent it webhook
    or log API requests, a PDB or NetworkPolicy that counted it, would be wrong."""
    objs = render(helm, "--set", "uninstall.releaseFinalizers=true", "--set", "networkPolicy.enabled=true", "--set", "webhook.enabled=true",
                  "--set", "logsApi.enabled=true", "--set", "metrics.podMonitor.enabled=true")
    hook = one(objs, "Job")["spec"]["template"]["metadata"]["labels"]
    operator = one(objs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert hook["app.kubernetes.io/instance"] == RELEASE and hook["app.kubernetes.io/component"] == "uninstall"
    selectors = [(o["kind"], o["metadata"]["name"], o["spec"]["selector"]) for o in objs if o["kind"] == "Service"]
    selectors += [(o["kind"], o["metadata"]["name"], o["spec"]["selector"]["matchLabels"]) for o in objs
                  if o["kind"] in ("PodDisruptionBudget", "PodMonitor")]
    selectors += [(o["kind"], o["metadata"]["name"], o["spec"]["podSelector"]["matchLabels"]) for o in objs if o["kind"] == "NetworkPolicy"]
    assert {kind for kind, _, _ in selectors} == {"Service", "PodDisruptionBudget", "PodMonitor", "NetworkPolicy"}
    for kind, name, selector in selectors:
        assert selector.items() <= operator.items(), (kind, name)  # each still selects the operator
        assert not selector.items() <= hook.items(), (kind, name, hook)


def test_two_replicas_without_leader_election_are_refused(helm: Any) -> None:
    out = helm("template", RELEASE, str(CHART), "--kube-version", KUBE_VERSION, "--set", "leaderElection.enabled=false",
               "--set", "replicaCount=2", check=False)
    assert out.returncode != 0 and "replicaCount > 1 needs leaderElection.enabled" in out.stderr, out.stderr


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
    assert "argustasks.argus.io" in crds


def test_installs_as_a_subchart_with_a_condition(helm: Any, control_plane: KubeCluster, chart_crds: None, tmp_path: Path) -> None:
    """A parent chart that depends on this one with `condition: argus.enabled` (the schema
    must accept `enabled`), and passes values down; then installed for real."""
    parent = tmp_path / "platform"
    (parent / "templates").mkdir(parents=True)
    (parent / "Chart.yaml").write_text(yaml.safe_dump({
        "apiVersion": "v2", "name": "platform", "version": "1.0.0",
        "dependencies": [{"name": "argus", "version": ">=0.1.0", "repository": f"file://{CHART}", "condition": "argus.enabled"}]}))
    (parent / "values.yaml").write_text(yaml.safe_dump({"argus": {"enabled": True, "operator": {"maxRunning": 7}, "rbac": {"userRoles": False},
                                                                  "webhook": {"enabled": False}, "logsApi": {"enabled": False}}}))
    (parent / "templates" / "configmap.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: platform-settings\n  namespace: {{ .Release.Namespace }}\ndata: {}\n")
    helm("dependency", "build", str(parent))
    on = render(helm, release="platform", namespace="platform-system", chart=parent)
    deployment = one(on, "Deployment", "platform-argus")
    assert "--max-running=7" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    off = render(helm, "--set", "argus.enabled=false", release="platform", namespace="platform-system", chart=parent)
    assert [o["kind"] for o in off] == ["ConfigMap"]
    helm("upgrade", "--install", "platform", str(parent), "--namespace", "platform-system", "--create-namespace", cluster=True)
    live = json.loads(control_plane.kubectl("get", "deployment", "platform-argus", "-n", "platform-system", "-o", "json").stdout)
    assert live["spec"]["replicas"] == 2
    helm("uninstall", "platform", "--namespace", "platform-system", cluster=True)


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
    # The job was stopped, then removed from Ray's job history: Ray removes only ended jobs
    # (delete_job refuses a running one), so its absence proves the stop. Ray's job monitor may
    # write the record once more as the supervisor exits; the operator removes it again.
    wait_for(lambda: sid not in [j.submission_id for j in JobSubmissionClient(ray_cluster.dashboard_url).list_jobs()], 20,
             "the deleted task's job to leave Ray's history", on_timeout=op.log_tail)

    # Events were posted (one per phase change, but none for the quiet Submitted).
    reasons = {e["reason"] for e in events_for(cp, ns, "quick")}
    assert "RayJobSucceeded" in reasons and "Admitted" not in reasons, reasons
    lease = json.loads(cp.kubectl("get", "lease", f"{RELEASE}-leader", "-n", RELEASE_NS, "-o", "json").stdout)
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
    values = ["--set", f"operator.watchNamespaces={{{ns}}}", "--set", "rbac.userRoles=false", *SERVERS_OFF]
    helm("upgrade", "--install", release, str(CHART), "--namespace", release_ns, "--create-namespace", *values, cluster=True)
    objs = render(helm, *values, release=release, namespace=release_ns)
    # The token Secrets and the Lease in the release's namespace, the tasks in theirs.
    assert [o["metadata"]["namespace"] for o in objs if o["kind"] == "Role"] == [release_ns, release_ns, ns]
    kubeconfig = sa_kubeconfig(cp, release, release_ns)
    other = ensure_namespace(cp, f"other-{uuid.uuid4().hex[:6]}", {"argus.io/user": "alice"})
    assert cp.kubectl("get", "argustasks", "-n", other, kubeconfig=kubeconfig, check=False).returncode != 0
    op = run_operator([ns], kubeconfig=kubeconfig, extra_args=chart_flags(objs))
    apply_text(cp, ns, advanced_task("single", ppo_command(steps=3)))
    status = wait_phase(cp, ns, "single", ("Succeeded", "Failed", "Rejected"), timeout=120, op=op)["status"]
    assert status["phase"] == "Succeeded", status
    assert not any(word in op.log_path.read_text() for word in FORBIDDEN), op.log_tail(80)


def _trimmed_identity(cp: KubeCluster, roles: list[dict[str, Any]], lease_ns: str) -> tuple[str, Path]:
    """A new ServiceAccount bound to copies of ``roles`` (the release namespace's Roles, the
    Lease's and the token Secrets', moved to ``lease_ns``: the operator's own namespace there)."""
    name = f"argus-trimmed-{uuid.uuid4().hex[:6]}"
    objects: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": RELEASE_NS}}]
    for i, r in enumerate(roles):
        meta = {"name": f"{name}-{i}"} if r["kind"] == "ClusterRole" else {"name": f"{name}-{i}", "namespace": lease_ns}
        objects.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": r["kind"], "metadata": meta, "rules": r["rules"]})
        objects.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{r['kind']}Binding", "metadata": meta,
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": r["kind"], "name": meta["name"]},
                        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": RELEASE_NS}]})
    cp.kubectl("apply", "-f", "-", input="\n---\n".join(yaml.dump(o, Dumper=yaml.CSafeDumper) for o in objects))
    return name, sa_kubeconfig(cp, name, RELEASE_NS)


def test_chart_webhook_answers_through_its_service_and_uninstall_leaves_nothing_blocking(
        helm: Any, control_plane: KubeCluster, service_network: ServiceNetwork, chart_crds: None, installed: list[dict[str, Any]],
        ray_cluster: Any, run_operator: Any, tmp_path: Path) -> None:
    """webhook.enabled with the chart's own CA, installed for real: the API server calls the
    chart's ValidatingWebhookConfiguration through the chart's Service (ClusterIP -> the
    operator's webhook port, ready replicas only: the service network), verifies the chart-made
    certificate against the chart's caBundle, and denies a bad task. The operator runs as the
    release's ServiceAccount with the Deployment's flags and the Secret's files, and needs no
    RBAC on webhook configurations. Without `get` on namespaces the webhook says so in its
    answer. `helm uninstall` removes the configuration: task creation works again."""
    cp = control_plane
    suffix = uuid.uuid4().hex[:6]
    release, release_ns = f"argus-wh-{suffix}", f"argus-wh-{suffix}"
    values = ["--set", "webhook.enabled=true", "--set", "rbac.userRoles=false", "--set", "leaderElection.enabled=false",
              "--set", "webhook.failurePolicy=Fail", "--set", "logsApi.enabled=false"]
    helm("upgrade", "--install", release, str(CHART), "--namespace", release_ns, "--create-namespace", *values, cluster=True)
    config = f"{release}.{release_ns}.argus.io"
    objs = [o for o in render(helm, *values, release=release, namespace=release_ns) if o["kind"] != "Secret"]
    ns = ensure_namespace(cp, f"wh-{suffix}", {"argus.io/user": "alice"})
    tls = secret_files(cp, release_ns, f"{release}-webhook-tls", tmp_path / "webhook-tls")  # what the pod mounts
    flags = chart_flags(objs, tls)
    cluster_ip = json.loads(cp.kubectl("get", "service", f"{release}-webhook", "-n", release_ns, "-o", "json").stdout)["spec"]["clusterIP"]

    def serve(kubeconfig: Path) -> Any:
        op = run_operator([ns], kubeconfig=kubeconfig, extra_args=flags)
        ready = f"http://127.0.0.1:{flag_value(flags, '--health-port')}/readyz"
        service_network.route(cluster_ip, 443, [Backend(int(flag_value(flags, "--webhook-port")), ready)])
        return op

    def answer() -> str | None:
        out = cp.kubectl("apply", "--dry-run=server", "-n", ns, "-f", "-", check=False,
                         input=advanced_task("bad", "echo python3 -m verl.trainer.main_ppo"))
        return out.stderr if out.returncode != 0 and "denied the request" in out.stderr else None

    op = serve(sa_kubeconfig(cp, release, release_ns))
    try:
        message = wait_for(answer, 60, "the webhook to deny a bad task", on_timeout=lambda: op.log_tail(60))
        assert "does not run an allowed entrypoint" in message
        assert (f"{cluster_ip}:443", int(flag_value(flags, "--webhook-port"))) in service_network.connections
        # A namespace labelled a moment ago: the webhook reads it live (namespaces get).
        fresh = ensure_namespace(cp, f"wh-fresh-{suffix}", {"argus.io/user": "alice"})
        ok = cp.kubectl("apply", "--dry-run=server", "-n", fresh, "-f", "-", input=advanced_task("good", ppo_command()), check=False)
        assert ok.returncode == 0, ok.stderr
        assert not any(word in op.log_path.read_text() for word in FORBIDDEN), op.log_tail(80)
        op.stop()

        # The same operator without `get` on namespaces: the webhook cannot tell the user and says why.
        roles = copy.deepcopy(operator_roles(objs, release))
        for role in roles:
            role["rules"] = [r for r in role["rules"] if r["resources"] != ["namespaces"]]
        _, trimmed = _trimmed_identity(cp, roles, release_ns)
        op = serve(trimmed)
        refusal = wait_for(lambda: (a := answer()) and "cannot read namespace" in a and a, 60,
                           "the trimmed webhook to answer", on_timeout=lambda: op.log_tail(60))
        assert "forbidden" in refusal and 'cannot get resource "namespaces"' in refusal, refusal
        op.stop()
    finally:
        op.stop()
        helm("uninstall", release, "--namespace", release_ns, cluster=True)
        service_network.unroute(cluster_ip, 443)
    # Uninstalled: no configuration is left to call a webhook that is gone (failurePolicy Fail
    # would refuse every create otherwise).
    assert cp.kubectl("get", "validatingwebhookconfiguration", config, check=False).returncode != 0
    created = apply_text(cp, ns, advanced_task("after-uninstall", ppo_command()), check=False)
    assert created.returncode == 0, created.stderr
    cp.kubectl("delete", "argustask", "after-uninstall", "-n", ns, "--wait=false")


def test_release_finalizers_stops_the_jobs_and_frees_the_tasks(helm: Any, control_plane: KubeCluster, installed: list[dict[str, Any]],
                                                                 ray_cluster: Any, run_operator: Any) -> None:
    """The uninstall hook's command, as the chart renders it, run as the chart's
    ServiceAccount once the operator is gone: the running task's Ray job is stopped (Ray says
    so), every finalizer is removed, and deleting the tasks then returns at once."""
    cp = control_plane
    ns = ensure_namespace(cp, f"rel-{uuid.uuid4().hex[:6]}", {"argus.io/user": "alice"})
    kubeconfig = sa_kubeconfig(cp, SA, RELEASE_NS)
    op = run_operator([ns], kubeconfig=kubeconfig, extra_args=chart_flags(installed))
    apply_text(cp, ns, advanced_task("long", ppo_command(steps=5000)))
    apply_text(cp, ns, advanced_task("short", ppo_command(steps=2)))
    running = wait_phase(cp, ns, "long", "Running", timeout=90, op=op)
    wait_phase(cp, ns, "short", ("Succeeded", "Failed"), timeout=90, op=op)
    sid = running["status"]["rayJob"]["submissionId"]
    op.stop()  # the operator is gone, as after an uninstall
    assert "argus.io/stop-ray-job" in get_task(cp, ns, "long")["metadata"]["finalizers"]

    hook = one(render(helm, "--set", "uninstall.releaseFinalizers=true", "--set", f"operator.watchNamespaces={{{ns}}}", *SERVERS_OFF), "Job")
    argv = [a for a in hook["spec"]["template"]["spec"]["containers"][0]["args"] if not a.startswith("--ray-address")]
    out = subprocess.run([sys.executable, "-m", "argus", *argv, f"--ray-address={ray_cluster.dashboard_url}", "--kubeconfig", str(kubeconfig)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{ns}/long: Ray job {sid} stopped or gone; finalizer removed" in out.stdout, out.stdout
    from ray.job_submission import JobSubmissionClient
    assert JobSubmissionClient(ray_cluster.dashboard_url).get_job_info(sid).status.value == "STOPPED"
    for name in ("long", "short"):
        assert "argus.io/stop-ray-job" not in (get_task(cp, ns, name)["metadata"].get("finalizers") or [])
    cp.kubectl("delete", "argustask", "long", "short", "-n", ns, "--timeout=20s")  # nothing waits for an operator


def _rule_for(resource: str, verb: str | None = None) -> Any:
    """Select the rule on ``resource`` (and holding ``verb``)."""
    return lambda rule: rule["resources"] == [resource] and (verb is None or verb in rule["verbs"])


def _lease_exists(cp: KubeCluster, namespace: str, victim_ns: str, ray_url: str) -> Callable[[], None] | None:
    """A Lease nobody holds, made by an admin: the operator never needs `create`."""
    cp.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                                     "metadata": {"name": f"{RELEASE}-leader", "namespace": namespace}, "spec": {}}))
    return None


def _argus_cluster(**spec: Any) -> Callable[[KubeCluster, str, str, str], Callable[[], None]]:
    """An ArgusCluster on the testbed's Ray (or as ``spec`` says) that only the victim's namespace
    may use (no other test's operator places a task there), and, for a rayClusterRef, the
    RayCluster it names. Returns what removes them: ArgusClusters are cluster-wide."""
    def prepare(cp: KubeCluster, lease_ns: str, victim_ns: str, ray_url: str) -> Callable[[], None]:
        name = f"trim-{victim_ns.rsplit('-', 1)[-1]}"
        cp.kubectl("label", "namespace", victim_ns, f"argus.io/trim={name}", "--overwrite")
        body = {"address": ray_url, **spec}
        if "rayClusterRef" in spec:
            del body["address"]
            cp.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {
                "name": spec["rayClusterRef"]["name"], "namespace": spec["rayClusterRef"]["namespace"]}, "spec": {"headGroupSpec": {
                    "rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.60.0"}]}}}}}))
        cp.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "argus.io/v1alpha1", "kind": "ArgusCluster", "metadata": {"name": name},
                                                         "spec": {**body, "namespaceSelector": {"matchLabels": {"argus.io/trim": name}}}}))

        def remove() -> None:
            cp.kubectl("patch", "arguscluster", name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False)
            cp.kubectl("delete", "arguscluster", name, "--ignore-not-found", "--wait=false", check=False)
        return remove
    return prepare


# Without each rule (or one verb) of the operator's roles (defaults: the ClusterRole and the
# Lease Role), what happens and what its log says. "stuck": the task never gets a phase;
# "unresolved": its only ArgusCluster's rayClusterRef cannot be read, so it waits Queued;
# "queued": it is validated and queued but never submitted (no finalizer, so no Ray job);
# "no-events": it runs, but kubectl describe shows nothing (the lifecycle test above asserts
# events, so it would catch that); "runs": it works without it, loudly: kopf cannot follow CRD
# changes (it warns), without `get` on the ArgusTask CRD the CRD check cannot compare (it
# warns), without `watch` the task cache lists every second instead of watching
# (a warning each time), without `list` on namespaces the GPU quotas cannot be read (a warning
# each poll interval); "kept": it runs, but is not deleted when its
# ttlSecondsAfterFinished (0 here) runs out. The last field prepares the cluster first.
# Here: each kind of symptom once, and each rule whose request kopf or an adapter makes
# against the real API server in a way the unit fakes do not (the task cache's list and
# watch, the leader's Lease, kopf's CRD watch, Events); the other rules are in UNIT_CASES.
TRIMMED = {
    "argustasks/status patch": (_rule_for("argustasks/status"), None, "stuck", 'cannot patch resource "argustasks/status"', None),
    "argustasks list (verb)": (_rule_for("argustasks"), "list", "stuck", 'cannot list resource "argustasks"', None),
    "argustasks watch (verb)": (_rule_for("argustasks"), "watch", "runs", 'cannot watch resource "argustasks"', None),
    "argustasks patch (verb)": (_rule_for("argustasks"), "patch", "queued", 'cannot patch resource "argustasks"', None),
    "argustasks delete (verb)": (_rule_for("argustasks"), "delete", "kept", 'cannot delete resource "argustasks"', None),
    "namespaces list (verb)": (_rule_for("namespaces"), "list", "runs", 'cannot list resource "namespaces"', None),
    "events create": (_rule_for("events"), None, "no-events", 'cannot create resource "events"', None),
    "leases create": (_rule_for("leases", "create"), None, "stuck", 'cannot create resource "leases"', None),
    "leases get/update": (_rule_for("leases", "get"), None, "stuck", 'cannot get resource "leases"', None),
    "leases update (verb, the Lease exists)": (_rule_for("leases", "update"), "update", "stuck", 'cannot update resource "leases"',
                                               _lease_exists),
    "customresourcedefinitions list/watch": (_rule_for("customresourcedefinitions", "list"), None, "runs",
                                             'cannot list resource "customresourcedefinitions"', None),
    # An ArgusCluster's rayClusterRef that cannot be read (its tasks wait): the kind "unresolved".
    "rayclusters get (rayClusterRef)": (_rule_for("rayclusters"), None, "unresolved", 'cannot get resource "rayclusters"',
                                        _argus_cluster(rayClusterRef={"name": "trim-ray", "namespace": RELEASE_NS})),
}

# The rules whose refusal the controller meets through a port of its own (argus.controller.ports),
# each with the same symptom and the same API server message as above: the unit test over the
# fakes (FakeCluster.refused, fakes.forbidden) that shows it, by file and name. The request
# itself, refused by the real API server and logged with its message, is the boundary the
# cases above hold (the same adapters, argus.adapters.kube, make these requests).
UNIT_CASES = {
    "namespaces get/list": (_rule_for("namespaces"), None, "test_controller.py::test_an_unreadable_namespace_is_tried_again_later"),
    "namespaces get (verb)": (_rule_for("namespaces"), "get", "test_controller.py::test_an_unreadable_namespace_is_tried_again_later"),
    "customresourcedefinitions get (the CRD check)": (lambda rule: "argustasks.argus.io" in rule.get("resourceNames", []), None,
                                                      "test_crdcheck.py::test_an_unreadable_crd_is_a_warning_and_changes_nothing"),
    "argusclusters list/patch": (_rule_for("argusclusters"), None,
                                 "test_controller_clusters.py::test_without_list_on_argusclusters_tasks_go_to_ray_address_and_the_log_says_why"),
    "argusclusters patch (verb: the finalizer)": (_rule_for("argusclusters"), "patch",
                                                  "test_controller_clusters.py::test_without_patch_on_an_arguscluster_its_tasks_run_and_the_log_says_why"),
    "argusclusters/status patch": (_rule_for("argusclusters/status"), None,
                                   "test_controller_clusters.py::test_without_patch_on_an_arguscluster_its_tasks_run_and_the_log_says_why"),
    "secrets get (a cluster's token)": (_rule_for("secrets"), None,
                                        "test_controller_clusters.py::test_without_get_on_secrets_a_clusters_tasks_run_without_its_token_and_the_log_says_why"),
    "secrets get (a task's spec.env)": (_rule_for("secrets"), None,
                                        "test_controller_secrets.py::test_without_get_on_secrets_a_task_with_env_waits_and_says_why"),
    "services get (rayClusterRef's head Service)": (
        _rule_for("services"), None,
        "test_controller_clusters.py::test_without_get_on_a_references_objects_the_cluster_is_unresolved_and_its_tasks_wait"),
}


# Rules without a removal case yet (none: each rule has its case above).
NO_REMOVAL_CASE_YET: set[tuple[str, ...]] = set()


def test_every_rule_and_verb_has_a_removal_case(installed: list[dict[str, Any]]) -> None:
    """Each rule of the default roles is removed whole by some case, and each verb of a rule
    with several verbs alone by some case, but for the pairs named here (and the rules of
    NO_REMOVAL_CASE_YET, each of which the default roles do hold)."""
    rules = [rule for role in operator_roles(installed) for rule in role["rules"]]
    assert NO_REMOVAL_CASE_YET <= {tuple(rule["resources"]) for rule in rules}
    rules = [rule for rule in rules if tuple(rule["resources"]) not in NO_REMOVAL_CASE_YET]
    cases = [(which, verb) for which, verb, *_ in TRIMMED.values()] + [(which, verb) for which, verb, _ in UNIT_CASES.values()]
    for rule in rules:
        # A rule is needed when one verb of it is: removing that verb alone is its case then.
        assert any(which(rule) and (verb is None or verb in rule["verbs"]) for which, verb in cases), f"no case removes {rule}"
    alone = {(tuple(rule["resources"]), verb) for rule in rules for which, verb in cases if verb and which(rule)}
    several = {(tuple(rule["resources"]), v) for rule in rules if len(rule["verbs"]) > 1 for v in rule["verbs"]}
    # list and watch on CRDs are one kopf feature (following CRD changes, "runs" either way);
    # get on the Lease comes before update in every round, so the whole-rule case is its case;
    # so is list on the ArgusClusters (without it no ArgusCluster is seen and patch is never used).
    assert several - alone == {(("customresourcedefinitions",), "list"), (("customresourcedefinitions",), "watch"),
                               (("leases",), "get"), (("argusclusters",), "list")}


def test_each_unit_case_exists() -> None:
    unit = REPO / "tests" / "unit"
    for name, (_, _, test) in UNIT_CASES.items():
        module, function = test.split("::")
        assert f"def {function}(" in (unit / module).read_text(), f"{name}: {test} is not there"
    assert not set(UNIT_CASES) & set(TRIMMED)


@pytest.mark.parametrize("case", list(TRIMMED))
def test_operator_without_one_rule_fails_loudly(case: str, helm: Any, installed: list[dict[str, Any]], control_plane: KubeCluster,
                                                ray_cluster: Any, run_operator: Any, kuberay_crd: Path) -> None:
    """A copy of the chart's operator roles, bound to a new ServiceAccount, with one rule (or
    verb) removed: the operator, run with the chart's flags, fails loudly."""
    cp = control_plane
    which, verb, symptom, complaint, prepare = TRIMMED[case]
    roles = copy.deepcopy(operator_roles(installed))
    matches = [(role, rule) for role in roles for rule in role["rules"] if which(rule)]
    assert len(matches) == 1, (case, matches)
    role, rule = matches[0]
    if verb:
        rule["verbs"] = [v for v in rule["verbs"] if v != verb]
    else:
        role["rules"] = [r for r in role["rules"] if r is not rule]
    suffix = uuid.uuid4().hex[:6]
    ns = ensure_namespace(cp, f"trim-{suffix}", {"argus.io/user": "alice"})
    lease_ns = ensure_namespace(cp, f"trim-lease-{suffix}")  # its own Lease: never waits for another test's
    assert [r["metadata"].get("namespace") for r in roles if r["kind"] == "Role"] == [RELEASE_NS, RELEASE_NS]  # token Secrets, Lease
    _, kubeconfig = _trimmed_identity(cp, roles, lease_ns)
    remove = prepare(cp, lease_ns, ns, ray_cluster.dashboard_url) if prepare else None
    victim = json.loads(advanced_task("victim", ppo_command(steps=3)))
    victim["spec"]["ttlSecondsAfterFinished"] = 0  # deleted as soon as it ends: the delete verb is used
    apply_text(cp, ns, json.dumps(victim))
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
        elif symptom == "unresolved":  # its only cluster's rayClusterRef cannot be read: it waits, and the cluster says why
            cluster = f"trim-{ns.rsplit('-', 1)[-1]}"

            def reason() -> str | None:
                out = cp.kubectl("get", "arguscluster", cluster, "-o", "json", check=False).stdout
                conditions = (json.loads(out).get("status") or {}).get("conditions") or [] if out.strip() else []
                return next((c["reason"] for c in conditions if c["type"] == "RayReachable"), None)
            wait_for(lambda: reason() == "RayClusterRefUnresolved", 60, f"{cluster} unresolved", on_timeout=lambda: op.log_tail(60))
            status = get_task(cp, ns, "victim").get("status") or {}
            assert status.get("phase") == "Queued", status
            assert ray_jobs_for(ray_cluster.dashboard_url, ns) == []
        elif symptom == "kept":  # it ran, and it stays although its TTL ran out
            status = wait_phase(cp, ns, "victim", ("Succeeded", "Failed", "Rejected"), timeout=120, op=op)["status"]
            assert status["phase"] == "Succeeded", status
            wait_for(lambda: log().count(complaint) >= 2, 60, f"the operator to retry and meet {complaint!r} again",
                     on_timeout=lambda: op.log_tail(60))
            assert get_task(cp, ns, "victim")["status"]["phase"] == "Succeeded"
        else:
            # It ran, and (its TTL being 0) it is deleted as soon as it ends: wait for either.
            def ended() -> str | None:
                out = cp.kubectl("get", "argustask", "victim", "-n", ns, "-o", "json", "--ignore-not-found").stdout
                if not out.strip():
                    return "deleted"
                return (json.loads(out).get("status") or {}).get("phase") if (json.loads(out).get("status") or {}).get("phase") in (
                    "Succeeded", "Failed", "Rejected") else None
            outcome = wait_for(ended, 120, "the victim to end", on_timeout=lambda: op.log_tail(60))
            assert outcome in ("Succeeded", "deleted"), outcome
            if symptom == "no-events":
                assert events_for(cp, ns, "victim") == []
                assert "could not post event" in log()
    finally:
        op.stop()
        # Leave nothing for a later operator: drop the finalizer a half-working operator may have added.
        cp.kubectl("patch", "argustask", "victim", "-n", ns, "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False)
        cp.kubectl("delete", "argustask", "victim", "-n", ns, "--wait=false", check=False)
        if remove is not None:
            remove()


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


def test_sso_identities_are_onboarded_by_their_kubernetes_names(installed: list[dict[str, Any]], control_plane: KubeCluster) -> None:
    """An SSO user (alice@corp.example is no POSIX name) and an SSO group: the namespace carries
    the Argus user id, the RoleBinding the names the API server authenticates."""
    cp = control_plane
    out = onboard(cp, "frank", "--k8s-user", "frank@corp.example")
    assert out.returncode == 0, out.stderr
    assert "rolebinding/argus-edit-frank created in frank (ClusterRole argus-edit for User frank@corp.example)" in out.stdout, out.stdout
    out = onboard(cp, "nlp", "--namespace", "team-nlp", "--group", "ml-nlp@corp.example")
    assert out.returncode == 0, out.stderr
    assert json.loads(cp.kubectl("get", "namespace", "team-nlp", "-o", "json").stdout)["metadata"]["labels"]["argus.io/user"] == "nlp"
    binding = json.loads(cp.kubectl("get", "rolebinding", "argus-edit-nlp", "-n", "team-nlp", "-o", "json").stdout)
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "ml-nlp@corp.example"}]

    frank = cp.mint_user("frank@corp.example")
    gina = cp.mint_user("gina@corp.example", groups=["ml-nlp@corp.example"])
    outsider = cp.mint_user("hank@corp.example", groups=["sales@corp.example"])
    for who, ns_, allowed in [(frank, "frank", "yes"), (frank, "team-nlp", "no"), (gina, "team-nlp", "yes"), (gina, "frank", "no"),
                              (outsider, "team-nlp", "no")]:
        got = cp.kubectl("auth", "can-i", "create", "argustasks.argus.io", "-n", ns_, kubeconfig=who, check=False).stdout.strip()
        assert got == allowed, (who.name, ns_, got)
    assert apply_text_as(cp, gina, "team-nlp", advanced_task("team-run", ppo_command())).returncode == 0
    cp.kubectl("delete", "argustask", "team-run", "-n", "team-nlp", "--wait=false", kubeconfig=gina)
    # Onboarding again with another subject replaces the binding's subjects, and says so.
    again = onboard(cp, "frank", "--k8s-user", "frank.l@corp.example")
    assert again.returncode == 0 and "rolebinding/argus-edit-frank updated in frank (now for User frank.l@corp.example)" in again.stdout


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
