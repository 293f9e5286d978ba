"""Shared pytest setup.

Markers: tests under tests/unit are marked `unit`, tests under tests/integration `integration`
(unless they carry one of those markers already), so `-m unit` / `-m "not integration"` work.

Session fixtures (started once per run on first use, always stopped at the end):
- `control_plane`: etcd + kube-apiserver (argus_testbed.ControlPlane). With ARGUS_TEST_KUBECONFIG
  set, an existing cluster is used instead (same .kubeconfig/.kubectl API; tests that need
  mint_user() or restart() are skipped there).
- `ray_cluster`: a head + one worker Ray cluster (argus_testbed.RayCluster). Its start options
  come from the session fixture `ray_cluster_options` (a dict of RayCluster.start keyword
  arguments, e.g. extra_path=[folder holding a stand-in torchrun]); override that fixture in
  a conftest.py to change them.
Function fixture:
- `kube_namespace`: a fresh namespace on the control plane (its name).

When a test that uses one of these fails, the tails of their logs are added to its report.
Each test item gets rep_setup / rep_call / rep_teardown attributes (its reports) for fixtures
that act on the outcome (e.g. `request.node.rep_call.failed`).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from argus_testbed import ControlPlane, ExternalCluster, KubeCluster, RayCluster

TESTS_DIR = Path(__file__).resolve().parent
LOG_TAIL_LINES = 60

# Testbeds started in this session, by fixture name, for the failure report.
_testbeds: dict[str, Any] = {}


# --------------------------------------------------------------------------- markers

def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("unit") or item.get_closest_marker("integration"):
            continue
        try:
            rel = Path(item.path).resolve().relative_to(TESTS_DIR)
        except ValueError:
            continue
        if rel.parts and rel.parts[0] == "unit":
            item.add_marker(pytest.mark.unit)
        elif rel.parts and rel.parts[0] == "integration":
            item.add_marker(pytest.mark.integration)


# --------------------------------------------------------------------------- failure report

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    report = yield
    # item.rep_setup / rep_call / rep_teardown, for fixtures that look at the outcome.
    setattr(item, f"rep_{report.when}", report)
    if report.failed:
        used = set(getattr(item, "fixturenames", ()))
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
def ray_cluster_options() -> dict[str, Any]:
    """Keyword arguments for RayCluster.start (override in a conftest.py to change them)."""
    return {}


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
