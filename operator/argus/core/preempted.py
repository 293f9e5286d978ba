"""A preempted task's moves, for ``core.lifecycle``: how a running task chosen as a victim
(``core.preemption`` chooses; the scheduler tells it with ``Preempt``) gives up its GPUs and
goes back to the queue.

    Submitted, Running --Preempt--> same phase, reason Preempting: StopJob, an Event
    ... then Ray STOPPED, or Ray no longer has the job --> Queued (Preempted), a new attempt

While it stops, ``status.preemptedBy`` names the task that takes its GPUs, and its job is
read often (``lifecycle.stopping``). A cancel, a suspension or a deletion meanwhile wins:
the task takes their path instead. A job that ends on its own before the stop (it
succeeded, or failed) ends as it would have.

The next attempt has its own submission id, runs in the same job folder, and verl's
``trainer.resume_mode=auto`` resumes from the newest checkpoint there
(``status.progress.resumedFromStep`` says from where). A preemption is not a failure: the
attempt's record says Preempted, and it does not count against ``spec.backoffLimit``
(``taskstate.NOT_RESTARTS``).
"""

from __future__ import annotations

from .observations import Decision, PostEvent, Preempt, StopJob
from .spec import ArgusTaskStatus, Phase
from .taskstate import TaskState, current_attempts, enter
from .vocabulary import ACTIVE_PHASES, Reason

# What a victim's message says when its next attempt starts over (no checkpoint to resume
# from, or trainer.resume_mode=disable); the message it goes back to the queue with says so too.
CANNOT_RESUME = "it cannot resume"


def victim_message(by: str, priority: int, own: int, lost: int, *, resumes: bool) -> str:
    """What a victim is told (its status message and Event): who takes its GPUs, what it loses,
    and whether its next attempt resumes or starts over."""
    if resumes:
        return (f"preempted for {by} (priority {priority}, above its own {own}): it loses {lost} step(s) since its last checkpoint; "
                "it goes back to the queue and its next attempt resumes from the newest checkpoint in the job folder")
    return (f"preempted for {by} (priority {priority}, above its own {own}): {CANNOT_RESUME} (no checkpoint to resume from, or "
            f"trainer.resume_mode=disable), so it loses all {lost} step(s) of this attempt; it goes back to the queue and its next "
            "attempt starts over from the first step (such a task is preempted last: only when no set of resumable tasks would do)")


def preempt(task: TaskState, seen: Preempt, stamp: str) -> Decision:
    """The scheduler chose ``task`` as a victim: stop its job (nothing when it is not active,
    or is already being stopped for another reason)."""
    if task.phase not in ACTIVE_PHASES or task.cancel or task.suspend or task.preempting:
        return Decision(task.status)
    phase = task.phase
    assert phase is not None
    status = task.status.model_copy(update={"preempted_by": seen.by})
    status = enter(task, status, phase, Reason.Preempting, seen.message, stamp)
    return Decision(status, (StopJob(task.submission_id), PostEvent("Normal", Reason.Preempted, seen.message)))


def stop_wins(task: TaskState) -> bool:
    """A preemption the task's own wishes do not override: its stop ends in the queue."""
    return task.preempting and not task.cancel and not task.suspend and not task.deleting


def requeued(task: TaskState, status: ArgusTaskStatus, stamp: str) -> Decision:
    """The preempted attempt's job stopped (or Ray forgot it): the task waits in the queue
    again, and its next attempt resumes from the newest checkpoint."""
    step = status.progress.step if status.progress and status.progress.step is not None else None
    at = f" at step {step}" if step is not None else ""
    by = status.preempted_by or "a task of higher priority"
    # Whether it resumes was said when it was told (``victim_message``, from its composed configuration).
    starts_over = task.status.reason == Reason.Preempting and CANNOT_RESUME in (task.status.message or "")
    then = ("starts over from the first step: it cannot resume (no checkpoint, or trainer.resume_mode=disable)" if starts_over
            else "resumes from the newest checkpoint in the job folder")
    message = (f"preempted{at}: {by} took attempt {task.attempt}'s GPUs; attempt {task.attempt + 1} waits in the queue and {then} "
               "(a preemption is no restart: spec.backoffLimit is untouched)")
    attempts = [r.model_copy(update={"preempted_by": status.preempted_by}) if r.attempt == task.attempt else r
                for r in current_attempts(task, status, outcome=Reason.Preempted)]  # whom its GPUs went to: after a restart too
    status = status.model_copy(update={"attempts": attempts, "preempted_by": None})
    return Decision(enter(task, status, Phase.Queued, Reason.Preempted, message, stamp, attempt=task.attempt + 1, ray_job=None,
                          ray_unreachable_since=None))
