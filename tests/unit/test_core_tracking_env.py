"""W&B, MLflow and TensorBoard configured the documented ways reach verl's trackers: the
command's exports and prefixes of their variables go into the job's runtime env (what verl's
TaskRunner, a Ray actor, gets), paths made absolute in the home, URLs by rule."""

from __future__ import annotations

import pytest

from argus.core.config import PlatformConfig
from argus.core.plan import validate_task

pytestmark = pytest.mark.unit

JOB = "/private/users/alice/jobs/alice-t-12345678"
RUN = ("python3 -m verl.trainer.main_ppo data.train_files=$HOME/datasets/a.parquet data.val_files=$HOME/datasets/b.parquet "
       "+ray_kwargs.ray_init.address=auto trainer.nnodes=1 trainer.n_gpus_per_node=1 \"trainer.logger=['console','wandb','mlflow','tensorboard']\"")


def plan_env(command: str) -> dict[str, str]:
    doc = {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask", "metadata": {"name": "t", "namespace": "alice", "uid": "1234567890"},
           "spec": {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "command": command}}
    v = validate_task(doc, "alice", PlatformConfig())
    assert v.valid and v.plan is not None, v.error_lines()
    return v.plan.runtime_env["env_vars"]


def test_exports_and_prefixes_of_the_trackers_variables_reach_the_runtime_env() -> None:
    env = plan_env("export MLFLOW_TRACKING_URI=https://mlflow.example.com\nexport TENSORBOARD_DIR=$HOME/tb\nexport WANDB_DIR=wandb\n"
                   "export WANDB_PROJECT=gsm8k\nWANDB_MODE=offline MLFLOW_EXPERIMENT_NAME=x " + RUN)
    assert env["MLFLOW_TRACKING_URI"] == "https://mlflow.example.com"
    assert env["TENSORBOARD_DIR"] == "/private/users/alice/tb"
    assert env["WANDB_DIR"] == f"{JOB}/wandb"  # relative: under the job folder
    assert (env["WANDB_PROJECT"], env["WANDB_MODE"], env["MLFLOW_EXPERIMENT_NAME"]) == ("gsm8k", "offline", "x")


def test_unset_outputs_land_in_the_job_folder_and_other_knobs_stay_in_the_shell() -> None:
    env = plan_env("export OMP_NUM_THREADS=4\n" + RUN)
    assert env["TENSORBOARD_DIR"] == f"{JOB}/tensorboard_log" and env["MLFLOW_TRACKING_URI"] == f"sqlite:///{JOB}/mlruns.db"
    assert "OMP_NUM_THREADS" not in env


@pytest.mark.parametrize("line", ["export MLFLOW_TRACKING_URI=ftp://x/y", "export TENSORBOARD_DIR=/private/users/bob/tb",
                                  "export WANDB_DIR=../x"])
def test_paths_and_urls_outside_the_rules_are_refused(line: str) -> None:
    doc = {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask", "metadata": {"name": "t", "namespace": "alice", "uid": "1234567890"},
           "spec": {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "command": line + "\n" + RUN}}
    assert not validate_task(doc, "alice", PlatformConfig()).valid
