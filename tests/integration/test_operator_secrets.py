"""Issue 36 item 6 on the real API server and a real Ray cluster: a variable from a Secret
(``spec.env[].valueFrom.secretKeyRef``) reaches the job's environment and appears nowhere in
the task, its status, its Events or the operator's log; a missing Secret holds the task in
the queue until it is created; the run's link a tracker prints lands in
``status.progress.runUrl``. And what Ray itself shows of the value, said as it is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ray.job_submission import JobSubmissionClient

from argus_testbed.harness import advanced_task, apply_text, get_task, ppo_command, wait_for, wait_phase

pytestmark = pytest.mark.integration

VALUE = "itest-wandb-key-7f3c9a1e5b"  # stands for a W&B key: only its length may be printed
RUN_URL = "https://wandb.ai/alice/argus/runs/itest01"
# A reward function of alice's that says whether the variable is set and its length, never
# the value, and prints W&B's own "View run" line (the shape wandb 0.23 prints).
REWARD = f'''import os
_value = os.environ.get("WANDB_API_KEY")
print(f"env_reward: WANDB_API_KEY set={{_value is not None}} length={{len(_value or '')}}", flush=True)
print("wandb: \\U0001F680 View run at {RUN_URL}", flush=True)


def compute_score(data_source=None, solution_str="", ground_truth=None, extra_info=None, **kwargs):
    return 1.0 if ground_truth is not None and str(ground_truth) in str(solution_str) else 0.0
'''


def test_a_secrets_value_reaches_the_job_and_no_kubernetes_reader(control_plane, ray_cluster, user_namespace, run_operator, argus_root: Path):
    ns = user_namespace("alice")
    (argus_root / "users" / "alice" / "code" / "env_reward.py").write_text(REWARD)
    op = run_operator([ns])
    command = ppo_command(extra="custom_reward_function.path=$HOME/code/env_reward.py custom_reward_function.name=compute_score")
    manifest = json.loads(advanced_task("with-secret", command))
    manifest["spec"]["env"] = [{"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {"name": "wandb", "key": "api_key"}}}]
    apply_text(control_plane, ns, json.dumps(manifest))

    # No Secret yet: the task waits in the queue, saying which variable, Secret and key.
    waiting = wait_for(lambda: (t := get_task(control_plane, ns, "with-secret")).get("status", {}).get("reason") == "SecretMissing" and t,
                       60, "the task to wait for its Secret", on_timeout=op.log_tail)
    status = waiting["status"]
    assert status["phase"] == "Queued" and "WANDB_API_KEY" in status["message"]
    assert f"Secret {ns}/wandb does not exist" in status["message"] and "api_key" in status["message"]
    assert not [j for j in JobSubmissionClient(ray_cluster.dashboard_url).list_jobs() if (j.metadata or {}).get("argus.io/name") == "with-secret"]

    control_plane.kubectl("create", "secret", "generic", "wandb", "-n", ns, f"--from-literal=api_key={VALUE}")
    task = wait_phase(control_plane, ns, "with-secret", ("Succeeded", "Failed"), timeout=150, op=op)
    status = task["status"]
    assert status["phase"] == "Succeeded", status

    # The job's environment had it: the reward function, run by the job, printed its length.
    client = JobSubmissionClient(ray_cluster.dashboard_url)
    sid = status["rayJob"]["submissionId"]
    logs = client.get_job_logs(sid)
    assert f"env_reward: WANDB_API_KEY set=True length={len(VALUE)}" in logs
    assert VALUE not in logs
    # The tracker's link, from the job's log.
    assert wait_for(lambda: (get_task(control_plane, ns, "with-secret")["status"].get("progress") or {}).get("runUrl") == RUN_URL,
                    30, "status.progress.runUrl")

    # Nowhere in Kubernetes but the Secret: the task (spec and status), its Events, the operator's log.
    assert VALUE not in json.dumps(get_task(control_plane, ns, "with-secret"))
    assert VALUE not in control_plane.kubectl("get", "events", "-n", ns, "-o", "json").stdout
    assert VALUE not in control_plane.kubectl("describe", "argustask", "with-secret", "-n", ns).stdout
    assert VALUE not in op.log_path.read_text(errors="replace")

    # What Ray shows: the job's details (GET /api/jobs/<id>, `ray job status`, and each job of
    # `ray job list`) carry the runtime env, the value in env_vars included, to anyone who can
    # reach the dashboard (docs/security.md says so).
    assert client.get_job_info(sid).runtime_env["env_vars"]["WANDB_API_KEY"] == VALUE
    listed = [j for j in client.list_jobs() if j.submission_id == sid]
    assert listed and (listed[0].runtime_env or {}).get("env_vars", {}).get("WANDB_API_KEY") == VALUE
    # And Ray's own log files on the nodes (readable by the worker's uid, so by every job, and
    # through the dashboard's log API):
    ray_logs = [p for p in ray_cluster.temp_dir.rglob("*") if p.is_file() and p.suffix in (".log", ".out", ".err", ".txt")
                and VALUE in p.read_text(errors="replace")]
    # Ray's runtime env agent logs the runtime env it sets up, env_vars and their values (Ray
    # 2.60: runtime_env_agent.log, at INFO); no other log of Ray's has it.
    assert all(p.name.startswith("runtime_env_agent") for p in ray_logs), ray_logs
