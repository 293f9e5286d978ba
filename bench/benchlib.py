"""Shared by bench/run.py (benchmarks) and bench/chaos.py (fault injection): the real
testbed (kube-apiserver + etcd and a Ray head + worker on loopback, from argus_testbed),
the operator as a subprocess (argus_testbed.harness.OperatorProcess), a watch on
ArgusTasks that timestamps every phase change as it arrives, and small measuring helpers
(machine description, /proc CPU and memory of a process, the operator's metrics).

Nothing here is a double of what the operator talks to: the API server, etcd and Ray are the
real programs; only the training workload is the verl stand-in (hack/verl-standin).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from argus.core.spec import GROUP, PLURAL, VERSION
from argus_testbed import ControlPlane, RayCluster, find_binaries
from argus_testbed.harness import OperatorProcess
from argus_testbed.harness import ppo_command as harness_ppo_command
from argus_testbed.ports import free_port
from argus_testbed.private_tree import STANDIN, login_home, make_private_tree

REPO = Path(__file__).resolve().parents[1]

TERMINAL = ("Succeeded", "Failed", "Stopped", "Rejected")
ACTIVE = ("Submitted", "Running")


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


# --------------------------------------------------------------------------- machine

def machine_info() -> dict[str, Any]:
    def versions() -> dict[str, str]:
        out = {"python": platform.python_version()}
        for mod in ("ray", "kopf", "kubernetes", "pydantic"):
            try:
                out[mod] = __import__(mod).__version__
            except Exception:  # noqa: BLE001
                out[mod] = "?"
        return out

    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_kb = 0
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    except OSError:
        pass
    info = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "cpu_model": cpu,
        "kernel": platform.release(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        **versions(),
    }
    try:
        from argus_testbed import find_binaries
        out = subprocess.run([str(find_binaries() / "kube-apiserver"), "--version"], capture_output=True, text=True, timeout=30)
        info["kube_apiserver"] = out.stdout.strip().split()[-1]
    except Exception:  # noqa: BLE001
        info["kube_apiserver"] = "?"
    return info


def loadavg() -> float:
    return round(os.getloadavg()[0], 2)


# --------------------------------------------------------------------------- process stats

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of one process (not its children), from /proc."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[-1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def memory(pid: int) -> dict[str, float]:
    """Resident memory now (VmRSS) and its peak (VmHWM), MiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value = line.split(":", 1)
                out[key] = int(value.split()[0]) / 1024
    return {"rss_mib": round(out.get("VmRSS", 0), 1), "peak_rss_mib": round(out.get("VmHWM", 0), 1)}


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, int(round(q / 100 * len(ordered) + 0.5)) - 1))
    return ordered[k]


def summary(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50": percentile(values, 50), "p99": percentile(values, 99), "mean": statistics.fmean(values),
            "min": min(values), "max": max(values)}


# --------------------------------------------------------------------------- commands

def ppo_command(steps: int | None = None, extra: str = "") -> str:
    """The tests' PPO command (argus_testbed.harness): it sets what verl requires before
    training, which the operator checks on the composed configuration."""
    return harness_ppo_command(steps=steps, extra=extra)


def task_body(name: str, command: str, *, priority: int | None = None, gpus: int = 1, labels: dict[str, str] | None = None,
              cancel: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": gpus, "command": command}
    if cancel:
        spec["cancel"] = True
    if priority is not None:
        spec["priority"] = priority
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ArgusTask", "metadata": meta, "spec": spec}


# --------------------------------------------------------------------------- kubernetes

class Kube:
    """The official client against the testbed's API server, sized for parallel use."""

    def __init__(self, kubeconfig: Path, pool: int = 32):
        from kubernetes import client, config
        cfg = client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)
        cfg.connection_pool_maxsize = pool
        self.api_client = client.ApiClient(cfg)
        self.api_client.user_agent = "argus-bench"  # told apart from the operator's own requests
        self.custom = client.CustomObjectsApi(self.api_client)
        self.core = client.CoreV1Api(self.api_client)
        self.client = client

    def namespace(self, name: str, user: str | None = "alice") -> None:
        from kubernetes.client.exceptions import ApiException
        labels = {"argus.io/user": user} if user is not None else None
        body = self.client.V1Namespace(metadata=self.client.V1ObjectMeta(name=name, labels=labels))
        try:
            self.core.create_namespace(body)
        except ApiException as exc:
            if exc.status != 409:
                raise

    def create(self, ns: str, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """Create; returns the object and the wall time at which the call returned."""
        obj = self.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
        return obj, time.time()

    def patch_status(self, ns: str, name: str, status: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object_status(GROUP, VERSION, ns, PLURAL, name, {"status": status})

    def patch_spec(self, ns: str, name: str, spec: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name, {"spec": spec})

    def get(self, ns: str, name: str) -> dict[str, Any]:
        return self.custom.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)

    def list(self, ns: str | None = None) -> list[dict[str, Any]]:
        if ns:
            return self.custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)["items"]
        return self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]

    def events(self, ns: str) -> list[Any]:
        return self.core.list_namespaced_event(ns).items

    def delete_all(self, ns: str) -> None:
        self.custom.delete_collection_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)


def service_account_kubeconfig(cp: ControlPlane, namespace: str = "argus-system") -> Path:
    """A kubeconfig that authenticates as the chart's ServiceAccount, with the chart's RBAC
    (``helm template``, its defaults: every namespace), by a TokenRequest token: what the
    operator's requests cost the API server in a cluster, where it is a Pod with a projected
    token, not a client certificate of ``system:masters`` (the testbed's admin). The API
    server checks a client certificate's chain on every request; a token's verdict is cached."""
    helm = [str(find_binaries() / "helm"), "template", "argus", str(REPO / "charts" / "argus"), "--namespace", namespace,
            "--kube-version", "1.34", "--show-only", "templates/serviceaccount.yaml", "--show-only", "templates/rbac.yaml"]
    rendered = subprocess.run(helm, capture_output=True, text=True, check=True, timeout=120,
                              env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"}).stdout
    cp.kubectl("create", "namespace", namespace, check=False)
    cp.kubectl("apply", "-f", "-", input=rendered)
    name = next(d["metadata"]["name"] for d in yaml.safe_load_all(rendered) if d and d["kind"] == "ServiceAccount")
    token = cp.kubectl("create", "token", name, "-n", namespace, "--duration=24h").stdout.strip()
    return cp.token_kubeconfig(token, f"sa-{namespace}-{name}")


def parallel(fn: Callable[[Any], Any], items: Iterable[Any], workers: int = 16) -> list[Any]:
    with ThreadPoolExecutor(workers) as ex:
        return list(ex.map(fn, items))


class TaskWatch:
    """A cluster-wide list+watch of ArgusTasks in a thread. For every task it keeps the
    latest body and the wall time (time.time(), taken when the event is read) at which each
    phase was first seen, so phase changes are timestamped as they arrive rather than by
    polling. Reconnects (and relists) when the stream breaks, e.g. across an API server
    restart."""

    def __init__(self, kube: Kube):
        self.kube = kube
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.first_seen: dict[tuple[str, str], dict[str, float]] = {}
        self.phase_history: dict[tuple[str, str], list[str]] = {}
        self.cond = threading.Condition()
        self.stopping = False
        self.reconnects = 0
        # How many tasks of each namespace have a phase, kept as events arrive: a waiter that
        # counts them is woken on every event, and a scan of 10,000 objects under the lock per
        # event held the watch itself back (bench/first_start.py measured its own lag).
        self.with_phase: dict[str, int] = {}
        self._thread = threading.Thread(target=self._run, name="task-watch", daemon=True)
        self._synced = threading.Event()

    def start(self) -> TaskWatch:
        self._thread.start()
        if not self._synced.wait(60):
            raise TimeoutError("the ArgusTask watch did not sync in 60 s")
        return self

    def stop(self) -> None:
        self.stopping = True

    def _record(self, obj: dict[str, Any], deleted: bool = False) -> None:
        now = time.time()
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        phase = (obj.get("status") or {}).get("phase") or ""
        with self.cond:
            had = bool(((self.objects.get(key) or {}).get("status") or {}).get("phase"))
            if had != (bool(phase) and not deleted):
                self.with_phase[key[0]] = self.with_phase.get(key[0], 0) + (-1 if had else 1)
            if deleted:
                self.objects.pop(key, None)
            else:
                old = self.objects.get(key)
                if old is not None and (old.get("metadata") or {}).get("uid") != meta.get("uid"):
                    self.first_seen.pop(key, None)
                    self.phase_history.pop(key, None)
                self.objects[key] = obj
                seen = self.first_seen.setdefault(key, {})
                if phase not in seen:
                    seen[phase] = now
                history = self.phase_history.setdefault(key, [])
                if not history or history[-1] != phase:
                    history.append(phase)
            self.cond.notify_all()

    def _run(self) -> None:
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException
        rv = None
        while not self.stopping:
            try:
                if rv is None:
                    listing = self.kube.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
                    for item in listing["items"]:
                        self._record(item)
                    rv = listing["metadata"]["resourceVersion"]
                    self._synced.set()
                w = watch.Watch()
                for event in w.stream(self.kube.custom.list_cluster_custom_object, GROUP, VERSION, PLURAL,
                                      resource_version=rv, timeout_seconds=120, allow_watch_bookmarks=True):
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        rv = None
                        break
                    rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                    if event["type"] == "BOOKMARK":
                        continue
                    self._record(obj, deleted=event["type"] == "DELETED")
                    if self.stopping:
                        return
            except ApiException as exc:
                self.reconnects += 1
                if exc.status == 410:
                    rv = None
                time.sleep(0.5)
            except Exception:  # noqa: BLE001 - connection dropped (API server restart): reconnect
                self.reconnects += 1
                time.sleep(0.5)

    # -- queries
    def phase(self, ns: str, name: str) -> str | None:
        obj = self.objects.get((ns, name))
        return (obj.get("status") or {}).get("phase") if obj else None

    def count_with_phase(self, namespaces: Iterable[str]) -> int:
        """Tasks with a phase in ``namespaces``, without a scan (cheap enough for a predicate)."""
        return sum(self.with_phase.get(ns, 0) for ns in namespaces)

    def in_namespace(self, ns: str) -> dict[str, dict[str, Any]]:
        with self.cond:
            return {name: obj for (n, name), obj in self.objects.items() if n == ns}

    def wait(self, predicate: Callable[[], Any], timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                result = predicate()
                if result:
                    return result
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
                self.cond.wait(min(left, 1.0))

    def phases(self, ns: str) -> dict[str, str | None]:
        with self.cond:
            return {name: (obj.get("status") or {}).get("phase") for (n, name), obj in self.objects.items() if n == ns}

    def count(self, ns_prefix: str, phases: Iterable[str]) -> int:
        phases = set(phases)
        with self.cond:
            return sum(1 for (n, _), obj in self.objects.items() if n.startswith(ns_prefix) and (obj.get("status") or {}).get("phase") in phases)


# --------------------------------------------------------------------------- the testbed

class Testbed:
    """Control plane + CRD + a /private tree + Ray login home, then Ray clusters and operators
    on demand. Everything it starts, it stops (``close``)."""

    def __init__(self, work: Path, users: tuple[str, ...] = ("alice", "bob"), audit: bool = False):
        self.work = work
        # Another checkout's operator (ARGUS_BENCH_OPERATOR_PYTHONPATH=<checkout>/operator) gets
        # that checkout's CRD too: a status field the served schema lacks is pruned, and an
        # operator that wrote it would write it again and again.
        other = os.environ.get("ARGUS_BENCH_OPERATOR_PYTHONPATH")
        crd = (Path(other).parent if other else REPO) / "crds" / "argus.io_argustasks.yaml"
        self.ray: RayCluster | None = None
        self.operators: list[OperatorProcess] = []
        t0 = time.monotonic()
        self.cp = ControlPlane.start(work / "k8s", audit=audit)
        log(f"kube-apiserver + etcd ready at {self.cp.server} in {time.monotonic() - t0:.1f} s")
        self.cp.kubectl("apply", "--server-side", "-f", str(crd))
        self.cp.wait_established("argustasks.argus.io")
        self.root = make_private_tree(work / "private", users=users)
        self.home = login_home(work / "ray-home")
        self.kube = Kube(self.cp.kubeconfig)

    def start_ray(self, name: str, env: dict[str, str], **kwargs: Any) -> RayCluster:
        t0 = time.monotonic()
        self.ray = RayCluster.start(self.work / name, extra_path=[STANDIN / "bin"], extra_env={"HOME": str(self.home), **env}, **kwargs)
        log(f"Ray head {self.ray.dashboard_url} + worker ready in {time.monotonic() - t0:.1f} s ({env})")
        return self.ray

    def stop_ray(self) -> None:
        if self.ray:
            self.ray.stop()
            self.ray = None

    def start_operator(self, name: str, *, ray_address: str | None = None, namespaces: list[str] = (), max_running: int = 4,
                       poll_interval: float = 2.0, extra_args: list[str] = (), metrics_port: int | None = None,
                       extra_env: dict[str, str] | None = None, crash_after_submit: float | None = None) -> OperatorProcess:
        args = list(extra_args)
        if metrics_port is not None:
            args += ["--metrics-port", str(metrics_port)]
        # Another checkout's operator against the same testbed and benchmark code: the before
        # and after figures of a change (git worktree add /tmp/before <commit>).
        other = os.environ.get("ARGUS_BENCH_OPERATOR_PYTHONPATH")
        if other:
            extra_env = {"PYTHONPATH": other, **(extra_env or {})}
        assert ray_address or self.ray
        op = OperatorProcess.start(self.work / "operator", kubeconfig=self.cp.kubeconfig, ray_address=ray_address or self.ray.dashboard_url,
                                   root=self.root, namespaces=list(namespaces), max_running=max_running, poll_interval=poll_interval,
                                   extra_args=args, extra_env=extra_env, name=name, crash_after_submit=crash_after_submit)
        op.metrics_port = metrics_port  # type: ignore[attr-defined]
        self.operators.append(op)
        return op

    def close(self) -> None:
        for op in self.operators:
            try:
                op.stop()
            except Exception:  # noqa: BLE001
                pass
        self.stop_ray()
        self.cp.stop()


# CPU pinning (bench/run.py, bench/scale.py): Ray's processes on their own CPU(s), the control
# plane, the operator and the benchmark on the others, so that the figures are the operator's.

def cpu_split(spec: str) -> tuple[set[int], set[int]] | None:
    """--ray-cpus (or first_start.py's --operator-cpus): (the CPUs set apart, everyone else's).
    "auto": the last CPU set apart (for Ray; for the operator in first_start.py), the others
    for the rest; "none": no pinning; else a list ("1" or "2,3")."""
    allowed = set(os.sched_getaffinity(0))
    if spec == "none" or len(allowed) < 2:
        return None
    ray = {max(allowed)} if spec == "auto" else {int(c) for c in spec.split(",")}
    if not ray < allowed:
        raise SystemExit(f"CPUs {spec}: must be a proper subset of this process's CPUs {sorted(allowed)}")
    return ray, allowed - ray


@contextlib.contextmanager
def pinned_to(cpus: set[int] | None) -> Iterator[None]:
    """Processes started inside inherit these CPUs (this thread's affinity, set and then
    restored): how Ray's processes get theirs."""
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def affinity_of(pid: int) -> str:
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("Cpus_allowed_list:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def affinities(tb: Testbed, op: OperatorProcess) -> dict[str, list[str]]:
    """The CPUs each process may use, read back from /proc: the pinning's evidence."""
    out = {role: sorted({affinity_of(p) for p in pids}) for role, pids in ray_processes(tb.ray).items() if pids}
    out["operator"] = [affinity_of(op.proc.pid)]
    out["kube-apiserver, etcd"] = sorted({affinity_of(p.popen.pid) for p in (tb.cp._etcd, tb.cp._apiserver) if p is not None and p.popen is not None})
    out["this benchmark"] = [affinity_of(os.getpid())]
    return out


def wait_metrics(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            scrape(port)
            return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"operator metrics on :{port} did not answer in {timeout:.0f} s")


def scrape(port: int) -> dict[str, float]:
    """The operator's Prometheus metrics as {'name{labels}': value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        try:
            out[key] = float(value)
        except ValueError:
            pass
    return out


# Ray's own processes by role, from their command lines (Ray 2.x names them so): the
# dashboard head and its module subprocesses (JobHead serves the Jobs API and the log
# streams), the nodes' agents (the dashboard agent reads a job's log file for its stream), the
# core (GCS, raylets, log monitors), and the job supervisors (one actor per running job).
RAY_ROLES = {
    "dashboard": ("dashboard/dashboard.py", "ray-dashboard-", "ray.dashboard.subprocesses"),
    "agents": ("DashboardAgent", "RuntimeEnvAgent", "dashboard/agent.py", "runtime_env/agent"),
    "core": ("gcs_server", "raylet/raylet", "log_monitor.py", "autoscaler/_private/monitor.py"),
    "supervisors": ("ray::JobSupervisor",),
}


def ray_processes(ray: RayCluster) -> dict[str, list[int]]:
    """Ray's processes on both nodes by role (RAY_ROLES); the jobs' drivers are left out."""
    from argus_testbed.procs import descendants
    roots = [p.popen.pid for p in (ray._head, ray._worker) if p is not None and p.popen is not None]
    out: dict[str, list[int]] = {role: [] for role in RAY_ROLES}
    for root in roots:
        for pid in descendants(root):
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            for role, marks in RAY_ROLES.items():
                if any(m in cmd for m in marks):
                    out[role].append(pid)
                    break
    return out


def ray_dashboard_pids(ray: RayCluster) -> list[int]:
    """The Ray processes that serve the Jobs API: the head's dashboard (with its module
    subprocesses) and each node's agents (which also serve the log tails)."""
    found = ray_processes(ray)
    return found["dashboard"] + found["agents"]


def cpu_of(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            total += cpu_seconds(pid)
        except OSError:
            pass
    return total


def ray_jobs(dashboard_url: str) -> list[Any]:
    from ray.job_submission import JobSubmissionClient
    return JobSubmissionClient(dashboard_url).list_jobs()


def jobs_by_task(jobs: list[Any], ns: str) -> dict[str, list[Any]]:
    """Ray's jobs for the namespace's tasks, by task name, found by the submission id the
    operator gives them (argus-<namespace>-<name>-<uid8>[-a<attempt>]), not by the metadata it
    writes (which a bug could leave out): a job submitted without it still counts."""
    import re
    pattern = re.compile(rf"^argus-{re.escape(ns)}-(?P<name>.+)-[0-9a-f]{{8}}(?:-a\d+)?$")
    out: dict[str, list[Any]] = {}
    for j in jobs:
        m = pattern.match(j.submission_id or "")
        if m:
            out.setdefault(m.group("name"), []).append(j)
    return out


def short_id() -> str:
    return uuid.uuid4().hex[:6]


__all__ = [
    "ACTIVE", "Kube", "OperatorProcess", "REPO", "STANDIN", "TERMINAL", "TaskWatch", "Testbed", "cpu_seconds", "free_port",
    "jobs_by_task", "json", "loadavg", "log", "machine_info", "memory", "parallel", "percentile", "ppo_command", "ray_jobs",
    "scrape", "short_id", "summary", "task_body", "wait_metrics",
]


def load_module(path: Path) -> Any:
    """A Python file loaded as a module by its path (test data the benchmarks reuse)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there while the class is made
    spec.loader.exec_module(module)
    return module
