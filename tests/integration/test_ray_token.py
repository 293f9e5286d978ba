"""Token authentication (issue 15) against a real Ray cluster that requires a token
(``RAY_AUTH_MODE=token``, Ray >= 2.52): without the token the operator shows a clear
``RayAuthFailed`` and submits nothing; with it a task runs to Succeeded; a token file fixed
while the operator runs counts; ``argus logs`` works with the token and fails in one line
without it. The token never reaches the operator's log, a task's status or an Event.

Uses its own Ray cluster (one that requires a token)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from argus_testbed import RayCluster
from argus_testbed.harness import advanced_task, apply_text, get_task, ppo_command, ray_jobs_for, wait_for, wait_phase

pytestmark = pytest.mark.integration

TOKEN = secrets.token_hex(16)
WRONG = secrets.token_hex(16)


@pytest.fixture(scope="module")
def token_ray(tmp_path_factory: pytest.TempPathFactory, ray_cluster_options: dict) -> RayCluster:
    rc = RayCluster.start(Path(tmp_path_factory.mktemp("ray-token")), auth_token=TOKEN, **ray_cluster_options)
    yield rc
    rc.stop()


def token_file(tmp_path: Path, token: str) -> Path:
    path = tmp_path / "ray-token"
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path


def reachable(task: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in (task.get("status") or {}).get("conditions") or [] if c["type"] == "RayReachable"), {})


def argus_logs(cp: Any, ns: str, name: str, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "ARGUS_RAY_TOKEN"))}
    return subprocess.run([sys.executable, "-m", "argus.cli", "logs", name, "-n", ns, "--kubeconfig", str(cp.kubeconfig), "--direct-ray", *extra],
                          capture_output=True, text=True, timeout=60, env={**clean, **(env or {})})


def assert_token_nowhere(cp: Any, ns: str, logs: list[Path]) -> None:
    """Neither token in the operators' logs, the namespace's tasks (status included) or its Events."""
    tasks = cp.kubectl("get", "argustasks", "-n", ns, "-o", "json").stdout
    events = cp.kubectl("get", "events", "-n", ns, "-o", "json").stdout
    assert json.loads(tasks)["items"] and json.loads(events)["items"]  # something was looked at
    for where, text in [("tasks", tasks), ("events", events)] + [(str(p), p.read_text(errors="replace")) for p in logs]:
        assert TOKEN not in text and WRONG not in text, f"a token appears in {where}"


def test_without_the_token_nothing_is_submitted_and_with_it_the_task_runs(control_plane, token_ray, user_namespace, run_operator, tmp_path):
    ns = user_namespace("alice")
    apply_text(control_plane, ns, advanced_task("guarded", ppo_command(steps=3)))
    first = run_operator([ns], ray_address=token_ray.dashboard_url)
    refused = wait_for(lambda: reachable(t := get_task(control_plane, ns, "guarded")).get("reason") == "RayAuthFailed" and t, 60,
                       "RayReachable=False/RayAuthFailed", on_timeout=first.log_tail)
    status = refused["status"]
    assert (status["phase"], status["reason"]) == ("Queued", "RayAuthFailed"), status
    assert reachable(refused)["status"] == "False"
    assert "HTTP 401" in reachable(refused)["message"] and "check the Ray token" in reachable(refused)["message"]
    assert "check the Ray token" in status["message"]
    wait_for(lambda: "refused the operator's credentials" in first.log_path.read_text(), 30, "the refusal in the operator's log")
    # The operator was refused (seen above): Ray has no job for the namespace, and the task
    # holds no finalizer (it never came near a submission).
    assert ray_jobs_for(token_ray.dashboard_url, ns, headers=token_ray.auth_headers) == []
    assert not get_task(control_plane, ns, "guarded")["metadata"].get("finalizers")
    first.stop()

    second = run_operator([ns], ray_address=token_ray.dashboard_url, extra_args=["--ray-token-file", str(token_file(tmp_path, TOKEN))])
    done = wait_phase(control_plane, ns, "guarded", ("Succeeded", "Failed"), timeout=120, op=second)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert reachable(done)["status"] == "True"
    assert done["status"]["rayJob"]["driverNodeId"] in token_ray.worker_node_ids
    assert [j.submission_id for j in ray_jobs_for(token_ray.dashboard_url, ns, headers=token_ray.auth_headers)] == \
        [done["status"]["rayJob"]["submissionId"]]

    # argus logs: with the token file, with Ray's own variables, and without any token: one
    # line, no traceback. (ARGUS_RAY_TOKEN_FILE is the flag's default: tests/unit/test_ray_token_settings.py.)
    (tmp_path / "cli").mkdir()
    tokens = token_file(tmp_path / "cli", TOKEN)
    for extra, env in ((["--ray-token-file", str(tokens)], None), ([], {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(tokens)})):
        logs = argus_logs(control_plane, ns, "guarded", *extra, env=env)
        assert logs.returncode == 0, (extra, env, logs.stderr)
        assert "Total training steps: 3" in logs.stdout and TOKEN not in logs.stdout + logs.stderr
    followed = argus_logs(control_plane, ns, "guarded", "-f", "--ray-token-file", str(tokens))
    assert followed.returncode == 0 and "Total training steps: 3" in followed.stdout, followed.stderr
    without = argus_logs(control_plane, ns, "guarded")
    assert without.returncode == 1 and "Traceback" not in without.stderr and len(without.stderr.splitlines()) == 1, without.stderr
    assert without.stderr == (f"argus logs: the Ray dashboard at {token_ray.dashboard_url} requires a token (HTTP 401); none was sent: "
                               "pass --ray-token-file FILE (or set ARGUS_RAY_TOKEN_FILE); the log is also in the job folder: "
                               f"{done['status']['logFile']['userPath']}\n")
    wrong = argus_logs(control_plane, ns, "guarded", "--ray-token-file", str(token_file(tmp_path, WRONG)))
    assert wrong.returncode == 1 and len(wrong.stderr.splitlines()) == 1 and "(HTTP 403)" in wrong.stderr, wrong.stderr
    followed_without = argus_logs(control_plane, ns, "guarded", "-f")
    assert followed_without.returncode == 1 and "requires a token (HTTP 401)" in followed_without.stderr \
        and "Traceback" not in followed_without.stderr, followed_without.stderr
    assert_token_nowhere(control_plane, ns, [first.log_path, second.log_path])


def test_a_wrong_token_is_refused_and_a_fixed_file_counts_without_a_restart(control_plane, token_ray, user_namespace, run_operator, tmp_path):
    ns = user_namespace("alice")
    tokens = token_file(tmp_path, WRONG)
    op = run_operator([ns], ray_address=token_ray.dashboard_url, extra_args=["--ray-token-file", str(tokens)])
    apply_text(control_plane, ns, advanced_task("rotated", ppo_command(steps=3)))
    refused = wait_for(lambda: reachable(t := get_task(control_plane, ns, "rotated")).get("reason") == "RayAuthFailed" and t, 60,
                       "RayReachable=False/RayAuthFailed", on_timeout=op.log_tail)
    assert "HTTP 403" in reachable(refused)["message"] and refused["status"]["phase"] == "Queued"
    assert ray_jobs_for(token_ray.dashboard_url, ns, headers=token_ray.auth_headers) == []
    # The Secret is fixed (the file's content changes, as a mounted Secret's does): the
    # operator reads the file again after each refusal.
    token_file(tmp_path, TOKEN)
    done = wait_phase(control_plane, ns, "rotated", ("Succeeded", "Failed"), timeout=120, op=op)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert reachable(done)["status"] == "True"
    assert_token_nowhere(control_plane, ns, [op.log_path])


def uninstall_hook(*values: str) -> dict[str, Any]:
    """The chart's pre-delete Job, as helm renders it."""
    import yaml  # noqa: PLC0415

    from argus_testbed import find_binaries  # noqa: PLC0415
    from argus_testbed.harness import REPO  # noqa: PLC0415
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    out = subprocess.run([str(find_binaries() / "helm"), "template", "argus", str(REPO / "charts" / "argus"), "--namespace", "argus-system",
                          "--kube-version", "1.34.4", "--set", "uninstall.releaseFinalizers=true", *values],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    (job,) = [d for d in yaml.safe_load_all(out.stdout) if d and d["kind"] == "Job"]
    return job


def test_the_uninstall_hook_stops_jobs_on_a_token_protected_ray(control_plane, token_ray, user_namespace, run_operator, tmp_path):
    """The chart's uninstall hook with operator.rayToken: it mounts the operator's Secret and
    passes the file, and --release-finalizers sends the token. Without it Ray answers 401, the
    finalizer stays and `helm uninstall` fails (issue 24)."""
    ns = user_namespace("alice")
    tokens = token_file(tmp_path, TOKEN)
    op = run_operator([ns], ray_address=token_ray.dashboard_url, extra_args=["--ray-token-file", str(tokens)])
    apply_text(control_plane, ns, advanced_task("long", ppo_command(steps=5000)))
    sid = wait_phase(control_plane, ns, "long", "Running", timeout=90, op=op)["status"]["rayJob"]["submissionId"]
    op.stop()  # the operator is gone, as after an uninstall

    job = uninstall_hook("--set", "operator.rayToken.secretName=ray-auth", "--set", f"operator.watchNamespaces={{{ns}}}")
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert {"name": "ray-token", "mountPath": "/etc/argus/ray-token", "readOnly": True} in container["volumeMounts"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "ray-token"]
    assert volume["secret"] == {"secretName": "ray-auth", "defaultMode": 0o440, "items": [{"key": "auth_token", "path": "token"}]}
    assert "--ray-token-file=/etc/argus/ray-token/token" in container["args"]
    assert "ray-token" not in json.dumps(uninstall_hook()["spec"])  # no Secret named: no token, no mount

    def run_hook(args: list[str]) -> subprocess.CompletedProcess[str]:
        # The hook's own arguments; the mounted file and the Service address are this test's.
        argv = [a.replace("/etc/argus/ray-token/token", str(tokens)) for a in args if not a.startswith("--ray-address")]
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "ARGUS_RAY"))}
        return subprocess.run([sys.executable, "-m", "argus", *argv, f"--ray-address={token_ray.dashboard_url}",
                               "--kubeconfig", str(control_plane.kubeconfig)], capture_output=True, text=True, timeout=300, env=clean)

    # What the hook did before: no token, Ray refuses, the finalizer stays, the uninstall fails.
    tokenless = run_hook([a for a in container["args"] if not a.startswith("--ray-token-file")])
    assert tokenless.returncode == 1 and "401" in tokenless.stdout and "its finalizer stays" in tokenless.stdout, tokenless.stdout
    assert "argus.io/stop-ray-job" in get_task(control_plane, ns, "long")["metadata"]["finalizers"]

    out = run_hook(container["args"])
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{ns}/long: Ray job {sid} stopped or gone; finalizer removed" in out.stdout, out.stdout
    (job_info,) = [j for j in ray_jobs_for(token_ray.dashboard_url, ns, headers=token_ray.auth_headers) if j.submission_id == sid]
    assert job_info.status.value == "STOPPED"
    assert not get_task(control_plane, ns, "long")["metadata"].get("finalizers")
    assert TOKEN not in out.stdout + out.stderr + tokenless.stdout + tokenless.stderr
    control_plane.kubectl("delete", "argustask", "long", "-n", ns, "--timeout=20s")  # nothing waits for an operator
