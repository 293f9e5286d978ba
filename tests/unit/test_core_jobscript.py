"""The job's script (``core.jobscript``), run by the real bash: the command's own exit status
is the job's and lands in the exit marker, everything it prints lands in the log, and a
marker that cannot be written changes nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from argus.core.jobscript import attempt_log_name, exit_marker_for, job_script

pytestmark = pytest.mark.unit


def run(command: str, job_dir: Path, attempt: int = 1) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", job_script(command, str(job_dir), attempt)], capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("status", [0, 1, 3, 137])
def test_the_commands_exit_status_is_the_jobs_and_the_markers(tmp_path: Path, status: int) -> None:
    job_dir = tmp_path / "jobs" / "ns-t-12345678"
    done = run(f"echo out; echo err >&2; exit {status}", job_dir, attempt=2)
    assert done.returncode == status
    log = job_dir / attempt_log_name(2)
    assert log.read_text() == "out\nerr\n" and done.stdout == "out\nerr\n"
    assert Path(exit_marker_for(str(log))).read_text() == f"{status}\n"
    assert exit_marker_for(str(log)) == str(job_dir / "attempt-2.exit")


def test_no_marker_while_the_command_runs(tmp_path: Path) -> None:
    job_dir = tmp_path / "job"
    proc = subprocess.Popen(["bash", "-c", job_script("echo started; sleep 30", str(job_dir), 1)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "started\n"
        assert not (job_dir / "attempt-1.exit").exists()
    finally:
        proc.kill()
        proc.wait()


def test_a_marker_that_cannot_be_written_changes_nothing(tmp_path: Path) -> None:
    job_dir = tmp_path / "job"
    (job_dir / "attempt-1.exit").mkdir(parents=True)  # a folder where the marker goes
    done = run("echo fine", job_dir)
    assert done.returncode == 0 and done.stderr == ""


def test_a_folder_that_cannot_be_made_runs_nothing(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    done = run("echo ran", tmp_path / "file" / "job")
    assert done.returncode == 1 and "ran" not in done.stdout
