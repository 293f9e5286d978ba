"""A real two-node Ray cluster on this machine: a head that runs no work and one worker node.

- Head: `ray start --head --block --num-cpus=0 --num-gpus=0` with the dashboard (Jobs API) on
  127.0.0.1; it has no `worker_resource`, so a job submitted with
  `entrypoint_resources={worker_resource: 1}` never runs its driver there.
- Worker: `ray start --address=<gcs> --block --num-cpus=N --num-gpus=G
  --resources='{"<worker_resource>": 100}'`. The GPUs are only declared (Ray accepts that on a
  machine without any), which is enough for GPU accounting.

Every port is a free one picked here (GCS, dashboard, node manager, object manager, Ray client,
worker port ranges, dashboard agent HTTP/gRPC, metrics export, runtime-env agent, and the
dashboard/autoscaler metric ports), so the cluster never collides with a developer's own Ray.
The worker's agent ports must differ from the head's: otherwise jobs still run but
`get_job_logs` fails (HTTP 500, the log URL's port is -1).

Ray takes the machine's address as both nodes' IP (it maps a loopback --node-ip-address to it
anyway), and its servers listen on all interfaces; only the dashboard is bound to 127.0.0.1.

Each node is a `ray start --block` process in its own process group, and stopping kills those
groups (and the job drivers Ray starts in sessions of their own). `ray stop` is never used: it
would kill every Ray on the machine. Ray's temp dir is a short folder under /tmp (unix socket
paths are limited to 107 bytes); its logs are copied into the workdir when the cluster stops.

``quiet`` (the default) starts the nodes with QUIET_SETTINGS: Ray's own settings that cut
the CPU its nodes burn while they wait, on what no test looks at (the constant's comment
says which). The demo, whose clusters people may look at in Ray's dashboard, passes
quiet=False.

Two options make it a cluster as people run them:
- ``python``: the interpreter whose Ray runs the nodes (default: this one). An older Ray
  from another virtual environment (``hack/build-ray-env.sh``) makes a cluster of that
  version while the caller keeps its own Ray client; the jobs' login shell should then
  find that interpreter too (``private_tree.login_home(python_dir=...)``).
- ``auth_token``: the cluster requires it on its dashboard, Jobs API and other control-plane
  endpoints (``RAY_AUTH_MODE=token``, Ray >= 2.52; the token is put in a file of mode 0600
  under the temp dir and named by ``RAY_AUTH_TOKEN_PATH``). Without it the cluster is started
  with ``RAY_AUTH_MODE=disabled``, so a Ray whose default is token authentication still
  behaves as before. ``auth_headers`` is what a client must send.

The cluster is stateless (no GCS fault tolerance): a restarted head has forgotten every job,
and a plain Ray worker dies with its head. So `stop_head()` takes the whole cluster down (the
dashboard and Jobs API stop answering) and `start_head()` starts a head and a worker again on
the same ports, with new node ids. `restart_head()` is both.
"""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .controlplane import repo_root
from .ports import START_ATTEMPTS, free_port, free_port_range, lost_port_race
from .procs import ManagedProcess, tail

WORKER_PORT_RANGE = 60  # ports for Ray worker processes, per node
OLD_RAY_SCRIPT = Path("hack") / "build-ray-env.sh"
# Ray's own settings that cut what its nodes burn while they wait (docs/testing.md has the
# figures), kept to what no test looks at: Ray's metrics (nobody scrapes the testbed's), its
# event-loop statistics (a debugging aid), the dashboard agent's node report (psutil over
# the node's processes, for the dashboard's cluster view; Argus reads the GCS's node list
# and cluster_status instead) every minute rather than every 5 s, the agent's check that
# its raylet lives every second rather than every 0.4 s (it still exits 5 checks after the
# raylet; stopping a node kills it anyway), and the log monitor's search for new worker log
# files once a second rather than ten times (a new file is still read from its start: what
# workers print reaches their driver whole, up to a second later). Every name exists in
# Ray 2.41 (the oldest tested, test_old_ray.py) and 2.60 (the .venv's); Ray ignores the
# names it does not know.
QUIET_SETTINGS = {
    "RAY_enable_metrics_collection": "0",
    "RAY_event_stats": "0",
    "REPORTER_UPDATE_INTERVAL_MS": "60000",
    "RAY_DASHBOARD_AGENT_CHECK_PARENT_INTERVAL_S": "1",
    "RAY_LOG_MONITOR_MANY_FILES_THRESHOLD": "0",
    "LOG_NAME_UPDATE_INTERVAL_S": "1",
}
# What Ray prints when one of its fixed start-up deadlines passed (not a setting of ours).
_RAY_START_DEADLINES = ("it contains the error message from the dashboard",
                        "The node registration may not be complete yet before the timeout",
                        "while waiting for node to startup", "timed out during startup",
                        "Timed out waiting for file")


# Ray's deadlines are missed only under load (CI: 4 test workers on 2 cores, load average 20-27
# at peaks), so a start gets more tries than a control plane's, each after the load has eased.
RAY_START_ATTEMPTS = 5
CALMER_LOAD_PER_CPU = 3.0
CALMER_WAIT_SECONDS = 120.0


def _passed_a_start_deadline(log: str) -> bool:
    """Whether a failed start's log says one of Ray's fixed start-up deadlines passed."""
    return any(marker in log for marker in _RAY_START_DEADLINES)


def _wait_for_a_calmer_machine() -> None:
    """Before another try at a start that missed one of Ray's fixed deadlines (the raylet
    gives its dashboard agent 15 s to write its ports, an import of several seconds of CPU):
    wait until the 1-minute load average is under CALMER_LOAD_PER_CPU a CPU, at most
    CALMER_WAIT_SECONDS. Outside the start lock, so other workers' starts go on meanwhile."""
    deadline = time.monotonic() + CALMER_WAIT_SECONDS
    limit = CALMER_LOAD_PER_CPU * (os.cpu_count() or 1)
    time.sleep(2.0)
    while os.getloadavg()[0] > limit and time.monotonic() < deadline:
        time.sleep(2.0)


@contextlib.contextmanager
def _machine_lock(name: str) -> Iterator[None]:
    """An exclusive lock shared by every process on this machine (a file in the temp dir)."""
    with open(Path(tempfile.gettempdir()) / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def older_ray_python(version: str | None = None, timeout: float | None = 900) -> Path:
    """The python of the virtual environment with an older Ray (``hack/build-ray-env.sh``:
    returns at once when cached, else builds it from PyPI, about half a minute; its progress
    goes to this process's stderr, its last stdout line is the python)."""
    script = repo_root() / OLD_RAY_SCRIPT
    proc = subprocess.run(["bash", str(script), *([version] if version else [])], stdout=subprocess.PIPE, stderr=None,
                          text=True, timeout=timeout, cwd=script.parent.parent)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{script} failed with exit code {proc.returncode}; stdout: {proc.stdout[-2000:]!r}")
    python = Path(lines[-1].strip())
    if not os.access(python, os.X_OK):
        raise RuntimeError(f"{script} printed {python}, which is no executable python")
    return python


@dataclass(frozen=True)
class NodePorts:
    node_manager: int = field(default_factory=free_port)
    object_manager: int = field(default_factory=free_port)
    dashboard_agent_listen: int = field(default_factory=free_port)
    dashboard_agent_grpc: int = field(default_factory=free_port)
    metrics_export: int = field(default_factory=free_port)
    runtime_env_agent: int = field(default_factory=free_port)
    worker_ports: tuple[int, int] = field(default_factory=lambda: free_port_range(WORKER_PORT_RANGE))

    def args(self) -> list[str]:
        return [
            f"--node-manager-port={self.node_manager}",
            f"--object-manager-port={self.object_manager}",
            f"--dashboard-agent-listen-port={self.dashboard_agent_listen}",
            f"--dashboard-agent-grpc-port={self.dashboard_agent_grpc}",
            f"--metrics-export-port={self.metrics_export}",
            f"--runtime-env-agent-port={self.runtime_env_agent}",
            f"--min-worker-port={self.worker_ports[0]}",
            f"--max-worker-port={self.worker_ports[1]}",
        ]


@dataclass(frozen=True)
class HeadPorts(NodePorts):
    gcs: int = field(default_factory=free_port)
    dashboard: int = field(default_factory=free_port)
    ray_client_server: int = field(default_factory=free_port)
    dashboard_metrics: int = field(default_factory=free_port)
    autoscaler_metrics: int = field(default_factory=free_port)

    def args(self) -> list[str]:
        return [
            f"--port={self.gcs}",
            f"--dashboard-port={self.dashboard}",
            f"--ray-client-server-port={self.ray_client_server}",
            *super().args(),
        ]


class PortTaken(RuntimeError):
    """A port of ours answered, but not in HTTP: another process's server (a Ray core
    worker's gRPC server of another cluster binds whatever port the kernel gives it) took it
    between our probe and Ray's bind. The start is tried again on fresh ports."""


def _http_get(url: str, timeout: float = 3.0, headers: Mapping[str, str] | None = None) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=dict(headers or {})), timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except http.client.RemoteDisconnected:
        raise  # an OSError too: a server of ours closing while it starts; the caller waits on
    except http.client.BadStatusLine as e:
        raise PortTaken(f"{url} answered {str(e)[:40]!r}, not HTTP: another process holds the port") from e


class RayCluster:
    """A head node plus one worker node. See the module docstring.

    Attributes: dashboard_url, gcs_address, head_node_id, worker_node_ids, temp_dir, workdir,
    worker_resource, python, auth_token, auth_headers, ray_version (the dashboard's),
    start_seconds (last start-to-ready time).
    """

    def __init__(
        self,
        workdir: Path,
        *,
        worker_gpus: int = 4,
        worker_cpus: int = 2,
        worker_resource: str = "worker_node",
        worker_resource_amount: int = 100,
        extra_env: Mapping[str, str] | None = None,
        extra_path: Iterable[str | os.PathLike[str]] = (),
        object_store_bytes: int = 128 * 1024 * 1024,
        extra_workers: Iterable[int] = (),
        python: str | os.PathLike[str] | None = None,
        auth_token: str | None = None,
        quiet: bool = True,
    ) -> None:
        self.workdir = Path(workdir).resolve()
        # Not resolved: a virtual environment's python is a symlink to the base interpreter.
        self.python = Path(os.path.abspath(python)) if python else Path(sys.executable)
        self.auth_token = auth_token
        self.quiet = quiet
        self.worker_gpus = worker_gpus
        self.worker_cpus = worker_cpus
        self.worker_resource = worker_resource
        self.worker_resource_amount = worker_resource_amount
        self.extra_env = dict(extra_env or {})
        self.extra_path = [str(Path(p).resolve()) for p in extra_path]
        self.object_store_bytes = object_store_bytes
        self.head_ports = HeadPorts()
        self.worker_node_ports = NodePorts()
        # More worker nodes, each with its own GPU count (declared) and ports.
        self.extra_worker_gpus = list(extra_workers)
        self.extra_node_ports = [NodePorts() for _ in self.extra_worker_gpus]
        self.extra_temp_dirs = [Path(tempfile.mkdtemp(prefix="argus-rw-", dir="/tmp")) for _ in self.extra_worker_gpus]
        self.dashboard_url = f"http://127.0.0.1:{self.head_ports.dashboard}"
        self.gcs_address = f"127.0.0.1:{self.head_ports.gcs}"
        # Short on purpose: Ray puts unix sockets under it (107-byte limit on sun_path).
        self.temp_dir = Path(tempfile.mkdtemp(prefix="argus-ray-", dir="/tmp"))
        self.head_node_id: str | None = None
        self.worker_node_ids: list[str] = []
        self.other_node_ids: list[str] = []  # alive non-head nodes without the worker resource (amount 0)
        self.start_seconds: float | None = None
        self.ray_version: str | None = None  # as the dashboard reports it, once started
        self._socket_flags: bool | None = None
        self._head: ManagedProcess | None = None
        self._worker: ManagedProcess | None = None
        self._extra: list[ManagedProcess] = []

    # ---- lifecycle

    @classmethod
    def start(
        cls,
        workdir: Path,
        *,
        worker_gpus: int = 4,
        worker_cpus: int = 2,
        worker_resource: str = "worker_node",
        worker_resource_amount: int = 100,
        extra_env: Mapping[str, str] | None = None,
        extra_path: Iterable[str | os.PathLike[str]] = (),
        object_store_bytes: int = 128 * 1024 * 1024,
        python: str | os.PathLike[str] | None = None,
        auth_token: str | None = None,
        timeout: float = 120,
        extra_workers: Iterable[int] = (),
        quiet: bool = True,
    ) -> RayCluster:
        """Start the head and the worker, and wait until the Jobs API answers and the worker
        has joined (its raylet and dashboard agent healthy)."""
        for attempt in range(1, RAY_START_ATTEMPTS + 1):
            rc = cls(
                workdir, worker_gpus=worker_gpus, worker_cpus=worker_cpus, worker_resource=worker_resource,
                worker_resource_amount=worker_resource_amount, extra_env=extra_env, extra_path=extra_path,
                object_store_bytes=object_store_bytes, extra_workers=extra_workers, python=python, auth_token=auth_token,
                quiet=quiet,
            )
            rc.workdir.mkdir(parents=True, exist_ok=True)
            try:
                rc.start_head(timeout=timeout)
                return rc
            except BaseException as exc:
                log = rc.log_tail(80)
                rc.stop()
                # A port probed free and taken before Ray bound it: again, on fresh ports. One
                # of Ray's own fixed start-up deadlines (15 s for the dashboard agent's ports,
                # 20 s for the dashboard, 30 s for a raylet to register) or ours passed on a
                # loaded machine (parallel test workers): again once the load has eased.
                race = isinstance(exc, PortTaken) or lost_port_race(log)
                slow = not race and (isinstance(exc, TimeoutError) or _passed_a_start_deadline(log))
                if not isinstance(exc, (RuntimeError, TimeoutError)) or not (
                        (race and attempt < START_ATTEMPTS) or (slow and attempt < RAY_START_ATTEMPTS)):
                    raise
                if slow:
                    _wait_for_a_calmer_machine()
        raise AssertionError("unreachable")

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        for k in ("DASHBOARD_METRIC_PORT", "AUTOSCALER_METRIC_PORT", "CUDA_VISIBLE_DEVICES"):
            env.pop(k, None)
        path = [*self.extra_path, str(self.python.parent), env.get("PATH", os.defpath)]
        tmp = self.temp_dir / "tmp"  # so Ray's own temp files (pymp-*) go away with the cluster
        tmp.mkdir(exist_ok=True)
        env.update(
            PATH=os.pathsep.join(path),
            TMPDIR=str(tmp),
            RAY_USAGE_STATS_ENABLED="0",
            DASHBOARD_METRIC_PORT=str(self.head_ports.dashboard_metrics),
            AUTOSCALER_METRIC_PORT=str(self.head_ports.autoscaler_metrics),
            PYTHONUNBUFFERED="1",
            RAY_AUTH_MODE="disabled",  # unknown to a Ray older than 2.52, which ignores it
        )
        if self.quiet:
            env.update(QUIET_SETTINGS)
        if self.auth_token is not None:
            token_file = self.temp_dir / "auth_token"
            fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(self.auth_token)
            env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token_file))
        env.update(self.extra_env)
        return env

    @property
    def auth_headers(self) -> dict[str, str]:
        """The headers a client sends to this cluster ({} without token authentication)."""
        return {"Authorization": f"Bearer {self.auth_token}"} if self.auth_token is not None else {}

    def _ray(self) -> list[str]:
        ray_script = self.python.parent / "ray"
        if ray_script.is_file():
            return [str(self.python), str(ray_script)]
        return [str(self.python), "-m", "ray.scripts.scripts"]

    def _worker_socket_args(self, name: str = "worker") -> list[str]:
        """A worker's own socket names where this Ray takes them: an older Ray (2.41 does)
        names the sockets alike for every node of a session, so the worker's plasma store
        fails to bind the head's; newer ones name them per node and dropped the flags."""
        if self._socket_flags is None:
            probe = ("import pathlib, importlib.util as u; "
                     "p = pathlib.Path(u.find_spec('ray').submodule_search_locations[0]) / 'scripts' / 'scripts.py'; "
                     "print('--plasma-store-socket-name' in p.read_text())")
            out = subprocess.run([str(self.python), "-c", probe], capture_output=True, text=True, timeout=60, check=True)
            self._socket_flags = out.stdout.strip() == "True"
        if not self._socket_flags:
            return []
        sockets = [self.temp_dir / f"{name}_plasma_store", self.temp_dir / f"{name}_raylet"]
        for stale in sockets:  # left by a worker killed before a restart: it would fail to bind
            stale.unlink(missing_ok=True)
        return [f"--plasma-store-socket-name={sockets[0]}", f"--raylet-socket-name={sockets[1]}"]

    def _common_args(self) -> list[str]:
        return [
            "--block",
            f"--object-store-memory={self.object_store_bytes}",
            "--disable-usage-stats",
            "--log-style=record",
            "--log-color=false",
        ]

    def start_head(self, timeout: float = 120) -> None:
        """Start (again) the head and the worker on the cluster's ports; wait until ready.
        One Ray cluster starts at a time on this machine (other test workers wait): a start
        is a burst of Python imports, and Ray holds its nodes to fixed deadlines (30 s for a
        raylet to register, 20 s for the dashboard) that several bursts at once on 2 cores
        miss."""
        if self.running:
            raise RuntimeError("the Ray cluster is already running")
        with _machine_lock("argus-testbed-ray-start"):
            self._start_head(timeout)

    def _start_head(self, timeout: float) -> None:
        t0 = time.monotonic()
        deadline = t0 + timeout
        env = self._env()
        head_argv = [
            *self._ray(), "start", "--head",
            "--num-cpus=0", "--num-gpus=0",
            "--dashboard-host=127.0.0.1",
            "--include-dashboard=true",
            f"--temp-dir={self.temp_dir}",
            *self.head_ports.args(),
            *self._common_args(),
        ]
        self._head = ManagedProcess("ray-head", head_argv, self.workdir / "ray-head.log", env=env, cwd=self.workdir)
        self._head.start()
        try:
            # The workers join once the head has come up whole (its dashboard answers): a
            # worker's `ray start` gives the GCS 30 s to list its node, and a GCS still busy
            # with the head's own start on a loaded machine missed that (CI, load 10-12).
            # Quiet, the start takes as long either way (about 10 s here).
            self._wait(self._jobs_api_up, deadline, f"the Jobs API at {self.dashboard_url}")
            self._start_workers(env)
            self._wait(self._worker_agent_up, deadline, "the worker's raylet and dashboard agent")
            self._wait(self._read_node_ids, deadline, "the head and the worker in the node list")
        except BaseException:
            self._stop_nodes()
            raise
        self.start_seconds = time.monotonic() - t0

    def _start_workers(self, env: dict[str, str]) -> None:
        worker_argv = [
            *self._ray(), "start",
            f"--address={self.gcs_address}",
            f"--num-cpus={self.worker_cpus}", f"--num-gpus={self.worker_gpus}",
            # Amount 0: a worker without the worker resource (Argus never places a driver there).
            *([f"--resources={json.dumps({self.worker_resource: self.worker_resource_amount})}"] if self.worker_resource_amount else []),
            *self._worker_socket_args(),
            *self.worker_node_ports.args(),
            *self._common_args(),
        ]
        self._worker = ManagedProcess("ray-worker", worker_argv, self.workdir / "ray-worker.log", env=env, cwd=self.workdir)
        self._worker.start()
        for i, (gpus, ports) in enumerate(zip(self.extra_worker_gpus, self.extra_node_ports, strict=True), start=2):
            # Several raylets on one machine: each needs a temp dir of its own (its sockets).
            argv = [*self._ray(), "start", f"--address={self.gcs_address}", f"--num-cpus={self.worker_cpus}", f"--num-gpus={gpus}",
                    f"--resources={json.dumps({self.worker_resource: self.worker_resource_amount})}", *ports.args(),
                    *self._worker_socket_args(f"worker{i}"),
                    f"--temp-dir={self.extra_temp_dirs[i - 2]}", *self._common_args()]
            extra = ManagedProcess(f"ray-worker-{i}", argv, self.workdir / f"ray-worker-{i}.log", env=env, cwd=self.workdir)
            extra.start()
            self._extra.append(extra)

    def _wait(self, ok: Callable[[], bool], deadline: float, what: str) -> None:
        while True:
            for p in (self._head, self._worker, *self._extra):
                if p is not None and p.popen is not None and not p.running:
                    raise RuntimeError(f"{p.name} exited with {p.returncode()} while waiting for {what}:\n{self.log_tail(40)}")
            try:
                if ok():
                    return
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}:\n{self.log_tail(40)}")
            time.sleep(0.2)

    def _jobs_api_up(self) -> bool:
        status, body = _http_get(f"{self.dashboard_url}/api/version", headers=self.auth_headers)
        if status != 200:
            return False
        self.ray_version = json.loads(body).get("ray_version")
        status, _ = _http_get(f"{self.dashboard_url}/api/jobs/", headers=self.auth_headers)
        return status == 200

    def _worker_agent_up(self) -> bool:
        for ports in (self.worker_node_ports, *self.extra_node_ports):
            status, body = _http_get(f"http://127.0.0.1:{ports.dashboard_agent_listen}/api/local_raylet_healthz", headers=self.auth_headers)
            if status != 200 or b"success" not in body:
                return False
        return True

    def nodes(self) -> list[dict[str, Any]]:
        """Ray's node list (state API, via the dashboard): dicts with node_id, state,
        is_head_node, resources_total, ..."""
        status, body = _http_get(f"{self.dashboard_url}/api/v0/nodes?limit=1000&detail=true", timeout=10, headers=self.auth_headers)
        if status != 200:
            raise OSError(f"GET /api/v0/nodes answered {status}: {body[:300]!r}")
        data = json.loads(body)
        result: Any = data.get("data", {}).get("result", {})
        return list(result.get("result", []) if isinstance(result, dict) else result)

    def _read_node_ids(self) -> bool:
        alive = [n for n in self.nodes() if n.get("state") == "ALIVE"]
        heads = [n["node_id"] for n in alive if n.get("is_head_node")]
        others = [n for n in alive if not n.get("is_head_node")]
        workers = [n["node_id"] for n in others if self.worker_resource in (n.get("resources_total") or {})]
        if len(heads) != 1 or len(others) != 1 + len(self.extra_worker_gpus):
            return False
        self.head_node_id, self.worker_node_ids = heads[0], workers
        self.other_node_ids = [n["node_id"] for n in others if n["node_id"] not in workers]
        return True

    def _stop_nodes(self) -> None:
        # Ray is stateless here, so no need to be gentle: `ray start --block` and the GCS take
        # 10 s and more to honour SIGTERM, so they get SIGKILL after a second.
        procs = [p for p in (*self._extra, self._worker, self._head) if p is not None]
        threads = [threading.Thread(target=p.stop, kwargs={"grace": 1.0}) for p in procs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self._worker = self._head = None
        self._extra = []

    def stop_head(self) -> None:
        """Take the head down, and with it the worker (a plain Ray worker dies with its head).
        The dashboard and the Jobs API stop answering until start_head()."""
        self._stop_nodes()
        self.head_node_id, self.worker_node_ids = None, []

    def restart_head(self, down_for: float = 0.0, timeout: float = 120) -> None:
        """stop_head(), wait `down_for` seconds, start_head(): same dashboard URL and ports,
        new node ids, and no memory of earlier jobs."""
        self.stop_head()
        if down_for > 0:
            time.sleep(down_for)
        for attempt in range(1, RAY_START_ATTEMPTS + 1):
            try:
                self.start_head(timeout=timeout)
                return
            except (RuntimeError, TimeoutError):
                # One of Ray's own fixed start-up deadlines passed on a loaded machine (as in
                # start()): again, on the same ports, since the dashboard's URL must stay.
                if attempt == RAY_START_ATTEMPTS or not _passed_a_start_deadline(self.log_tail(80)):
                    raise
                self.stop_head()
                _wait_for_a_calmer_machine()

    def stop(self) -> None:
        """Stop both nodes, keep Ray's logs (copied to workdir/ray-logs) and delete the temp dir."""
        self._stop_nodes()
        if self.temp_dir.exists():
            dest = self.workdir / "ray-logs"
            for session in sorted(self.temp_dir.glob("session_2*")):
                try:
                    shutil.copytree(session / "logs", dest / session.name, dirs_exist_ok=True)
                except OSError:
                    pass
            shutil.rmtree(self.temp_dir, ignore_errors=True)
        for extra in self.extra_temp_dirs:
            shutil.rmtree(extra, ignore_errors=True)

    @property
    def running(self) -> bool:
        return bool(self._head and self._head.running and self._worker and self._worker.running and all(p.running for p in self._extra))

    # ---- diagnostics

    def ray_logs_dir(self) -> Path | None:
        latest = self.temp_dir / "session_latest" / "logs"
        if latest.is_dir():
            return latest
        sessions = sorted((self.workdir / "ray-logs").glob("session_*"))
        return sessions[-1] if sessions else None

    def log_tail(self, n: int = 50) -> str:
        parts = []
        for name in ("ray-head", "ray-worker", *(f"ray-worker-{i}" for i in range(2, 2 + len(self.extra_worker_gpus)))):
            parts.append(f"----- {name} ({self.workdir / (name + '.log')}) -----")
            parts.append(tail(self.workdir / f"{name}.log", n))
        logs = self.ray_logs_dir()
        if logs is not None:
            picks = [logs / "gcs_server.err", logs / "dashboard.err", logs / "dashboard.log"]
            picks += sorted(logs.glob("raylet*.err")) + sorted(logs.glob("raylet*.out"))
            drivers = sorted(logs.glob("job-driver-*.log"), key=lambda p: p.stat().st_mtime)
            picks += drivers[-2:]
            for p in picks:
                if p.is_file() and p.stat().st_size > 0:
                    parts.append(f"----- {p} -----")
                    parts.append(tail(p, n if p.suffix != ".out" else min(n, 20)))
        return "\n".join(parts)

    def __repr__(self) -> str:
        return f"RayCluster(dashboard_url={self.dashboard_url!r}, gcs_address={self.gcs_address!r}, running={self.running})"

    def __enter__(self) -> RayCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
