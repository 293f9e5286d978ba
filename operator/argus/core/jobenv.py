"""The environment Argus gives a job through Ray's runtime env: the one verl's Ray actors get
(the command's own exports reach only the driver's shell)."""

from __future__ import annotations

import posixpath

from .command import CheckedCommand
from .command.environment import job_outputs
from .config import PlatformConfig
from .jobscript import attempt_log_name


def runtime_env_vars(config: PlatformConfig, user: str, job_dir: str, attempt: int, code_path: str | None,
                     checked: CheckedCommand | None = None) -> dict[str, str]:
    """The environment Argus gives the job (through Ray's runtime env): what the plan
    submits, and what ``${oc.env:...}`` reads when the configuration is resolved."""
    env_vars = {
        "PYTHONPATH": f"{code_path or config.verl_code()}:{posixpath.join(config.home(user), 'code')}",
        "ARGUS_USER": user,
        "ARGUS_JOB_DIR": job_dir,
        "ARGUS_LOG_FILE": posixpath.join(job_dir, attempt_log_name(attempt)),
        "ARGUS_ATTEMPT": str(attempt),
    }
    # The shared model cache, so that a model is downloaded once for everyone, unless the
    # command exports its own HF_HOME.
    hf_home = config.hf_cache()
    if hf_home and not (checked is not None and checked.exports("HF_HOME")):
        env_vars["HF_HOME"] = hf_home
    # verl's SFT trainer prints its total steps (status.progress) only at INFO level.
    if not (checked is not None and checked.exports("VERL_SFT_LOGGING_LEVEL")):
        env_vars["VERL_SFT_LOGGING_LEVEL"] = "INFO"
    exported = {n: "".join(map(str, p)) for n, p in (checked.environment if checked else {}).items() if all(type(x) is str for x in p)}
    return {**env_vars, **job_outputs(job_dir, exported)}  # verl's trackers: into the job folder
