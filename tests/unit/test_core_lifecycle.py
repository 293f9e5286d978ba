"""The lifecycle state machine (``core.lifecycle.step``), transition by transition: for a
task in a given state and one observation, the status it gets and the actions that follow.
Expectations are written out literally, never computed with the code under test."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from argus.core import lifecycle as lc
from argus.core.conditions import Condition
from argus.core.lifecycle import (
    Admitted,
    DeleteTask,
    JobObserved,
    JobUnknown,
    LifecycleSettings,
    PostEvent,
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
    TaskState,
    Validated,
    Waiting,
    needs_look,
    needs_ray,
    phase_for_ray,
    timer_due,
)
from argus.core.lifecycle import (
    step as _step,
)
from argus.core.rayjobs import RayJobState
from argus.core.spec import ArgusTaskStatus, AttemptRecord, Phase, RayJobStatus, TaskProgress
from argus.core.submission import SubmissionPlan
from argus.core.vocabulary import REASONS_BY_PHASE, Reason

pytestmark = pytest.mark.unit

T0 = dt.datetime(2026, 12, 3, 8, 0, 0, tzinfo=dt.UTC)
SETTINGS = LifecycleSettings(ray_grace_seconds=300, delete_grace_seconds=120, dashboard_url="http://ray:8265")
SID = "argus-ns-t-0a1b2c3d"
PLAN = SubmissionPlan(submission_id=SID, user="alice", command="python3 -m verl.trainer.main_ppo", entrypoint="bash -lc x",
                      entrypoint_resources={"worker_node": 1}, runtime_env={}, metadata={}, job_dir="/private/users/alice/jobs/x", gpus=1)


def step(task: TaskState, seen: lc.Observation, now: dt.datetime, settings: LifecycleSettings) -> lc.Decision:
    """``lifecycle.step``, with every status it writes checked against the vocabulary: a
    reason it sets is one the phase may carry (docs/lifecycle.md's table, REASONS_BY_PHASE),
    and every Event's reason is a Reason."""
    decision = _step(task, seen, now, settings)
    status = decision.status
    if status.phase and (status.phase, status.reason) != (task.status.phase, task.status.reason):
        assert status.reason in REASONS_BY_PHASE[Phase(status.phase)], f"{status.phase} with reason {status.reason}"
    for event in (a for a in decision.actions if isinstance(a, PostEvent)):
        assert event.reason in set(Reason), event.reason
    return decision


def task(phase: str | None = None, *, reason: str | None = None, cancel: bool = False, finalizer: bool = False,
         deleting: dt.datetime | None = None, deadline: int | None = None, **status: object) -> TaskState:
    ray_job = status.pop("ray_job", None)
    s = ArgusTaskStatus(phase=phase, reason=reason, **status)
    if ray_job is not None:
        s = s.model_copy(update={"ray_job": ray_job})
    elif phase in ("Submitted", "Running"):
        s = s.model_copy(update={"ray_job": RayJobStatus(submission_id=SID, status="RUNNING" if phase == "Running" else "PENDING")})
    return TaskState(namespace="ns", name="t", uid="0a1b2c3d-0000-0000-0000-000000000000", status=s, generation=1,
                     cancel=cancel, active_deadline_seconds=deadline, deleting_since=deleting, holds_finalizer=finalizer)


def conditions(status: ArgusTaskStatus) -> dict[str, str]:
    return {c.type: c.status for c in status.conditions or []}


def running(**kw: object) -> TaskState:
    return task("Running", reason="RayJobRunning", admitted_at="2026-12-03T07:59:00Z", finalizer=True, **kw)


# --------------------------------------------------------------------------- new tasks

def test_validated_task_is_queued_with_its_user_command_and_warnings() -> None:
    d = step(task(), Validated("alice", "python3 -m verl.trainer.main_ppo x=1", ("no data files",)), T0, SETTINGS)
    s = d.status
    assert (s.phase, s.reason, s.user, s.command, s.warnings) == ("Queued", "Validated", "alice", "python3 -m verl.trainer.main_ppo x=1", ["no data files"])
    assert conditions(s) == {"Admitted": "False", "Running": "False", "Complete": "False", "Failed": "False", "Finished": "False"}
    assert d.actions == (PostEvent("Warning", "WeakCheck", "no data files"),)


def test_validated_task_says_which_verl_config_tree_checked_it() -> None:
    s = step(task(), Validated("alice", "cmd", (), ("0.9.1", "release")), T0, SETTINGS).status
    assert s.verl is not None and (s.verl.version, s.verl.source) == ("0.9.1", "release")
    assert s.model_dump(by_alias=True, exclude_none=True)["verl"] == {"version": "0.9.1", "source": "release"}
    assert step(task(), Validated("alice", "cmd"), T0, SETTINGS).status.verl is None


def test_a_task_cancelled_before_validation_is_stopped_without_reaching_ray() -> None:
    d = step(task(cancel=True), Validated("alice", "cmd"), T0, SETTINGS)
    assert (d.status.phase, d.status.reason) == ("Stopped", "Cancelled")
    assert "never reached Ray" in d.status.message
    # Finished is the one condition true at every end (kubectl wait --for=condition=Finished);
    # never admitted, so Admitted stays False.
    assert conditions(d.status) == {"Admitted": "False", "Running": "False", "Complete": "False", "Failed": "False", "Finished": "True"}
    assert not [a for a in d.actions if isinstance(a, (StopJob, Submit))]


def test_refused_task_is_rejected_with_every_problem_capped_at_100_lines() -> None:
    problems = "\n".join(f"spec.command: 'x{i}': bad" for i in range(250))
    d = step(task(), Refused("InvalidSpec", problems, "alice"), T0, SETTINGS)
    lines = d.status.message.splitlines()
    assert (d.status.phase, d.status.reason, d.status.user) == ("Rejected", "InvalidSpec", "alice")
    assert len(lines) == 101 and lines[0] == "spec.command: 'x0': bad" and lines[99] == "spec.command: 'x99': bad"
    assert lines[100] == "... and 150 more problems (argus validate shows them all)"
    assert conditions(d.status)["Failed"] == "True" and conditions(d.status)["Admitted"] == "False"
    # the Failed condition carries the first problem, not the whole list
    failed = next(c for c in d.status.conditions if c.type == "Failed")
    assert failed.message == "spec.command: 'x0': bad"
    assert d.actions == ()


def test_refusing_a_task_that_may_have_reached_ray_stops_its_job() -> None:
    d = step(task("Queued", finalizer=True), Refused("InvalidSpec", "spec.command: 'x': bad"), T0, SETTINGS)
    assert d.status.phase == "Rejected" and d.actions == (StopJob("argus-ns-t-0a1b2c3d"),)


# --------------------------------------------------------------------------- the queue

def test_waiting_sets_the_reason_and_message_and_no_place() -> None:
    d = step(task("Queued", reason="Validated"), Waiting("Queued", "waiting for 4 free GPUs"), T0, SETTINGS)
    assert (d.status.reason, d.status.message) == ("Queued", "waiting for 4 free GPUs")
    assert "queuePosition" not in d.status.model_dump(by_alias=True)  # places are served on demand
    assert conditions(d.status)["RayReachable"] == "True"
    assert d.actions == ()


def test_waiting_while_ray_is_unreachable_says_so() -> None:
    d = step(task("Queued"), Waiting("Queued", "waiting behind tasks ahead in the queue", "connection refused"), T0, SETTINGS)
    reach = next(c for c in d.status.conditions if c.type == "RayReachable")
    assert (reach.status, reach.reason, reach.message) == ("False", "RayUnreachable", "connection refused")
    # Why it waits is Ray, whatever the queue said (it decided without Ray's capacity).
    assert (d.status.reason, d.status.message) == ("RayUnreachable", "waiting: cannot read the Ray cluster's capacity (connection refused)")


def test_waiting_while_ray_refuses_the_credentials_says_to_check_the_token() -> None:
    d = step(task("Queued"), Waiting("Queued", "waiting behind tasks ahead in the queue", "HTTP 401: the Ray cluster requires a token and none was sent",
                                     ray_reason="RayAuthFailed"), T0, SETTINGS)
    reach = next(c for c in d.status.conditions if c.type == "RayReachable")
    assert (reach.status, reach.reason) == ("False", "RayAuthFailed")
    assert reach.message == ("Ray refused the operator's credentials (HTTP 401: the Ray cluster requires a token and none was sent): "
                             "check the Ray token the operator is given (--ray-token-file)")
    assert (d.status.phase, d.status.reason, d.status.message) == ("Queued", "RayAuthFailed", f"waiting: {reach.message}")


def test_a_look_is_needed_for_a_cancelled_queued_task_that_never_reached_ray_and_for_timers_that_ran_out() -> None:
    assert needs_look(task("Queued", cancel=True), T0, SETTINGS)
    assert not needs_look(task("Queued", cancel=True, finalizer=True), T0, SETTINGS)  # it may have reached Ray: Ray is asked
    assert not needs_look(task("Queued", cancel=True, deleting=T0), T0, SETTINGS)
    assert not needs_look(task("Queued"), T0, SETTINGS)
    ttl = dataclasses.replace(SETTINGS, default_ttl_seconds=60)
    ended = task("Succeeded", reason="RayJobSucceeded", finished_at="2026-12-03T08:00:00Z")
    assert not needs_look(ended, T0 + dt.timedelta(seconds=59), ttl)
    assert needs_look(ended, T0 + dt.timedelta(seconds=60), ttl)


def test_a_queued_task_shows_ray_reachable_again_once_ray_answers() -> None:
    refused = [Condition(type="RayReachable", status="False", reason="RayAuthFailed", message="x", last_transition_time="2026-12-03T07:50:00Z")]
    d = step(task("Queued", conditions=refused), Waiting("Queued", "waiting behind tasks ahead in the queue"), T0, SETTINGS)
    reach = next(c for c in d.status.conditions if c.type == "RayReachable")
    assert (reach.status, reach.reason, reach.last_transition_time) == ("True", "RayReachable", "2026-12-03T08:00:00Z")


def test_admitted_task_is_submitted() -> None:
    assert step(task("Queued"), Admitted(PLAN), T0, SETTINGS).actions == (Submit(PLAN),)


def test_admission_of_a_task_cancelled_meanwhile_submits_nothing() -> None:
    assert step(task("Queued", cancel=True), Admitted(PLAN), T0, SETTINGS).actions == ()


@pytest.mark.parametrize("outcome,reason,message", [
    ("submitted", "Admitted", "submitted to Ray as argus-ns-t-0a1b2c3d"),
    ("adopted", "AdoptedExistingJob", "Ray already had job argus-ns-t-0a1b2c3d (submitted before a restart); adopted it, no second job"),
])
def test_a_submission_makes_the_task_submitted(outcome: str, reason: str, message: str) -> None:
    d = step(task("Queued"), SubmitResult(outcome, SID), T0, SETTINGS)
    s = d.status
    assert (s.phase, s.reason, s.message, s.admitted_at) == ("Submitted", reason, message, "2026-12-03T08:00:00Z")
    assert s.ray_job.submission_id == SID and s.ray_job.dashboard_url == "http://ray:8265"
    assert s.ray_job.status == ("PENDING" if outcome == "submitted" else None)
    assert conditions(s)["Admitted"] == "True"


def test_ray_unreachable_at_submission_keeps_the_task_queued() -> None:
    d = step(task("Queued"), SubmitResult("unreachable", SID, "ConnectionError: refused"), T0, SETTINGS)
    assert (d.status.phase, d.status.reason) == ("Queued", "RayUnreachable")
    assert d.status.message == "waiting: Ray is unreachable (ConnectionError: refused)"


def test_ray_refusing_the_credentials_at_submission_keeps_the_task_queued() -> None:
    d = step(task("Queued"), SubmitResult("auth_failed", SID, "HTTP 403: the Ray cluster did not accept the token that was sent"), T0, SETTINGS)
    assert (d.status.phase, d.status.reason) == ("Queued", "RayAuthFailed")
    assert d.status.message == ("waiting: Ray refused the operator's credentials (HTTP 403: the Ray cluster did not accept the token that was sent): "
                                "check the Ray token the operator is given (--ray-token-file)")
    assert conditions(d.status) == {"RayReachable": "False"}
    assert d.actions == ()


def test_ray_refusing_the_submission_fails_the_task() -> None:
    d = step(task("Queued"), SubmitResult("refused", SID, "entrypoint_resources must be a dict"), T0, SETTINGS)
    assert (d.status.phase, d.status.reason, d.status.message) == ("Failed", "RaySubmitFailed", "Ray refused the job: entrypoint_resources must be a dict")


def test_queued_cancel_without_finalizer_never_reached_ray() -> None:
    d = step(task("Queued", cancel=True), Reconcile(), T0, SETTINGS)
    assert (d.status.phase, d.status.reason, d.status.message) == ("Stopped", "Cancelled", "cancelled while queued; it never reached Ray")
    assert d.actions == ()


def test_queued_cancel_with_finalizer_waits_for_rays_answer() -> None:
    """The issue-18 bug: a task whose job may be in Ray is not closed without asking Ray."""
    t = task("Queued", cancel=True, finalizer=True)
    assert needs_ray(t)
    assert step(t, Reconcile(), T0, SETTINGS).status.phase == "Queued"
    unknown = step(t, JobUnknown(), T0, SETTINGS)
    assert (unknown.status.phase, unknown.status.reason) == ("Stopped", "Cancelled")
    assert "Ray has no job argus-ns-t-0a1b2c3d" in unknown.status.message


def test_queued_cancel_finds_the_orphaned_job_and_stops_it() -> None:
    """The job reached Ray but its Submitted status was never written (the operator died):
    the cancel adopts it and stops it, and the task is not Stopped until Ray says so."""
    t = task("Queued", cancel=True, finalizer=True)
    d = step(t, JobObserved(RayJobState.RUNNING), T0, SETTINGS)
    assert StopJob(SID) in d.actions
    assert d.status.phase == "Submitted" and d.status.reason == "AdoptedExistingJob"
    assert PostEvent("Normal", "AdoptedExistingJob", "Ray already had job argus-ns-t-0a1b2c3d (submitted before a restart); adopted it, no second job") in d.actions
    stopped = step(lc.TaskState(**{**t.__dict__, "status": d.status}), JobObserved(RayJobState.STOPPED), T0, SETTINGS)
    assert (stopped.status.phase, stopped.status.reason) == ("Stopped", "Cancelled")


def test_a_queued_task_found_running_in_ray_is_adopted_not_resubmitted() -> None:
    d = step(task("Queued", finalizer=True), JobObserved(RayJobState.RUNNING, driver_node_id="w1", start_time_ms=1_796_284_800_000), T0, SETTINGS)
    assert (d.status.phase, d.status.reason) == ("Running", "RayJobRunning")
    assert d.status.admitted_at == "2026-12-03T08:00:00Z"
    assert d.status.ray_job.start_time == "2026-12-03T08:00:00Z"
    assert not [a for a in d.actions if isinstance(a, (Submit, StopJob))]


def test_a_queued_task_unknown_to_ray_stays_queued() -> None:
    d = step(task("Queued", finalizer=True, reason="Queued"), JobUnknown(), T0, SETTINGS)
    assert d.status.phase == "Queued" and d.status.reason == "Queued" and d.actions == ()


# --------------------------------------------------------------------------- following Ray

@pytest.mark.parametrize("ray,cancelled,late,expected", [
    (RayJobState.PENDING, False, False, (Phase.Submitted, "RayJobPending")),
    (RayJobState.RUNNING, False, False, (Phase.Running, "RayJobRunning")),
    (RayJobState.SUCCEEDED, False, False, (Phase.Succeeded, "RayJobSucceeded")),
    (RayJobState.FAILED, False, False, (Phase.Failed, "RayJobFailed")),
    (RayJobState.STOPPED, False, False, (Phase.Stopped, "RayJobStopped")),
    (RayJobState.STOPPED, True, False, (Phase.Stopped, "Cancelled")),
    (RayJobState.STOPPED, False, True, (Phase.Failed, "DeadlineExceeded")),
    (RayJobState.STOPPED, True, True, (Phase.Failed, "DeadlineExceeded")),
    (RayJobState.FAILED, True, False, (Phase.Stopped, "Cancelled")),
    (RayJobState.SUCCEEDED, True, False, (Phase.Succeeded, "RayJobSucceeded")),  # finished before the stop: the truth
    (None, False, False, (Phase.Submitted, "RayJobPending")),  # a state this Argus does not know (a newer Ray's)
])
def test_phase_for_ray(ray: RayJobState | None, cancelled: bool, late: bool, expected: tuple[Phase, str]) -> None:
    assert phase_for_ray(ray, cancelled=cancelled, deadline_exceeded=late) == expected


def test_running_job_marks_the_task_running() -> None:
    t = task("Submitted", reason="Admitted", admitted_at="2026-12-03T07:59:59Z", finalizer=True)
    d = step(t, JobObserved(RayJobState.RUNNING, "Job is currently running.", "w1", 1_796_284_800_000, None, True), T0, SETTINGS)
    s = d.status
    assert (s.phase, s.reason, s.message) == ("Running", "RayJobRunning", "Job is currently running.")
    assert (s.ray_job.status, s.ray_job.driver_node_id, s.ray_job.start_time, s.ray_job.end_time) == ("RUNNING", "w1", "2026-12-03T08:00:00Z", None)
    assert conditions(s) == {"RayReachable": "True", "Admitted": "True", "Running": "True", "Complete": "False", "Failed": "False", "Finished": "False"}
    assert d.actions == ()


def test_a_pending_job_keeps_the_submissions_words() -> None:
    t = task("Submitted", reason="Admitted", message="submitted to Ray as x", finalizer=True)
    d = step(t, JobObserved(RayJobState.PENDING), T0, SETTINGS)
    assert (d.status.phase, d.status.reason, d.status.message) == ("Submitted", "Admitted", "submitted to Ray as x")


def test_succeeded_job_completes_the_task() -> None:
    d = step(running(), JobObserved(RayJobState.SUCCEEDED, "Job finished successfully.", "w1", 1, 1_796_284_860_000), T0, SETTINGS)
    assert (d.status.phase, d.status.reason) == ("Succeeded", "RayJobSucceeded")
    assert d.status.ray_job.end_time == "2026-12-03T08:01:00Z"
    assert conditions(d.status)["Complete"] == "True" and conditions(d.status)["Running"] == "False"


def test_cancel_stops_a_running_job_and_waits_for_ray() -> None:
    d = step(running(cancel=True), JobObserved(RayJobState.RUNNING), T0, SETTINGS)
    assert d.actions == (StopJob(SID),) and d.status.phase == "Running"
    after = step(running(cancel=True), JobObserved(RayJobState.STOPPED), T0, SETTINGS)
    assert (after.status.phase, after.status.reason, after.status.message) == ("Stopped", "Cancelled", "stopped because spec.cancel was set")
    assert after.actions == ()


def test_the_deadline_counts_from_admission() -> None:
    t = running(deadline=60)  # admitted 07:59:00
    assert step(t, JobObserved(RayJobState.RUNNING), T0 - dt.timedelta(seconds=1), SETTINGS).actions == ()
    assert step(t, JobObserved(RayJobState.RUNNING), T0, SETTINGS).actions == (StopJob(SID),)
    late = step(t, JobObserved(RayJobState.STOPPED), T0, SETTINGS)
    assert (late.status.phase, late.status.reason, late.status.message) == ("Failed", "DeadlineExceeded", "stopped after activeDeadlineSeconds=60 from admission")


def test_a_job_ray_forgot_is_lost_never_resubmitted() -> None:
    d = step(running(), JobUnknown(), T0, SETTINGS)
    assert (d.status.phase, d.status.reason) == ("Failed", "RayJobLost")
    assert "does not resubmit" in d.status.message
    assert not [a for a in d.actions if isinstance(a, Submit)]


def test_driver_on_the_head_is_a_placement_violation() -> None:
    d = step(running(), JobObserved(RayJobState.RUNNING, driver_node_id="head", driver_on_worker=False), T0, SETTINGS)
    assert PostEvent("Warning", "PlacementViolation", "the driver runs on node head, which lacks the 'worker_node' resource (the head?)") in d.actions
    # once reported, the same node is not reported again
    again = running(ray_job=RayJobStatus(submission_id=SID, status="RUNNING", driver_node_id="head"))
    assert step(again, JobObserved(RayJobState.RUNNING, driver_node_id="head", driver_on_worker=False), T0, SETTINGS).actions == ()
    assert step(running(), JobObserved(RayJobState.RUNNING, driver_node_id="w1", driver_on_worker=True), T0, SETTINGS).actions == ()


def test_ray_unreachable_within_the_grace_only_says_so() -> None:
    d = step(running(), RayUnreachable("ConnectionError: refused"), T0, SETTINGS)
    assert d.status.phase == "Running" and d.status.ray_unreachable_since == "2026-12-03T08:00:00Z"
    reach = next(c for c in d.status.conditions if c.type == "RayReachable")
    assert (reach.status, reach.reason, reach.message, reach.last_transition_time) == ("False", "RayUnreachable", "ConnectionError: refused", "2026-12-03T08:00:00Z")


def test_ray_unreachable_past_the_grace_fails_the_task() -> None:
    t = running(ray_unreachable_since="2026-12-03T07:55:00Z")
    d = step(t, RayUnreachable("timeout"), T0, SETTINGS)  # 300 s later
    assert (d.status.phase, d.status.reason) == ("Failed", "RayUnreachable")
    assert d.status.message == "Ray was unreachable for 300 s (grace 300 s): timeout"
    just_before = step(t, RayUnreachable("timeout"), T0 - dt.timedelta(seconds=1), SETTINGS)
    assert just_before.status.phase == "Running"


def test_ray_refusing_the_credentials_never_fails_a_running_task() -> None:
    """Ray answered: no outage, so no grace is counted. The task stays Running with the
    refusal shown, however long it lasts, and the outage clock is not started."""
    refused = RayUnreachable("HTTP 401: the Ray cluster requires a token and none was sent", reason="RayAuthFailed")
    d = step(running(), refused, T0, SETTINGS)
    assert (d.status.phase, d.status.reason, d.status.ray_unreachable_since) == ("Running", "RayJobRunning", None)
    reach = next(c for c in d.status.conditions if c.type == "RayReachable")
    assert (reach.status, reach.reason, reach.last_transition_time) == ("False", "RayAuthFailed", "2026-12-03T08:00:00Z")
    assert "check the Ray token" in reach.message and d.actions == ()
    much_later = step(lc.TaskState(**{**running().__dict__, "status": d.status}), refused, T0 + dt.timedelta(hours=5), SETTINGS)
    assert (much_later.status.phase, much_later.status.ray_unreachable_since) == ("Running", None)


def test_a_refusal_after_an_outage_stops_the_outage_clock() -> None:
    """Ray down for 299 s, then it answers with a refusal: not 300 s of outage."""
    t = running(ray_unreachable_since="2026-12-03T07:55:01Z")
    d = step(t, RayUnreachable("HTTP 403: the Ray cluster did not accept the token that was sent", reason="RayAuthFailed"), T0, SETTINGS)
    assert (d.status.phase, d.status.ray_unreachable_since) == ("Running", None)
    assert next(c for c in d.status.conditions if c.type == "RayReachable").reason == "RayAuthFailed"


def test_ray_answering_again_clears_the_outage() -> None:
    t = running(ray_unreachable_since="2026-12-03T07:59:00Z",
                conditions=[Condition(type="RayReachable", status="False", reason="RayUnreachable", message="x", last_transition_time="2026-12-03T07:59:00Z")])
    d = step(t, JobObserved(RayJobState.RUNNING), T0, SETTINGS)
    assert d.status.ray_unreachable_since is None
    assert conditions(d.status)["RayReachable"] == "True"


def test_a_task_failed_for_an_outage_has_its_job_stopped_once_ray_answers() -> None:
    """Closed without Ray's word (Failed/RayUnreachable): the job may still run on a
    partitioned cluster, holding GPUs. When Ray answers again, it is stopped."""
    unreachable = [Condition(type="RayReachable", status="False", reason="RayUnreachable", message="x", last_transition_time="2026-12-03T07:50:00Z")]
    t = task("Failed", reason="RayUnreachable", finalizer=True, conditions=unreachable,
             ray_job=RayJobStatus(submission_id=SID, status="RUNNING"))
    assert needs_ray(t)
    d = step(t, JobObserved(RayJobState.RUNNING), T0, SETTINGS)
    assert d.actions == (StopJob(SID),) and d.status.phase == "Failed"
    assert conditions(d.status)["RayReachable"] == "True"
    assert not needs_ray(lc.TaskState(**{**t.__dict__, "status": d.status}))
    gone = step(t, JobUnknown(), T0, SETTINGS)
    assert gone.actions == () and conditions(gone.status)["RayReachable"] == "True"


@pytest.mark.parametrize("phase,reason", [("Succeeded", "RayJobSucceeded"), ("Stopped", "Cancelled"), ("Rejected", "InvalidSpec"),
                                          ("Failed", "RayJobLost"), ("Failed", "RaySubmitFailed")])
def test_closed_tasks_need_no_ray_read(phase: str, reason: str) -> None:
    assert not needs_ray(task(phase, reason=reason, finalizer=True))


# --------------------------------------------------------------------------- deletion

@pytest.mark.parametrize("phase", [None, "Queued", "Submitted", "Running", "Succeeded", "Failed", "Stopped"])
def test_deleting_a_task_that_may_have_a_job_asks_ray_first(phase: str | None) -> None:
    """Whatever the phase: the finalizer means Argus may have submitted, so Ray is asked
    about the submission id and what exists is stopped (issue 18: also for ended phases)."""
    t = task(phase, finalizer=True, deleting=T0)
    assert needs_ray(t)
    assert step(t, JobObserved(RayJobState.RUNNING), T0, SETTINGS).actions == (StopJob(SID),)
    # Once it has stopped (or was never there), its job leaves Ray's history and the object goes.
    assert step(t, JobObserved(RayJobState.STOPPED), T0, SETTINGS).actions == (RemoveRayJobs((SID,)), ReleaseFinalizer())
    assert step(t, JobUnknown(), T0, SETTINGS).actions == (RemoveRayJobs((SID,)), ReleaseFinalizer())


def test_deleting_a_task_without_finalizer_needs_nothing() -> None:
    t = task("Queued", deleting=T0)
    assert not needs_ray(t)
    assert step(t, Reconcile(), T0, SETTINGS).actions == ()


def test_delete_grace_releases_the_finalizer_when_ray_stays_unreachable() -> None:
    t = running(deleting=T0 - dt.timedelta(seconds=119))
    assert step(t, RayUnreachable("refused"), T0, SETTINGS).actions == ()
    later = step(t, RayUnreachable("refused"), T0 + dt.timedelta(seconds=1), SETTINGS)
    assert later.actions == (
        PostEvent("Warning", "FinalizerReleased", "Ray unreachable for 120 s (delete grace 120 s); released without stopping argus-ns-t-0a1b2c3d: refused"),
        ReleaseFinalizer(),
    )


def test_delete_grace_also_releases_a_task_while_ray_refuses_the_credentials() -> None:
    """A deletion is never held for ever by a wrong token: the delete grace applies, and the
    event says why the job was not stopped."""
    t = running(deleting=T0 - dt.timedelta(seconds=120))
    d = step(t, RayUnreachable("HTTP 401: the Ray cluster requires a token and none was sent", reason="RayAuthFailed"), T0, SETTINGS)
    assert d.actions == (
        PostEvent("Warning", "FinalizerReleased", "Ray refused the operator's credentials for 120 s (delete grace 120 s); released without "
                  "stopping argus-ns-t-0a1b2c3d: HTTP 401: the Ray cluster requires a token and none was sent"),
        ReleaseFinalizer(),
    )


def test_a_deleted_task_keeps_its_status() -> None:
    t = running(deleting=T0)
    assert step(t, JobObserved(RayJobState.SUCCEEDED), T0, SETTINGS).status == t.status


# --------------------------------------------------------------------------- conditions

def test_last_transition_time_moves_only_when_the_condition_changes() -> None:
    c = lc.set_condition(None, "Running", True, "RayJobRunning", "m", now="t1", generation=1)
    c = lc.set_condition(c, "Running", True, "RayJobRunning", "m2", now="t2", generation=1)
    assert (c[0].last_transition_time, c[0].message) == ("t1", "m2")
    c = lc.set_condition(c, "Running", False, "RayJobSucceeded", "done", now="t3", generation=2)
    assert (c[0].last_transition_time, c[0].status, c[0].observed_generation) == ("t3", "False", 2)


def test_conditions_for_each_terminal_phase() -> None:
    succeeded = lc.conditions_for_phase(None, Phase.Succeeded, "RayJobSucceeded", "ok", now="t", generation=1)
    assert {x.type: x.status for x in succeeded} == {"Admitted": "True", "Running": "False", "Complete": "True", "Failed": "False", "Finished": "True"}
    rejected = lc.conditions_for_phase(None, Phase.Rejected, "InvalidSpec", "bad", now="t", generation=1)
    assert {x.type: x.status for x in rejected} == {"Admitted": "False", "Running": "False", "Complete": "False", "Failed": "True", "Finished": "True"}


@pytest.mark.parametrize("end", [Phase.Stopped, Phase.Failed])
def test_a_task_that_ends_in_the_queue_was_never_admitted(end: Phase) -> None:
    """Stopped or Failed keep Admitted as it was: True after a run, False for a task
    cancelled (or failed) while it waited, or created cancelled."""
    def admitted(conditions: list[Condition]) -> str:
        return next(x.status for x in conditions if x.type == "Admitted")
    queued = lc.conditions_for_phase(None, Phase.Queued, "Queued", "waiting", now="t1", generation=1)
    assert admitted(lc.conditions_for_phase(queued, end, "Cancelled", "cancelled", now="t2", generation=2)) == "False"
    assert admitted(lc.conditions_for_phase(None, end, "Cancelled", "cancelled", now="t2", generation=2)) == "False"
    running = lc.conditions_for_phase(queued, Phase.Running, "RayJobRunning", "running", now="t2", generation=1)
    ended = lc.conditions_for_phase(running, end, "Cancelled", "cancelled", now="t3", generation=2)
    assert admitted(ended) == "True"
    assert next(x.last_transition_time for x in ended if x.type == "Admitted") == "t2"


def test_a_pending_read_after_the_submission_writes_nothing_new() -> None:
    """Ray stamps a job's start time while it is still PENDING; the submission already
    said PENDING, so that read changes nothing (the start time comes with RUNNING)."""
    submitted = step(task("Queued"), SubmitResult("submitted", SID), T0, SETTINGS).status
    t = TaskState(**{**task("Queued").__dict__, "status": submitted, "holds_finalizer": True})
    d = step(t, JobObserved(RayJobState.PENDING, start_time_ms=1_796_284_800_000), T0, SETTINGS)
    assert d.status == submitted and d.actions == ()
    running = step(t, JobObserved(RayJobState.RUNNING, start_time_ms=1_796_284_800_000, driver_node_id="w1"), T0, SETTINGS)
    assert running.status.ray_job.start_time == "2026-12-03T08:00:00Z"


# --------------------------------------------------------------------------- attempts

def with_policy(t: TaskState, policy: str, limit: int = 3, **status: object) -> TaskState:
    return TaskState(**{**t.__dict__, "restart_policy": policy, "backoff_limit": limit,
                        "status": t.status.model_copy(update=status) if status else t.status})


def test_never_keeps_a_lost_job_final() -> None:
    d = step(with_policy(running(), "Never"), JobUnknown(), T0, SETTINGS)
    assert (d.status.phase, d.status.reason) == ("Failed", "RayJobLost")
    assert "spec.restartPolicy: Never" in d.status.message
    assert [(r.attempt, r.outcome) for r in d.status.attempts] == [(1, "RayJobLost")]


def test_a_lost_attempt_is_queued_again_as_the_next_attempt() -> None:
    t = with_policy(running(), "OnRayJobLost", progress=TaskProgress(step=40, total_steps=300))
    d = step(t, JobUnknown(), T0, SETTINGS)
    s = d.status
    assert (s.phase, s.reason, s.attempt) == ("Queued", "Retrying", 2)
    assert s.message == ("attempt 1 at step 40: Ray no longer knows job argus-ns-t-0a1b2c3d: the Ray head restarted (it keeps no job "
                         "history) or the job was removed; attempt 2 waits in the queue (restart 1 of 3) and resumes from the newest "
                         "checkpoint in the job folder")
    assert [(r.attempt, r.submission_id, r.outcome, r.last_step) for r in s.attempts] == [(1, SID, "RayJobLost", 40)]
    assert s.ray_job is None and s.admitted_at == "2026-12-03T07:59:00Z"  # the deadline still counts from the first admission
    retried = TaskState(**{**t.__dict__, "status": s})
    assert retried.submission_id == "argus-ns-t-0a1b2c3d-a2"  # Ray never reuses an id
    assert retried.submission_ids() == [SID, "argus-ns-t-0a1b2c3d-a2"]
    assert needs_ray(retried)  # it holds the finalizer: attempt 2 may reach Ray before its status says so
    submitted = step(retried, SubmitResult("submitted", "argus-ns-t-0a1b2c3d-a2"), T0, SETTINGS).status
    assert (submitted.phase, submitted.attempt, submitted.ray_job.submission_id) == ("Submitted", 2, "argus-ns-t-0a1b2c3d-a2")
    assert [(r.attempt, r.outcome) for r in submitted.attempts] == [(1, "RayJobLost"), (2, None)]


def test_on_ray_job_lost_does_not_retry_a_failed_job_but_on_failure_does() -> None:
    failed = JobObserved(RayJobState.FAILED, "Job entrypoint command failed with exit code 1")
    lost_only = step(with_policy(running(), "OnRayJobLost"), failed, T0, SETTINGS).status
    assert (lost_only.phase, lost_only.reason) == ("Failed", "RayJobFailed")
    on_failure = step(with_policy(running(), "OnFailure"), failed, T0, SETTINGS).status
    assert (on_failure.phase, on_failure.reason, on_failure.attempt) == ("Queued", "Retrying", 2)
    assert "job argus-ns-t-0a1b2c3d failed: Job entrypoint command failed with exit code 1" in on_failure.message


def test_the_backoff_limit_ends_the_retries() -> None:
    t = with_policy(running(), "OnFailure", limit=2, attempt=3)
    d = step(t, JobObserved(RayJobState.FAILED, "exit code 1"), T0, SETTINGS)
    assert (d.status.phase, d.status.reason) == ("Failed", "BackoffLimitExceeded")
    assert d.status.message == "attempt 3: job argus-ns-t-0a1b2c3d-a3 failed: exit code 1; no restart left (spec.backoffLimit 2)"
    zero = step(with_policy(running(), "OnFailure", limit=0), JobObserved(RayJobState.FAILED), T0, SETTINGS)
    assert zero.status.reason == "BackoffLimitExceeded"


def test_a_cancelled_or_late_job_is_never_retried() -> None:
    cancelled = step(with_policy(running(cancel=True), "OnFailure"), JobObserved(RayJobState.STOPPED), T0, SETTINGS)
    assert (cancelled.status.phase, cancelled.status.reason) == ("Stopped", "Cancelled")
    late = step(with_policy(running(deadline=30), "OnFailure"), JobObserved(RayJobState.FAILED), T0, SETTINGS)
    assert (late.status.phase, late.status.reason) == ("Failed", "DeadlineExceeded")


def test_a_succeeded_attempt_is_recorded() -> None:
    d = step(running(), JobObserved(RayJobState.SUCCEEDED, "ok", "w1", 1_796_284_800_000, 1_796_284_860_000), T0, SETTINGS)
    assert [(r.attempt, r.outcome, r.start_time, r.end_time) for r in d.status.attempts] == [
        (1, "RayJobSucceeded", "2026-12-03T08:00:00Z", "2026-12-03T08:01:00Z")]
    assert d.status.finished_at == "2026-12-03T08:00:00Z"


# --------------------------------------------------------------------------- progress

def test_progress_is_recorded_for_a_task_that_ran() -> None:
    p = TaskProgress(step=37, total_steps=300, summary="37/300")
    assert step(running(), ProgressObserved(p), T0, SETTINGS).status.progress == p
    # The job's last lines arrive a moment after its end: they still count, in the attempt too.
    done = task("Succeeded", reason="RayJobSucceeded", attempts=[AttemptRecord(attempt=1, submission_id=SID, outcome="RayJobSucceeded", last_step=36)])
    after = step(done, ProgressObserved(TaskProgress(step=300, total_steps=300)), T0, SETTINGS).status
    assert after.progress.step == 300 and after.attempts[0].last_step == 300
    assert step(task(), ProgressObserved(p), T0, SETTINGS).status.progress is None  # never ran


# --------------------------------------------------------------------------- cleanup

def ended(**kw: object) -> TaskState:
    t = task("Succeeded", reason="RayJobSucceeded", finished_at="2026-12-03T07:00:00Z", finalizer=True,
             attempts=[AttemptRecord(attempt=1, submission_id=SID, outcome="RayJobSucceeded")])
    return TaskState(**{**t.__dict__, **kw})


def test_an_ended_task_is_deleted_when_its_ttl_runs_out() -> None:
    t = ended(ttl_seconds_after_finished=3600)  # ended 07:00
    assert timer_due(t, SETTINGS) == (dt.datetime(2026, 12, 3, 8, 0, tzinfo=dt.UTC), "ttl")
    assert step(t, Reconcile(), T0 - dt.timedelta(seconds=1), SETTINGS).actions == ()
    assert step(t, Reconcile(), T0, SETTINGS).actions == (DeleteTask(),)
    assert timer_due(ended(), SETTINGS) is None  # no TTL: kept
    assert timer_due(task("Running", reason="RayJobRunning"), SETTINGS) is None


def test_an_ended_tasks_ray_jobs_leave_rays_history_after_the_retention() -> None:
    settings = LifecycleSettings(ray_job_retention_seconds=1800)
    t = ended()
    assert timer_due(t, settings) == (dt.datetime(2026, 12, 3, 7, 30, tzinfo=dt.UTC), "retention")
    assert step(t, Reconcile(), T0, settings).actions == (RemoveRayJobs((SID,)),)
    removed = step(t, RayJobsRemoved(), T0, settings).status
    assert removed.ray_jobs_removed is True
    assert timer_due(TaskState(**{**t.__dict__, "status": removed}), settings) is None
    never_ran = task("Rejected", reason="InvalidSpec", finished_at="2026-12-03T07:00:00Z")
    assert timer_due(never_ran, settings) is None


# --------------------------------------------------------------------------- TTL under GitOps

TRACKING_ID = "argocd.argoproj.io/tracking-id"


def test_a_task_argo_cd_tracks_is_kept_past_its_ttl_and_its_ray_jobs_go() -> None:
    # Annotation tracking (Argo CD's default): deleting the task would make Argo CD create it
    # again from Git, a new run after every TTL.
    t = ended(ttl_seconds_after_finished=3600, annotations={TRACKING_ID: "alice-tasks:argus.io/ArgusTask:ns/t"})
    d = step(t, Reconcile(), T0, SETTINGS)
    assert DeleteTask() not in d.actions
    assert d.status.kept_by == "Argo CD application alice-tasks (annotation argocd.argoproj.io/tracking-id)"
    assert d.actions[0] == RemoveRayJobs((SID,))
    event = d.actions[1]
    assert isinstance(event, PostEvent) and (event.type, event.reason) == ("Normal", "KeptForGitOps")
    assert "alice-tasks" in event.message and "run the training again" in event.message and "through Git" in event.message
    assert len(d.actions) == 2
    # Once: the kept task's TTL is no longer due; only the removal from Ray's history is, until done.
    kept = TaskState(**{**t.__dict__, "status": d.status})
    assert timer_due(kept, SETTINGS) == (dt.datetime(2026, 12, 3, 8, 0, tzinfo=dt.UTC), "retention")
    assert step(kept, Reconcile(), T0, SETTINGS).actions == (RemoveRayJobs((SID,)),)  # the removal failed: again, no Event
    removed = TaskState(**{**t.__dict__, "status": step(kept, RayJobsRemoved(), T0, SETTINGS).status})
    assert timer_due(removed, SETTINGS) is None
    assert step(removed, Reconcile(), T0 + dt.timedelta(days=1), SETTINGS).actions == ()


def test_the_operators_default_ttl_keeps_a_tracked_task_too() -> None:
    settings = LifecycleSettings(default_ttl_seconds=60)
    t = ended(labels={"app.kubernetes.io/instance": "alice-tasks"})  # label tracking
    d = step(t, Reconcile(), T0, settings)
    assert d.status.kept_by == "Argo CD application alice-tasks (label app.kubernetes.io/instance, Argo CD's label tracking)"
    assert [type(a) for a in d.actions] == [RemoveRayJobs, PostEvent]


def test_a_task_that_never_reached_ray_is_kept_with_only_the_event() -> None:
    t = task("Rejected", reason="InvalidSpec", finished_at="2026-12-03T07:00:00Z")
    t = TaskState(**{**t.__dict__, "ttl_seconds_after_finished": 0, "annotations": {TRACKING_ID: "a:argus.io/ArgusTask:ns/t"}})
    d = step(t, Reconcile(), T0, SETTINGS)
    assert [(type(a), getattr(a, "reason", None)) for a in d.actions] == [(PostEvent, "KeptForGitOps")]
    assert timer_due(TaskState(**{**t.__dict__, "status": d.status}), SETTINGS) is None


def test_what_counts_as_argo_cd_tracking() -> None:
    def actions(**kw: object) -> tuple:
        return step(ended(ttl_seconds_after_finished=0, **kw), Reconcile(), T0, SETTINGS).actions

    # Helm's own install sets app.kubernetes.io/instance too; its release annotation says it is Helm's.
    assert actions(labels={"app.kubernetes.io/instance": "r"}, annotations={"meta.helm.sh/release-name": "r"}) == (DeleteTask(),)
    # A tracking id copied from another object (kubectl get -o yaml | kubectl apply): Argo CD does not track this one.
    assert actions(annotations={TRACKING_ID: "a:argus.io/ArgusTask:ns/other"}) == (DeleteTask(),)
    assert actions(annotations={TRACKING_ID: "a:apps/Deployment:ns/t"}) == (DeleteTask(),)
    assert actions(annotations={TRACKING_ID: "a:argus.io/ArgusTask:elsewhere/t"}) == (DeleteTask(),)
    assert actions(annotations={TRACKING_ID: "not a tracking id"}) == (DeleteTask(),)
    # annotation+label tracking: the annotation decides.
    assert DeleteTask() not in actions(labels={"app.kubernetes.io/instance": "a"}, annotations={TRACKING_ID: "a:argus.io/ArgusTask:ns/t"})
    # A site whose Argo CD uses another label key (argocd-cm application.instanceLabelKey).
    custom = LifecycleSettings(gitops_tracking_label="example.com/app")
    t = ended(ttl_seconds_after_finished=0, labels={"example.com/app": "a"})
    assert DeleteTask() not in step(t, Reconcile(), T0, custom).actions
    assert step(ended(ttl_seconds_after_finished=0, labels={"app.kubernetes.io/instance": "a"}), Reconcile(), T0, custom).actions == (DeleteTask(),)
    # Label tracking off: only the annotation counts.
    off = LifecycleSettings(gitops_tracking_label="")
    assert step(ended(ttl_seconds_after_finished=0, labels={"app.kubernetes.io/instance": "a"}), Reconcile(), T0, off).actions == (DeleteTask(),)


def test_a_kept_task_that_loses_its_tracking_goes_at_its_ttl() -> None:
    # The application was deleted without cascade (the task stays, unmarked): the TTL applies again.
    t = ended(ttl_seconds_after_finished=60)
    t = TaskState(**{**t.__dict__, "status": t.status.model_copy(update={"kept_by": "Argo CD application a (...)", "ray_jobs_removed": True})})
    assert timer_due(t, SETTINGS) == (dt.datetime(2026, 12, 3, 7, 1, tzinfo=dt.UTC), "ttl")
    assert step(t, Reconcile(), T0, SETTINGS).actions == (DeleteTask(),)
