"""What the operator hands Ray for one attempt of a task: the ``SubmissionPlan`` (built from
the spec by ``core.plan``, submitted as is by ``adapters.ray``) and its submission id (derived
from the task, so the lifecycle knows it before any status says it).

    core.plan.resolve_plan(spec) -> **SubmissionPlan** -> observations.Admitted / Submit -> adapters.ray submits it

Kept apart from ``core.plan`` so that the lifecycle (``core.lifecycle``, ``core.observations``,
``core.taskstate``) names the plan and its id without importing what builds it: the command
language, verl's config trees, the templates (an import-linter contract in pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field, SecretStr


class SubmissionPlan(BaseModel):
    """Everything the Ray Jobs API is given for one task; the operator submits it as is."""

    submission_id: str | None
    user: str
    command: str
    entrypoint: str
    entrypoint_resources: dict[str, float]
    # GPUs the driver itself takes (a torchrun launch): Ray places it on a node with that many
    # free and counts them while it runs (the Jobs API's entrypoint_num_gpus); 0 for verl's
    # own launches, whose GPUs are its workers' placement groups.
    entrypoint_num_gpus: int = 0
    runtime_env: dict[str, Any]
    metadata: dict[str, str]
    job_dir: str
    gpus: int
    attempt: int = 1
    log_file: str = ""  # the attempt's log in the job folder: everything the driver printed
    home: str = ""      # the user's home as the job sees it (for paths as the user sees them)
    cluster: str = ""   # the ArgusCluster it is submitted to ("": the implicit cluster of --ray-address)
    # spec.env's variables as every reader sees them ("<from secret NAME/KEY>"); their values,
    # read at submission, ride in secret_values: never dumped, never in a repr.
    secret_env: dict[str, str] = Field(default_factory=dict)
    secret_values: dict[str, SecretStr] = Field(default_factory=dict, exclude=True, repr=False)

    def with_secrets(self, values: Mapping[str, str]) -> SubmissionPlan:
        return self.model_copy(update={"secret_values": {k: SecretStr(v) for k, v in values.items()}})

    def submitted_runtime_env(self) -> dict[str, Any]:
        """The runtime env Ray is given: the plan's, with the Secrets' values."""
        if not self.secret_values:
            return self.runtime_env
        env_vars = {**self.runtime_env.get("env_vars", {}), **{k: v.get_secret_value() for k, v in self.secret_values.items()}}
        return {**self.runtime_env, "env_vars": env_vars}

    def for_user(self, path: str) -> str:
        """A path in the user's home as the file browser shows it: $HOME/..."""
        return "$HOME" + path[len(self.home):] if self.home and (path == self.home or path.startswith(self.home + "/")) else path


def submission_id_for(namespace: str, name: str, uid: str, attempt: int = 1) -> str:
    """Deterministic from the object's UID and the attempt, and readable in ``ray job list``.
    A restart is a new id (``-a2``, ...): Ray never reuses one, even after ``delete_job``."""
    base = f"argus-{namespace}-{name}-{uid.replace('-', '')[:8]}"
    return base if attempt <= 1 else f"{base}-a{attempt}"
