"""Existence checks before the wait (issue 36, item 5) on the real API server and Ray: a task
whose data file is not in the shared tree is not admitted to Ray; it waits as
Queued/InputMissing with one line naming the field, the path and the rule, and goes (and
trains, with the stand-in reading that very file) once the file is uploaded, as Argo CD's
ordering needs (the task applied before its data)."""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

import pytest

from argus_testbed.harness import advanced_task, apply_text, get_task, ppo_command, ray_jobs_for, wait_for, wait_phase

pytestmark = pytest.mark.integration


def test_a_missing_data_file_holds_the_task_until_it_is_uploaded(control_plane, ray_cluster, user_namespace, run_operator,
                                                                  argus_root: Path) -> None:
    ns = user_namespace("alice")
    op = run_operator([ns])
    data = f"late-{uuid.uuid4().hex[:8]}.parquet"
    path = argus_root / "users" / "alice" / "datasets" / data
    command = ppo_command(steps=2).replace("data.train_files=$HOME/common/datasets/gsm8k/train.parquet",
                                           f"data.train_files=$HOME/datasets/{data}")
    apply_text(control_plane, ns, advanced_task("late", command))

    def held() -> dict | None:
        status = get_task(control_plane, ns, "late").get("status") or {}
        return status if status.get("reason") == "InputMissing" else None

    status = wait_for(held, 60, "the task to wait for its data file", on_timeout=op.log_tail)
    assert status["phase"] == "Queued"
    assert status["message"].splitlines()[0] == (f"data.train_files: {path} does not exist in the shared tree "
                                                 "(the file verl reads at start)"), status["message"]
    time.sleep(2)  # several more passes (the poll interval is 0.5 s here): still held, never sent to Ray
    assert held() is not None
    assert ray_jobs_for(ray_cluster.dashboard_url, ns) == []
    assert "is not mounted here" not in op.log_tail(400)

    shutil.copy(argus_root / "datasets" / "gsm8k" / "train.parquet", path)  # uploaded after kubectl apply
    done = wait_phase(control_plane, ns, "late", "Succeeded", timeout=120, op=op)["status"]
    assert done["attempt"] == 1 and len(ray_jobs_for(ray_cluster.dashboard_url, ns)) == 1
