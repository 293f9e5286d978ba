"""A real Kubernetes control plane for tests: etcd and kube-apiserver as local processes.

This is what controller-runtime's envtest does: no kubelet, no scheduler, no controller
manager, so nothing runs pods and nothing creates a namespace's `default` ServiceAccount (the
ServiceAccount admission plugin is off for that reason, as in envtest). What is real: the API
server itself, with CRDs, CEL validation, RBAC, client-certificate authentication and
ServiceAccount tokens (`kubectl create token`).

Binaries come from `hack/build-testbed-bins.sh` (built once into a per-user cache, or taken
from KUBEBUILDER_ASSETS). Both processes listen on free 127.0.0.1 ports and keep all of their
state (certificates, etcd data, logs, kubeconfigs) in the work directory given to `start`.

    cp = ControlPlane.start(tmp_path)
    cp.kubectl("get", "ns")
    cp.stop()
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import shutil
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import certs
from .ports import START_ATTEMPTS, free_port, lost_port_race
from .procs import ManagedProcess, tail
from .servicenet import ServiceNetwork

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
CLUSTER_NAME = "argus-testbed"
ADMIN_USER = "argus-testbed-admin"
# The aggregation layer: the API server proxies aggregated APIs (an APIService's Service)
# presenting this client certificate, signed by the front-proxy CA (requestheader flags).
FRONT_PROXY_CLIENT = "front-proxy-client"
BUILD_SCRIPT = Path("hack") / "build-testbed-bins.sh"


class KubectlError(subprocess.CalledProcessError):
    """A failed kubectl call; its message carries kubectl's stderr."""

    def __str__(self) -> str:
        return f"{super().__str__()}\nstderr: {(self.stderr or '').strip()}\nstdout: {(self.output or '').strip()[:2000]}"


class NotSupportedHere(NotImplementedError):
    """The operation needs the local control plane (e.g. the CA key) and this cluster isn't one."""


# --------------------------------------------------------------------------- binaries

def repo_root() -> Path:
    """The repository holding this package (or ARGUS_REPO_ROOT)."""
    env = os.environ.get("ARGUS_REPO_ROOT")
    if env:
        return Path(env).resolve()
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / BUILD_SCRIPT).is_file():
            return parent
    return here.parents[3]


def find_monitoring_crds() -> Path:
    """The folder holding the Prometheus Operator's ServiceMonitor and PodMonitor CRDs
    (hack/build-testbed-bins.sh --monitoring-crds generates them once and caches them)."""
    script = repo_root() / BUILD_SCRIPT
    proc = subprocess.run(["bash", str(script), "--monitoring-crds"], stdout=subprocess.PIPE, stderr=None, text=True,
                          cwd=script.parent.parent)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{script} --monitoring-crds failed with exit code {proc.returncode}")
    return Path(lines[-1].strip())


_bin_dir_lock = threading.Lock()
_bin_dir: Path | None = None


def find_binaries(timeout: float | None = None) -> Path:
    """The folder holding kube-apiserver and etcd.

    Runs hack/build-testbed-bins.sh, which returns at once when the binaries are cached (and
    uses KUBEBUILDER_ASSETS when that names a folder holding both), and builds them otherwise
    (many minutes on a cold cache: CI should run the script before the tests). Its progress
    goes to this process's stderr; its last stdout line is the folder.
    """
    global _bin_dir
    with _bin_dir_lock:
        if _bin_dir is not None:
            return _bin_dir
        script = repo_root() / BUILD_SCRIPT
        assets = os.environ.get("KUBEBUILDER_ASSETS")
        if not script.is_file():
            if assets and all(os.access(Path(assets) / b, os.X_OK) for b in ("kube-apiserver", "etcd")):
                _bin_dir = Path(assets)
                return _bin_dir
            raise FileNotFoundError(
                f"{script} not found: set ARGUS_REPO_ROOT to the repository or KUBEBUILDER_ASSETS "
                "to a folder holding kube-apiserver and etcd"
            )
        proc = subprocess.run(
            ["bash", str(script)],
            stdout=subprocess.PIPE,
            stderr=None,
            text=True,
            timeout=timeout,
            cwd=script.parent.parent,
        )
        lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
        if proc.returncode != 0 or not lines:
            raise RuntimeError(
                f"{script} failed with exit code {proc.returncode}; stdout: {proc.stdout[-2000:]!r}"
            )
        folder = Path(lines[-1].strip())
        for b in ("kube-apiserver", "etcd"):
            if not os.access(folder / b, os.X_OK):
                raise RuntimeError(f"{script} printed {folder}, which holds no executable {b}")
        _bin_dir = folder
        return folder


def find_kubectl() -> str:
    """The kubectl that hack/build-testbed-bins.sh builds beside kube-apiserver (the same
    Kubernetes release as the server, and present on a fresh machine that has none); else,
    with KUBEBUILDER_ASSETS or outside this repository, kubectl on PATH."""
    try:
        built = find_binaries() / "kubectl"
    except (FileNotFoundError, RuntimeError):
        built = None
    if built is not None and os.access(built, os.X_OK):
        return str(built)
    found = shutil.which("kubectl")
    if found:
        return found
    raise FileNotFoundError("kubectl not found: run hack/build-testbed-bins.sh (it builds one), or put kubectl on PATH")


# --------------------------------------------------------------------------- kubeconfig

def write_kubeconfig(
    path: Path,
    *,
    server: str,
    ca_pem: bytes,
    user: str,
    cert_pem: bytes | None = None,
    key_pem: bytes | None = None,
    token: str | None = None,
    namespace: str | None = None,
) -> Path:
    """A self-contained kubeconfig (certificates embedded). JSON, which every YAML reader reads."""
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    creds: dict[str, str] = {}
    if cert_pem is not None and key_pem is not None:
        creds = {"client-certificate-data": b64(cert_pem), "client-key-data": b64(key_pem)}
    if token is not None:
        creds["token"] = token
    context: dict[str, str] = {"cluster": CLUSTER_NAME, "user": user}
    if namespace:
        context["namespace"] = namespace
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CLUSTER_NAME, "cluster": {"server": server, "certificate-authority-data": b64(ca_pem)}}],
        "users": [{"name": user, "user": creds}],
        "contexts": [{"name": user, "context": context}],
        "current-context": user,
        "preferences": {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))
    path.chmod(0o600)
    return path


# --------------------------------------------------------------------------- clusters

class KubeCluster:
    """What tests need from any API server: a kubeconfig and kubectl."""

    kubeconfig: Path
    server: str
    ca_cert: Path | None = None
    _kubectl_env: Mapping[str, str] | None = None

    def kubectl(
        self,
        *args: str,
        kubeconfig: Path | str | None = None,
        input: str | None = None,  # noqa: A002 - mirrors subprocess.run
        check: bool = True,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster (as admin unless `kubeconfig` is another identity).

        With check=True a non-zero exit raises KubectlError, whose message holds stderr.
        """
        argv = [find_kubectl(), f"--kubeconfig={kubeconfig or self.kubeconfig}", *map(str, args)]
        env = dict(os.environ)
        env.pop("KUBECONFIG", None)
        if self._kubectl_env:
            env.update(self._kubectl_env)
        proc = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout, env=env)
        if check and proc.returncode != 0:
            raise KubectlError(proc.returncode, argv, proc.stdout, proc.stderr)
        return proc

    def wait_established(self, *crds: str, timeout: float = 60) -> None:
        """Wait until each CRD (e.g. ``argustasks.argus.io``) is Established. Polled here:
        ``kubectl wait --for=condition=Established`` fails outright on a CRD whose status has
        no conditions yet (just created), instead of waiting."""
        deadline = time.monotonic() + timeout
        pending = list(crds)
        while pending:
            out = self.kubectl("get", "crd", *pending, "-o", "json", check=False)
            doc = json.loads(out.stdout) if out.returncode == 0 and out.stdout.strip() else {}
            items = doc.get("items", [doc] if doc.get("kind") == "CustomResourceDefinition" else [])  # one name: the object itself
            established = {i["metadata"]["name"] for i in items
                           if any(c.get("type") == "Established" and c.get("status") == "True" for c in (i.get("status") or {}).get("conditions") or [])}
            pending = [c for c in pending if c not in established]
            if not pending:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRDs not Established after {timeout:.0f} s: {pending}")
            time.sleep(0.1)

    def mint_user(self, name: str, groups: Iterable[str] = ()) -> Path:
        raise NotSupportedHere(f"{type(self).__name__} cannot mint client certificates")

    def restart(self, down_for: float = 0.0) -> None:
        raise NotSupportedHere(f"{type(self).__name__} cannot be restarted")

    def stop(self) -> None:
        pass

    def log_tail(self, n: int = 50) -> str:
        return ""

    def __enter__(self) -> KubeCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ExternalCluster(KubeCluster):
    """An existing cluster named by a kubeconfig (e.g. ARGUS_TEST_KUBECONFIG): nothing is started
    or stopped, and what needs the local CA or processes (mint_user, restart) is not supported."""

    def __init__(self, kubeconfig: Path | str) -> None:
        self.kubeconfig = Path(kubeconfig).expanduser().resolve()
        if not self.kubeconfig.is_file():
            raise FileNotFoundError(f"kubeconfig {self.kubeconfig} does not exist")
        self.server = self._read_server()

    def _read_server(self) -> str:
        try:
            import yaml  # a dependency of the kubernetes client

            doc: Any = yaml.safe_load(self.kubeconfig.read_text())
            ctx_name = doc.get("current-context")
            ctx = next(c["context"] for c in doc["contexts"] if c["name"] == ctx_name)
            return next(c["cluster"]["server"] for c in doc["clusters"] if c["name"] == ctx["cluster"])
        except Exception:  # noqa: BLE001 - informational only
            return ""

    def log_tail(self, n: int = 50) -> str:
        return f"(external cluster {self.server} from {self.kubeconfig}: no local logs)"


class ControlPlane(KubeCluster):
    """etcd + kube-apiserver on free loopback ports, state under `workdir`.

    Attributes: kubeconfig (admin, O=system:masters), server (https URL), ca_cert (PEM path),
    workdir, etcd_url, start_seconds (last start-to-ready time).
    """

    def __init__(self, workdir: Path, bin_dir: Path, audit: bool = False, service_network: ServiceNetwork | None = None) -> None:
        self.workdir = Path(workdir).resolve()
        # With a service network: the API server reaches Services (a webhook's service:
        # clientConfig) through it (servicenet.py).
        self.service_network = service_network
        self.bin_dir = bin_dir
        # With audit: every write (create, update, patch, delete) the API server accepts or
        # refuses is logged, one JSON line each, to audit_log (bench/api_writes.py counts them).
        self.audit_log = self.workdir / "logs" / "audit.jsonl" if audit else None
        self.cert_dir = self.workdir / "pki"
        self.log_dir = self.workdir / "logs"
        self.etcd_data = self.workdir / "etcd-data"
        self.etcd_port, self.etcd_peer_port, self.port = free_port(), free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{self.etcd_port}"
        self.server = f"https://127.0.0.1:{self.port}"
        self.ca_cert = self.cert_dir / "ca.crt"
        self.kubeconfig = self.workdir / "admin.kubeconfig"
        self._kubectl_env = {"KUBECACHEDIR": str(self.workdir / "kube-cache")}
        self._etcd: ManagedProcess | None = None
        self._apiserver: ManagedProcess | None = None
        self.start_seconds: float | None = None
        self._ca: certs.CertificateAuthority | None = None

    # ---- lifecycle

    @classmethod
    def start(cls, workdir: Path, *, bin_dir: Path | None = None, timeout: float = 60, audit: bool = False,
              service_network: ServiceNetwork | None = None) -> ControlPlane:
        """Start etcd and kube-apiserver and wait until /readyz answers ok. A start that lost a
        port to another process (probed free, taken before the server bound it) is tried again
        on fresh ports."""
        for attempt in range(1, START_ATTEMPTS + 1):
            cp = cls(Path(workdir), bin_dir or find_binaries(), audit=audit, service_network=service_network)
            cp.workdir.mkdir(parents=True, exist_ok=True)
            cp._write_certs()
            try:
                cp._start_processes(timeout)
                return cp
            except BaseException as exc:
                cp.stop()
                if attempt == START_ATTEMPTS or not isinstance(exc, (RuntimeError, TimeoutError)) or not lost_port_race(cp.log_tail(80)):
                    raise
                shutil.rmtree(cp.etcd_data, ignore_errors=True)
        raise AssertionError("unreachable")

    def _write_certs(self) -> None:
        d = self.cert_dir
        d.mkdir(parents=True, exist_ok=True)
        ca = certs.CertificateAuthority.create()
        self._ca = ca
        ca.pair.write(d / "ca.crt", d / "ca.key")
        ca.serving(
            "kube-apiserver",
            dns_names=["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                       "kubernetes.default.svc.cluster.local"],
            ips=["127.0.0.1", "10.0.0.1"],
        ).write(d / "apiserver.crt", d / "apiserver.key")
        # The aggregation layer's own CA, apart from the cluster CA as in kubeadm: an extension
        # server believes X-Remote-User only from a certificate this CA signed.
        front = certs.CertificateAuthority.create("argus-testbed-front-proxy-ca")
        front.pair.write(d / "front-proxy-ca.crt", d / "front-proxy-ca.key")
        front.client(FRONT_PROXY_CLIENT).write(d / "front-proxy-client.crt", d / "front-proxy-client.key")
        admin = ca.client(ADMIN_USER, ["system:masters"])
        admin.write(d / "admin.crt", d / "admin.key")
        sa_key = certs.new_key()
        (d / "sa.key").write_bytes(certs.key_pem(sa_key))
        (d / "sa.pub").write_bytes(certs.public_key_pem(sa_key))
        write_kubeconfig(
            self.kubeconfig, server=self.server, ca_pem=ca.pair.cert_pem, user=ADMIN_USER,
            cert_pem=admin.cert_pem, key_pem=admin.key_pem,
        )

    def _etcd_argv(self) -> list[str]:
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        return [
            str(self.bin_dir / "etcd"),
            "--name=default",
            f"--data-dir={self.etcd_data}",
            f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=default={peer}",
            "--initial-cluster-state=new",
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]

    def _apiserver_argv(self) -> list[str]:
        d = self.cert_dir
        return [
            str(self.bin_dir / "kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--cert-dir={d}",
            f"--tls-cert-file={d / 'apiserver.crt'}",
            f"--tls-private-key-file={d / 'apiserver.key'}",
            f"--client-ca-file={d / 'ca.crt'}",
            "--authorization-mode=RBAC",
            f"--service-account-issuer={self.server}",
            f"--service-account-key-file={d / 'sa.pub'}",
            f"--service-account-signing-key-file={d / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            "--allow-privileged=true",
            # The aggregation layer (APIServices such as logs.argus.io; docs/logs.md). No
            # --enable-aggregator-routing: the aggregator dials the Service's ClusterIP, which
            # the service network (egress "cluster") maps to a loopback backend.
            f"--requestheader-client-ca-file={d / 'front-proxy-ca.crt'}",
            f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={d / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={d / 'front-proxy-client.key'}",
            # As in envtest: nothing creates a namespace's `default` ServiceAccount here.
            "--disable-admission-plugins=ServiceAccount",
            # Start-up speed: no APF bootstrap objects to wait for, no endpoint lease loop.
            "--enable-priority-and-fairness=false",
            "--endpoint-reconciler-type=none",
            # /debug/pprof off unless asked for (ARGUS_TESTBED_PROFILING=1): where the API
            # server's CPU goes under a benchmark (docs/benchmarks-first-start.md).
            f"--profiling={'true' if os.environ.get('ARGUS_TESTBED_PROFILING') == '1' else 'false'}",
            *self._audit_args(),
            *([f"--egress-selector-config-file={self.service_network.egress_config(self.workdir / 'egress.yaml')}"]
              if self.service_network else []),
            "--v=1",
        ]

    def _audit_args(self) -> list[str]:
        if self.audit_log is None:
            return []
        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n"
            "- level: Request\n  verbs: [create, update, patch, delete, deletecollection]\n"
            "  resources: [{group: argus.io}, {group: '', resources: [events]}, {group: events.k8s.io}]\n"
            "- level: Metadata\n  verbs: [create, update, patch, delete, deletecollection]\n- level: None\n"
        )
        self.audit_log.parent.mkdir(parents=True, exist_ok=True)
        return [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}", "--audit-log-format=json",
                "--audit-log-mode=blocking"]

    def _start_processes(self, timeout: float) -> None:
        t0 = time.monotonic()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._etcd = ManagedProcess("etcd", self._etcd_argv(), self.log_dir / "etcd.log").start()
        self._wait_etcd(t0 + timeout)
        self._apiserver = ManagedProcess(
            "kube-apiserver", self._apiserver_argv(), self.log_dir / "kube-apiserver.log"
        ).start()
        self._wait_ready(t0 + timeout)
        self.start_seconds = time.monotonic() - t0

    def _wait_etcd(self, deadline: float) -> None:
        while True:
            assert self._etcd is not None
            if not self._etcd.running:
                raise RuntimeError(f"etcd exited with {self._etcd.returncode()}:\n{self._etcd.log_tail(30)}")
            try:
                with urllib.request.urlopen(f"{self.etcd_url}/health", timeout=2) as r:
                    if json.loads(r.read()).get("health") == "true":
                        return
            except (OSError, ValueError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"etcd not healthy at {self.etcd_url}:\n{self._etcd.log_tail(30)}")
            time.sleep(0.05)

    def _ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_cert))
        ctx.load_cert_chain(self.cert_dir / "admin.crt", self.cert_dir / "admin.key")
        return ctx

    def readyz(self, timeout: float = 2.0) -> tuple[int, str]:
        """GET /readyz as admin: (status, body); raises OSError when nothing answers."""
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self._ssl_context(), timeout=timeout)
        try:
            conn.request("GET", "/readyz")
            resp = conn.getresponse()
            return resp.status, resp.read().decode(errors="replace")
        finally:
            conn.close()

    def _wait_ready(self, deadline: float) -> None:
        last = ""
        while True:
            assert self._apiserver is not None
            if not self._apiserver.running:
                raise RuntimeError(
                    f"kube-apiserver exited with {self._apiserver.returncode()}:\n{self._apiserver.log_tail(40)}"
                )
            try:
                status, body = self.readyz()
                if status == 200:
                    return
                last = f"{status}: {body[-1500:]}"
            except (OSError, http.client.HTTPException) as e:
                last = repr(e)
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"kube-apiserver not ready at {self.server}: {last}\n{self._apiserver.log_tail(40)}"
                )
            time.sleep(0.1)

    def _stop_processes(self) -> None:
        if self._apiserver is not None:
            self._apiserver.stop()
        if self._etcd is not None:
            self._etcd.stop()

    def stop(self) -> None:
        """Stop kube-apiserver and etcd (SIGTERM, then SIGKILL). The workdir is kept."""
        self._stop_processes()

    def restart(self, down_for: float = 0.0, timeout: float = 60) -> None:
        """Stop kube-apiserver and etcd, wait `down_for` seconds, start both again on the same
        ports with the same data and certificates, and wait until ready. Clients holding the
        kubeconfig reconnect; watches break and must be re-established."""
        self._stop_processes()
        if down_for > 0:
            time.sleep(down_for)
        self._start_processes(timeout)

    @property
    def running(self) -> bool:
        return bool(self._apiserver and self._apiserver.running and self._etcd and self._etcd.running)

    # ---- identities

    def mint_user(self, name: str, groups: Iterable[str] = ()) -> Path:
        """A kubeconfig for a client-certificate identity (user `name`, `groups`) with no
        permissions beyond what RBAC grants it (authenticated users get discovery only)."""
        if self._ca is None:
            self._ca = certs.CertificateAuthority.load(self.cert_dir / "ca.crt", self.cert_dir / "ca.key")
        pair = self._ca.client(name, list(groups))
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        return write_kubeconfig(
            self.workdir / "users" / f"{safe}.kubeconfig",
            server=self.server, ca_pem=self._ca.pair.cert_pem, user=name,
            cert_pem=pair.cert_pem, key_pem=pair.key_pem,
        )

    def token_kubeconfig(self, token: str, name: str, namespace: str | None = None) -> Path:
        """A kubeconfig that authenticates with a bearer token (e.g. from `kubectl create token`)."""
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        return write_kubeconfig(
            self.workdir / "users" / f"{safe}.token.kubeconfig",
            server=self.server, ca_pem=self.ca_cert.read_bytes(), user=name, token=token,
            namespace=namespace,
        )

    # ---- diagnostics

    def log_tail(self, n: int = 50) -> str:
        parts = []
        for name in ("etcd", "kube-apiserver"):
            parts.append(f"----- {name} ({self.log_dir / (name + '.log')}) -----")
            parts.append(tail(self.log_dir / f"{name}.log", n))
        return "\n".join(parts)

    def __repr__(self) -> str:
        return f"ControlPlane(server={self.server!r}, workdir={str(self.workdir)!r}, running={self.running})"

    def __enter__(self) -> ControlPlane:
        return self


__all__: Sequence[str] = [
    "ControlPlane",
    "ExternalCluster",
    "KubeCluster",
    "KubectlError",
    "NotSupportedHere",
    "find_binaries",
    "find_kubectl",
    "repo_root",
    "write_kubeconfig",
]
