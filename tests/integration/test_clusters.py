"""Several Ray clusters (issue 23) on the real API server and two real Ray clusters on
loopback: ``a`` (the session's cluster: one worker with 4 declared GPUs, no token, most
preferred) and ``b`` (a worker with 2 GPUs, token authentication, its token in a Secret in
the operator's namespace, closed to namespaces labelled ``argus.io/team=a-only``).

What is checked: a task goes to ``b`` when ``a`` is full, and its job is in ``b``'s Ray; a
namespace that may use only ``a`` is never placed on ``b``; both ArgusClusters report
themselves (reachable, Ray version, workers, GPUs, running); deleting ``b`` with a task on
it waits for the task (its Deleting condition names it; nothing new goes there) and
completes once it ends; with ``b`` down, a task pinned to it waits (RayUnreachable) while
``a`` keeps admitting and running. The ArgusClusters are removed at the end: the control
plane is shared with later modules, whose operators would otherwise place tasks on them."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from argus_testbed import RayCluster
from argus_testbed.apiget import get_object
from argus_testbed.controlplane import KubectlError
from argus_testbed.harness import REPO, STANDIN, advanced_task, apply_text, get_task, make_private_tree, ppo_command, ray_jobs_for, wait_for, wait_phase
from argus_testbed.verl import standin_snapshot

pytestmark = pytest.mark.integration

TOKEN = secrets.token_hex(16)


@pytest.fixture(scope="module")
def ray_b(tmp_path_factory: pytest.TempPathFactory, ray_cluster_options: dict) -> Iterator[RayCluster]:
    rc = RayCluster.start(Path(tmp_path_factory.mktemp("ray-b")), worker_gpus=2, auth_token=TOKEN, **ray_cluster_options)
    yield rc
    rc.stop()


def cluster_object(name: str, address: str, **spec: Any) -> str:
    return json.dumps({"apiVersion": "argus.io/v1alpha1", "kind": "ArgusCluster", "metadata": {"name": name},
                       "spec": {"address": address, **spec}})


@pytest.fixture(scope="module")
def fleet(control_plane: Any, crd_installed: None, ray_cluster: RayCluster, ray_b: RayCluster) -> Iterator[dict[str, str]]:
    """The two ArgusClusters (names unique to this run) and the operator's namespace with b's token."""
    suffix = uuid.uuid4().hex[:6]
    names = {"a": f"a-{suffix}", "b": f"b-{suffix}", "ns": f"argus-system-{suffix}"}
    cp = control_plane
    cp.kubectl("create", "namespace", names["ns"])
    cp.kubectl("create", "secret", "generic", "ray-b-token", "-n", names["ns"], f"--from-literal=token={TOKEN}")
    apply_text(cp, "default", cluster_object(names["a"], ray_cluster.dashboard_url, preference=10))
    apply_text(cp, "default", cluster_object(
        names["b"], ray_b.dashboard_url, tokenSecret={"name": "ray-b-token"},
        namespaceSelector={"matchExpressions": [{"key": "argus.io/team", "operator": "NotIn", "values": ["a-only"]}]}))
    yield names
    for key in ("a", "b"):
        cp.kubectl("patch", "arguscluster", names[key], "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False)
        cp.kubectl("delete", "arguscluster", names[key], "--ignore-not-found", "--wait=false", check=False)


def arguscluster(cp: Any, name: str) -> dict[str, Any] | None:
    """The ArgusCluster as ``kubectl get -o json`` prints it, None when there is none; read
    directly (the wait_for loops poll it every 0.3 s, for up to 4 minutes: apiget.py)."""
    try:
        return get_object(cp, f"/apis/argus.io/v1alpha1/argusclusters/{name}", "arguscluster", name)
    except KubectlError as e:
        if "(NotFound)" in (e.stderr or ""):
            return None
        raise


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c["type"] == type_), {})


def long_task(name: str, gpus: int, **spec: Any) -> str:
    doc = json.loads(advanced_task(name, ppo_command(steps=100000, gpus=gpus), gpus=gpus))
    doc["spec"].update(spec)
    return json.dumps(doc)


def short_task(name: str, **spec: Any) -> str:
    doc = json.loads(advanced_task(name, ppo_command(steps=3)))
    doc["spec"].update(spec)
    return json.dumps(doc)


def cancel(cp: Any, ns: str, name: str) -> None:
    cp.kubectl("patch", "argustask", name, "-n", ns, "--type=merge", "-p", '{"spec":{"cancel":true}}')


def test_placement_across_two_clusters(control_plane, ray_cluster, ray_b, fleet, user_namespace, run_operator) -> None:
    cp = control_plane
    anyone, a_only = user_namespace("alice"), user_namespace("bob")
    cp.kubectl("label", "namespace", a_only, "argus.io/team=a-only")
    op = run_operator([anyone, a_only], extra_env={"POD_NAMESPACE": fleet["ns"]})
    a, b = fleet["a"], fleet["b"]
    # Both report in: reachable (b with its token from the Secret), their Ray and workers.
    for name, gpus in ((a, 4), (b, 2)):
        obj = wait_for(lambda n=name: (o := arguscluster(cp, n)) and condition(o, "RayReachable").get("status") == "True" and o, 60,
                       f"ArgusCluster {name} reachable", on_timeout=op.log_tail)
        assert obj["status"]["gpus"] == gpus and obj["status"]["workerNodes"] == 1 and obj["status"]["rayVersion"], obj["status"]

    apply_text(cp, anyone, long_task("big", 4))
    big = wait_phase(cp, anyone, "big", "Running", op=op)
    assert big["status"]["cluster"] == a and big["status"]["rayJob"]["dashboardUrl"] == ray_cluster.dashboard_url
    # a is full: the next task goes to b, and its job is in b's Ray (found with b's token).
    apply_text(cp, anyone, short_task("small"))
    small = wait_phase(cp, anyone, "small", "Succeeded", op=op)
    assert small["status"]["cluster"] == b and small["status"]["attempts"][0]["cluster"] == b
    assert [j.submission_id for j in ray_jobs_for(ray_b.dashboard_url, anyone, headers=ray_b.auth_headers)] == \
        [small["status"]["rayJob"]["submissionId"]]
    assert {j.submission_id for j in ray_jobs_for(ray_cluster.dashboard_url, anyone)} == {big["status"]["rayJob"]["submissionId"]}
    assert get_task(cp, anyone, "small")["metadata"]["annotations"]["argus.io/placement"] == f"1:{b}"

    # A namespace that may use only a waits for a, though b has room, and is never placed on b.
    apply_text(cp, a_only, short_task("mine"))
    waiting = wait_for(lambda: (t := get_task(cp, a_only, "mine")).get("status", {}).get("reason") == "Queued" and t, 30,
                       "mine waiting", on_timeout=op.log_tail)
    assert f"on cluster {a}" in waiting["status"]["message"], waiting["status"]
    counted = wait_for(lambda: (o := arguscluster(cp, a)) and (s := o.get("status") or {}).get("running") == 1 and s.get("queued") == 1
                       and o, 30, "a's running and queued counts")
    assert counted["status"]["freeGpus"] == 0, counted["status"]
    assert ray_jobs_for(ray_b.dashboard_url, a_only, headers=ray_b.auth_headers) == []
    cancel(cp, anyone, "big")
    mine = wait_phase(cp, a_only, "mine", "Succeeded", op=op)
    assert mine["status"]["cluster"] == a


def test_doctor_checks_an_argus_cluster_with_its_token(control_plane, ray_b, fleet, argus_root) -> None:
    """argus doctor --cluster: the ArgusCluster's address, and its token from its Secret."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "ARGUS_"))}
    proc = subprocess.run([sys.executable, "-m", "argus.cli", "doctor", "--cluster", fleet["b"], "--secrets-namespace", fleet["ns"],
                           "--kubeconfig", str(control_plane.kubeconfig), "--root", str(argus_root), "--verl-code-path", str(STANDIN),
                           "-o", "json"], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    worker = {r["check"]: r for r in report["checks"] if r["node"].startswith(ray_b.worker_node_ids[0][:12])}
    assert worker["probe"]["status"] == "ok" and worker["worker-resource"]["status"] == "ok", worker
    wrong = subprocess.run([sys.executable, "-m", "argus.cli", "doctor", "--cluster", fleet["b"], "--secrets-namespace", "nowhere",
                            "--kubeconfig", str(control_plane.kubeconfig), "--root", str(argus_root)],
                           capture_output=True, text=True, timeout=60, env=env)
    assert wrong.returncode == 1 and len(wrong.stderr.strip().splitlines()) == 1 and "Secret nowhere/ray-b-token" in wrong.stderr, wrong.stderr


def test_deleting_a_cluster_waits_for_its_tasks(control_plane, ray_b, fleet, user_namespace, run_operator) -> None:
    cp = control_plane
    ns = user_namespace("alice")
    op = run_operator([ns], extra_env={"POD_NAMESPACE": fleet["ns"]})
    b = fleet["b"]
    apply_text(cp, ns, long_task("onb", 1, cluster=b))
    wait_phase(cp, ns, "onb", "Running", op=op)
    wait_for(lambda: "argus.io/tasks-on-cluster" in ((arguscluster(cp, b) or {}).get("metadata") or {}).get("finalizers", []), 30,
             "b's finalizer while a task runs on it", on_timeout=op.log_tail)
    cp.kubectl("delete", "arguscluster", b, "--wait=false")
    deleting = wait_for(lambda: condition(o := arguscluster(cp, b), "Deleting").get("status") == "True" and o, 30,
                        "b's Deleting condition", on_timeout=op.log_tail)
    assert f"{ns}/onb" in condition(deleting, "Deleting")["message"]
    # Nothing new goes to a cluster being deleted: a task pinned to it waits (NoCluster).
    apply_text(cp, ns, short_task("late", cluster=b))
    late = wait_for(lambda: (t := get_task(cp, ns, "late")).get("status", {}).get("reason") == "NoCluster" and t, 30,
                    "late NoCluster", on_timeout=op.log_tail)
    assert "takes no new tasks" in late["status"]["message"]
    cancel(cp, ns, "onb")
    wait_phase(cp, ns, "onb", "Stopped", op=op)
    wait_for(lambda: arguscluster(cp, b) is None, 30, "b deleted once its task ended", on_timeout=op.log_tail)
    # Gone: the pinned task now names a cluster that does not exist.
    late = wait_for(lambda: "no Ray cluster it may use exists" in (get_task(cp, ns, "late").get("status") or {}).get("message", "")
                    and get_task(cp, ns, "late"), 30, "late waits for a cluster that exists")
    assert late["status"]["phase"] == "Queued"
    # Put b back for the next test.
    apply_text(cp, "default", cluster_object(
        b, ray_b.dashboard_url, tokenSecret={"name": "ray-b-token"},
        namespaceSelector={"matchExpressions": [{"key": "argus.io/team", "operator": "NotIn", "values": ["a-only"]}]}))
    wait_phase(cp, ns, "late", "Succeeded", op=op)


def test_the_uninstall_hook_stops_a_job_on_its_own_cluster(control_plane, ray_cluster, ray_b, fleet, user_namespace, run_operator) -> None:
    """argus-operator --release-finalizers stops each job where it runs: b's, with b's token."""
    cp = control_plane
    ns = user_namespace("alice")
    op = run_operator([ns], extra_env={"POD_NAMESPACE": fleet["ns"]})
    apply_text(cp, ns, long_task("onb", 1, cluster=fleet["b"]))
    sid = wait_phase(cp, ns, "onb", "Running", op=op)["status"]["rayJob"]["submissionId"]
    op.stop()  # the operator is gone, as after an uninstall
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "ARGUS_"))}, "POD_NAMESPACE": fleet["ns"]}
    out = subprocess.run([sys.executable, "-m", "argus", "--release-finalizers", "--namespace", ns, "--ray-address", ray_cluster.dashboard_url,
                          "--kubeconfig", str(cp.kubeconfig)], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{ns}/onb: Ray job {sid} stopped or gone; finalizer removed" in out.stdout, out.stdout
    (job,) = [j for j in ray_jobs_for(ray_b.dashboard_url, ns, headers=ray_b.auth_headers) if j.submission_id == sid]
    assert job.status.value == "STOPPED"
    assert TOKEN not in out.stdout + out.stderr


def reference_cluster(name: str, namespace: str) -> dict[str, Any]:
    """deploy/kuberay/raycluster.yaml's RayCluster (it passes KubeRay's schema: test_kuberay.py), renamed."""
    import yaml
    doc = next(d for d in yaml.safe_load_all((REPO / "deploy" / "kuberay" / "raycluster.yaml").read_text()) if d and d["kind"] == "RayCluster")
    doc["metadata"] = {"name": name, "namespace": namespace}
    return doc


def test_a_kuberay_raycluster_reference_and_the_doctor_verdict(control_plane, ray_b, fleet, kuberay_crd, user_namespace, run_operator,
                                                              argus_root) -> None:
    """An ArgusCluster with spec.rayClusterRef: the operator reads the RayCluster (KubeRay's own
    CRD; no KubeRay controller runs here, so the test writes the status KubeRay would) and its
    head Service, and reaches Ray on the Service's port named dashboard. Nothing resolves
    cluster DNS names on this machine, so --kuberay-dashboard-url is http://127.0.0.1:{port}
    and the Service's dashboard port is b's dashboard port on loopback: what is checked is that
    the address comes from the Service. The operator's argus doctor runs on every ArgusCluster
    and each one's verdict is in its status, the same as `argus doctor --cluster` says."""
    cp = control_plane
    suffix = uuid.uuid4().hex[:6]
    ray_ns, name, team = f"ray-{suffix}", f"k-{suffix}", f"kuberay-{suffix}"
    port = int(ray_b.dashboard_url.rsplit(":", 1)[1])
    cp.kubectl("create", "namespace", ray_ns)
    apply_text(cp, ray_ns, json.dumps(reference_cluster(name, ray_ns)))
    cp.kubectl("patch", "raycluster", name, "-n", ray_ns, "--subresource=status", "--type=merge",
               "-p", json.dumps({"status": {"state": "ready", "head": {"serviceName": f"{name}-head-svc"}}}))
    apply_text(cp, ray_ns, json.dumps({"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"{name}-head-svc", "namespace": ray_ns},
                                       "spec": {"ports": [{"name": "client", "port": 10001},
                                                          {"name": "dashboard", "port": port, "targetPort": 8265}]}}))
    apply_text(cp, "default", json.dumps({"apiVersion": "argus.io/v1alpha1", "kind": "ArgusCluster", "metadata": {"name": name}, "spec": {
        "rayClusterRef": {"name": name, "namespace": ray_ns}, "tokenSecret": {"name": "ray-b-token"},
        "namespaceSelector": {"matchLabels": {"argus.io/team": team}}}}))
    ns = user_namespace("alice")
    cp.kubectl("label", "namespace", ns, f"argus.io/team={team}")
    local = "http://127.0.0.1:{port}"
    try:
        op = run_operator([ns], extra_env={"POD_NAMESPACE": fleet["ns"]}, extra_args=["--kuberay-dashboard-url", local], doctor_interval=3600)
        reached = wait_for(lambda: (o := arguscluster(cp, name)) and condition(o, "RayReachable").get("status") == "True" and o, 60,
                           f"ArgusCluster {name} reachable through its RayCluster", on_timeout=op.log_tail)
        assert reached["status"]["address"] == ray_b.dashboard_url and reached["status"]["gpus"] == 2, reached["status"]
        apply_text(cp, ns, short_task("viaref", cluster=name))
        done = wait_phase(cp, ns, "viaref", "Succeeded", op=op)
        assert (done["status"]["cluster"], done["status"]["rayJob"]["dashboardUrl"]) == (name, ray_b.dashboard_url)
        assert done["status"]["rayJob"]["submissionId"] in {j.submission_id for j in ray_jobs_for(ray_b.dashboard_url, ns, headers=ray_b.auth_headers)}

        # argus doctor, run by the operator at start on each ArgusCluster: its verdict in the status.
        for cluster in (name, fleet["a"]):
            checked = wait_for(lambda c=cluster: (o := arguscluster(cp, c)) and (o.get("status") or {}).get("doctor") and o, 180,
                               f"{cluster}'s doctor verdict", on_timeout=op.log_tail)
            assert checked["status"]["doctor"]["verdict"] in ("Passed", "Warnings", "Failed") and checked["status"]["doctor"]["checkedAt"]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "ARGUS_"))}
        cli = subprocess.run([sys.executable, "-m", "argus.cli", "doctor", "--cluster", name, "--secrets-namespace", fleet["ns"],
                              "--kuberay-dashboard-url", local, "--kubeconfig", str(cp.kubeconfig), "--root", str(argus_root),
                              "--verl-code-path", str(STANDIN), "-o", "json"], capture_output=True, text=True, timeout=300, env=env)
        assert cli.returncode in (0, 1), cli.stderr
        report = json.loads(cli.stdout)
        verdict = arguscluster(cp, name)["status"]["doctor"]
        assert (verdict["verdict"] != "Failed") == report["ok"] and verdict["failed"] == report["summary"]["fail"], (verdict, report)
        worker = {r["check"]: r for r in report["checks"] if r["node"].startswith(ray_b.worker_node_ids[0][:12])}
        assert worker["probe"]["status"] == "ok", worker

        # The head Service goes (the RayCluster being torn down): the cluster says so, within the re-read period.
        cp.kubectl("delete", "service", f"{name}-head-svc", "-n", ray_ns)
        gone = wait_for(lambda: condition(o := arguscluster(cp, name), "RayReachable").get("reason") == "RayClusterRefUnresolved" and o, 60,
                        "the reference unresolved", on_timeout=op.log_tail)
        assert condition(gone, "RayReachable")["message"] == \
            f"spec.rayClusterRef: RayCluster {ray_ns}/{name}: its head Service {ray_ns}/{name}-head-svc does not exist (KubeRay makes it with the head)"
        assert "address" not in gone["status"]
        missing = subprocess.run([sys.executable, "-m", "argus.cli", "doctor", "--cluster", name, "--secrets-namespace", fleet["ns"],
                                  "--kubeconfig", str(cp.kubeconfig), "--root", str(argus_root)], capture_output=True, text=True, timeout=60, env=env)
        assert missing.returncode == 1 and len(missing.stderr.strip().splitlines()) == 1 and "does not exist" in missing.stderr, missing.stderr
    finally:
        cp.kubectl("patch", "arguscluster", name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False)
        cp.kubectl("delete", "arguscluster", name, "--ignore-not-found", "--wait=false", check=False)
        cp.kubectl("delete", "namespace", ray_ns, "--wait=false", check=False)


def test_progress_from_the_log_files_of_a_clusters_own_tree(control_plane, ray_b, fleet, user_namespace, run_operator,
                                                            tmp_path_factory) -> None:
    """--progress-source file with an ArgusCluster whose jobs use a shared tree of their own
    (spec.root, another folder on this machine: mounted for the operator at the same path):
    the job's folder and log are in that tree, and the operator reads its progress there."""
    cp = control_plane
    suffix = uuid.uuid4().hex[:6]
    name, team = f"f-{suffix}", f"files-{suffix}"
    tree = make_private_tree(tmp_path_factory.mktemp("private-f"))
    apply_text(cp, "default", json.dumps({"apiVersion": "argus.io/v1alpha1", "kind": "ArgusCluster", "metadata": {"name": name}, "spec": {
        "address": ray_b.dashboard_url, "tokenSecret": {"name": "ray-b-token"}, "root": str(tree),
        "namespaceSelector": {"matchLabels": {"argus.io/team": team}}}}))
    ns = user_namespace("alice")
    cp.kubectl("label", "namespace", ns, f"argus.io/team={team}")
    try:
        op = run_operator([ns], extra_env={"POD_NAMESPACE": fleet["ns"]}, extra_args=["--progress-source", "file"])
        apply_text(cp, ns, short_task("filed", cluster=name))
        done = wait_phase(cp, ns, "filed", "Succeeded", op=op)["status"]
        assert done["cluster"] == name and done["logFile"]["jobPath"].startswith(f"{tree}/users/alice/jobs/"), done
        assert Path(done["logFile"]["jobPath"]).is_file()
        assert done["progress"]["step"] == done["progress"]["totalSteps"] == 3, done["progress"]
        assert "is not mounted here" not in op.log_tail(400)
    finally:
        cp.kubectl("patch", "arguscluster", name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False)
        cp.kubectl("delete", "arguscluster", name, "--ignore-not-found", "--wait=false", check=False)


def test_the_api_server_holds_the_address_or_reference_rule(control_plane, crd_installed) -> None:
    """The CRD's CEL rule, run by the real API server: the examples pass (a server-side dry
    run), a spec with both an address and a rayClusterRef, or neither, is refused in the
    rule's own words."""
    cp = control_plane
    ok = cp.kubectl("apply", "--dry-run=server", "-f", str(REPO / "examples" / "clusters" / "argusclusters.yaml"), check=False)
    assert ok.returncode == 0 and "gpu-a" in ok.stdout and "gpu-b" in ok.stdout, ok.stderr
    both = {"address": "http://ray:8265", "rayClusterRef": {"name": "ray", "namespace": "ray"}}
    for spec in (both, {"maxRunning": 2}):
        doc = {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusCluster", "metadata": {"name": "bad"}, "spec": spec}
        out = cp.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(doc), check=False)
        assert out.returncode != 0 and "exactly one of address and rayClusterRef must be set" in out.stderr, out.stderr


def test_one_cluster_down_the_other_runs_on(control_plane, ray_cluster, ray_b, fleet, user_namespace, run_operator) -> None:
    cp = control_plane
    ns = user_namespace("alice")
    op = run_operator([ns], extra_env={"POD_NAMESPACE": fleet["ns"]})
    a, b = fleet["a"], fleet["b"]
    wait_for(lambda: condition(arguscluster(cp, b), "RayReachable").get("status") == "True", 60, "b reachable", on_timeout=op.log_tail)
    ray_b.stop()
    down = wait_for(lambda: condition(o := arguscluster(cp, b), "RayReachable").get("status") == "False" and o, 60,
                    "b unreachable", on_timeout=op.log_tail)
    assert condition(down, "RayReachable")["reason"] == "RayUnreachable"
    assert condition(arguscluster(cp, a), "RayReachable")["status"] == "True"
    apply_text(cp, ns, short_task("pinned", cluster=b))
    apply_text(cp, ns, short_task("free"))
    free = wait_phase(cp, ns, "free", "Succeeded", op=op)
    assert free["status"]["cluster"] == a
    pinned = get_task(cp, ns, "pinned")
    assert (pinned["status"]["phase"], pinned["status"]["reason"]) == ("Queued", "RayUnreachable"), pinned["status"]


def test_a_cluster_running_another_verl_fails_the_doctor(control_plane, ray_cluster, fleet, user_namespace, run_operator,
                                                         tmp_path: Path) -> None:
    """Verl versions per cluster: the operator composes with verl 0.9.1 by default (the
    stand-in snapshot of --verl-code-path) and has the other pinned release, 0.6.1, in its
    cache. An ArgusCluster whose snapshot is verl 0.6.1 passes the doctor's verl check, and a
    task for it is composed, checked and run with 0.6.1 (status.verl). An ArgusCluster whose
    snapshot is at a release Argus has no tree for (0.5.0) fails the operator's own argus
    doctor, and its status says which verl it runs and which Argus composes with
    (status.doctor, the VerlDrift condition); a task for it waits (VerlDrift) instead of
    reaching Ray and being refused by verl at start. Both clusters are the session's Ray."""
    cp = control_plane
    name = f"drift-{uuid.uuid4().hex[:6]}"
    older, odd = f"{name}-old", f"{name}-odd"
    old = standin_snapshot("0.6.1")
    unknown = tmp_path / "verl-0.5.0"
    shutil.copytree(old, unknown)
    (unknown / "verl" / "version" / "version").write_text("0.5.0\n")
    selector = {"matchLabels": {"argus.io/team": name}}
    # On the session's cluster (always up: an earlier test of this module takes b down).
    for cluster, snapshot in ((older, old), (odd, unknown)):
        apply_text(cp, "default", cluster_object(cluster, ray_cluster.dashboard_url, verlCodePath=str(snapshot), namespaceSelector=selector))
    ns = user_namespace("alice")
    try:
        op = run_operator([ns], extra_env={"POD_NAMESPACE": fleet["ns"]}, doctor_interval=3600)
        doctors = {c: wait_for(lambda c=c: (o := arguscluster(cp, c)) and (o.get("status") or {}).get("doctor"), 240,
                               f"{c}'s doctor verdict", on_timeout=op.log_tail) for c in (older, odd)}
        assert doctors[older]["verlVersions"] == ["0.6.1"] and doctors[older]["supportedVerl"] == ["0.9.1", "0.6.1"], doctors[older]
        assert "verl-snapshot" not in doctors[older]["message"], doctors[older]
        doctor = doctors[odd]
        assert doctor["verdict"] == "Failed" and doctor["failed"] >= 1, doctor
        assert f"{unknown}: verl 0.5.0, Argus composes with verl 0.9.1 or 0.6.1" in doctor["message"], doctor
        assert (doctor["verlVersions"], doctor["supportedVerl"]) == (["0.5.0"], ["0.9.1", "0.6.1"]), doctor
        drift = wait_for(lambda: condition(arguscluster(cp, odd), "VerlDrift") or None, 60, f"{odd}'s VerlDrift condition",
                         on_timeout=op.log_tail)
        assert (drift["status"], drift["reason"]) == ("True", "VerlDrift") and "runs verl 0.5.0" in drift["message"], drift
        matches = condition(arguscluster(cp, older), "VerlDrift")
        assert matches is not None and (matches["status"], matches["reason"]) == ("False", "VerlMatches"), matches
        # A task for the 0.6.1 cluster is composed with 0.6.1 and runs there; one for the
        # other waits, saying why, and never reaches its Ray.
        cp.kubectl("label", "namespace", ns, f"argus.io/team={name}")
        apply_text(cp, ns, short_task("runs", cluster=older))
        apply_text(cp, ns, short_task("held", cluster=odd))
        held = wait_for(lambda: (t := get_task(cp, ns, "held")) and (t.get("status") or {}).get("reason") == "VerlDrift" and t, 60,
                        "the task held by the drift", on_timeout=op.log_tail)["status"]
        assert held["phase"] == "Queued" and f"cluster {odd} runs verl 0.5.0" in held["message"], held
        assert "composed for verl 0.9.1" in held["message"], held
        done = wait_phase(cp, ns, "runs", "Succeeded", op=op)["status"]
        assert (done["cluster"], done["verl"]["version"]) == (older, "0.6.1"), done
        assert [j.submission_id for j in ray_jobs_for(ray_cluster.dashboard_url, ns)] == [done["rayJob"]["submissionId"]]
    finally:
        for cluster in (older, odd):
            cp.kubectl("patch", "arguscluster", cluster, "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False)
            cp.kubectl("delete", "arguscluster", cluster, "--ignore-not-found", "--wait=false", check=False)
