"""The script every job runs and what it leaves in the task's job folder: the Ray job's
entrypoint (built by ``core.plan``) and its files, named once here for the plan, the log query and the
operator's log followers. Pure.

In the job folder, per attempt:
- ``attempt-N.log``: everything the driver printed, stdout and stderr in order (tee). It
  outlives Ray's job history and a head restart.
- ``attempt-N.exit``: the command's exit status, written as the command ends. The operator
  (``--progress-source file``) sees a job's end there without a Ray call, a few milliseconds
  before Ray's job supervisor notices the process has exited (it looks every 0.1 s), and
  then reads the job's status from Ray at once: Ray stays the judge of how the job ended.
"""

from __future__ import annotations

import posixpath
import shlex

LOG_SUFFIX = ".log"
EXIT_SUFFIX = ".exit"


def attempt_log_name(attempt: int) -> str:
    """The attempt's log file, in the job folder."""
    return f"attempt-{attempt}{LOG_SUFFIX}"


def exit_marker_for(log_file: str) -> str:
    """The attempt's exit marker, beside its log file ``log_file``."""
    base = log_file[: -len(LOG_SUFFIX)] if log_file.endswith(LOG_SUFFIX) else log_file
    return base + EXIT_SUFFIX


def job_script(command: str, job_dir: str, attempt: int) -> str:
    """The bash script of one attempt: start in the job folder (if that fails, nothing of the
    user's command runs), copy everything the command prints to the attempt's log, and write
    its exit status to the exit marker. pipefail: the command's exit status, not tee's, is
    the job's; the marker's own failure (a full disk) does not change it."""
    log_file = posixpath.join(job_dir, attempt_log_name(attempt))
    marker = exit_marker_for(log_file)
    return (f"set -o pipefail\nmkdir -p {shlex.quote(job_dir)} && cd {shlex.quote(job_dir)} || exit 1\n"
            f"{{\n{command}\n}} 2>&1 | tee -a {shlex.quote(log_file)}\n"
            f"argus_status=$?\n{{ echo \"$argus_status\" > {shlex.quote(marker)}; }} 2>/dev/null\nexit \"$argus_status\"")
