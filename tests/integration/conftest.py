"""Integration fixtures (they need the testbed, tests/testbed, installed: hack/setup.sh).

Session fixtures (started once per run on first use, always stopped at the end):
- `control_plane`: etcd + kube-apiserver (argus_testbed.ControlPlane). With ARGUS_TEST_KUBECONFIG
  set, an existing cluster is used instead (same .kubeconfig/.kubectl API; tests that need
  mint_user() or restart() are skipped there).
- `ray_cluster`: a head + one worker Ray cluster (argus_testbed.RayCluster). Its start options
  come from the session fixture `ray_cluster_options` (a dict of RayCluster.start keyword
  arguments, e.g. extra_path=[folder holding a stand-in torchrun]).
Function fixture:
- `kube_namespace`: a fresh namespace on the control plane (its name).

When a test that uses one of these fails, the tails of their logs are added to its report.
Each test item gets rep_setup / rep_call / rep_teardown attributes (its reports) for fixtures
that act on the outcome (e.g. `request.node.rep_call.failed`).

For the operator: a /private tree, Ray nodes whose login shell finds the test's Python and
the verl stand-in, onboarded namespaces, and a factory that runs the operator as a real
subprocess watching only the test's namespaces.

For the real-verl modules (test_real_verl*.py): `real_ray` (a Ray cluster of the verl
runtime's Ray, one logical GPU, verl's plugin hook on its nodes), `real_root` (a /private
tree with alice's home laid out for real verl) and `real_operator_in` (the operator on them,
in a new namespace of alice's)."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from argus_testbed import ControlPlane, ExternalCluster, KubeCluster, RayCluster, ServiceNetwork, realverl
from argus_testbed.harness import REPO, STANDIN, OperatorProcess, make_private_tree
from argus_testbed.private_tree import login_home

LOG_TAIL_LINES = 60

# Testbeds started in this session, by fixture name, for the failure report.
_testbeds: dict[str, Any] = {}


# --------------------------------------------------------------------------- failure report

_LAZY = pytest.StashKey[set[str]]()


def _used_lazily(item: pytest.Item) -> set[str]:
    """The testbeds a test asked for while it ran (request.getfixturevalue), which its
    fixturenames do not list."""
    return item.stash.setdefault(_LAZY, set())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    report = yield
    # item.rep_setup / rep_call / rep_teardown, for fixtures that look at the outcome.
    setattr(item, f"rep_{report.when}", report)
    if report.failed:
        used = set(getattr(item, "fixturenames", ())) | _used_lazily(item)
        for name, testbed in list(_testbeds.items()):
            if name not in used:
                continue
            try:
                text = testbed.log_tail(LOG_TAIL_LINES)
            except Exception as e:  # noqa: BLE001 - the report must not fail
                text = f"<log_tail failed: {e!r}>"
            report.sections.append((f"{name} log tail ({report.when})", text))
    return report


# --------------------------------------------------------------------------- control plane

class _ExternalClusterForTests(ExternalCluster):
    """ARGUS_TEST_KUBECONFIG: what needs the local control plane skips the test."""

    def mint_user(self, name: str, groups: Any = ()) -> Path:
        pytest.skip("mint_user() needs the local control plane (ARGUS_TEST_KUBECONFIG is set)")

    def restart(self, down_for: float = 0.0) -> None:
        pytest.skip("restart() needs the local control plane (ARGUS_TEST_KUBECONFIG is set)")


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    external = os.environ.get("ARGUS_TEST_KUBECONFIG")
    if external:
        cluster: KubeCluster = _ExternalClusterForTests(external)
    else:
        cluster = ControlPlane.start(tmp_path_factory.mktemp("control-plane"))
    _testbeds["control_plane"] = cluster
    try:
        yield cluster
    finally:
        _testbeds.pop("control_plane", None)
        cluster.stop()


# --------------------------------------------------------------------------- ray

@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory, ray_cluster_options: dict[str, Any]) -> Iterator[RayCluster]:
    cluster = RayCluster.start(tmp_path_factory.mktemp("ray"), **ray_cluster_options)
    _testbeds["ray_cluster"] = cluster
    try:
        yield cluster
    finally:
        _testbeds.pop("ray_cluster", None)
        cluster.stop()


# --------------------------------------------------------------------------- helpers

@pytest.fixture
def kube_namespace(control_plane: KubeCluster) -> Iterator[str]:
    """A new namespace for one test. Deleted afterwards without waiting (the test control
    plane has no namespace controller, so it stays Terminating there)."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    control_plane.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def service_network() -> Iterator[ServiceNetwork]:
    """The Services-for-the-API-server network (servicenet.py), for modules that start a
    control plane of their own with it (webhook, HA, log API)."""
    net = ServiceNetwork()
    yield net
    net.stop()


@pytest.fixture(scope="session")
def ray_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """HOME of the Ray nodes. Jobs run under ``bash -lc`` (a login shell resets PATH from
    /etc/profile), so, as a worker image would, the profile puts the training Python and
    the stand-in torchrun back on PATH."""
    return login_home(tmp_path_factory.mktemp("ray-home"))


@pytest.fixture(scope="session")
def ray_cluster_options(ray_home: Path) -> dict[str, Any]:
    return {"extra_path": [STANDIN / "bin"], "extra_env": {"HOME": str(ray_home), "VERL_STANDIN_STEP_SECONDS": "0.05"}}


@pytest.fixture(scope="session")
def argus_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_private_tree(tmp_path_factory.mktemp("private"))


@pytest.fixture(scope="session")
def crd_installed(control_plane: Any) -> None:
    control_plane.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
    control_plane.wait_established("argustasks.argus.io", "argusclusters.argus.io")


@pytest.fixture(scope="module")
def kuberay_crd(control_plane: Any) -> Path:
    """KubeRay's own RayCluster CRD at the pinned version (hack/kuberay-version.txt), fetched
    from its Go module through the module proxy (hack/fetch-kuberay-crd.sh, cached) and
    installed: RayClusters can then be made as KubeRay's users make them (no KubeRay
    controller runs here: a test writes their status as it would)."""
    proc = subprocess.run(["bash", str(REPO / "hack" / "fetch-kuberay-crd.sh")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    crd = Path(proc.stdout.strip().splitlines()[-1])
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crd))
    control_plane.wait_established("rayclusters.ray.io")
    return crd


@pytest.fixture
def user_namespace(control_plane: Any, crd_installed: None) -> Callable[..., str]:
    """Create a namespace onboarded for a user (label argus.io/user)."""
    def make(user: str | None = "alice", prefix: str = "t") -> str:
        ns = f"{prefix}-{uuid.uuid4().hex[:6]}"
        meta: dict[str, Any] = {"name": ns}
        if user is not None:
            meta["labels"] = {"argus.io/user": user}
        control_plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": meta}))
        return ns
    return make


def stop_operators(started: list[OperatorProcess], request: pytest.FixtureRequest, also: Callable[[], str] | None = None) -> None:
    """Stop the operators a test started; when the test failed, print each one's log tail
    (and ``also``'s text: another process's tail) into its report."""
    failed = getattr(request.node, "rep_call", None)
    for op in started:
        op.stop()
        if failed is not None and failed.failed:
            print(f"\n--- {op.log_path.name} (tail) ---\n{op.log_tail(80)}" + (f"\n{also()}" if also else ""))


@pytest.fixture
def run_operator(control_plane: Any, argus_root: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., OperatorProcess]]:
    """Start the operator as a subprocess on the test's namespaces; stopped after the test.
    Without ``ray_address`` it submits to the session's `ray_cluster`, started then (not
    before): a module whose operators all run on a Ray cluster of its own never pays the
    session cluster's start (20-28 s of CPU, docs/testing.md)."""
    started: list[OperatorProcess] = []

    def start(namespaces: list[str], **kwargs: Any) -> OperatorProcess:
        if "ray_address" not in kwargs:
            _used_lazily(request.node).add("ray_cluster")
            kwargs["ray_address"] = request.getfixturevalue("ray_cluster").dashboard_url
        kwargs.setdefault("kubeconfig", control_plane.kubeconfig)  # or another identity's (tests/integration/test_chart.py)
        op = OperatorProcess.start(tmp_path / "operator", root=argus_root,
                                   namespaces=namespaces, name=f"operator-{len(started)}", **kwargs)
        started.append(op)
        return op

    yield start
    stop_operators(started, request)


# The real-verl modules (test_real_verl*.py): a Ray cluster of the verl runtime's Ray and a
# /private tree with alice's home laid out for real verl.
@pytest.fixture(scope="module")
def real_ray(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    python = realverl.runtime()
    home = login_home(tmp_path_factory.mktemp("real-ray-home"), python_dir=python.parent, standin=False)
    # One logical GPU (the demo's cluster has realverl.WORKER_GPUS): two tasks cannot run side
    # by side (test_real_verl.py's SFT task preempts its GRPO task).
    cluster = RayCluster.start(tmp_path_factory.mktemp("real-ray"), python=python, worker_cpus=realverl.WORKER_CPUS,
                               worker_gpus=1, object_store_bytes=512 * 1024 * 1024,
                               extra_env={"HOME": str(home), **realverl.node_env()})
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def real_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_private_tree(tmp_path_factory.mktemp("real-private"), users=("alice",))
    realverl.lay_out_home(root / "users" / "alice")
    return root


@pytest.fixture
def real_operator_in(control_plane: Any, real_ray: RayCluster, real_root: Path, user_namespace: Any, tmp_path: Path,
                     request: pytest.FixtureRequest) -> Iterator[Callable[..., tuple[str, OperatorProcess]]]:
    """Start the operator on the real-verl Ray cluster, watching a new namespace of alice's
    (``prefix``), with the ``hf`` rollout the cluster's plugins register and ``extra_args``:
    its namespace and the process. Stopped after the test; on a failure, its log's tail and
    the Ray worker's in the report."""
    started: list[OperatorProcess] = []

    def start(prefix: str, *extra_args: str) -> tuple[str, OperatorProcess]:
        ns = user_namespace("alice", prefix=prefix)
        op = OperatorProcess.start(tmp_path / f"operator-{prefix}", kubeconfig=control_plane.kubeconfig, ray_address=real_ray.dashboard_url,
                                   root=real_root, namespaces=[ns], verl_code_path=realverl.snapshot(), poll_interval=1.0,
                                   extra_args=["--verl-plugin-rollout", "hf", "--progress-interval", "1", *extra_args])
        started.append(op)
        return ns, op

    yield start
    stop_operators(started, request, also=lambda: f"--- ray worker (tail) ---\n{real_ray.log_tail(40)}")
