"""Integration fixtures for the operator: a /private tree, Ray nodes whose login shell
finds the test's Python and the verl stand-in, onboarded namespaces, and a factory that
runs the operator as a real subprocess watching only the test's namespaces."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from argus_testbed import ServiceNetwork
from argus_testbed.harness import REPO, STANDIN, OperatorProcess, make_private_tree
from argus_testbed.private_tree import login_home


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
    control_plane.kubectl("apply", "--server-side", "-f", str(REPO / "crds" / "argus.io_argustasks.yaml"))
    control_plane.wait_established("argustasks.argus.io")


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


@pytest.fixture
def run_operator(control_plane: Any, ray_cluster: Any, argus_root: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., OperatorProcess]]:
    started: list[OperatorProcess] = []

    def start(namespaces: list[str], **kwargs: Any) -> OperatorProcess:
        kwargs.setdefault("ray_address", ray_cluster.dashboard_url)
        kwargs.setdefault("kubeconfig", control_plane.kubeconfig)  # or another identity's (tests/integration/test_chart.py)
        op = OperatorProcess.start(tmp_path / "operator", root=argus_root,
                                   namespaces=namespaces, name=f"operator-{len(started)}", **kwargs)
        started.append(op)
        return op

    yield start
    failed = getattr(request.node, "rep_call", None)
    for op in started:
        op.stop()
        if failed is not None and failed.failed:
            print(f"\n--- {op.log_path.name} (tail) ---\n{op.log_tail(80)}")
