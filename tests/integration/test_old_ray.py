"""The old end of the supported Ray range (issue 15): the testbed's Ray cluster runs Ray
2.41.0 from a virtual environment of its own (hack/build-ray-env.sh, cached), while the
operator keeps its own, newer client (the ray of .venv). The main lifecycle runs against it:
submit, run on a worker, succeed (with its progress and argus logs), cancel, a head restart
-> lost, and the job history cleanup.

Why 2.41: it is the oldest Ray that verl accepts (``ray[default]>=2.41.0``), so no cluster
that runs verl is older. The jobs on that cluster run that environment's python too (its
login profile), as a worker image's would.

Marked ``old_ray`` (``-m old_ray`` runs it alone); CI runs it with the whole suite."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import ray

from argus_testbed import RayCluster
from argus_testbed.harness import STANDIN, advanced_task, apply_text, get_task, ppo_command, ray_jobs_for, wait_for, wait_phase
from argus_testbed.private_tree import login_home
from argus_testbed.raycluster import older_ray_python

pytestmark = [pytest.mark.integration, pytest.mark.old_ray, pytest.mark.slow]

OLD_RAY = "2.41.0"


@pytest.fixture(scope="module")
def old_ray(tmp_path_factory: pytest.TempPathFactory) -> RayCluster:
    python = older_ray_python(OLD_RAY)
    home = login_home(tmp_path_factory.mktemp("old-ray-home"), python_dir=python.parent)
    rc = RayCluster.start(Path(tmp_path_factory.mktemp("old-ray")), python=python, extra_path=[STANDIN / "bin"],
                          extra_env={"HOME": str(home), "VERL_STANDIN_STEP_SECONDS": "0.05"})
    yield rc
    rc.stop()


def argus_logs(cp, ns: str, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "argus.cli", "logs", name, "-n", ns, "--kubeconfig", str(cp.kubeconfig), "--direct-ray", *extra],
                          capture_output=True, text=True, timeout=60)


def test_the_cluster_is_the_old_ray_and_the_operator_keeps_its_own(old_ray):
    assert old_ray.ray_version == OLD_RAY
    assert ray.__version__ != OLD_RAY  # the client under test is the operator's own


def test_a_task_runs_on_a_worker_and_succeeds(control_plane, old_ray, user_namespace, run_operator, tmp_path):
    """Also with a token configured: Ray 2.41 has no token authentication, so the token is
    sent and ignored, and the operator says so (and which Ray the cluster runs) once."""
    ns = user_namespace("alice")
    token = tmp_path / "token"
    token.write_text("a-token-that-ray-2.41-ignores")
    op = run_operator([ns], ray_address=old_ray.dashboard_url, extra_args=["--progress-interval", "1", "--ray-token-file", str(token)])
    apply_text(control_plane, ns, advanced_task("old-ok", ppo_command(steps=20)))
    task = wait_phase(control_plane, ns, "old-ok", ("Succeeded", "Failed"), timeout=120, op=op)
    status = task["status"]
    assert status["phase"] == "Succeeded", status
    assert status["rayJob"]["driverNodeId"] in old_ray.worker_node_ids and status["rayJob"]["driverNodeId"] != old_ray.head_node_id
    assert {c["type"]: c["status"] for c in status["conditions"]}["RayReachable"] == "True"
    # The log stream (progress) and the log read (argus logs) work against the old Jobs API.
    final = wait_for(lambda: ((get_task(control_plane, ns, "old-ok")["status"].get("progress") or {}).get("step") == 20), 30,
                     "the final progress from the log stream", on_timeout=op.log_tail)
    assert final
    logs = argus_logs(control_plane, ns, "old-ok", "--tail", "3")
    assert logs.returncode == 0 and "Final validation metrics" in logs.stdout, logs.stderr
    assert len(logs.stdout.splitlines()) == 3
    said = wait_for(lambda: [ln for ln in op.log_path.read_text().splitlines() if "runs Ray" in ln], 30, "the cluster's version in the log")
    assert len(said) == 1 and f"runs Ray {OLD_RAY} (Argus is tested against Ray" in said[0], said
    assert "has no token authentication: the token is sent and ignored" in said[0]
    assert f"the operator's Ray client is {ray.__version__}" in said[0]
    log = op.log_path.read_text()
    assert "a-token-that-ray-2.41-ignores" not in log
    # Nothing failed with a traceback, and 2.41 reports GPU use per node (the queue's free
    # GPUs per worker; without it the operator would say so and count from the totals).
    assert "Traceback" not in log and "reports no GPU use per node" not in log


def test_cancel_stops_the_job(control_plane, old_ray, user_namespace, run_operator):
    ns = user_namespace("alice")
    op = run_operator([ns], ray_address=old_ray.dashboard_url)
    apply_text(control_plane, ns, advanced_task("old-cancel", ppo_command(steps=5000)))
    wait_phase(control_plane, ns, "old-cancel", "Running", timeout=60, op=op)
    control_plane.kubectl("patch", "argustask", "old-cancel", "-n", ns, "--type=merge", "-p", '{"spec":{"cancel":true}}')
    status = wait_phase(control_plane, ns, "old-cancel", ("Stopped", "Failed", "Succeeded"), timeout=60, op=op)["status"]
    assert (status["phase"], status["reason"]) == ("Stopped", "Cancelled"), status
    [job] = ray_jobs_for(old_ray.dashboard_url, ns)
    assert (job.submission_id, job.status.value) == (status["rayJob"]["submissionId"], "STOPPED")
    # Deleting the ended task removes its job from Ray's job history (Ray's delete_job).
    control_plane.kubectl("delete", "argustask", "old-cancel", "-n", ns, "--timeout=60s")
    wait_for(lambda: ray_jobs_for(old_ray.dashboard_url, ns) == [], 30, "the job to leave Ray's history", on_timeout=op.log_tail)


def test_a_head_restart_loses_the_running_job(control_plane, old_ray, user_namespace, run_operator):
    ns = user_namespace("alice")
    op = run_operator([ns], ray_address=old_ray.dashboard_url, extra_args=["--ray-grace", "120"])
    apply_text(control_plane, ns, advanced_task("old-lost", ppo_command(steps=5000)))
    wait_phase(control_plane, ns, "old-lost", "Running", timeout=60, op=op)
    old_ray.restart_head()
    assert old_ray.ray_version == OLD_RAY
    status = wait_phase(control_plane, ns, "old-lost", ("Failed", "Succeeded", "Stopped"), timeout=90, op=op)["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "RayJobLost"), status
    assert "does not resubmit" in status["message"]
    assert ray_jobs_for(old_ray.dashboard_url, ns) == []  # nothing resubmitted to the new head


def test_argus_doctor_pins_its_probe_by_the_nodes_ip_on_an_old_jobs_api(old_ray, tmp_path):
    """Ray 2.41's Jobs API has no entrypoint_label_selector (it refuses the field): argus
    doctor pins the probe by the node's node:<ip> resource instead, says so, and the probe runs
    through the login shell of the old cluster's worker."""
    from argus_testbed.harness import make_private_tree
    root = make_private_tree(tmp_path / "private")
    proc = subprocess.run([sys.executable, "-m", "argus.cli", "doctor", "--ray-address", old_ray.dashboard_url, "--root", str(root),
                           "--verl-code-path", str(STANDIN), "-o", "json"], capture_output=True, text=True, timeout=300)
    report = json.loads(proc.stdout)
    rows = {r["check"]: r for r in report["checks"] if r["node"].startswith(old_ray.worker_node_ids[0][:12])}
    assert rows["probe"]["status"] == "ok" and "pinned by node:" in rows["probe"]["detail"], rows["probe"]
    assert rows["python3"]["status"] == "ok" and str(older_ray_python(OLD_RAY).parent) in rows["python3"]["detail"]
    cluster = {r["check"]: r for r in report["checks"] if r["node"] == "cluster"}
    assert cluster["ray-version"]["status"] == "ok" and OLD_RAY in cluster["ray-version"]["detail"]
    from ray.job_submission import JobSubmissionClient
    client = JobSubmissionClient(old_ray.dashboard_url)
    wait_for(lambda: not [j for j in client.list_jobs() if (j.submission_id or "").startswith("doctor-")], 20, "the probe to leave the history")
