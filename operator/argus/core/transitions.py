"""The lifecycle's transitions, declared as data: for a task in a phase (``None``: new, not
looked at yet), being deleted or not, and one kind of observation, the phases it may move
to, the reasons it may then carry, and the kinds of action that may follow. Read it as the
answer to "which moves can a task make at all?"; ``core.lifecycle`` says how one is chosen.

How the two relate (honestly): ``lifecycle.step``'s branches decide, and every decision
they make is checked against this table (``require``) before ``step`` returns it. What
happens to one that is not declared is the caller's choice: by default ``step`` raises
``UndeclaredTransition`` (the tests' way: they hold the table complete); the operator
passes ``undeclared=`` instead (``controller.reconcile``), so the decision is carried out
and written all the same (a task must not stall on a row missing from the table), logged
as an error and counted in ``argus_undeclared_transitions_total``. So the table is a
contract ``step`` is held to, not the code that picks the next phase. A decision that keeps
the phase and reason and asks for nothing is always allowed: an observation that does not
apply (progress lines, a read that only refreshes the ``RayReachable`` condition) is not a
transition.

docs/lifecycle.md's transition diagram and tables, and the README's phase list, are
generated from here (``hack/update-lifecycle-docs.py`` writes them; ``python -m
argus.core.transitions --markdown`` prints them). tests/unit/test_transitions.py fails when
they are stale, walks every phase and observation with hypothesis to check that ``step``
makes only declared transitions, and finds a case for every row (none is dead).

A rule is keyed by the class of its observation (``core.observations``; the docs print the
class's name). Action kinds are named by their class names, a ``PostEvent`` with its reason,
``PostEvent(WeakCheck)`` (``lifecycle.action_kind``); the tests check every name against the
classes.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from .observations import (
    Admitted,
    JobObserved,
    JobUnknown,
    Observation,
    Preempt,
    RayUnreachable,
    Reconcile,
    Refused,
    SubmitResult,
    Validated,
    Waiting,
)
from .rayjobs import RayJobState
from .vocabulary import ACTIVE_PHASES, END_PHASES, REASONS_BY_PHASE, Phase, Reason


class _Same(Enum):
    SAME = "SAME"


SAME = _Same.SAME  # a rule's target: the phase stays what it was
ObservationKind = type[Observation]  # a rule is keyed by the class of the observation it is taken on
Source = Phase | None  # None: a new task, no phase yet
NEW: tuple[Source, ...] = (None,)
ANY: tuple[Source, ...] = (None, *Phase)
ENDED: tuple[Source, ...] = END_PHASES
ACTIVE: tuple[Source, ...] = ACTIVE_PHASES


def event(reason: str) -> str:
    """The action kind of a ``PostEvent`` with this reason."""
    return f"PostEvent({reason})"


@dataclass(frozen=True)
class Rule:
    """From any of ``sources``, on ``observation``, the task may move to ``target`` (``SAME``:
    its phase stays) with one of ``reasons`` (empty: the reason stays), and ``actions`` (a
    subset of these kinds) may follow. ``when`` says in words when the lifecycle takes it."""

    sources: tuple[Source, ...]
    observation: ObservationKind
    target: Phase | _Same
    reasons: tuple[Reason, ...]
    actions: tuple[str, ...]
    when: str
    deleting: bool = False

    def target_from(self, source: Source) -> Source:
        return source if self.target is SAME else self.target


_EVENTS_ON_A_READ = (event(Reason.PlacementViolation),)
_ADOPTED = event(Reason.AdoptedExistingJob)
_REJECTED = REASONS_BY_PHASE[Phase.Rejected]
_WAITING = (Reason.Queued, Reason.Unschedulable, Reason.QuotaExceeded, Reason.NoCluster, Reason.VerlDrift, Reason.InputMissing, Reason.SecretMissing,
            Reason.RayUnreachable, Reason.RayAuthFailed)


def _job_observed(source: Phase) -> list[Rule]:
    """What a read of the task's Ray job may do to a Queued (the job reached Ray before the
    status said so: it is adopted first) or an active task."""
    adopted = (_ADOPTED,) if source is Phase.Queued else ()
    read = adopted + _EVENTS_ON_A_READ
    src = (source,)
    rules = [
        Rule(src, JobObserved, Phase.Running, (Reason.RayJobRunning,), read, "Ray runs the job"),
        Rule(src, JobObserved, Phase.Succeeded, (Reason.RayJobSucceeded,), read, f"Ray says {RayJobState.SUCCEEDED}"),
        Rule(src, JobObserved, Phase.Failed, (Reason.RayJobFailed, Reason.DeadlineExceeded, Reason.BackoffLimitExceeded), read,
             f"Ray says {RayJobState.FAILED} (no restart left, or spec.restartPolicy is not OnFailure), or the job ended past activeDeadlineSeconds"),
        Rule(src, JobObserved, Phase.Stopped, (Reason.Cancelled, Reason.RayJobStopped), read,
             f"Ray says {RayJobState.STOPPED} (Cancelled when spec.cancel asked for it)"),
        Rule(src, JobObserved, Phase.Queued, (Reason.Retrying,), read,
             f"Ray says {RayJobState.FAILED}, spec.restartPolicy is OnFailure and spec.backoffLimit allows another attempt"),
        Rule(src, JobObserved, Phase.Suspended, (Reason.Suspended,), read,
             f"Ray says {RayJobState.STOPPED} and spec.suspend asked for it: its GPUs go back to the queue"),
    ]
    if source in ACTIVE:
        rules.append(Rule(src, JobObserved, Phase.Queued, (Reason.Preempted,), read,
                          f"Ray says {RayJobState.STOPPED} and a preemption asked for it: queued again, a new attempt that resumes "
                          "from the newest checkpoint"))
    if source is Phase.Queued:
        rules.insert(0, Rule(src, JobObserved, Phase.Submitted, (Reason.AdoptedExistingJob,), read + ("StopJob",),
                             "Ray already has the job (submitted before an operator restart): adopted, never a second one; "
                             "StopJob if it is cancelled, suspended, preempted or past its deadline"))
    elif source is Phase.Submitted:
        rules.insert(0, Rule(src, JobObserved, SAME, (), read + ("StopJob",),
                             "still pending; StopJob if it is cancelled, suspended, preempted or past its deadline"))
    else:
        rules.insert(0, Rule(src, JobObserved, SAME, (), read + ("StopJob",),
                             "still running; StopJob if it is cancelled, suspended, preempted or past its deadline"))
        rules.insert(1, Rule(src, JobObserved, Phase.Submitted, (Reason.RayJobPending,), read, f"Ray says {RayJobState.PENDING} again"))
    return rules


RULES: tuple[Rule, ...] = (
    # a new task
    Rule(NEW, Validated, Phase.Queued, (Reason.Validated,), (event(Reason.WeakCheck),),
         "the spec is valid (a WeakCheck Warning per weak-check warning)"),
    Rule(NEW, Validated, Phase.Stopped, (Reason.Cancelled,), (),
         "valid, but spec.cancel is set: it never reached Ray (and never will: its weak-check warnings only in status.warnings)"),
    Rule(NEW, Validated, Phase.Suspended, (Reason.Suspended,), (event(Reason.WeakCheck),),
         "valid, but spec.suspend is set: it waits outside the queue until resumed"),
    Rule((None, Phase.Queued), Refused, Phase.Rejected, _REJECTED, ("StopJob",),
         "the spec is invalid, or the namespace has no valid user; StopJob if it holds the finalizer (it may have reached Ray)"),
    # the queue
    Rule((Phase.Queued,), Validated, SAME, (Reason.Queued,), (),
         "composed again for the verl release its clusters run (it waited VerlDrift): the new command and status.verl"),
    Rule((Phase.Queued,), Waiting, SAME, _WAITING, (), "the queue leaves it waiting (the reason and message say why; its place is served on demand)"),
    Rule((Phase.Queued,), Admitted, SAME, (), ("Submit",), "the queue admits it: add the finalizer, submit to Ray"),
    Rule((Phase.Queued,), Reconcile, Phase.Stopped, (Reason.Cancelled,), (),
         "spec.cancel, and no finalizer: it never reached Ray"),
    Rule((Phase.Queued,), Reconcile, Phase.Suspended, (Reason.Suspended,), (),
         "spec.suspend, and no finalizer: it leaves the queue"),
    # a suspended task (spec.suspend; core.suspension)
    Rule((Phase.Suspended,), Reconcile, Phase.Queued, (Reason.Resumed,), (),
         "spec.suspend is false again: queued, a new attempt that resumes from the newest checkpoint (when the last one reached Ray)"),
    Rule((Phase.Suspended,), Reconcile, Phase.Stopped, (Reason.Cancelled,), (), "spec.cancel while suspended: no job runs"),
    # the submission
    Rule((Phase.Queued,), SubmitResult, Phase.Submitted, (Reason.Admitted, Reason.AdoptedExistingJob), (),
         "Ray accepted the job, or already had its submission id (adopted)"),
    Rule((Phase.Queued,), SubmitResult, SAME, (Reason.RayUnreachable, Reason.RayAuthFailed), (),
         "Ray did not answer, or refused the operator's credentials: it waits, the queue tries again"),
    Rule((Phase.Queued,), SubmitResult, Phase.Failed, (Reason.RaySubmitFailed,), (), "Ray refused the job"),
    # Ray's answers
    *(rule for source in (Phase.Queued, *ACTIVE_PHASES) for rule in _job_observed(source)),
    Rule((None, Phase.Suspended, *END_PHASES), JobObserved, SAME, (), ("StopJob",),
         "closed while Ray could not be asked (or before a restart), or suspended: stop the job if it still runs"),
    Rule((Phase.Queued,), JobUnknown, Phase.Stopped, (Reason.Cancelled,), (),
         "spec.cancel, and Ray has no job: it never reached Ray"),
    Rule((Phase.Queued,), JobUnknown, Phase.Suspended, (Reason.Suspended,), (),
         "spec.suspend, and Ray has no job for this attempt: it leaves the queue"),
    Rule(ACTIVE, JobUnknown, Phase.Suspended, (Reason.Suspended,), (),
         "spec.suspend, and Ray no longer has the job: suspended all the same"),
    Rule(ACTIVE, JobUnknown, Phase.Queued, (Reason.Preempted,), (),
         "a preemption stopped it, and Ray no longer has the job: queued again all the same"),
    Rule(ACTIVE, JobUnknown, Phase.Failed, (Reason.RayJobLost, Reason.BackoffLimitExceeded), (),
         "Ray forgot the job (its head restarted), and spec.restartPolicy is Never or no restart is left"),
    Rule(ACTIVE, JobUnknown, Phase.Queued, (Reason.Retrying,), (),
         "Ray forgot the job, spec.restartPolicy allows a restart and spec.backoffLimit another attempt"),
    Rule(ACTIVE, RayUnreachable, Phase.Failed, (Reason.RayUnreachable,), (),
         "Ray did not answer for longer than --ray-grace (refused credentials never end a task)"),
    # preemption (core.preemption chooses the victims; core.preempted moves them)
    Rule(ACTIVE, Preempt, SAME, (Reason.Preempting,), ("StopJob", event(Reason.Preempted)),
         "the scheduler chose it as a victim for a task of higher priority: stop its job (status.preemptedBy names that task)"),
    # an ended task
    Rule(ENDED, Reconcile, SAME, (), ("DeleteTask",), "its time to live (ttlSecondsAfterFinished) ran out"),
    Rule(ENDED, Reconcile, SAME, (), ("RemoveRayJobs", event(Reason.KeptForGitOps)),
         "its time to live ran out, but Argo CD tracks it: kept (status.keptBy), its Ray jobs leave Ray's history"),
    Rule(ENDED, Reconcile, SAME, (), ("RemoveRayJobs",), "--ray-job-retention ran out: its Ray jobs leave Ray's history"),
    # a deleted task (holding the finalizer; without it the object is already free to go)
    Rule(ANY, JobObserved, SAME, (), ("StopJob",), "its job still runs: stop it, read it again", deleting=True),
    Rule(ANY, JobObserved, SAME, (), ("RemoveRayJobs", "ReleaseFinalizer"),
         "its job has ended: remove its Ray jobs, let the object go", deleting=True),
    Rule(ANY, JobUnknown, SAME, (), ("RemoveRayJobs", "ReleaseFinalizer"), "Ray has no job: let the object go", deleting=True),
    Rule(ANY, RayUnreachable, SAME, (), (event(Reason.FinalizerReleased), "ReleaseFinalizer"),
         "Ray could not be asked for longer than --delete-grace: released, with a Warning", deleting=True),
)


_INDEX: dict[tuple[bool, Source, ObservationKind], list[Rule]] = {}
for _rule in RULES:
    for _source in _rule.sources:
        _INDEX.setdefault((_rule.deleting, _source, _rule.observation), []).append(_rule)


class UndeclaredTransition(AssertionError):
    """``step`` decided something the table does not declare: a bug in one or the other."""


@dataclass(frozen=True)
class Move:
    """One decision of ``step``, as the table sees it."""

    source: Source
    observation: ObservationKind
    deleting: bool
    target: Source
    reason_before: str | None
    reason_after: str | None
    actions: tuple[str, ...]

    @property
    def idle(self) -> bool:
        """Phase and reason stay and nothing is asked for: not a transition."""
        return self.target == self.source and self.reason_after == self.reason_before and not self.actions

    def __str__(self) -> str:
        def phase(p: Source) -> str:
            return p.value if p else "(new)"
        where = " (being deleted)" if self.deleting else ""
        return (f"{phase(self.source)}/{self.reason_before}{where} --{self.observation.__name__}--> {phase(self.target)}/{self.reason_after}"
                f" with actions [{', '.join(self.actions)}]")


def rules_for(source: Source, observation: ObservationKind, *, deleting: bool = False) -> list[Rule]:
    return list(_INDEX.get((deleting, source, observation), ()))


def declared(move: Move, rules: Sequence[Rule] | None = None) -> Rule | None:
    """The rule that allows ``move`` (None when none does; an idle move needs none, and gets
    None too: check ``move.idle``)."""
    candidates = rules_for(move.source, move.observation, deleting=move.deleting) if rules is None else \
        [r for r in rules if r.deleting == move.deleting and r.observation == move.observation and move.source in r.sources]
    keeps_reason = move.target == move.source and move.reason_after == move.reason_before
    for rule in candidates:
        if rule.target_from(move.source) != move.target:
            continue
        if not keeps_reason and move.reason_after not in rule.reasons:
            continue
        if set(move.actions) <= set(rule.actions):
            return rule
    return None


def require(move: Move) -> None:
    """Raise ``UndeclaredTransition`` unless the table allows ``move``."""
    if not move.idle and declared(move) is None:
        raise UndeclaredTransition(f"undeclared lifecycle transition {move} (declared in argus.core.transitions.RULES)")


# --------------------------------------------------------------------------- the docs

PHASE_MEANINGS: dict[Phase | None, str] = {
    None: "Just created; the operator has not looked yet.",
    Phase.Queued: "Valid, waiting for a slot and GPUs (why in `message`; its place: `argus queue`). `QuotaExceeded`: its user's GPU quota "
                  "is full. `NoCluster`: no Ray cluster it may use takes tasks (its `spec.cluster`, the ArgusClusters' `namespaceSelector`, "
                  "a drained or deleted cluster). `VerlDrift`: argus doctor found the verl snapshot of every cluster it may use at a release Argus "
                  "has no config tree for (or at several); it goes when a doctor run finds one it has there. A task whose clusters turn out "
                  "to run another release Argus has is composed again for it (`status.verl`; rejected if that release's checks refuse it). `InputMissing`: a data file, the reward "
                  "function or a model folder it reads is not in the shared tree (one line each in `message`); it goes when they exist. `SecretMissing`: a Secret or key its "
                  "`spec.env` names is not in its namespace (the message names the variable, the Secret and the key); read again every 30 s, "
                  "it holds no GPUs and no place ahead of others, nothing reached Ray. `RayAuthFailed`: Ray refused the operator's token. `Retrying`: an earlier attempt was lost or failed and "
                  "the next waits. `Resumed`: it was suspended, and `spec.suspend` is false again. `Preempted`: a task of higher priority took its GPUs; "
                  "the next attempt resumes from the newest checkpoint, and it counts as no restart.",
    Phase.Submitted: f"Ray has the job ({RayJobState.PENDING}). A task admitted at once goes from nothing to `Submitted` in one write. "
                     "`RayJobPending`: Ray reports the job pending again after it ran.",
    Phase.Running: "Ray runs the driver (on a worker node). `Preempting`: its job is being stopped for a task of higher priority "
                   "(`status.preemptedBy`); it goes back to the queue.",
    Phase.Suspended: "`spec.suspend` (`argus suspend`): its job was stopped and its GPUs went back to the queue, or it left the "
                     "queue; not an end. `argus resume` queues it again, and a new attempt resumes from the newest checkpoint.",
    Phase.Succeeded: "",
    Phase.Failed: "",
    Phase.Stopped: "`spec.cancel`, or someone stopped the job in Ray.",
    Phase.Rejected: "Never reached Ray; every problem in `message`.",
}


def reasons_by_phase() -> dict[Phase, tuple[Reason, ...]]:
    """The reasons each phase may carry, as the table's rules give them (tests check that this
    is ``vocabulary.REASONS_BY_PHASE``), in the vocabulary's order."""
    found: dict[Phase, set[Reason]] = {p: set() for p in Phase}
    for rule in RULES:
        for source in rule.sources:
            target = rule.target_from(source)
            if target is not None:
                found[target].update(rule.reasons)
    def order(phase: Phase) -> list[Reason]:
        return list(dict.fromkeys([*REASONS_BY_PHASE[phase], *Reason]))
    return {p: tuple(sorted(found[p], key=order(p).index)) for p in Phase}


def _phase_name(p: Source) -> str:
    return f"`{p.value}`" if p else "(new)"


def _words(items: Iterable[str]) -> str:
    return ", ".join(f"`{i}`" for i in items)


def _sources(rule: Rule) -> str:
    if rule.deleting:
        return "any, being deleted"
    if set(rule.sources) == set(END_PHASES):
        return "any end"
    return ", ".join(_phase_name(s) for s in rule.sources)


def phases_markdown() -> str:
    """docs/lifecycle.md's 'Phases and reasons' table."""
    by_phase = reasons_by_phase()
    lines = ["| Phase | Reasons | Means |", "|---|---|---|", f"| (none) | | {PHASE_MEANINGS[None]} |"]
    lines += [f"| `{p.value}` | {_words(by_phase[p])} | {PHASE_MEANINGS[p]} |".replace("|  |", "| |") for p in Phase]
    return "\n".join(lines)


def transitions_markdown() -> str:
    """docs/lifecycle.md's transition table: every rule, one row."""
    lines = ["| From | Observation | To | Reason | Actions | When |", "|---|---|---|---|---|---|"]
    for rule in RULES:
        target = "(stays)" if rule.target is SAME else f"`{rule.target.value}`"
        reasons = _words(rule.reasons) if rule.reasons else "(stays)"
        lines.append(f"| {_sources(rule)} | `{rule.observation.__name__}` | {target} | {reasons} | {_words(rule.actions) or '-'} | {rule.when} |")
    return "\n".join(lines)


def diagram_mermaid() -> str:
    """The phase changes as a Mermaid state diagram (GitHub draws it): one arrow per (from,
    to), labelled with the observations that take it."""
    edges: dict[tuple[str, str], list[str]] = {}
    for rule in RULES:
        for source in rule.sources:
            target = rule.target_from(source)
            if rule.deleting or target == source:
                continue
            names = edges.setdefault((source.value if source else "[*]", target.value if target else "[*]"), [])
            if rule.observation.__name__ not in names:
                names.append(rule.observation.__name__)
    lines = ["```mermaid", "stateDiagram-v2"]
    lines += [f"    {a} --> {b}: {', '.join(names)}" for (a, b), names in edges.items()]
    return "\n".join(lines + ["```"])


def phase_list_markdown() -> str:
    """The README's phase list: where each phase may go next."""
    nexts: dict[Source, list[Phase]] = {}
    for rule in RULES:
        for source in rule.sources:
            target = rule.target_from(source)
            if not rule.deleting and target is not None and target != source and target not in nexts.setdefault(source, []):
                nexts.setdefault(source, []).append(target)
    order = list(Phase)
    parts = [f"{_phase_name(s)} → {' | '.join(_phase_name(t) for t in sorted(nexts[s], key=order.index))}"
             for s in ANY if nexts.get(s)]
    ended = ", ".join(_phase_name(p) for p in END_PHASES)
    return "; ".join(parts) + f"; {ended} are ends."


BLOCKS = {
    "docs/lifecycle.md": {"lifecycle diagram": diagram_mermaid, "phases and reasons": phases_markdown,
                          "transitions": transitions_markdown},
    "README.md": {"phase list": phase_list_markdown},
}


def marker(name: str, end: bool = False) -> str:
    if end:
        return f"<!-- {name}: end -->"
    return f"<!-- {name}: generated from operator/argus/core/transitions.py by hack/update-lifecycle-docs.py -->"


def render(path: str, text: str) -> str:
    """``text`` (the file at ``path``, relative to the repository) with its generated blocks
    made anew; a block's markers must be there already."""
    for name, make in BLOCKS[path].items():
        begin, end = marker(name), marker(name, end=True)
        if text.count(begin) != 1 or text.count(end) != 1:
            raise ValueError(f"{path}: the markers of the generated block '{name}' are missing or repeated ({begin} ... {end})")
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = f"{head}{begin}\n{make()}\n{end}{tail}"
    return text


def main(argv: Sequence[str]) -> int:
    """``--markdown``: print the generated blocks (hack/update-lifecycle-docs.py writes them
    into the docs; the core reads and writes no files)."""
    if list(argv) != ["--markdown"]:
        print("usage: python -m argus.core.transitions --markdown", file=sys.stderr)
        return 2
    for path, blocks in BLOCKS.items():
        for name, make in blocks.items():
            print(f"{path}: {name}\n{make()}", end="\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
