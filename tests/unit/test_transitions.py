"""The lifecycle's declared transition table (``core.transitions``): the docs generated from
it are current, its names are the lifecycle's own, and ``lifecycle.step`` makes only the
transitions it declares: a hypothesis walk over every phase (and new), deleted or not, and
every kind of observation, with the fields that steer the lifecycle generated around their
limits (grace periods, deadlines, TTL, attempts against backoffLimit, active and ended jobs,
auth failures). Each declared row is also reached by some generated case (no dead rows)."""

from __future__ import annotations

import datetime as dt
import typing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import Phase as Stage
from hypothesis import strategies as st

from argus.core import lifecycle as lc
from argus.core import transitions as tr
from argus.core.conditions import Condition
from argus.core.gitops import DEFAULT_TRACKING_LABEL, HELM_RELEASE, TRACKING_ID
from argus.core.rayjobs import RayJobState
from argus.core.spec import ArgusTaskStatus, AttemptRecord, RayJobStatus, RestartPolicy, TaskProgress
from argus.core.submission import SubmissionPlan, submission_id_for
from argus.core.times import format_time
from argus.core.vocabulary import REASONS_BY_PHASE, Phase, Reason

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
T0 = dt.datetime(2026, 12, 3, 8, 0, 0, tzinfo=dt.UTC)
NS, NAME, UID = "ns", "t", "0a1b2c3d-0000-0000-0000-000000000000"
OBSERVATION_KINDS = {t.__name__: t for t in typing.get_args(lc.Observation)}
OBSERVATIONS = list(OBSERVATION_KINDS)
ACTIONS = [t.__name__ for t in typing.get_args(lc.Action)]
SOURCES: list[Phase | None] = [None, *Phase]
STALE = "is stale: run .venv/bin/python hack/update-lifecycle-docs.py (it regenerates it from operator/argus/core/transitions.py) and commit the result"


# --------------------------------------------------------------------------- the docs and the names

@pytest.mark.parametrize("path", sorted(tr.BLOCKS))
def test_the_generated_docs_are_current(path: str) -> None:
    text = (REPO / path).read_text()
    assert tr.render(path, text) == text, f"{path}'s lifecycle tables {STALE}"


def test_a_stale_block_is_told_apart_and_missing_markers_are_named() -> None:
    """Negative control for the check above."""
    text = (REPO / "docs" / "lifecycle.md").read_text()
    stale = text.replace("| `Queued` | `Waiting` |", "| `Running` | `Waiting` |", 1)
    assert stale != text and tr.render("docs/lifecycle.md", stale) == text
    with pytest.raises(ValueError, match="'transitions' are missing"):
        tr.render("docs/lifecycle.md", text.replace(tr.marker("transitions", end=True), ""))


def test_the_reasons_each_phase_may_reach_are_the_vocabularys() -> None:
    assert tr.reasons_by_phase() == REASONS_BY_PHASE


def test_the_table_names_the_lifecycles_observations_and_actions() -> None:
    assert {r.observation for r in tr.RULES} <= set(OBSERVATION_KINDS.values())
    events = {tr.event(r) for r in Reason}
    for rule in tr.RULES:
        assert set(rule.actions) <= set(ACTIONS) - {"PostEvent"} | events, rule
        assert rule.target is tr.SAME or rule.reasons, f"a rule that changes the phase names the reasons: {rule}"
        assert all(rule.target is tr.SAME or r in REASONS_BY_PHASE[rule.target] for r in rule.reasons), rule


def test_markdown_prints_every_block(capsys: pytest.CaptureFixture[str]) -> None:
    assert tr.main(["--markdown"]) == 0
    out = capsys.readouterr().out
    assert tr.transitions_markdown() in out and tr.phase_list_markdown() in out and tr.diagram_mermaid() in out
    assert tr.main([]) == 2


# --------------------------------------------------------------------------- generated tasks and observations

SECONDS = st.sampled_from([0, 1, 59, 60, 61, 119, 120, 121, 299, 300, 301, 3599, 3600, 3601, 86_400]) | st.integers(0, 100_000)


def ago(seconds: int) -> str:
    return format_time(T0 - dt.timedelta(seconds=seconds))


# The strategies are built once, here: hypothesis validates each strategy object the first
# time it draws from it, which cost more than the lifecycle's step when they were built
# anew inside every generated case. Only the submission id depends on the case (its attempt).
BOOL = st.booleans()
MAYBE_BOOL = st.none() | BOOL
ATTEMPT = st.integers(1, 5)
BACKOFF_LIMIT = st.integers(0, 4)
AGO = st.none() | SECONDS.map(ago)
REASON_IN = {phase: st.sampled_from(REASONS_BY_PHASE[phase]) for phase in Phase}
RAY_JOB_STATE = st.sampled_from([None, "PENDING", "RUNNING", "FAILED", "STOPPED"])
DRIVER = st.sampled_from([None, "node-1", "head"])
REACHABLE = st.sampled_from([None, "True", "False"])
UNREACHABLE = st.sampled_from(["RayUnreachable", "RayAuthFailed"])
KEPT_BY = st.none() | st.just("Argo CD application a")
PROGRESS = st.none() | st.builds(TaskProgress, step=st.none() | st.integers(0, 500))
MARKS = st.sampled_from(["none", "annotation", "label", "helm"])
GENERATION = st.none() | st.integers(1, 3)
DEADLINE = st.none() | st.sampled_from([1, 60, 300, 3600])
RESTART_POLICY = st.sampled_from([p.value for p in RestartPolicy])
TTL = st.none() | st.sampled_from([0, 60, 3600])
PREEMPTED_BY = st.none() | st.just("team-a/urgent")
LIFECYCLE_SETTINGS = st.builds(
    lc.LifecycleSettings,
    ray_grace_seconds=st.sampled_from([0.0, 60.0, 300.0]),
    delete_grace_seconds=st.sampled_from([0.0, 120.0]),
    dashboard_url=st.none() | st.just("http://ray:8265"),
    ray_job_retention_seconds=st.none() | st.sampled_from([0.0, 60.0, 3600.0]),
    default_ttl_seconds=st.none() | st.sampled_from([0, 60, 3600]),
    gitops_tracking_label=st.sampled_from([DEFAULT_TRACKING_LABEL, ""]),
)


@st.composite
def tasks(draw: st.DrawFn, phase: Phase | None, deleting: bool) -> lc.TaskState:
    attempt = draw(ATTEMPT)
    sid = submission_id_for(NS, NAME, UID, attempt)
    reason = draw(REASON_IN[phase]) if phase else None
    ray_job = RayJobStatus(submission_id=sid, status=draw(RAY_JOB_STATE), driver_node_id=draw(DRIVER)) if draw(BOOL) else None
    reachable = draw(REACHABLE)
    conditions = None if reachable is None else [Condition(
        type="RayReachable", status=reachable, reason="RayReachable" if reachable == "True" else draw(UNREACHABLE),
        message="x", last_transition_time=ago(draw(SECONDS)))]
    attempts = [AttemptRecord(attempt=n, submission_id=submission_id_for(NS, NAME, UID, n)) for n in range(1, attempt + 1)] \
        if draw(BOOL) else None
    status = ArgusTaskStatus(
        phase=phase, reason=reason, message="m", attempt=attempt, attempts=attempts, ray_job=ray_job, conditions=conditions,
        admitted_at=draw(AGO), ray_unreachable_since=draw(AGO),
        finished_at=draw(AGO) if phase is not None and phase.terminal else None,
        ray_jobs_removed=draw(MAYBE_BOOL), kept_by=draw(KEPT_BY), progress=draw(PROGRESS),
        preempted_by=draw(PREEMPTED_BY) if phase in (Phase.Submitted, Phase.Running) else None,
    )
    marks = draw(MARKS)
    labels = {DEFAULT_TRACKING_LABEL: "app"} if marks in ("label", "helm") else {}
    annotations = {TRACKING_ID: f"app:argus.io/ArgusTask:{NS}/{NAME}"} if marks == "annotation" else \
        {HELM_RELEASE: "r"} if marks == "helm" else {}
    return lc.TaskState(
        namespace=NS, name=NAME, uid=UID, status=status, generation=draw(GENERATION),
        cancel=draw(BOOL), suspend=draw(BOOL), active_deadline_seconds=draw(DEADLINE),
        deleting_since=(T0 - dt.timedelta(seconds=draw(SECONDS))) if deleting else None,
        holds_finalizer=draw(BOOL), restart_policy=draw(RESTART_POLICY),
        backoff_limit=draw(BACKOFF_LIMIT), ttl_seconds_after_finished=draw(TTL),
        labels=labels, annotations=annotations,
    )


ERRORS = st.sampled_from(["connection refused", "HTTP 401: the Ray cluster requires a token", "timed out", ""])
# What the adapter makes of Ray's word (adapters.ray, RayJobState.parse): a state, or None for
# one this Argus does not know (its case and unknown words are tested at the adapter).
RAY_STATUSES = st.sampled_from([*RayJobState, None])
RAY_REASON = st.sampled_from([Reason.RayUnreachable, Reason.RayAuthFailed])
SUBMIT_OUTCOMES = st.sampled_from(["submitted", "adopted", "unreachable", "auth_failed", "refused"])
# Every observation kind but the two that carry the task's submission id (``observations``).
OBSERVED: dict[str, st.SearchStrategy[lc.Observation]] = {
    "Validated": st.builds(lc.Validated, user=st.just("alice"), command=st.just("c"),
                           warnings=st.lists(st.sampled_from(["w1", "w2"]), max_size=2).map(tuple),
                           verl=st.none() | st.just(("0.9.1", "release"))),
    "Refused": st.builds(lc.Refused, reason=st.sampled_from(REASONS_BY_PHASE[Phase.Rejected]), message=st.sampled_from(["a\nb", "", "x"]),
                         user=st.none() | st.just("alice")),
    "Waiting": st.builds(lc.Waiting, reason=st.sampled_from(tr._WAITING), message=st.just("waiting"),
                         ray_error=st.none() | ERRORS, ray_reason=RAY_REASON),
    "JobObserved": st.builds(lambda status, **fields: lc.JobObserved(status=status, unknown_status="" if status else "NEW_STATE", **fields),
                             status=RAY_STATUSES, message=st.sampled_from(["", "exit 1"]),
                             driver_node_id=st.none() | st.sampled_from(["node-1", "head"]),
                             start_time_ms=st.none() | st.just(1_796_000_000_000), end_time_ms=st.none() | st.just(1_796_000_100_000),
                             driver_on_worker=st.none() | BOOL),
    "JobUnknown": st.just(lc.JobUnknown()),
    "RayUnreachable": st.builds(lc.RayUnreachable, error=ERRORS, reason=RAY_REASON),
    "Reconcile": st.just(lc.Reconcile()),
    "ProgressObserved": st.builds(lc.ProgressObserved, progress=st.builds(TaskProgress, step=st.none() | st.integers(0, 500))),
    "RayJobsRemoved": st.just(lc.RayJobsRemoved()),
    "Preempt": st.builds(lc.Preempt, by=st.just("team-a/urgent"), message=st.just("preempted for team-a/urgent: loses 3 steps")),
}


@st.composite
def observations(draw: st.DrawFn, kind: str, task: lc.TaskState) -> lc.Observation:
    """Every observation kind, with its fields generated (an Admitted plan is always the
    current attempt's: ``step`` refuses another with a ValueError, tested elsewhere)."""
    assert set(OBSERVED) | {"Admitted", "SubmitResult"} == set(OBSERVATIONS), "a new observation kind: give it a strategy here"
    sid = task.submission_id
    if kind == "Admitted":
        return lc.Admitted(SubmissionPlan(submission_id=sid, user="alice", command="c", entrypoint="e", entrypoint_resources={},
                                          runtime_env={}, metadata={}, job_dir="/j", gpus=1))
    if kind == "SubmitResult":
        return lc.SubmitResult(outcome=draw(SUBMIT_OUTCOMES), submission_id=sid, detail=draw(ERRORS))
    return draw(OBSERVED[kind])


@st.composite
def cases(draw: st.DrawFn, phase: Phase | None, deleting: bool, kind: str) -> tuple[lc.TaskState, lc.Observation, lc.LifecycleSettings]:
    task = draw(tasks(phase, deleting))
    return task, draw(observations(kind, task)), draw(LIFECYCLE_SETTINGS)


def move_of(task: lc.TaskState, seen: lc.Observation, decision: lc.Decision) -> tr.Move:
    """The decision as the table sees it, built here from the decision itself (not by
    ``step``'s own check)."""
    return tr.Move(source=task.phase, observation=type(seen), deleting=task.deleting,
                   target=Phase(decision.status.phase) if decision.status.phase else None,
                   reason_before=task.status.reason, reason_after=decision.status.reason,
                   actions=tuple(tr.event(a.reason) if isinstance(a, lc.PostEvent) else type(a).__name__ for a in decision.actions))


# --------------------------------------------------------------------------- the walk

WALK = [(phase, deleting, kind) for phase in SOURCES for deleting in (False, True) for kind in OBSERVATIONS]


@pytest.mark.parametrize("phase,deleting,kind", WALK, ids=[f"{p.value if p else 'new'}-{'deleting' if d else 'live'}-{k}" for p, d, k in WALK])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(data=st.data())
def test_step_makes_only_declared_transitions(phase: Phase | None, deleting: bool, kind: str, data: st.DataObject) -> None:
    task, seen, lifecycle_settings_ = data.draw(cases(phase, deleting, kind))
    decision = lc._decide(task, seen, T0, lifecycle_settings_)  # the branches, before step's own check
    move = move_of(task, seen, decision)
    assert move.idle or tr.declared(move) is not None, f"undeclared: {move}"
    if move.target is not None and (move.target, move.reason_after) != (move.source, move.reason_before):
        assert move.reason_after in REASONS_BY_PHASE[move.target], str(move)
    assert lc.step(task, seen, T0, lifecycle_settings_) == decision  # step returns what the branches decided


# --------------------------------------------------------------------------- every row is reached, and needed

@pytest.mark.parametrize("index", range(len(tr.RULES)), ids=[f"{i}-{r.observation.__name__}" for i, r in enumerate(tr.RULES)])
def test_every_declared_row_is_reached(index: int) -> None:
    """For each row, some generated case of one of its sources takes it: no row is dead."""
    rule = tr.RULES[index]

    def takes_it(case: tuple[lc.TaskState, lc.Observation, lc.LifecycleSettings]) -> bool:
        task, seen, lifecycle_settings_ = case
        move = move_of(task, seen, lc._decide(task, seen, T0, lifecycle_settings_))
        return not move.idle and tr.declared(move, [rule]) is rule

    sources = st.sampled_from(rule.sources).flatmap(lambda source: cases(source, rule.deleting, rule.observation.__name__))
    # Found, not shrunk: the first case that takes the row is enough.
    find(sources, takes_it, settings=settings(max_examples=5000, deadline=None, database=None, phases=[Stage.generate],
                                              suppress_health_check=[HealthCheck.too_slow]))


def test_step_refuses_a_transition_the_table_does_not_declare(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the row 'an active task fails after the Ray grace', that decision is refused."""
    row = next(r for r in tr.RULES if r.observation is lc.RayUnreachable and r.target is Phase.Failed)
    index = {key: [r for r in rules if r is not row] for key, rules in tr._INDEX.items()}
    monkeypatch.setattr(tr, "_INDEX", index)
    task = lc.TaskState(namespace=NS, name=NAME, uid=UID, holds_finalizer=True,
                        status=ArgusTaskStatus(phase=Phase.Running, reason=Reason.RayJobRunning, ray_unreachable_since=ago(400)))
    with pytest.raises(tr.UndeclaredTransition, match=r"Running/RayJobRunning --RayUnreachable--> Failed/RayUnreachable"):
        lc.step(task, lc.RayUnreachable("connection refused"), T0, lc.LifecycleSettings(ray_grace_seconds=300))
    monkeypatch.undo()
    decided = lc.step(task, lc.RayUnreachable("connection refused"), T0, lc.LifecycleSettings(ray_grace_seconds=300))
    assert (decided.status.phase, decided.status.reason) == ("Failed", "RayUnreachable")


def test_the_operator_carries_out_an_undeclared_transition_and_reports_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's way (``undeclared=``): the decision is returned, not refused (a task must
    not stall on a row missing from the table), and reported once."""
    row = next(r for r in tr.RULES if r.observation is lc.RayUnreachable and r.target is Phase.Failed)
    monkeypatch.setattr(tr, "_INDEX", {key: [r for r in rules if r is not row] for key, rules in tr._INDEX.items()})
    task = lc.TaskState(namespace=NS, name=NAME, uid=UID, holds_finalizer=True,
                        status=ArgusTaskStatus(phase=Phase.Running, reason=Reason.RayJobRunning, ray_unreachable_since=ago(400)))
    reported: list[str] = []
    decided = lc.step(task, lc.RayUnreachable("connection refused"), T0, lc.LifecycleSettings(ray_grace_seconds=300), undeclared=reported.append)
    assert (decided.status.phase, decided.status.reason) == ("Failed", "RayUnreachable")
    assert len(reported) == 1 and "Running/RayJobRunning --RayUnreachable--> Failed/RayUnreachable" in reported[0]
