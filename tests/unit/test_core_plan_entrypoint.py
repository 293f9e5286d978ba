"""The entrypoint the operator submits, run by a real bash (the shell Ray runs it with):
the job starts in its folder, everything the driver prints (stdout and stderr, in order) is
also in the attempt's log file, and the command's exit code stays the job's."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from argus.core.config import PlatformConfig
from argus.core.plan import resolve_plan
from argus.core.spec import ArgusTaskSpec

pytestmark = pytest.mark.unit

UID = "0b8f0a36-1111-2222-3333-444455556666"
SPEC = ArgusTaskSpec.model_validate({"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "command": "x"})


def run(tmp_path: Path, command: str, attempt: int = 1) -> tuple[subprocess.CompletedProcess[str], Path]:
    config = PlatformConfig(root=str(tmp_path / "private"), entrypoint_shell="bash -c")  # -c: no login profile in a unit test
    plan = resolve_plan(SPEC, command, "alice", config, namespace="ns", name="t", uid=UID, attempt=attempt)
    result = subprocess.run(shlex.split(plan.entrypoint), capture_output=True, text=True, timeout=30, env={"PATH": os.defpath})
    assert plan.log_file == f"{plan.job_dir}/attempt-{attempt}.log"
    assert plan.for_user(plan.log_file) == f"$HOME/jobs/ns-t-0b8f0a36/attempt-{attempt}.log"
    return result, Path(plan.log_file)


def test_output_goes_to_the_attempts_log_file_in_order(tmp_path: Path) -> None:
    result, log = run(tmp_path, "echo one\necho two >&2\necho three\npwd")
    lines = ["one", "two", "three", str(log.parent)]
    assert log.read_text().splitlines() == lines  # stderr too, in the order written; the job ran in its folder
    assert result.stdout.splitlines() == lines  # and Ray's own log still gets all of it
    assert result.returncode == 0


def test_a_failing_command_still_fails_the_job(tmp_path: Path) -> None:
    result, log = run(tmp_path, "echo before\nexit 3")
    assert result.returncode == 3
    assert log.read_text() == "before\n"


def test_each_attempt_has_its_own_log(tmp_path: Path) -> None:
    run(tmp_path, "echo first")
    _, second = run(tmp_path, "echo second", attempt=2)
    assert second.name == "attempt-2.log" and second.read_text() == "second\n"
    assert (second.parent / "attempt-1.log").read_text() == "first\n"
