"""Which variables spec.env may take from Secrets, and what is decided from what was read
(``core.secretenv``, the environment rules of ``core.command.environment``)."""

from __future__ import annotations

from typing import Any

import pytest

from argus.core.config import PlatformConfig
from argus.core.plan import validate_task
from argus.core.secretenv import SecretEnv, SecretUnreadable, resolve_secret_env

pytestmark = pytest.mark.unit

CMD = ("python3 -m verl.trainer.main_ppo data.train_files=$HOME/datasets/a.parquet data.val_files=$HOME/datasets/b.parquet "
       "trainer.nnodes=1 trainer.n_gpus_per_node=1")


def task(env: list[dict[str, Any]], command: str = CMD) -> dict[str, Any]:
    return {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask", "metadata": {"name": "t", "namespace": "alice", "uid": "0123456789"},
            "spec": {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "command": command, "env": env}}


def ref(name: str, secret: str = "creds", key: str = "k") -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


@pytest.mark.parametrize("name", ["WANDB_API_KEY", "MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_PASSWORD", "HF_TOKEN", "WANDB_ENTITY"])
def test_credentials_and_settings_may_come_from_a_secret(name: str) -> None:
    v = validate_task(task([ref(name)]), "alice", PlatformConfig())
    assert v.valid, v.error_lines()
    assert v.plan is not None and v.plan.secret_env == {name: "<from secret creds/k>"}
    assert name not in v.plan.runtime_env["env_vars"]


@pytest.mark.parametrize(("name", "why"), [
    ("PYTHONPATH", "search path"), ("LD_PRELOAD", "changes which program runs"), ("RAY_ADDRESS", "Ray reads it"),
    ("HYDRA_MAIN_MODULE", "Hydra reads it"), ("PATH", "changes which program runs"), ("DATA", "not on the list"),
    ("WANDB_DIR", "it is a path"), ("MLFLOW_TRACKING_URI", "it is a URL"), ("NCCL_NET_PLUGIN", "NCCL loads"),
    ("ARGUS_JOB_DIR", "not on the list"), ("HF_HOME", "it is a path"),
])
def test_names_the_rules_refuse_or_that_are_checked_by_value_may_not(name: str, why: str) -> None:
    v = validate_task(task([ref(name)]), "alice", PlatformConfig())
    assert not v.valid
    (line,) = v.error_lines()
    assert line.startswith("spec.env[0].name:") and "may not come from a Secret" in line and why in line


def test_a_name_set_twice_by_the_command_or_by_argus_is_refused() -> None:
    v = validate_task(task([ref("WANDB_API_KEY"), ref("WANDB_API_KEY", key="other")]), "alice", PlatformConfig())
    assert any("set twice" in line for line in v.error_lines())
    v = validate_task(task([ref("WANDB_PROJECT")], "export WANDB_PROJECT=p\n" + CMD), "alice", PlatformConfig())
    assert any("also set by the command" in line for line in v.error_lines())
    v = validate_task(task([ref("VERL_SFT_LOGGING_LEVEL")]), "alice", PlatformConfig())
    assert any("set by Argus" in line for line in v.error_lines())


def test_a_value_field_or_a_bad_reference_is_refused_by_the_schema() -> None:
    v = validate_task(task([{"name": "WANDB_API_KEY", "value": "plain"}]), "alice", PlatformConfig())
    assert not v.valid
    v = validate_task(task([ref("WANDB_API_KEY", secret="Not_A_Name")]), "alice", PlatformConfig())
    assert not v.valid


REFS = (SecretEnv("WANDB_API_KEY", "wandb", "api_key"), SecretEnv("HF_TOKEN", "hf", "token", optional=True))


def test_resolution_gives_every_value_or_one_line_naming_variable_secret_and_key() -> None:
    assert resolve_secret_env(REFS, "alice", {"wandb": {"api_key": "v1\n"}, "hf": None}) == ({"WANDB_API_KEY": "v1\n"}, None)
    values, waits = resolve_secret_env(REFS, "alice", {"wandb": {"other": "x"}, "hf": {"token": "t"}})
    assert values == {} and waits is not None and "\n" not in waits
    assert "WANDB_API_KEY: Secret alice/wandb has no key api_key" in waits
    _, waits = resolve_secret_env(REFS, "alice", {"wandb": None})
    assert waits is not None and "Secret alice/wandb does not exist (spec.env names key api_key)" in waits
    _, waits = resolve_secret_env(REFS, "alice", {"wandb": SecretUnreadable("secrets \"wandb\" is forbidden")})
    assert waits is not None and "cannot be read (secrets \"wandb\" is forbidden)" in waits


def test_render_and_describe_show_the_reference_never_a_value() -> None:
    from argus.taskctl import describe_lines
    v = validate_task(task([ref("WANDB_API_KEY", "wandb", "api_key")]), "alice", PlatformConfig())
    assert v.plan is not None
    dumped = v.plan.with_secrets({"WANDB_API_KEY": "s3cret-value"}).model_dump(mode="json")  # what argus render prints
    assert dumped["secret_env"] == {"WANDB_API_KEY": "<from secret wandb/api_key>"} and "secret_values" not in dumped
    assert "s3cret-value" not in repr(dumped)
    lines = describe_lines({"metadata": {"namespace": "alice", "name": "t"}, "spec": task([ref("WANDB_API_KEY", "wandb", "api_key")])["spec"],
                            "status": {"phase": "Running", "progress": {"step": 3, "runUrl": "https://wandb.ai/a/b/runs/x"}}})
    assert "Environment: WANDB_API_KEY=<from secret wandb/api_key>" in lines
    assert "Run:         https://wandb.ai/a/b/runs/x" in lines
