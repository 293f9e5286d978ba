"""Intake: how a new task's command is checked, and how it enters the queue.

A task without a phase is new. Intake finds its user (the ``argus.io/user`` label of its
namespace, read live once per tick for all new tasks of that namespace), then validates the
spec with ``core.plan.validate_task``: the command parsed and checked, the configuration
composed with verl's own config tree and checked as verl would (``core.verlconfig``), the
tree of the release the clusters it may use run (``core.verlchoice``; ``Intake.recompose``
composes a queued task again when its cluster turns out to run another). The
verdict goes to the lifecycle as ``Validated`` (-> Queued) or ``Refused`` (-> Rejected); the
status is written once, after the queue pass, so a task admitted at once goes from nothing
to Submitted in one patch.

Until it is validated, a task holds its place in the queue for a while
(``core.queue.holds_place``): nothing created after it is admitted before it is queued.

New tasks are validated highest priority and oldest first, at most ``INTAKE_PER_TICK`` a tick
and for at most ``INTAKE_SECONDS`` of it. A first start over thousands of tasks no operator
has handled (created while none ran) then costs a batch per tick: each tick stays short for
the running tasks' sake, memory holds a batch of drafts rather than thousands, and the loop
comes back at once for the next batch (``loop.ControlLoop.next_wait``). A task deferred so
holds its place until its turn. The batch is large because each tick also looks at every task
once (a few hundred milliseconds at 10,000): small batches would pay that look a hundred
times over in a first start.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from ..core import lifecycle
from ..core.config import PlatformConfig
from ..core.lifecycle import Observation
from ..core.plan import check_failed, validate_task
from ..core.queue import holds_place
from ..core.spec import API_VERSION, KIND
from ..core.store import store_message
from ..core.times import parse_time
from ..core.user import USER_LABEL, user_from_label
from ..core.verlchoice import Composers, VerlChoice
from ..core.verlconfig import Composer
from ..core.vocabulary import Key, Reason
from .inputcheck import InputChecks
from .ports import TaskStore
from .reconcile import Draft, TaskReconciler
from .view import TaskView

log = logging.getLogger(__name__)
# A new task whose namespace cannot be read (RBAC, an API hiccup) is tried again this much later.
RETRY_SECONDS = 10.0
# New tasks validated in one tick at most, and the time they may take (see the module's
# docstring): a validation with verl's configuration composed takes a few milliseconds, so a
# tick validates a few hundred before the time is up, and refills a freed slot a second later
# at worst while a first start is under way.
INTAKE_PER_TICK = 1000
INTAKE_SECONDS = 1.0


def manifest(view: TaskView) -> dict[str, Any]:
    """The task as ``validate_task`` reads it (the webhook gives it the same shape)."""
    return {"apiVersion": API_VERSION, "kind": KIND, "spec": view.spec,
            "metadata": {"name": view.name, "namespace": view.namespace, "uid": view.uid}}


class Intake:
    def __init__(self, platform: PlatformConfig, composers: Composers | None, store: TaskStore, task_reconciler: TaskReconciler,
                 monotonic: Callable[[], float], *, input_checks: InputChecks | None = None,
                 choose: Callable[[TaskView, dict[str, str] | None], VerlChoice] | None = None):
        self.platform = platform
        self.input_checks = input_checks  # handed each queued task's inputs (the existence checks before the wait)
        self.composers = composers  # compose each task's configuration with verl's config tree of a release
        self.choose = choose  # the release a task is composed for (queuesnapshot.QueueSnapshot.verl_choice)
        self.store = store
        self.task_reconciler = task_reconciler
        self.monotonic = monotonic
        self._retry_at: dict[Key, float] = {}
        self.deferred: set[Key] = set()  # new tasks left for the next ticks (INTAKE_PER_TICK)

    def new(self, views: list[TaskView]) -> dict[Key, Draft]:
        """Drafts for the new tasks to validate this tick (not those waiting for a retry):
        at most INTAKE_PER_TICK, highest priority and oldest first; the rest are ``deferred``."""
        now = self.monotonic()
        new = [v for v in views if v.phase is None and not v.deleting and self._retry_at.get(v.key, 0.0) <= now]
        # In the queue's order even when all fit the count: INTAKE_SECONDS may cut the batch short.
        new.sort(key=lambda v: (-v.priority, v.created, v.namespace, v.name))
        self.deferred = {v.key for v in new[INTAKE_PER_TICK:]}
        return {v.key: Draft.of(v) for v in new[:INTAKE_PER_TICK]}

    async def validate(self, drafts: dict[Key, Draft]) -> None:
        """Validate the new tasks in their order: Queued or Rejected, decided but not written
        yet. Those left when INTAKE_SECONDS are up stay new (their drafts unchanged) and are
        ``deferred`` to the next tick."""
        labels = await self._namespace_labels({d.view.namespace for d in drafts.values()}, list(drafts))
        deadline = self.monotonic() + INTAKE_SECONDS
        ready = [d for d in drafts.values() if d.view.namespace in labels]
        for i, draft in enumerate(ready):
            if i and self.monotonic() > deadline:
                self.deferred |= {d.view.key for d in ready[i:]}
                break
            # One at a time: a validation is CPU, nothing to overlap (the status goes out with
            # the others after the queue pass). ``each`` keeps one task's failure its own.
            await self.task_reconciler.each((self._validate(draft, labels),))

    def not_ready(self, views: list[TaskView], drafts: dict[Key, Draft], now: dt.datetime) -> list[TaskView]:
        """The tasks not validated yet that still hold their place in the queue."""
        held = [v for v in views if v.phase is None and not v.deleting and not v.cancel and v.key not in drafts
                and (v.key in self.deferred or holds_place(parse_time(v.created), now))]
        return held + [d.view for d in drafts.values() if d.view.phase is None]

    def forget(self, present: set[Key]) -> None:
        for key in [k for k in self._retry_at if k not in present]:
            del self._retry_at[key]

    async def _namespace_labels(self, namespaces: set[str], new: list[Key]) -> dict[str, dict[str, str] | None]:
        """The labels of each namespace with new tasks, read live once per tick (a label
        changed a moment ago counts at once; a thousand new tasks in one namespace cost one
        read). A namespace that cannot be read is left out: its tasks are tried again later."""
        found: dict[str, dict[str, str] | None] = {}

        async def read(namespace: str) -> None:
            try:
                found[namespace] = await self.store.namespace_labels(namespace)
            except Exception as exc:  # noqa: BLE001 - RBAC or an API hiccup: say which, retry later
                log.warning("cannot read namespace %s to find the user of its tasks: %s; retrying in %d s",
                            namespace, store_message(exc), RETRY_SECONDS)
                for key in new:
                    if key[0] == namespace:
                        self._retry_at[key] = self.monotonic() + RETRY_SECONDS
        await asyncio.gather(*(read(ns) for ns in namespaces))
        return found

    async def _validate(self, draft: Draft, labels: dict[str, dict[str, str] | None]) -> None:
        view = draft.view
        user, reason, message = user_from_label(view.namespace, (labels.get(view.namespace) or {}).get(USER_LABEL))
        if user is None:
            seen: Observation = lifecycle.Refused(reason, message)
        else:
            choice = self.choose(view, labels.get(view.namespace)) if self.choose is not None else VerlChoice(None)
            if choice.why:
                log.info("task %s/%s: %s", view.namespace, view.name, choice.why)
            seen = self._checked(view, user, self.composers.of(choice.version) if self.composers is not None else None)
        await self.task_reconciler.carry_out(draft, self.task_reconciler.step(view, seen))

    def recompose(self, view: TaskView) -> Observation | None:
        """A queued task that waits VerlDrift (its clusters run a release other than the one it
        is composed for), composed again for the release they run when Argus has a tree for it
        (core.verlchoice): Validated again, or Refused by that release's checks. None: there is
        no other release to compose it for (it waits on)."""
        if self.composers is None or self.choose is None:
            return None
        choice = self.choose(view, None)
        had = view.state.status.verl.version if view.state.status.verl is not None else None
        composer = self.composers.get(choice.version) if choice.why and choice.version != had else None
        if composer is None:
            return None
        log.info("task %s/%s waited VerlDrift, composed for verl %s: %s", view.namespace, view.name, had, choice.why)
        return self._checked(view, view.state.status.user or "", composer, choice.why)

    def _checked(self, view: TaskView, user: str, composer: Composer | None, why: str = "") -> Observation:
        """``validate_task``'s verdict on the task as an observation: Validated or Refused."""
        try:
            verdict = validate_task(manifest(view), user, self.platform, composer)
        except Exception as exc:  # noqa: BLE001 - validate_task does not raise; if it ever does, reject, not retry each tick
            log.exception("the checks of task %s/%s raised: rejected", view.namespace, view.name)
            return lifecycle.Refused(Reason.InvalidSpec, str(check_failed(exc)), user)
        verl = (verdict.verl["version"], verdict.verl["source"]) if verdict.verl else None
        if verdict.valid and self.input_checks is not None:
            self.input_checks.remember(view.uid, verdict.inputs)
        return (lifecycle.Validated(user, verdict.expanded_command or "", tuple(verdict.warning_lines()), verl, why) if verdict.valid
                else lifecycle.Refused(Reason.InvalidSpec, "\n".join(verdict.error_lines()), user))
