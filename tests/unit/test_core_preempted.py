"""A preempted task's moves through the lifecycle (``core.preempted`` via ``lifecycle.step``):
told Preempt, its job is stopped; once Ray says it stopped (or forgot it) it is Queued again
with reason Preempted, its next attempt resumes, and the attempt is no restart. Expectations
are written out literally."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from argus.core import lifecycle as lc
from argus.core import preempted
from argus.core.lifecycle import JobObserved, JobUnknown, LifecycleSettings, PostEvent, Preempt, StopJob, TaskState
from argus.core.rayjobs import RayJobState
from argus.core.spec import ArgusTaskStatus, AttemptRecord, RayJobStatus, TaskProgress
from argus.core.vocabulary import Reason

pytestmark = pytest.mark.unit

T0 = dt.datetime(2026, 12, 6, 8, 0, 0, tzinfo=dt.UTC)
SETTINGS = LifecycleSettings()
UID = "0a1b2c3d-0000-0000-0000-000000000000"
BY = "team-a/urgent-eval"
SAYS = "preempted for team-a/urgent-eval (priority 10): it loses 2 steps since its checkpoint at step 10"


def running(**changes: object) -> TaskState:
    sid = lc.TaskState(namespace="ns", name="t", uid=UID, status=ArgusTaskStatus()).submission_id
    status = ArgusTaskStatus(phase="Running", reason=Reason.RayJobRunning, message="m", attempt=1,
                             ray_job=RayJobStatus(submission_id=sid, status="RUNNING"), progress=TaskProgress(step=12),
                             attempts=[AttemptRecord(attempt=1, submission_id=sid)])
    task = TaskState(namespace="ns", name="t", uid=UID, status=status, generation=1, holds_finalizer=True, restart_policy="OnFailure",
                     backoff_limit=1)
    return dataclasses.replace(task, **changes) if changes else task


def after(task: TaskState, decision: lc.Decision) -> TaskState:
    return dataclasses.replace(task, status=decision.status)


def test_a_victim_is_told_and_its_job_stopped() -> None:
    t = running()
    d = lc.step(t, Preempt(BY, SAYS), T0, SETTINGS)
    assert (d.status.phase, d.status.reason, d.status.preempted_by, d.status.message) == ("Running", "Preempting", BY, SAYS)
    assert d.actions == (StopJob(t.submission_id), PostEvent("Normal", "Preempted", SAYS))
    assert lc.stopping(after(t, d), T0)  # read often until it has stopped


def test_while_it_stops_its_job_is_stopped_again_and_it_keeps_its_phase() -> None:
    t = after(running(), lc.step(running(), Preempt(BY, SAYS), T0, SETTINGS))
    d = lc.step(t, JobObserved(RayJobState.RUNNING), T0, SETTINGS)
    assert (d.status.phase, d.status.reason) == ("Running", "Preempting")
    assert StopJob(t.submission_id) in d.actions


@pytest.mark.parametrize("gone", [JobObserved(RayJobState.STOPPED), JobUnknown()], ids=["stopped", "forgotten"])
def test_once_stopped_it_is_queued_again_for_a_new_attempt_that_resumes(gone: lc.Observation) -> None:
    t = after(running(), lc.step(running(), Preempt(BY, SAYS), T0, SETTINGS))
    d = lc.step(t, gone, T0, SETTINGS)
    s = d.status
    assert (s.phase, s.reason, s.attempt, s.preempted_by, s.ray_job) == ("Queued", "Preempted", 2, None, None)
    assert s.message == ("preempted at step 12: team-a/urgent-eval took attempt 1's GPUs; attempt 2 waits in the queue and resumes "
                         "from the newest checkpoint in the job folder (a preemption is no restart: spec.backoffLimit is untouched)")
    assert [(r.attempt, r.outcome, r.last_step) for r in s.attempts or ()] == [(1, "Preempted", 12)]


def test_a_preemption_is_no_restart_against_the_backoff_limit() -> None:
    """backoffLimit 1: after a preemption (attempt 1) and a failure (attempt 2), attempt 3 still runs."""
    t = after(running(), lc.step(running(), Preempt(BY, SAYS), T0, SETTINGS))
    queued = after(t, lc.step(t, JobObserved(RayJobState.STOPPED), T0, SETTINGS))
    sid2 = queued.submission_id
    running2 = after(queued, lc.Decision(queued.status.model_copy(update={
        "phase": "Running", "reason": "RayJobRunning", "ray_job": RayJobStatus(submission_id=sid2, status="RUNNING")})))
    d = lc.step(running2, JobObserved(RayJobState.FAILED, "exit 1"), T0, SETTINGS)
    assert (d.status.phase, d.status.reason, d.status.attempt) == ("Queued", "Retrying", 3)
    assert "restart 1 of 1" in (d.status.message or "")


def test_a_job_that_ends_on_its_own_before_the_stop_ends_as_it_would_have() -> None:
    t = after(running(), lc.step(running(), Preempt(BY, SAYS), T0, SETTINGS))
    d = lc.step(t, JobObserved(RayJobState.SUCCEEDED), T0, SETTINGS)
    assert (d.status.phase, d.status.reason, d.status.preempted_by) == ("Succeeded", "RayJobSucceeded", None)


def test_a_cancel_or_a_suspension_meanwhile_wins() -> None:
    t = after(running(), lc.step(running(), Preempt(BY, SAYS), T0, SETTINGS))
    cancelled = lc.step(dataclasses.replace(t, cancel=True), JobObserved(RayJobState.STOPPED), T0, SETTINGS)
    assert (cancelled.status.phase, cancelled.status.reason) == ("Stopped", "Cancelled")
    suspended = lc.step(dataclasses.replace(t, suspend=True), JobObserved(RayJobState.STOPPED), T0, SETTINGS)
    assert (suspended.status.phase, suspended.status.reason) == ("Suspended", "Suspended")


@pytest.mark.parametrize("phase", ["Queued", "Succeeded", "Suspended"])
def test_only_an_active_task_can_be_preempted(phase: str) -> None:
    t = dataclasses.replace(running(), status=ArgusTaskStatus(phase=phase, reason="x", message="m"))
    d = lc.step(t, Preempt(BY, SAYS), T0, SETTINGS, undeclared=lambda _: None)
    assert d.status == t.status and d.actions == ()


def test_a_task_already_stopping_is_not_preempted_twice() -> None:
    t = after(running(), lc.step(running(), Preempt(BY, SAYS), T0, SETTINGS))
    d = lc.step(t, Preempt("team-b/other", "another"), T0, SETTINGS)
    assert d.status.preempted_by == BY and d.actions == ()


def test_a_victim_that_cannot_resume_is_told_so_and_goes_back_to_the_queue_saying_it_starts_over() -> None:
    told = preempted.victim_message(BY, 10, 0, 12, resumes=False)
    assert told == ("preempted for team-a/urgent-eval (priority 10, above its own 0): it cannot resume (no checkpoint to resume from, "
                    "or trainer.resume_mode=disable), so it loses all 12 step(s) of this attempt; it goes back to the queue and its "
                    "next attempt starts over from the first step (such a task is preempted last: only when no set of resumable tasks "
                    "would do)")
    t = after(running(), lc.step(running(), Preempt(BY, told), T0, SETTINGS))
    s = lc.step(t, JobObserved(RayJobState.STOPPED), T0, SETTINGS).status
    assert s.message == ("preempted at step 12: team-a/urgent-eval took attempt 1's GPUs; attempt 2 waits in the queue and starts over "
                         "from the first step: it cannot resume (no checkpoint, or trainer.resume_mode=disable) (a preemption is no "
                         "restart: spec.backoffLimit is untouched)")
    assert "resumes from" in preempted.victim_message(BY, 10, 0, 2, resumes=True)
