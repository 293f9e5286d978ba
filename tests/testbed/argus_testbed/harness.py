"""Helpers for the operator's integration tests, the demo and the benchmarks: the operator
as a real subprocess (optionally with a fault injected: ``argus_testbed.faults``), and
waits that poll the API server (apiget.py). Everything here drives real processes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .apiget import get_object
from .controlplane import KubectlError, repo_root
from .private_tree import STANDIN, make_private_tree  # noqa: F401 - re-exported for tests

REPO = repo_root()
EXAMPLES = REPO / "examples"


# The operator's own servers listen on loopback here (in a pod they listen on every address
# of the pod, their defaults): everything the tests start talks on loopback only.
LOOPBACK_SERVERS = {"ARGUS_METRICS_HOST": "127.0.0.1", "ARGUS_HEALTH_HOST": "127.0.0.1", "ARGUS_LOGS_API_HOST": "127.0.0.1",
                    "ARGUS_WEBHOOK_LISTEN_HOST": "127.0.0.1"}


class OperatorProcess:
    """``python -m argus`` as a subprocess, logging to a file."""

    def __init__(self, log_path: Path, argv: list[str], env: dict[str, str]):
        self.log_path = log_path
        self.argv = argv
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def start(cls, workdir: Path, *, kubeconfig: Path, ray_address: str, root: Path, namespaces: list[str],
              max_running: int = 4, poll_interval: float = 0.5, extra_args: list[str] = (), extra_env: dict[str, str] | None = None,
              name: str = "operator", crash_after_submit: float | None = None, doctor_interval: float = 0,
              verl_code_path: Path | None = None) -> OperatorProcess:
        """``doctor_interval``: the operator's own argus doctor runs (off by default here, so that
        the tests' Ray job history holds their tasks' jobs only; tests/integration/test_doctor_ray.py
        turns it on). ``crash_after_submit``: the chance (0-1) that the operator dies (exit 137) right
        after Ray accepted a job and before its status is written (``argus_testbed.faults``).
        ``verl_code_path``: the verl snapshot (default the stand-in's; real verl:
        ``argus_testbed.realverl.snapshot()``)."""
        workdir.mkdir(parents=True, exist_ok=True)
        program = ["-m", "argus"] if crash_after_submit is None else [
            "-m", "argus_testbed.faults", "--crash-after-submit", str(crash_after_submit), "--"]
        argv = [sys.executable, *program, "--kubeconfig", str(kubeconfig), "--ray-address", ray_address,
                "--root", str(root), "--verl-code-path", str(verl_code_path or STANDIN), "--max-running", str(max_running),
                "--poll-interval", str(poll_interval), "--doctor-interval", str(doctor_interval), *extra_args]
        for ns in namespaces:
            argv += ["--namespace", ns]
        env = {**LOOPBACK_SERVERS, **os.environ, **(extra_env or {})}
        op = cls(workdir / f"{name}.log", argv, env)
        op.launch()
        return op

    def launch(self) -> None:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)

    def restart(self, extra_env: dict[str, str] | None = None, drop_env: tuple[str, ...] = (), without_faults: bool = False) -> None:
        self.stop()
        self.env = {k: v for k, v in {**self.env, **(extra_env or {})}.items() if k not in drop_env}
        if without_faults and "argus_testbed.faults" in self.argv:
            self.argv = [self.argv[0], "-m", "argus", *self.argv[self.argv.index("--") + 1:]]
        self.launch()

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def wait_exit(self, timeout: float) -> int:
        assert self.proc
        return self.proc.wait(timeout=timeout)

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def get_task(cp: Any, ns: str, name: str) -> dict[str, Any]:
    """The task as ``kubectl get argustask NAME -n NS -o json`` prints it (read directly:
    apiget.py says why)."""
    return get_object(cp, f"/apis/argus.io/v1alpha1/namespaces/{ns}/argustasks/{name}", "argustask", name, "-n", ns)


def task_gone(cp: Any, ns: str, name: str) -> bool:
    """True once the task is not found (read as get_task reads it: a poll loop of kubectl
    starts costs a process start, about 0.1 s of CPU, a poll); any other error is raised."""
    try:
        get_task(cp, ns, name)
    except KubectlError as e:
        if "(NotFound)" in (e.stderr or ""):
            return True
        raise
    return False


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.3, on_timeout: Callable[[], str] | None = None) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    extra = on_timeout() if on_timeout else ""
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last: {last!r}\n{extra}")


def wait_phase(cp: Any, ns: str, name: str, phases: tuple[str, ...] | str, timeout: float = 90, op: OperatorProcess | None = None) -> dict[str, Any]:
    phases = (phases,) if isinstance(phases, str) else phases

    def check() -> dict[str, Any] | None:
        task = get_task(cp, ns, name)
        return task if (task.get("status") or {}).get("phase") in phases else None

    def report() -> str:
        task = get_task(cp, ns, name)
        return f"status: {json.dumps(task.get('status'), indent=1)}\noperator log:\n{op.log_tail() if op else ''}"

    return wait_for(check, timeout, f"{ns}/{name} to reach {phases}", on_timeout=report)


def apply_file(cp: Any, ns: str, path: Path | str) -> None:
    cp.kubectl("apply", "-n", ns, "-f", str(path))


def apply_text(cp: Any, ns: str, text: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return cp.kubectl("apply", "-n", ns, "-f", "-", input=text, check=check)


def advanced_task(name: str, command: str, *, nnodes: int = 1, gpus: int = 1, priority: int | None = None,
                  deadline: int | None = None, workload: str = "ppo") -> str:
    spec: dict[str, Any] = {"kind": "advanced", "workload": workload, "nnodes": nnodes, "nGpusPerNode": gpus, "command": command}
    if priority is not None:
        spec["priority"] = priority
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    return json.dumps({"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask", "metadata": {"name": name}, "spec": spec})


def task_with(name: str, command: str, **spec: object) -> str:
    """An advanced task (``advanced_task``) with more fields in its spec (restartPolicy,
    backoffLimit, ttlSecondsAfterFinished, ...)."""
    body = json.loads(advanced_task(name, command))
    body["spec"].update(spec)
    return json.dumps(body)


_STEP = re.compile(r"^step:(\d+) ", re.M)


def logged_steps(log: str) -> list[int]:
    """The steps a job's log shows, read as verl printed them: past Ray's actor prefix,
    colour codes and tqdm's bar (argus.core.progress.verl_lines)."""
    from argus.core.progress import verl_lines

    return [int(n) for n in _STEP.findall("\n".join(verl_lines(log)))]


def ppo_command(*, steps: int | None = None, nnodes: int = 1, gpus: int = 1, extra: str = "") -> str:
    # What verl requires before training (the stand-in checks it as verl does): micro batch
    # sizes, a batch the GPUs divide, a rollout engine and a tensor-parallel size that fits.
    batch = 8 * nnodes * gpus
    cmd = ("python3 -m verl.trainer.main_ppo data.train_files=$HOME/common/datasets/gsm8k/train.parquet "
           "data.val_files=$HOME/datasets/gsm8k/test.parquet +ray_kwargs.ray_init.address=auto "
           f"data.train_batch_size={batch} actor_rollout_ref.actor.ppo_mini_batch_size={batch} "
           "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 actor_rollout_ref.rollout.name=vllm "
           "actor_rollout_ref.rollout.tensor_model_parallel_size=1 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1 "
           "critic.ppo_micro_batch_size_per_gpu=1 trainer.total_epochs=1 "
           f"trainer.nnodes={nnodes} trainer.n_gpus_per_node={gpus}")
    if steps is not None:
        cmd += f" trainer.total_training_steps={steps}"
    return cmd + (" " + extra if extra else "")


def forget_ray_job(dashboard_url: str, submission_id: str, timeout: float = 30) -> None:
    """Remove an ended job from Ray's history so that it stays removed: Ray's job monitor may
    write a just-ended job's record once more after a delete (the operator's
    ``HistoryRemovals`` handles the same), so delete until it is gone across the monitor's
    period."""
    from ray.job_submission import JobSubmissionClient
    client = JobSubmissionClient(dashboard_url)

    def gone() -> bool:
        if submission_id in [j.submission_id for j in client.list_jobs()]:
            client.delete_job(submission_id)
            return False
        time.sleep(3)  # longer than the monitor's period: still gone?
        return submission_id not in [j.submission_id for j in client.list_jobs()]
    wait_for(gone, timeout, f"Ray to forget job {submission_id}")


def ray_jobs_for(dashboard_url: str, namespace: str, headers: dict[str, str] | None = None) -> list[Any]:
    """Every Ray job submitted for the namespace's tasks, found by the submission-id prefix
    the operator uses (``argus-<namespace>-``), not by the metadata it writes, which a bug
    could leave out. ``headers``: a token cluster's (``RayCluster.auth_headers``)."""
    from ray.job_submission import JobSubmissionClient
    client = JobSubmissionClient(dashboard_url, headers=headers or None)
    return [j for j in client.list_jobs() if (j.submission_id or "").startswith(f"argus-{namespace}-")]


def argus_logs(cp: Any, ns: str, name: str) -> str:
    """A task's log as ``argus logs`` prints it (read from Ray directly)."""
    done = subprocess.run([sys.executable, "-m", "argus.cli", "logs", name, "-n", ns, "--kubeconfig", str(cp.kubeconfig),
                           "--direct-ray"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout
