"""The task lifecycle: one pure function; ``step`` decides what an ArgusTask's status
becomes for each thing the operator observes, and which actions follow. The controller
gathers the observations (validation, the queue's decision, Ray's answers), calls ``step``
and carries out the actions; one writer patches the status and posts one Event per phase
change (but the quiet ones, ``vocabulary.QUIET_PHASE_CHANGES``). This is the file to read for "how does a task change phase?"; the moves it may
make at all are declared as a table in ``core.transitions``, which ``step`` is checked
against (and docs/lifecycle.md's tables are generated from).

    (new) --Validated--> Queued --Admitted/Submit--> Submitted --Ray RUNNING--> Running
      |                    |                            |                         |
      +--Refused--> Rejected                            +--Ray ends (SUCCEEDED, FAILED, STOPPED)--> Succeeded | Failed | Stopped
                           +--cancel--> Stopped         +--Ray forgot the job--> Failed (RayJobLost)
                                                        +--Ray unreachable past the grace--> Failed (RayUnreachable)

Ray refusing the operator's credentials (HTTP 401/403, reason ``RayAuthFailed``) is shown as
``RayReachable=False`` and never ends a task: Ray is up and the job runs on, so the grace
(which bets that a long outage lost the job) does not apply; once the token is fixed the
next read tells the job's real state. A deleted task still waits only the delete grace.

The finalizer ``argus.io/stop-ray-job`` is added just before a task's first submission, so
*a task without it never reached Ray*, and one with it may have (the operator can die
between Ray accepting a job and the status saying so; the submission id is deterministic,
so that job is found again). Whenever Argus closes or deletes a task that holds the
finalizer, it first asks Ray about the task's submission id and stops what exists ("job
unknown" is the normal answer). The observations that need Ray are named by
``needs_ray``; what a read returns comes back to ``step`` as ``JobObserved``,
``JobUnknown`` or ``RayUnreachable``.

Here: ``step`` and its decision for each kind of observation, and the timers of an ended
task. What it is told and answers (observations, actions, ``Decision``) is declared in
``core.observations``; the task as it knows it, and how a decision rewrites its status
(entering a phase, conditions, attempts), in ``core.taskstate``; the conditions' types and
``set_condition`` in ``core.conditions``. All of it is importable from here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Literal

from . import preempted, suspension
from .conditions import MAX_CONDITION_MESSAGE, ConditionType, set_condition
from .gitops import tracked_by
from .observations import (
    Action,
    Admitted,
    Decision,
    DeleteTask,
    JobObserved,
    JobUnknown,
    Observation,
    PostEvent,
    Preempt,
    ProgressObserved,
    RayJobsRemoved,
    RayUnreachable,
    Reconcile,
    Refused,
    ReleaseFinalizer,
    RemoveRayJobs,
    StopJob,
    Submit,
    SubmitResult,
    Validated,
    Waiting,
)
from .problems import cap_lines
from .rayjobs import RAY_ACTIVE, RayJobState
from .spec import ArgusTaskStatus, Phase, RayJobStatus, RestartPolicy, VerlConfigSource
from .taskstate import (
    RAY_TO_PHASE,
    LifecycleSettings,
    TaskState,
    attempt_ended,
    conditions_for_phase,
    current_attempts,
    enter,
    phase_for_ray,
    ray_reachable,
    ray_refused,
)
from .times import format_time, from_epoch_ms, parse_time
from .transitions import Move, UndeclaredTransition, event, require
from .vocabulary import ACTIVE_PHASES, Reason

# The lifecycle's whole vocabulary is importable from here (the controller, the tests): the
# task and its settings (core.taskstate), the observations, actions and decision
# (core.observations), the conditions (core.conditions).
__all__ = [
    "FINALIZER", "MAX_CONDITION_MESSAGE", "RAY_ACTIVE", "RAY_TO_PHASE",
    "Action", "Admitted", "Decision", "DeleteTask", "JobObserved", "JobUnknown", "LifecycleSettings", "Observation", "PostEvent",
    "Preempt", "ProgressObserved", "RayJobsRemoved", "RayUnreachable", "Reconcile", "Refused", "ReleaseFinalizer", "RemoveRayJobs", "StopJob",
    "Submit", "SubmitResult", "TaskState", "Validated", "Waiting",
    "action_kind", "conditions_for_phase", "needs_look", "needs_ray", "phase_for_ray", "ray_refused", "set_condition", "settled",
    "step", "stopping", "timer_due",
]

FINALIZER = "argus.io/stop-ray-job"


def needs_ray(task: TaskState) -> bool:
    """Whether the task's Ray job must be read (and what it says given to ``step``):
    active tasks; tasks that may have reached Ray and are being cancelled, deleted, or were
    closed while Ray could not be asked."""
    if task.deleting:
        return task.holds_finalizer
    phase = task.phase
    if phase in ACTIVE_PHASES:
        return True
    if phase is Phase.Queued:
        return task.holds_finalizer  # submitted before the status said so, perhaps
    if phase is Phase.Failed and task.status.reason == Reason.RayUnreachable and task.holds_finalizer:
        reachable = task.condition(ConditionType.RayReachable)
        return reachable is None or not reachable.true  # its job may still run: stop it once Ray answers
    return False


def settled(task: TaskState) -> bool:
    """Whether nothing but a change to the task or its timer (``timer_due``) can give the
    operator anything to do for it: it has ended, is not being deleted, and has no Ray job
    to read. Most of a big cluster's tasks are settled; the controller's tick passes them by
    until they change (controller/idle.py), so its cost follows the tasks that live."""
    phase = task.phase
    paused = phase is Phase.Suspended and not suspension.needs_look(task)  # only a resume or a cancel moves it
    return phase is not None and (phase.terminal or paused) and not task.deleting and not needs_ray(task)


def stopping(task: TaskState, now: dt.datetime) -> bool:
    """The task's job is to be stopped (cancel, suspend, preemption, deadline or delete): read it often."""
    return task.deleting or task.cancel or task.suspend or task.preempting or task.deadline_passed(now)


def step(task: TaskState, seen: Observation, now: dt.datetime, settings: LifecycleSettings, *,
         undeclared: Callable[[str], None] | None = None) -> Decision:
    """The new status of ``task`` and the actions that follow, given what was ``seen``.

    The branches below decide; the decision is then held to the declared transition table
    (``core.transitions.RULES``). The table does not choose the next phase; it bounds what
    the branches may. A decision the table does not declare raises ``UndeclaredTransition``
    (the tests' way, and the default); with ``undeclared`` it is reported there and returned
    (the operator's way: a task must not stall on a row missing from the table, so the
    operator logs it as an error and counts it, and the tests hold the table complete)."""
    decision = _decide(task, seen, now, settings)
    try:
        require(Move(source=task.phase, observation=type(seen), deleting=task.deleting,
                     target=Phase(decision.status.phase) if decision.status.phase else None,
                     reason_before=task.status.reason, reason_after=decision.status.reason,
                     actions=tuple(action_kind(a) for a in decision.actions)))
    except UndeclaredTransition as exc:
        if undeclared is None:
            raise
        undeclared(str(exc))
    return decision


def action_kind(action: Action) -> str:
    """How the transition table names an action: its class, and an Event's reason."""
    return event(action.reason) if isinstance(action, PostEvent) else type(action).__name__


def _decide(task: TaskState, seen: Observation, now: dt.datetime, settings: LifecycleSettings) -> Decision:
    """The decision for ``seen``, before ``step`` holds it to the transition table: a deleted
    task's (``_deleting``), else the one of the observation's kind."""
    if task.deleting:
        return _deleting(task, seen, now, settings)
    if isinstance(seen, Validated):
        return _validated(task, seen, now, settings)
    if isinstance(seen, Refused):
        return _refused(task, seen, now)
    if isinstance(seen, Reconcile):
        return _reconcile(task, now, settings)
    if isinstance(seen, Waiting):
        return _waiting(task, seen, now)
    if isinstance(seen, Admitted):
        return _admitted(task, seen)
    if isinstance(seen, SubmitResult):
        return _submit_result(task, seen, now, settings)
    if isinstance(seen, JobObserved):
        return _job_observed(task, seen, now, settings)
    if isinstance(seen, JobUnknown):
        return _job_unknown(task, now)
    if isinstance(seen, ProgressObserved):
        return _progress(task, seen)
    if isinstance(seen, RayJobsRemoved):
        return Decision(task.status.model_copy(update={"ray_jobs_removed": True}))
    if isinstance(seen, RayUnreachable):
        return _ray_unreachable(task, seen, now, settings)
    if isinstance(seen, Preempt):
        return preempted.preempt(task, seen, format_time(now))
    raise TypeError(f"unknown observation {seen!r}")


# --------------------------------------------------------------------------- what the controller saw

def _validated(task: TaskState, seen: Validated, now: dt.datetime, settings: LifecycleSettings) -> Decision:
    """A new task's spec passed: it is queued (and stopped at once if already cancelled). A
    queued one composed again for the verl its clusters run keeps its place, with the new command."""
    status = task.status.model_copy(update={"user": seen.user, "command": seen.command, "warnings": list(seen.warnings) or None,
                                            "verl": VerlConfigSource(version=seen.verl[0], source=seen.verl[1]) if seen.verl else None})
    if task.phase is not None:
        again = task.phase is Phase.Queued and not task.cancel and not task.suspend
        return Decision(status.model_copy(update={"reason": Reason.Queued, "message": f"{seen.why}; waiting in the queue"}) if again else task.status)
    # A weak check warns of what a run would do; a task created cancelled never runs (cancel
    # is one-way), so its warnings stay in status.warnings without an Event each.
    events = () if task.cancel else tuple(PostEvent("Warning", Reason.WeakCheck, w) for w in seen.warnings)
    queued = Decision(enter(task, status, Phase.Queued, Reason.Validated, "validated; waiting in the queue", format_time(now)), events)
    if task.cancel or task.suspend:
        return _merge(queued, step(_with(task, queued.status), Reconcile(), now, settings))
    return queued


def _refused(task: TaskState, seen: Refused, now: dt.datetime) -> Decision:
    status = task.status
    if task.phase not in (None, Phase.Queued):
        return Decision(status)
    message = "\n".join(cap_lines(seen.message.splitlines() or [seen.message]))
    closed = enter(task, status.model_copy(update={"user": seen.user or status.user}), Phase.Rejected, seen.reason, message, format_time(now))
    # A task that may have been submitted (an earlier operator added the finalizer) is
    # rejected only with its job stopped.
    return Decision(closed, (StopJob(task.submission_id),) if task.holds_finalizer else ())


def _reconcile(task: TaskState, now: dt.datetime, settings: LifecycleSettings) -> Decision:
    """Nothing new: a queued task cancelled before it reached Ray stops; an ended one's
    timer (time to live, Ray job retention) may have run out."""
    status, phase = task.status, task.phase
    if phase is Phase.Queued and task.cancel and not task.holds_finalizer:
        return Decision(enter(task, status, Phase.Stopped, Reason.Cancelled, "cancelled while queued; it never reached Ray", format_time(now)))
    if phase is Phase.Queued and suspension.suspend_asked(task) and not task.holds_finalizer:
        return suspension.left_the_queue(task, status, format_time(now))
    if phase is Phase.Suspended:
        return suspension.reconcile_suspended(task, format_time(now))
    if phase is not None and phase.terminal:
        due = timer_due(task, settings)
        if due is not None and now >= due[0]:
            if due[1] == "ttl":
                return _ttl_ran_out(task, settings)
            return Decision(status, (RemoveRayJobs(tuple(task.submission_ids())),))
    return Decision(status)


def _waiting(task: TaskState, seen: Waiting, now: dt.datetime) -> Decision:
    """The queue left the task waiting: its place and why (Ray unreadable, when that is why)."""
    status = task.status
    if task.phase is not Phase.Queued or task.cancel or task.suspend:
        return Decision(status)
    reason, message = seen.reason, seen.message
    if seen.ray_error is not None:  # the queue could not read Ray's capacity: that is why it waits
        if seen.ray_reason == Reason.RayAuthFailed:
            reason, message = Reason.RayAuthFailed, f"waiting: {ray_refused(seen.ray_error)}"
        else:
            reason, message = Reason.RayUnreachable, f"waiting: cannot read the Ray cluster's capacity ({seen.ray_error[:200]})"
    if reason == Reason.Queued and status.reason == Reason.Preempted:  # what happened to it stays in sight while it waits
        reason, message = Reason.Preempted, f"{(status.message or '').splitlines()[0]}\n{message}"
    status = status.model_copy(update={"reason": reason, "message": message, "preempts": list(seen.preempts) or None})
    reachable = task.condition(ConditionType.RayReachable)
    if seen.ray_error is not None or reachable is None or not reachable.true:
        status = ray_reachable(task, status, seen.ray_error is None, seen.ray_error or "", format_time(now), since=None, reason=seen.ray_reason)
    return Decision(status)


def _admitted(task: TaskState, seen: Admitted) -> Decision:
    if task.phase is not Phase.Queued or task.cancel or task.suspend:
        return Decision(task.status)
    if seen.plan.submission_id != task.submission_id:  # each attempt has its own id: Ray never reuses one
        raise ValueError(f"plan for {seen.plan.submission_id} admitted for attempt {task.attempt} ({task.submission_id})")
    return Decision(task.status, (Submit(seen.plan),))


def _submit_result(task: TaskState, seen: SubmitResult, now: dt.datetime, settings: LifecycleSettings) -> Decision:
    """What Ray said to the submission: a job (new or adopted), a refusal, or no answer."""
    stamp = format_time(now)
    status = task.status
    if task.phase is not Phase.Queued:
        return Decision(status)
    if seen.outcome == "unreachable":
        return Decision(status.model_copy(update={"reason": Reason.RayUnreachable, "message": f"waiting: Ray is unreachable ({seen.detail[:200]})"}))
    if seen.outcome == "auth_failed":
        status = ray_reachable(task, status, False, seen.detail, stamp, reason=Reason.RayAuthFailed)
        return Decision(status.model_copy(update={"reason": Reason.RayAuthFailed, "message": f"waiting: {ray_refused(seen.detail)}"}))
    if seen.outcome == "refused":
        return Decision(enter(task, status, Phase.Failed, Reason.RaySubmitFailed, f"Ray refused the job: {seen.detail}", stamp))
    fresh = seen.outcome == "submitted"
    reason = Reason.Admitted if fresh else Reason.AdoptedExistingJob
    message = (f"submitted to Ray as {seen.submission_id}" if fresh else
               f"Ray already had job {seen.submission_id} (submitted before a restart); adopted it, no second job")
    # A job Ray has just accepted is PENDING by Ray's definition; an adopted one's state
    # is learnt at the next read.
    ray_job = RayJobStatus(submission_id=seen.submission_id, status=RayJobState.PENDING.value if fresh else None,
                           dashboard_url=seen.dashboard_url or settings.dashboard_url)
    status = ray_reachable(task, status, True, "", stamp)  # Ray just answered
    status = status.model_copy(update={"cluster": seen.cluster or None})  # before its attempt's record, which names it
    status = status.model_copy(update={"attempt": task.attempt, "attempts": current_attempts(task, status),
                                       "job_dir": seen.job_dir or status.job_dir, "log_file": seen.log_file or status.log_file})
    return Decision(enter(task, status, Phase.Submitted, reason, message, stamp,
                          admitted_at=status.admitted_at or stamp, ray_job=ray_job))


def _progress(task: TaskState, seen: ProgressObserved) -> Decision:
    status, phase = task.status, task.phase
    if phase is None or phase is Phase.Rejected:
        return Decision(status)
    # Also after the end: a job's last lines reach its log stream a moment after Ray
    # reports it ended.
    status = status.model_copy(update={"progress": seen.progress})
    if status.attempts and phase.terminal and seen.progress.step is not None:
        status = status.model_copy(update={"attempts": current_attempts(task, status)})
    return Decision(status)


# --------------------------------------------------------------------------- what Ray said

def _job_unknown(task: TaskState, now: dt.datetime) -> Decision:
    """Ray answered and has no job with the task's submission id."""
    stamp = format_time(now)
    status, phase = task.status, task.phase
    sid = task.submission_id
    if phase is Phase.Queued:
        if task.cancel:
            return Decision(enter(task, status, Phase.Stopped, Reason.Cancelled,
                                  f"cancelled while queued; it never reached Ray (Ray has no job {sid})", stamp))
        if suspension.suspend_asked(task):
            return suspension.left_the_queue(task, status, stamp)
        return Decision(status)  # not submitted after all: the queue submits it in its turn
    status = ray_reachable(task, status, True, "", stamp)
    if phase in ACTIVE_PHASES and suspension.suspend_asked(task):  # stopped and gone: suspended all the same
        return Decision(suspension.job_stopped(task, status, stamp))
    if phase in ACTIVE_PHASES and preempted.stop_wins(task):  # stopped and gone: back to the queue
        return preempted.requeued(task, status, stamp)
    if phase in ACTIVE_PHASES:
        what = f"Ray no longer knows job {sid}: the Ray head restarted (it keeps no job history) or the job was removed"
        return attempt_ended(task, status, Reason.RayJobLost, what, stamp, retry=task.restart_policy != RestartPolicy.Never.value,
                             final=f"{what}. Argus does not resubmit on its own (spec.restartPolicy: Never); "
                                   "create a new task to run it again")
    return Decision(status)  # a closed task: nothing of it is left in Ray


def _ray_unreachable(task: TaskState, seen: RayUnreachable, now: dt.datetime, settings: LifecycleSettings) -> Decision:
    """Ray could not be asked: an active task fails once the grace has passed (never for
    refused credentials: Ray answered)."""
    stamp = format_time(now)
    status = task.status
    if task.phase not in ACTIVE_PHASES:
        return Decision(status)
    if seen.reason == Reason.RayAuthFailed:  # Ray answered: no outage, no grace counted (see the docstring)
        return Decision(ray_reachable(task, status, False, seen.error, stamp, reason=Reason.RayAuthFailed))
    since = status.ray_unreachable_since or stamp
    elapsed = (now - (parse_time(since) or now)).total_seconds()
    status = ray_reachable(task, status, False, seen.error, stamp, since=since)
    if elapsed >= settings.ray_grace_seconds:
        message = f"Ray was unreachable for {int(elapsed)} s (grace {int(settings.ray_grace_seconds)} s): {seen.error[:200]}"
        return Decision(enter(task, status, Phase.Failed, Reason.RayUnreachable, message, stamp, ray_unreachable_since=since))
    return Decision(status)


def _job_observed(task: TaskState, job: JobObserved, now: dt.datetime, settings: LifecycleSettings) -> Decision:
    stamp = format_time(now)
    status = ray_reachable(task, task.status, True, "", stamp)
    phase = task.phase
    sid = task.submission_id
    if phase not in (Phase.Queued, *ACTIVE_PHASES):
        # A task closed while Ray could not be asked: Ray answers again, stop what runs.
        return Decision(status, (StopJob(sid),) if job.active else ())
    actions: list[Action] = []
    if phase is Phase.Queued:
        # The job reached Ray before the status said so (the operator died in between):
        # adopt it, never a second job.
        adopted = f"Ray already had job {sid} (submitted before a restart); adopted it, no second job"
        status = status.model_copy(update={"cluster": job.cluster or None})  # where it was found
        status = enter(task, status, Phase.Submitted, Reason.AdoptedExistingJob, adopted, stamp, admitted_at=status.admitted_at or stamp,
                       attempt=task.attempt)
        actions.append(PostEvent("Normal", Reason.AdoptedExistingJob, adopted))
    cancelled, late = task.cancel, task.deadline_passed(now)
    stop = cancelled or late or task.suspend or task.preempting
    if stop and job.active:
        actions.append(StopJob(sid))  # the next read sees it stopped
    previous = task.status.ray_job
    ray_job = RayJobStatus(
        submission_id=sid, status=job.reported, driver_node_id=job.driver_node_id,
        start_time=from_epoch_ms(job.start_time_ms), end_time=from_epoch_ms(job.end_time_ms),
        dashboard_url=job.dashboard_url or (previous.dashboard_url if previous and previous.dashboard_url else settings.dashboard_url),
    )
    status = status.model_copy(update={"ray_job": ray_job, "ray_unreachable_since": None})
    if job.driver_on_worker is False and job.driver_node_id != (previous.driver_node_id if previous else None):
        actions.append(PostEvent("Warning", Reason.PlacementViolation,
                                 f"the driver runs on node {job.driver_node_id}, which lacks the '{settings.worker_resource}' resource (the head?)"))
    if stop and job.active:
        return Decision(status, tuple(actions))
    new_phase, reason = phase_for_ray(job.status, cancelled=cancelled, deadline_exceeded=late)
    if reason == Reason.RayJobStopped and suspension.suspend_asked(task):
        return Decision(suspension.job_stopped(task, status, stamp), tuple(actions))
    if reason == Reason.RayJobStopped and preempted.stop_wins(task):
        return Decision(preempted.requeued(task, status, stamp).status, tuple(actions))
    if task.preempting and not job.active:  # it ended on its own before the stop: as it would have
        status = status.model_copy(update={"preempted_by": None})
    message = job.message or reason
    if reason == Reason.DeadlineExceeded:
        message = f"stopped after activeDeadlineSeconds={task.active_deadline_seconds} from admission"
    elif reason == Reason.Cancelled:
        message = "stopped because spec.cancel was set"
    if new_phase is Phase.Submitted and Phase(status.phase) is Phase.Submitted:
        # Still pending: the submission's reason and message stay, and so does the recorded
        # job unless its state is new to us (Ray's start time comes with RUNNING: one write).
        if previous is not None and previous.status == job.reported:
            status = status.model_copy(update={"ray_job": previous})
        return Decision(status, tuple(actions))
    if reason == Reason.RayJobFailed:
        what = f"job {sid} failed: {job.message or 'the command exited with an error'}"
        decided = attempt_ended(task, status, Reason.RayJobFailed, what, stamp, retry=task.restart_policy == RestartPolicy.OnFailure.value,
                                 final=job.message or reason)
        return Decision(decided.status, tuple(actions) + decided.actions)
    status = status.model_copy(update={"attempts": current_attempts(task, status, outcome=reason if new_phase.terminal else None)})
    return Decision(enter(task, status, new_phase, reason, message, stamp), tuple(actions))


def _deleting(task: TaskState, seen: Observation, now: dt.datetime, settings: LifecycleSettings) -> Decision:
    """A deleted task: stop its job (if it may have one), then let the object go."""
    keep = Decision(task.status)
    if not task.holds_finalizer:
        return keep
    gone = (RemoveRayJobs(tuple(task.submission_ids())), ReleaseFinalizer())
    if isinstance(seen, JobObserved):
        return Decision(task.status, (StopJob(task.submission_id),) if seen.active else gone)
    if isinstance(seen, JobUnknown):
        return Decision(task.status, gone)
    if isinstance(seen, RayUnreachable):
        waited = (now - task.deleting_since).total_seconds() if task.deleting_since else 0.0
        if waited >= settings.delete_grace_seconds:
            what = "Ray refused the operator's credentials" if seen.reason == Reason.RayAuthFailed else "Ray unreachable"
            return Decision(task.status, (
                PostEvent("Warning", Reason.FinalizerReleased,
                          f"{what} for {int(waited)} s (delete grace {int(settings.delete_grace_seconds)} s); "
                          f"released without stopping {task.submission_id}: {seen.error[:200]}"),
                ReleaseFinalizer(),
            ))
    return keep


def needs_look(task: TaskState, now: dt.datetime, settings: LifecycleSettings) -> bool:
    """Whether ``step`` must see the task with ``Reconcile`` now, with nothing new from Ray:
    a queued task cancelled before it could reach Ray (no finalizer: nothing to ask Ray), a
    suspension to make or undo (``core.suspension.needs_look``), or an ended one whose timer (``timer_due``) has run out."""
    if task.deleting:
        return False
    if (task.phase is Phase.Queued and task.cancel and not task.holds_finalizer) or suspension.needs_look(task):
        return True
    timer = timer_due(task, settings)
    return timer is not None and timer[0] <= now


def timer_due(task: TaskState, settings: LifecycleSettings) -> tuple[dt.datetime, Literal["ttl", "retention"]] | None:
    """When an ended task next needs the operator without anything happening: its time to
    live runs out (delete it), or its Ray jobs' retention does (remove them from Ray). A task
    kept past its TTL for GitOps (``_ttl_ran_out``) has its Ray jobs removed then instead."""
    phase = task.phase
    finished = parse_time(task.status.finished_at)
    if phase is None or not phase.terminal or finished is None or task.deleting:
        return None
    due: list[tuple[dt.datetime, Literal["ttl", "retention"]]] = []
    retention = settings.ray_job_retention_seconds
    ttl = task.ttl_seconds_after_finished if task.ttl_seconds_after_finished is not None else settings.default_ttl_seconds
    if ttl is not None:
        if task.status.kept_by and _tracker(task, settings):
            retention = ttl if retention is None else min(ttl, retention)  # kept: its Ray jobs still go (again if that failed)
        else:
            due.append((finished + dt.timedelta(seconds=ttl), "ttl"))
    if retention is not None and not task.status.ray_jobs_removed and task.status.attempts:
        due.append((finished + dt.timedelta(seconds=retention), "retention"))
    return min(due, default=None, key=lambda d: d[0])


def _tracker(task: TaskState, settings: LifecycleSettings) -> str | None:
    return tracked_by(task.namespace, task.name, task.labels, task.annotations, settings.gitops_tracking_label)


def _ttl_ran_out(task: TaskState, settings: LifecycleSettings) -> Decision:
    """Delete the task, unless a GitOps tool tracks it: Argo CD would create it again from Git
    (a new UID, a new Ray job: the training run again, after every TTL). Such a task is kept,
    says so once (``status.keptBy`` and an Event), and its Ray jobs leave Ray's history."""
    keeper = _tracker(task, settings)
    if keeper is None:
        return Decision(task.status, (DeleteTask(),))
    actions: list[Action] = []
    if not task.status.ray_jobs_removed and task.status.attempts:
        actions.append(RemoveRayJobs(tuple(task.submission_ids())))
    actions.append(PostEvent("Normal", Reason.KeptForGitOps,
                             f"ttlSecondsAfterFinished ran out, but {keeper} tracks this task: deleting it would make Argo CD "
                             "create it again from Git and run the training again. Kept (its Ray jobs leave Ray's job history); "
                             "delete it through Git: remove its file, then let Argo CD prune it (docs/argocd.md)"))
    return Decision(task.status.model_copy(update={"kept_by": keeper}), tuple(actions))


def _with(task: TaskState, status: ArgusTaskStatus) -> TaskState:
    return TaskState(**{**task.__dict__, "status": status})


def _merge(first: Decision, second: Decision) -> Decision:
    return Decision(second.status, first.actions + second.actions)
