"""``argus doctor`` against real Ray clusters (issue 22): a healthy cluster passes (exit 0),
and each requirement a task meets at start fails on its own row, with its fix, when it is
not met: a worker without the worker resource, a login shell without python3 (a second
worker whose HOME's profile empties PATH), a missing verl snapshot and a home the worker's
uid cannot write in (a shared tree laid out wrongly). Probe jobs leave Ray's job history and
the homes as they found them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from argus_testbed import RayCluster
from argus_testbed.harness import make_private_tree, wait_for

pytestmark = pytest.mark.integration

VERL = "0.9.1"


def snapshot(root: Path, version: str | None = VERL) -> Path:
    """A verl source tree where Argus expects it (<root>/common/code/verl/verl_repo): the
    package and its version file, which is all the probe looks at."""
    repo = root / "common" / "code" / "verl" / "verl_repo"
    (repo / "verl" / "version").mkdir(parents=True, exist_ok=True)
    (repo / "verl" / "__init__.py").write_text("")
    if version:
        (repo / "verl" / "version" / "version").write_text(version + "\n")
    return repo


def doctor(address: str, root: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "ARGUS_"))}
    proc = subprocess.run([sys.executable, "-m", "argus.cli", "doctor", "--ray-address", address, "--root", str(root), "-o", "json", *extra],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def rows(report: dict[str, Any], node_id: str) -> dict[str, dict[str, str]]:
    return {r["check"]: r for r in report["checks"] if r["node"].startswith(node_id[:12])}


def probe_ids(address: str) -> set[str]:
    from ray.job_submission import JobSubmissionClient
    return {j.submission_id for j in JobSubmissionClient(address).list_jobs() if (j.submission_id or "").startswith("doctor-")}


# Probes already in the session's shared Ray cluster's history when this module starts: an
# operator that other tests run through the chart (its doctor on by default) and stop at
# once may be stopped while its probe runs. This module's own probes must all leave.
_OTHER_TESTS_PROBES: dict[str, set[str]] = {}


@pytest.fixture(scope="module", autouse=True)
def probes_of_other_tests(ray_cluster: RayCluster) -> None:
    _OTHER_TESTS_PROBES[ray_cluster.dashboard_url] = probe_ids(ray_cluster.dashboard_url)


def no_probe_left(address: str) -> None:
    other = _OTHER_TESTS_PROBES.get(address, set())
    # Removed as the operator removes jobs: checked again after Ray's job monitor could write one back.
    wait_for(lambda: not (probe_ids(address) - other), 20, "the probes to leave Ray's job history")
    from ray.job_submission import JobSubmissionClient
    assert not [j for j in JobSubmissionClient(address).list_jobs() if (j.submission_id or "").startswith("argus-doctor")]


@pytest.fixture(scope="module")
def healthy_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_private_tree(tmp_path_factory.mktemp("private-doctor"))
    snapshot(root)
    return root


def test_a_healthy_cluster_passes_and_leaves_nothing_behind(ray_cluster: RayCluster, healthy_root: Path) -> None:
    code, report, _ = doctor(ray_cluster.dashboard_url, healthy_root, "--expect-verl", VERL)
    assert code == 0 and report["ok"], report
    worker = rows(report, ray_cluster.worker_node_ids[0])
    for check in ("worker-resource", "probe", "python3", "verl-snapshot", "private-tree", "homes-writable", "hf-home"):
        assert worker[check]["status"] == "ok", worker[check]
    assert "worker_node=100" in worker["worker-resource"]["detail"]
    assert f"verl {VERL} (as expected)" in worker["verl-snapshot"]["detail"]
    assert "2 home(s)" in worker["homes-writable"]["detail"]
    # The testbed's worker declares 4 GPUs it does not have: nothing on the node shows them.
    assert worker["gpus"]["status"] == "warn" and "Ray counts 4 GPU(s)" in worker["gpus"]["detail"]
    cluster = rows(report, "cluster")
    assert cluster["ray-version"]["status"] == "ok" and ray_cluster.ray_version in cluster["ray-version"]["detail"]
    assert not rows(report, ray_cluster.head_node_id), "the head is not probed"
    no_probe_left(ray_cluster.dashboard_url)
    assert not list(healthy_root.glob("users/*/.argus-doctor-*")), "the scratch folders are removed"


def test_a_snapshot_of_another_verl_fails_when_a_version_is_expected(ray_cluster: RayCluster, healthy_root: Path) -> None:
    code, report, _ = doctor(ray_cluster.dashboard_url, healthy_root, "--expect-verl", "0.6.1")
    assert code == 1
    verl = rows(report, ray_cluster.worker_node_ids[0])["verl-snapshot"]
    assert verl["status"] == "fail" and "verl 0.9.1, Argus composes with verl 0.6.1" in verl["detail"] and verl["fix"]
    # Without --expect-verl the version is shown, not compared: tests/unit/test_doctor.py.


@pytest.fixture
def unwritable_home(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A tree without the verl snapshot whose home 'bob' the worker's uid cannot create a
    folder in: mode 0555, or, as root (whom modes do not stop), the immutable attribute."""
    root = make_private_tree(tmp_path / "private")
    home = root / "users" / "bob"
    if os.geteuid() == 0:
        made = subprocess.run(["chattr", "+i", str(home)], capture_output=True, text=True)
        undo = ["chattr", "-i", str(home)]
    else:
        home.chmod(0o555)
        made, undo = subprocess.CompletedProcess([], 0), ["chmod", "755", str(home)]
    try:
        (home / "probe-of-the-test").mkdir()
    except OSError:
        pass
    else:
        subprocess.run(undo, check=False)
        pytest.fail(f"could not make {home} unwritable here (chattr: {made.stderr.strip()})")
    try:
        yield root, home
    finally:
        subprocess.run(undo, check=False)


def test_a_missing_snapshot_and_an_unwritable_home_fail_with_their_fix(ray_cluster: RayCluster, unwritable_home: tuple[Path, Path]) -> None:
    root, _ = unwritable_home
    code, report, _ = doctor(ray_cluster.dashboard_url, root)
    assert code == 1 and not report["ok"]
    worker = rows(report, ray_cluster.worker_node_ids[0])
    assert worker["verl-snapshot"]["status"] == "fail"
    assert f"no verl snapshot at {root}/common/code/verl/verl_repo" in worker["verl-snapshot"]["detail"]
    assert worker["homes-writable"]["status"] == "fail"
    assert "1 of 2 home(s) not writable by uid" in worker["homes-writable"]["detail"] and "bob" in worker["homes-writable"]["detail"]
    assert f"under {root}/users" in worker["homes-writable"]["fix"]
    for check in ("python3", "private-tree", "hf-home"):
        assert worker[check]["status"] == "ok", worker[check]
    no_probe_left(ray_cluster.dashboard_url)


@pytest.fixture(scope="module")
def odd_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    """A head and a worker started without the worker resource, whose login profile leaves
    python3 off PATH (as an image without a profile.d entry does). (One worker: on one
    machine, Ray reads a job's log through the node's IP, which every testbed node shares, so
    the log of a job on a second worker with a temp dir of its own cannot be read back.)"""
    bare = tmp_path_factory.mktemp("bare-home")
    (bare / ".bash_profile").write_text("export PATH=/nonexistent-bin\n")
    rc = RayCluster.start(tmp_path_factory.mktemp("ray-odd"), worker_gpus=1, worker_resource_amount=0, extra_env={"HOME": str(bare)})
    yield rc
    rc.stop()


def test_a_worker_without_the_resource_or_python3_fails_on_its_own_rows(odd_cluster: RayCluster, healthy_root: Path) -> None:
    code, report, _ = doctor(odd_cluster.dashboard_url, healthy_root)
    assert code == 1
    assert rows(report, "cluster")["workers"]["status"] == "fail"  # no node a task could start on
    (odd_id,) = odd_cluster.other_node_ids
    odd = rows(report, odd_id)
    assert odd["worker-resource"]["status"] == "fail" and "no 'worker_node' resource" in odd["worker-resource"]["detail"]
    assert '--resources=\'{"worker_node": N}\'' in odd["worker-resource"]["fix"]
    assert odd["probe"]["status"] == "ok"  # pinned to the node by its id, it still ran there
    assert odd["python3"]["status"] == "fail" and "/nonexistent-bin" in odd["python3"]["detail"]
    assert "profile.d" in odd["python3"]["fix"]
    assert odd["verl-snapshot"]["status"] == "skip"
    no_probe_left(odd_cluster.dashboard_url)


def test_the_table_says_each_failure_with_its_fix(odd_cluster: RayCluster, healthy_root: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "ARGUS_"))}
    proc = subprocess.run([sys.executable, "-m", "argus.cli", "doctor", "--ray-address", odd_cluster.dashboard_url, "--root", str(healthy_root)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["NODE", "CHECK", "STATUS", "DETAIL"]
    fails = [i for i, line in enumerate(lines) if " FAIL " in line]
    assert [lines[i].split(" FAIL ")[0].split()[-1] for i in fails] == ["workers", "worker-resource", "python3"]
    assert all(lines[i + 1].strip().startswith("fix: ") for i in fails)
    assert lines[-1].startswith("3 failed,")


def test_the_operator_runs_the_doctor_at_start(control_plane: Any, ray_cluster: RayCluster, healthy_root: Path, kube_namespace: str,
                                                tmp_path: Path) -> None:
    """As the leader: the gauge per node and check, an Event on the leader Lease, its log."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    from argus_testbed.harness import OperatorProcess
    from argus_testbed.ports import free_port
    port = free_port()
    op = OperatorProcess.start(tmp_path / "operator", kubeconfig=control_plane.kubeconfig, ray_address=ray_cluster.dashboard_url,
                               root=healthy_root, namespaces=[kube_namespace], doctor_interval=3600,
                               extra_args=["--metrics-port", str(port), "--metrics-host", "127.0.0.1", "--leader-elect",
                                           "--leader-election-namespace", kube_namespace, "--leader-election-name", "argus-leader",
                                           "--verl-code-path", str(healthy_root / "common" / "code" / "verl" / "verl_repo")])
    try:
        def ready() -> dict[tuple[str, str], float] | None:
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            except OSError:
                return None
            found = {(s.labels["node"], s.labels["check"]): s.value for f in text_string_to_metric_families(text)
                     if f.name == "argus_cluster_ready" for s in f.samples}
            return found or None

        gauge = wait_for(ready, 120, "argus_cluster_ready", on_timeout=op.log_tail)
        worker = next(node for node, _ in gauge if node.startswith(ray_cluster.worker_node_ids[0][:12]))
        assert gauge[(worker, "python3")] == 1 and gauge[(worker, "homes-writable")] == 1 and gauge[("cluster", "ray-version")] == 1

        def event() -> dict[str, Any] | None:
            items = json.loads(control_plane.kubectl("get", "events", "-n", kube_namespace, "-o", "json").stdout)["items"]
            return next((e for e in items if e["involvedObject"]["kind"] == "Lease" and e["reason"] == "ClusterReady"), None)

        found = wait_for(event, 30, "the ClusterReady Event on the Lease", on_timeout=op.log_tail)
        assert found["involvedObject"]["name"] == "argus-leader" and "every check passed on 1 worker node(s)" in found["message"]
        assert "argus doctor: every check passed" in op.log_tail(400)
        no_probe_left(ray_cluster.dashboard_url)
    finally:
        op.stop()
