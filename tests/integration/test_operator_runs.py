"""A training run's whole life (issue 13) on the real API server and a real Ray cluster:
durable logs in the job folder, progress in the status, suspend and resume from the newest
checkpoint, the backoff limit, and cleanup (TTL, Ray's job history). The trainer is the verl
stand-in (it checkpoints and resumes as verl does). A head restart's new attempt, which
resumes from the checkpoint as well, is test_operator_ray_outage.py's (that module restarts
a Ray of its own anyway; this one runs on the session's)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from argus.core.progress import verl_line
from argus_testbed.harness import (
    advanced_task,
    apply_text,
    forget_ray_job,
    get_task,
    logged_steps,
    ppo_command,
    ray_jobs_for,
    task_gone,
    task_with,
    wait_for,
    wait_phase,
)

pytestmark = pytest.mark.integration

FAST_PROGRESS = ["--progress-interval", "1"]


def argus_logs(cp, ns: str, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "argus.cli", "logs", name, "-n", ns, "--kubeconfig", str(cp.kubeconfig), "--direct-ray", *extra],
                          capture_output=True, text=True, timeout=60)


def test_the_log_outlives_ray_and_progress_shows_in_the_status(control_plane, ray_cluster, user_namespace, run_operator, argus_root):
    ns = user_namespace("alice")
    op = run_operator([ns], extra_args=FAST_PROGRESS)
    apply_text(control_plane, ns, advanced_task("logged", ppo_command(steps=60)))
    running = wait_for(lambda: (get_task(control_plane, ns, "logged").get("status") or {}).get("progress", {}).get("step"), 90,
                       "progress in the status while the task runs", on_timeout=op.log_tail)
    assert running >= 1
    table = control_plane.kubectl("get", "argustasks", "-n", ns).stdout
    assert "PROGRESS" in table.splitlines()[0] and re.search(r"\b\d+/60\b", table), table
    status = wait_phase(control_plane, ns, "logged", ("Succeeded", "Failed"), timeout=120, op=op)["status"]
    assert status["phase"] == "Succeeded", status
    # The job's last lines reach its log stream a moment after Ray reports the end.
    status = wait_for(lambda: (s := get_task(control_plane, ns, "logged")["status"])["progress"]["step"] == 60 and s, 30,
                      "the final progress", on_timeout=op.log_tail)
    progress = status["progress"]
    assert (progress["step"], progress["totalSteps"], progress["summary"], progress["percent"]) == (60, 60, "60/60", 100.0)
    assert "critic/score/mean" in progress["metrics"]
    # The log file: where the status says, as the user sees it and as the job sees it.
    job_dir = status["jobDir"]
    assert job_dir["userPath"].startswith("$HOME/jobs/") and job_dir["jobPath"].startswith(str(argus_root / "users" / "alice" / "jobs"))
    assert status["logFile"] == {"userPath": job_dir["userPath"] + "/attempt-1.log", "jobPath": job_dir["jobPath"] + "/attempt-1.log"}
    text = Path(status["logFile"]["jobPath"]).read_text()
    assert "Total training steps: 60" in text and logged_steps(text) == list(range(1, 61))
    # Ray's own log says the same; once Ray forgets the job (its history trimmed here), the
    # CLI reads the file.
    from ray.job_submission import JobSubmissionClient
    sid = status["rayJob"]["submissionId"]
    assert logged_steps(JobSubmissionClient(ray_cluster.dashboard_url).get_job_logs(sid)) == list(range(1, 61))
    forget_ray_job(ray_cluster.dashboard_url, sid)
    out = argus_logs(control_plane, ns, "logged", "--tail", "1")
    assert out.returncode == 0, out.stderr
    assert f"Ray no longer has job {sid}" in out.stderr and job_dir["userPath"] + "/attempt-1.log" in out.stderr
    assert verl_line(out.stdout.strip()).startswith("Final validation metrics")


def argus_cli(control_plane, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "argus.cli", *args, "--kubeconfig", str(control_plane.kubeconfig)],
                          capture_output=True, text=True, timeout=60)


def test_suspend_stops_the_job_and_resume_starts_attempt_two_from_the_checkpoint(control_plane, ray_cluster, user_namespace, run_operator):
    """argus suspend / resume (spec.suspend) on the real API server and Ray: the running job
    is stopped and the task is Suspended; resumed, attempt 2 starts in the same job folder and
    resumes from the newest checkpoint; argus cancel then ends it."""
    ns = user_namespace("alice")
    op = run_operator([ns], extra_args=FAST_PROGRESS)
    save_freq = 10
    apply_text(control_plane, ns, task_with("pausable", ppo_command(steps=2000, extra=f"trainer.save_freq={save_freq}")))
    wait_for(lambda: ((get_task(control_plane, ns, "pausable").get("status") or {}).get("progress") or {}).get("step", 0) > save_freq,
             120, "the run to pass a checkpoint", on_timeout=op.log_tail)
    first = get_task(control_plane, ns, "pausable")["status"]["rayJob"]["submissionId"]
    out = argus_cli(control_plane, "suspend", "pausable", "-n", ns)
    assert out.returncode == 0 and out.stdout.startswith(f"argustask {ns}/pausable suspended"), out.stderr
    status = wait_phase(control_plane, ns, "pausable", "Suspended", timeout=60, op=op)["status"]
    assert status["reason"] == "Suspended" and "finishedAt" not in status
    from ray.job_submission import JobSubmissionClient
    assert JobSubmissionClient(ray_cluster.dashboard_url).get_job_info(first).status.value == "STOPPED"
    assert [(a["attempt"], a["outcome"]) for a in status["attempts"]] == [(1, "Suspended")]
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert (conditions["Suspended"], conditions["Admitted"], conditions["Finished"]) == ("True", "False", "False")

    out = argus_cli(control_plane, "resume", "pausable", "-n", ns)
    assert out.returncode == 0 and "resumed" in out.stdout, out.stderr
    status = wait_for(lambda: (s := get_task(control_plane, ns, "pausable")["status"]).get("phase") == "Running" and s.get("attempt") == 2
                      and (s.get("progress") or {}).get("resumedFromStep") is not None and s, 120,
                      "attempt 2 to run and resume from the checkpoint", on_timeout=op.log_tail)
    assert status["rayJob"]["submissionId"] == first + "-a2"
    resumed = status["progress"]["resumedFromStep"]
    assert resumed > 0 and resumed % save_freq == 0
    assert "Resuming from" in (Path(status["jobDir"]["jobPath"]) / "attempt-2.log").read_text()
    described = argus_cli(control_plane, "describe", "pausable", "-n", ns, "--tail", "0")
    assert described.returncode == 0 and "Phase:       Running (RayJobRunning)" in described.stdout, described.stderr
    assert any(line.split()[:2] == ["1", first] and "Suspended" in line.split() for line in described.stdout.splitlines()), described.stdout

    out = argus_cli(control_plane, "cancel", "pausable", "-n", ns)
    assert out.returncode == 0, out.stderr
    status = wait_phase(control_plane, ns, "pausable", ("Stopped", "Failed", "Succeeded"), timeout=60, op=op)["status"]
    assert (status["phase"], status["reason"]) == ("Stopped", "Cancelled")
    # A new task from the old one, with a changed hyper-parameter (the spec itself is immutable).
    out = argus_cli(control_plane, "rerun", "pausable", "-n", ns, "--set", "trainer.save_freq=20")
    assert out.returncode == 0 and out.stdout.startswith(f"argustask {ns}/pausable-rerun-1 created from pausable"), out.stderr
    rerun = wait_phase(control_plane, ns, "pausable-rerun-1", ("Submitted", "Running"), timeout=60, op=op)
    assert "trainer.save_freq=20" in rerun["status"]["command"] and rerun["metadata"]["annotations"]["argus.io/rerun-of"] == "pausable"
    assert argus_cli(control_plane, "cancel", "pausable-rerun-1", "-n", ns).returncode == 0
    missing = argus_cli(control_plane, "cancel", "nope", "-n", ns)
    assert (missing.returncode, missing.stderr) == (1, f"argus cancel: no ArgusTask 'nope' in namespace '{ns}'\n")


def test_restarts_end_at_the_backoff_limit(control_plane, ray_cluster, user_namespace, run_operator):
    ns = user_namespace("alice")
    op = run_operator([ns])
    # A reward function its file does not hold: the trainer exits 1 at start. (A key Hydra
    # refuses no longer gets that far: Argus composes; a file that does not exist waits in the
    # queue: InputMissing.)
    failing = ppo_command(steps=3, extra="custom_reward_function.path=$HOME/code/reward.py custom_reward_function.name=no_such_function")
    apply_text(control_plane, ns, task_with("flaky", failing, restartPolicy="OnFailure", backoffLimit=1))
    status = wait_phase(control_plane, ns, "flaky", ("Succeeded", "Failed"), timeout=120, op=op)["status"]
    assert (status["phase"], status["reason"], status["attempt"]) == ("Failed", "BackoffLimitExceeded", 2), status
    assert [a["outcome"] for a in status["attempts"]] == ["RayJobFailed", "RayJobFailed"]
    assert sorted(j.submission_id for j in ray_jobs_for(ray_cluster.dashboard_url, ns)) == sorted(a["submissionId"] for a in status["attempts"])


def test_an_ended_task_goes_after_its_ttl_and_takes_its_ray_jobs_along(control_plane, ray_cluster, user_namespace, run_operator):
    ns = user_namespace("alice")
    op = run_operator([ns], extra_args=["--ray-job-retention", "1"])
    apply_text(control_plane, ns, task_with("short-lived", ppo_command(steps=2), ttlSecondsAfterFinished=4))
    apply_text(control_plane, ns, advanced_task("kept", ppo_command(steps=2)))
    kept = wait_phase(control_plane, ns, "kept", ("Succeeded", "Failed"), timeout=90, op=op)["status"]
    done = wait_phase(control_plane, ns, "short-lived", ("Succeeded", "Failed"), timeout=90, op=op)["status"]
    assert kept["phase"] == done["phase"] == "Succeeded"
    # The retention (1 s) removes both tasks' jobs from Ray's job history; the TTL (4 s) the one task.
    wait_for(lambda: ray_jobs_for(ray_cluster.dashboard_url, ns) == [], 60, "Ray's job history to lose both jobs", on_timeout=op.log_tail)
    wait_for(lambda: task_gone(control_plane, ns, "short-lived"), 60,
             "the task to be deleted after its TTL", on_timeout=op.log_tail)
    kept = get_task(control_plane, ns, "kept")["status"]
    assert kept["phase"] == "Succeeded" and kept["rayJobsRemoved"] is True
    out = argus_logs(control_plane, ns, "kept")
    assert out.returncode == 0 and "removed after the task ended" in out.stderr and "Final validation metrics" in out.stdout, out.stderr


def with_metadata(text: str, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> str:
    body = json.loads(text)
    body["metadata"].update({k: v for k, v in (("labels", labels), ("annotations", annotations)) if v})
    return json.dumps(body)


def test_a_task_argo_cd_tracks_outlives_its_ttl_and_leaves_rays_history(control_plane, ray_cluster, user_namespace, run_operator):
    # Argo CD (selfHeal) would create a deleted task again from Git and run it again: the TTL
    # keeps it, removes its Ray job from Ray's history, and says why once. A task with the same
    # well-known label set by Helm's own install (its release annotation) is deleted as usual.
    ns = user_namespace("alice")
    op = run_operator([ns])
    tracked = with_metadata(task_with("from-git", ppo_command(steps=2), ttlSecondsAfterFinished=2),
                            annotations={"argocd.argoproj.io/tracking-id": f"alice-tasks:argus.io/ArgusTask:{ns}/from-git"})
    helm = with_metadata(task_with("from-helm", ppo_command(steps=2), ttlSecondsAfterFinished=2),
                         labels={"app.kubernetes.io/instance": "training"}, annotations={"meta.helm.sh/release-name": "training"})
    apply_text(control_plane, ns, tracked)
    apply_text(control_plane, ns, helm)
    wait_phase(control_plane, ns, "from-git", ("Succeeded", "Failed"), timeout=90, op=op)
    # The Helm-labelled task may be gone already (its 2 s TTL can pass between two reads on a
    # loaded machine): its end shows in its Events, which outlive it.
    wait_for(lambda: task_gone(control_plane, ns, "from-helm"), 150,
             "the Helm-labelled task to end and be deleted after its TTL", on_timeout=op.log_tail)
    events = json.loads(control_plane.kubectl("get", "events", "-n", ns, "-o", "json").stdout)["items"]
    assert [e for e in events if e["involvedObject"]["name"] == "from-helm"
            and e["reason"] in ("RayJobSucceeded", "RayJobFailed")], events
    kept = wait_for(lambda: (s := get_task(control_plane, ns, "from-git")["status"]).get("rayJobsRemoved") and s, 60,
                    "the tracked task's Ray job to leave Ray's history", on_timeout=op.log_tail)
    assert kept["phase"] == "Succeeded" and kept["keptBy"] == "Argo CD application alice-tasks (annotation argocd.argoproj.io/tracking-id)"
    wait_for(lambda: ray_jobs_for(ray_cluster.dashboard_url, ns) == [], 30, "Ray's job history to lose both jobs", on_timeout=op.log_tail)
    uid = get_task(control_plane, ns, "from-git")["metadata"]["uid"]
    time.sleep(4)  # a quiet while: the kept task stays (the same object), and its Event is not posted again
    assert get_task(control_plane, ns, "from-git")["metadata"]["uid"] == uid
    events = json.loads(control_plane.kubectl("get", "events", "-n", ns, "-o", "json").stdout)["items"]
    kept_events = [e for e in events if e["reason"] == "KeptForGitOps" and e["involvedObject"]["name"] == "from-git"]
    assert len(kept_events) == 1 and kept_events[0].get("count", 1) == 1, kept_events
    assert "alice-tasks" in kept_events[0]["message"] and "through Git" in kept_events[0]["message"]
