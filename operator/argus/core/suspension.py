"""Suspending and resuming a task (``spec.suspend``), for ``core.lifecycle``: the moves a
suspension makes, kept here so the lifecycle reads as before with one branch per place.

    Queued    --suspend--> Suspended                  (it leaves the queue; nothing ran)
    Submitted, Running --suspend--> StopJob, then Ray STOPPED --> Suspended (its GPUs go back)
    Suspended --resume-->  Queued (Resumed), a new attempt when the last one reached Ray
    Suspended --cancel-->  Stopped (Cancelled)

A resumed task takes the restart path (``taskstate.attempt_ended``'s): the next attempt has
its own submission id, runs in the same job folder, and verl's ``trainer.resume_mode=auto``
resumes from the newest checkpoint there (``status.progress.resumedFromStep`` says from
where). An attempt ended by a suspension counts as no restart against ``backoffLimit``.
Suspended is no end: no ``finishedAt``, no time to live; ``Finished`` stays false, and the
``Suspended`` condition is true while it lasts.
"""

from __future__ import annotations

from .observations import Decision
from .spec import ArgusTaskStatus, Phase
from .taskstate import TaskState, current_attempts, enter
from .vocabulary import Reason


def suspend_asked(task: TaskState) -> bool:
    """spec.suspend is set, and no stronger wish (cancel, deletion) overrides it."""
    return task.suspend and not task.cancel and not task.deleting


def suspended(task: TaskState, status: ArgusTaskStatus, stamp: str, message: str, *, ran: bool) -> ArgusTaskStatus:
    """``status`` entering Suspended; ``ran``: the current attempt reached Ray (its record
    ends with the outcome Suspended)."""
    if ran:
        status = status.model_copy(update={"attempts": current_attempts(task, status, outcome=Reason.Suspended)})
    return enter(task, status, Phase.Suspended, Reason.Suspended, message, stamp, ray_unreachable_since=None)


def left_the_queue(task: TaskState, status: ArgusTaskStatus, stamp: str) -> Decision:
    """A queued task (this attempt never reached Ray) suspended: it leaves the queue."""
    return Decision(suspended(task, status, stamp, "suspended while queued (spec.suspend); it left the queue. "
                                                   "Resume it with: argus resume " + task.name, ran=False))


def job_stopped(task: TaskState, status: ArgusTaskStatus, stamp: str) -> ArgusTaskStatus:
    """The attempt's job was stopped for spec.suspend (Ray STOPPED, or forgot it)."""
    step = f" at step {status.progress.step}" if status.progress and status.progress.step is not None else ""
    message = (f"suspended (spec.suspend): attempt {task.attempt}'s job {task.submission_id} was stopped{step} and its GPUs went "
               f"back to the queue. Resume it with: argus resume {task.name}")
    return suspended(task, status, stamp, message, ran=True)


def reconcile_suspended(task: TaskState, stamp: str) -> Decision:
    """A Suspended task looked at: cancelled (Stopped), resumed (Queued), or still suspended."""
    status = task.status
    if task.cancel:
        return Decision(enter(task, status, Phase.Stopped, Reason.Cancelled, "cancelled while suspended", stamp))
    if task.suspend:
        return Decision(status)
    ran = any(r.attempt == task.attempt for r in status.attempts or ())
    attempt = task.attempt + 1 if ran else task.attempt
    how = (f"attempt {attempt} waits in the queue and resumes from the newest checkpoint in the job folder" if ran else
           f"attempt {attempt} waits in the queue")
    return Decision(enter(task, status, Phase.Queued, Reason.Resumed, f"resumed (spec.suspend is false): {how}", stamp,
                          attempt=attempt, ray_job=None if ran else status.ray_job))


def needs_look(task: TaskState) -> bool:
    """Whether a suspension needs ``Reconcile`` with nothing new from Ray: a queued task
    suspended that never reached Ray, a suspended one resumed or cancelled."""
    if task.phase is Phase.Queued:
        return suspend_asked(task) and not task.holds_finalizer
    return task.phase is Phase.Suspended and (task.cancel or not task.suspend)
