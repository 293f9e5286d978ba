"""Issue 16: the image's dependency set, without an image. The lock
(requirements/operator.txt: hashes required) and the operator's wheel go into
a new, empty virtual environment (hack/lock-install.sh), which is then pruned as the image
is (hack/prune-venv.sh with requirements/image-prune.txt: no Ray server binaries, jars or
Ray libraries, no pip). From that environment, against the real Ray cluster: the operator's
own Ray adapter reads the nodes (Ray's state API), submits a job, follows it to the end and
asks to stop it (Ray's JobSubmissionClient): `ray` without its [default] extras is enough
for the operator. And `argus-operator --help` starts."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from argus_testbed.harness import REPO

pytestmark = pytest.mark.integration

CLIENT = textwrap.dedent("""
    import asyncio, sys
    from argus.adapters.clock import SystemClock
    from argus.adapters.ray import RayJobsClient
    from argus.core.rayjobs import RayJobUnknown
    from argus.core.submission import SubmissionPlan

    async def main(address, sid):
        ray = RayJobsClient(address, monotonic=SystemClock().monotonic)
        nodes = await ray.nodes()
        print("nodes", len(nodes), sorted({k for n in nodes for k in n.resources_total if k == "worker_node"}))
        plan = SubmissionPlan(submission_id=sid, user="alice", command="echo locked-client-ok", entrypoint="echo locked-client-ok",
                              entrypoint_resources={}, runtime_env={}, metadata={"argus.io/test": "lock"}, job_dir="/tmp", gpus=0)
        print("submitted", await ray.submit(plan))
        for _ in range(600):
            job = await ray.job(sid)
            if job.status in ("SUCCEEDED", "FAILED", "STOPPED"):
                break
            await asyncio.sleep(0.1)
        print("status", job.status)
        for _ in range(100):  # the driver's output reaches Ray's log a moment after the job ends
            lines = (await ray.logs(sid)).splitlines()
            if "locked-client-ok" in lines:
                break
            await asyncio.sleep(0.1)
        print("logs", "locked-client-ok" if "locked-client-ok" in lines else repr(lines[-3:]))
        print("stop", await ray.stop(sid))
        try:
            await ray.job(sid + "-never")
        except RayJobUnknown:
            print("unknown ok")
        import ray as ray_module
        print("ray", ray_module.__version__)

    asyncio.run(main(sys.argv[1], sys.argv[2]))
""")


@pytest.fixture(scope="module")
def locked_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("locked") / "venv"
    out = subprocess.run(["bash", str(REPO / "hack" / "lock-install.sh"), str(folder)], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    print(out.stderr.strip().splitlines()[-1])  # the install time and size
    pruned = subprocess.run(["bash", str(REPO / "hack" / "prune-venv.sh"), str(folder)], capture_output=True, text=True, timeout=120)
    assert pruned.returncode == 0, pruned.stderr
    return folder


def test_the_locked_environment_holds_only_the_lock(locked_venv: Path) -> None:
    locked = {line.split("==")[0].strip().lower().replace("_", "-") for line in (REPO / "requirements" / "operator.txt").read_text().splitlines()
              if "==" in line and not line.startswith((" ", "#"))}
    out = subprocess.run([str(locked_venv / "bin" / "python"), "-c",
                          "import importlib.metadata as m; print('\\n'.join(d.metadata['Name'] for d in m.distributions()))"],
                         capture_output=True, text=True, check=True)
    installed = {n.strip().lower().replace("_", "-") for n in out.stdout.splitlines() if n.strip()}
    assert installed - {"argus-operator"} == locked  # pip and setuptools pruned, nothing unlocked
    assert not (locked_venv / "bin" / "pip").exists() or subprocess.run([str(locked_venv / "bin" / "pip"), "--version"],
                                                                         capture_output=True).returncode != 0
    help_ = subprocess.run([str(locked_venv / "bin" / "argus-operator"), "--help"], capture_output=True, text=True, timeout=60)
    assert help_.returncode == 0 and "--ray-address" in help_.stdout


def test_ray_without_extras_serves_the_operator(locked_venv: Path, ray_cluster: Any) -> None:
    sid = f"argus-locktest-{uuid.uuid4().hex[:8]}"
    out = subprocess.run([str(locked_venv / "bin" / "python"), "-c", CLIENT, ray_cluster.dashboard_url, sid],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert lines["nodes"].startswith("2 ") and "worker_node" in lines["nodes"], out.stdout
    assert lines["submitted"] == "True" and lines["status"] == "SUCCEEDED", out.stdout
    assert lines["logs"] == "locked-client-ok" and lines["stop"] == "False" and lines["unknown"] == "ok", out.stdout
    # Not the test environment's Ray (which has the dashboard extras): the locked one.
    locked_ray = next(line.split("==")[1].split()[0] for line in (REPO / "requirements" / "operator.txt").read_text().splitlines()
                      if line.startswith("ray=="))
    assert lines["ray"] == locked_ray
    assert sys.prefix != str(locked_venv)
