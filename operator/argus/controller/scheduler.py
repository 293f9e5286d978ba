"""The scheduler (``Scheduler``) decides the queue once per tick and starts each admitted
task: the queue pass.

``queuesnapshot.QueueSnapshot`` gathers what the decision needs (Ray's worker nodes and free
GPUs, claims, quotas, usage, and the files tasks read that are not in the shared tree:
``inputcheck``); ``core.queue.decide`` decides; the lifecycle turns each
answer into a status: ``Admitted`` (-> Submitted, with the ``Submit`` action that
``reconcile`` carries out) or ``Waiting`` (its reason and message).

At admission the spec is validated a second time, on purpose (``_start``): the plan that
runs is made from the platform configuration in force when the task starts, with this
attempt's submission id (docs/lifecycle.md).

A waiting task's place is not written: every admission moves every task behind it, and
writing each move cost one patch per queued task per admission. Its status holds the reason
and message, written when they change; the places are served on demand
(servers/logapi/queueview.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ..core import lifecycle
from ..core.clock import Clock
from ..core.config import PlatformConfig
from ..core.lifecycle import Observation
from ..core.patch import merge_patch
from ..core.plan import Verdict, validate_spec
from ..core.secretenv import SecretEnv, SecretRead, SecretUnreadable, raw_secret_env, resolve_secret_env, secret_env
from ..core.spec import ArgusTaskSpec, Phase
from ..core.store import StoreError
from ..core.submission import SubmissionPlan
from ..core.verlchoice import Composers
from ..core.vocabulary import Key, Reason
from .fleet import Fleet
from .metrics import Metrics
from .ports import TaskSecrets
from .preemptor import Preemptor
from .queuesnapshot import QueueSnapshot
from .reconcile import Draft, TaskReconciler
from .view import TaskView, composed_with, in_queue
from .writer import status_document

log = logging.getLogger(__name__)
# A queued task whose spec.env names a Secret or key that is not there is left out of the
# queue's decision (it must not hold GPUs, nor the head of the queue, while it waits); its
# Secrets are read again at most this often (seconds) while it waits.
SECRET_RECHECK_SECONDS = 30.0


class Scheduler:
    def __init__(self, platform: PlatformConfig, composers: Composers | None, snapshot: QueueSnapshot, fleet: Fleet,
                 task_reconciler: TaskReconciler, current: Callable[[Key], TaskView | None], every_task: Callable[[], list[TaskView]], *,
                 clock: Clock, metrics: Metrics, secrets: TaskSecrets | None = None):
        self.platform = platform
        self.secrets = secrets        # the Secrets spec.env names (None: no reader; such a task waits)
        self.preemptor: Preemptor | None = None  # stops lower-priority tasks for a waiting one (--preemption)
        self.composers = composers
        # Composes a task that waits VerlDrift again for the release its clusters run (intake.Intake.recompose).
        self.recompose: Callable[[TaskView], Observation | None] | None = None
        self.snapshot = snapshot
        self.fleet = fleet
        self.task_reconciler = task_reconciler
        self.current = current        # a task as this process knows it now (its own writes included)
        self.every_task = every_task  # every task in the cache (the fair policy's usage)
        self.clock = clock
        self.metrics = metrics
        self.last_seconds = 0.0
        # What each waiting task was last told, on which view of it: the same observation on
        # the same view makes the same status, so it is not stepped again (a long queue
        # costs a dict lookup per task per pass, not a lifecycle step and a status diff).
        self._told: dict[Key, tuple[TaskView, lifecycle.Waiting]] = {}
        # Each queued task's last Secret check: (when, the view's spec, why it waits or None).
        # Never a value: only whether every Secret and key is there.
        self._secrets_checked: dict[Key, tuple[float, dict, str | None]] = {}
        # The tasks whose finalizer is being put on ahead of their start (``_arm``), and each
        # armed task's validation, kept for its start (``_validated``).
        self._arming: dict[Key, asyncio.Future[None]] = {}
        self._verdicts: dict[Key, tuple[tuple[object, ...], object, Verdict]] = {}

    async def run(self, queued: list[TaskView], active: list[TaskView], not_ready: list[TaskView], drafts: dict[Key, Draft],
                  ending: frozenset[Key] = frozenset()) -> None:
        """Admit from the head of the queue and start those admitted; tell the others why they
        wait. ``ending``: active tasks whose log said their job ended; the tasks next in line
        for their slots are armed (``_arm``)."""
        held = await self._held_by_secrets(queued)
        by_key = {v.key: v for v in queued}
        queued = [v for v in queued if v.key not in held]
        decision, ray_errors = await self.snapshot.decide(queued, active, not_ready, self.every_task(), self.clock.now(), ending)
        self._verdicts = {k: kept for k, kept in self._verdicts.items() if k in by_key}
        for key, cluster in self.snapshot.next_up.items():
            upcoming = by_key.get(key)
            if upcoming is not None and not upcoming.holds_finalizer and key not in drafts and key not in self._arming:
                self._arming[key] = asyncio.ensure_future(self._arm(key, cluster))
        if self.preemptor is not None:  # before the waiting tasks are told: it may change what they wait for
            await self.preemptor.run(decision, active, self.clock.now().timestamp(), list(by_key.values()))
        started = self.clock.monotonic()
        told: dict[Key, tuple[TaskView, lifecycle.Waiting]] = {}
        waiting = [*decision.waiting.items(), *((key, (Reason.SecretMissing, why)) for key, why in held.items())]
        for key, (reason, message) in waiting:
            if key not in by_key:
                continue
            view = by_key[key]
            ray_error, ray_reason = ray_errors.get(key, (None, Reason.RayUnreachable))
            preempts = self.preemptor.preempts(key) if self.preemptor is not None else ()
            again = self.recompose(view) if reason == Reason.VerlDrift and self.recompose is not None else None
            if again is not None:  # composed for the release its clusters run: placed there next pass, or rejected
                drafts.setdefault(key, Draft.of(view)).take(self.task_reconciler.step(view, again))
                continue
            seen = lifecycle.Waiting(reason, message, ray_error, ray_reason, preempts)
            told[key] = (view, seen)
            last = self._told.get(key)
            if key not in drafts and last is not None and last[0] is view and last[1] == seen:
                continue
            result = self.task_reconciler.step(view, seen)
            if key in drafts or merge_patch(view.status, status_document(result.status)):
                drafts.setdefault(key, Draft.of(view)).take(result)
        self._told = told
        # The pass's own work, what grows with the queue: the decision and telling the waiting
        # tasks. Its reads (Ray's capacity, the users' quotas) are cached and timed on their own
        # (argus_ray_api_call_duration_seconds); the starts are Ray submissions.
        self.last_seconds = self.snapshot.decide_seconds + self.clock.monotonic() - started
        self.metrics.admission_pass.observe(self.last_seconds)
        await self.task_reconciler.each(self._start(drafts, by_key[t.key], decision.placed.get(t.key, "")) for t in decision.admit)

    def platform_on(self, cluster: str) -> PlatformConfig:
        """The platform configuration a task placed on ``cluster`` is planned with: its
        shared tree's root, verl snapshot and worker resource where its ArgusCluster says."""
        found = self.fleet.get(cluster)
        return self.platform if found is None or not cluster else found.config.platform(self.platform)

    async def _start(self, drafts: dict[Key, Draft], view: TaskView, cluster: str = "") -> None:
        """Submit an admitted task (under its lock: a cancel or delete may race it)."""
        async with self.task_reconciler.lock(view.key):
            draft = drafts.get(view.key)
            if draft is None:
                current = self.current(view.key)
                if current is None or current.phase != Phase.Queued.value or current.deleting:
                    return
                draft = drafts[view.key] = Draft.of(current)
            # The second validation of the attempt, on purpose: the plan that runs is made
            # now, from the spec and the platform configuration in force when the task
            # starts (a path root or verl snapshot changed while it waited applies to it),
            # with this attempt's submission id; intake's validation only admitted it to the
            # queue. A task that no longer passes is Rejected with the reason (docs/lifecycle.md).
            verdict = self._validated(draft.view, cluster)
            if not verdict.valid or verdict.plan is None:
                seen: Observation = lifecycle.Refused(Reason.InvalidSpec, "\n".join(verdict.error_lines()), draft.view.state.status.user)
            else:
                if self.preemptor is not None:
                    self.preemptor.remember(draft.view, verdict.save_freq, verdict.resume_mode)
                plan, waits = await self._with_secrets(view.namespace, verdict.spec, verdict.plan)
                seen = (lifecycle.Admitted(plan.model_copy(update={"cluster": cluster})) if waits is None
                        else lifecycle.Waiting(Reason.SecretMissing, waits, None, Reason.RayUnreachable))
            await self.task_reconciler.decide_and_write(draft, seen)  # under the lock: a cancel or deletion must not overtake it

    def _validated(self, view: TaskView, cluster: str) -> Verdict:
        """The start's validation of ``view`` placed on ``cluster``; the one made when it was
        armed (``_arm``) if nothing it depends on changed since: the spec, the user, the
        attempt, the platform configuration and the verl release it is composed for."""
        platform, composer = self.platform_on(cluster), composed_with(self.composers, view)
        inputs = (view.uid, view.spec, view.state.status.user or "", view.state.attempt, platform)
        kept = self._verdicts.pop(view.key, None)
        if kept is not None and kept[0] == inputs and kept[1] is composer:
            return kept[2]
        verdict = validate_spec(view.spec, inputs[2], platform, namespace=view.namespace, name=view.name, uid=view.uid,
                                attempt=view.state.attempt, composer=composer)
        self._verdicts[view.key] = (inputs, composer, verdict)
        return verdict

    async def _arm(self, key: Key, cluster: str) -> None:
        """Put the finalizer on the task next in line for an ending job's slot and validate its
        start ahead (``TaskReconciler.arm``): once Ray says the job ended, the slot's refill is
        the Ray submission alone. In the background: the tick goes on reading the ending job."""
        try:
            async with self.task_reconciler.lock(key):
                view = self.current(key)
                if view is None or not in_queue(view) or view.holds_finalizer:
                    return
                verdict = self._validated(view, cluster)
                if verdict.valid and verdict.plan is not None:  # else its start rejects it, with the reason
                    await self.task_reconciler.arm(view, cluster)
        except Exception as exc:  # noqa: BLE001 - ahead of time only: its start puts the finalizer on as ever
            log.warning("could not put the finalizer on %s/%s ahead of its start: %s", *key,
                        exc.message if isinstance(exc, StoreError) else exc)
        finally:
            self._arming.pop(key, None)

    async def armed(self) -> None:
        """Wait for the finalizers being put on ahead (tests, and a clean stop)."""
        await asyncio.gather(*self._arming.values(), return_exceptions=True)

    def stop_arming(self) -> None:
        for arming in self._arming.values():
            arming.cancel()

    async def _with_secrets(self, namespace: str, spec: ArgusTaskSpec | None, plan: SubmissionPlan) -> tuple[SubmissionPlan, str | None]:
        """The plan with the values of the Secrets its spec.env names, read now (a rotated
        Secret counts at the next attempt), or why the task waits. Nothing reaches Ray
        before every value is there; no value is logged."""
        refs = secret_env(spec)
        if not refs:
            return plan, None
        values, waits = resolve_secret_env(refs, namespace, await self._read(namespace, refs))
        return (plan, waits) if waits is not None else (plan.with_secrets(values), None)

    async def _held_by_secrets(self, queued: list[TaskView]) -> dict[Key, str]:
        """The queued tasks that wait for a Secret or key (why, one line each), each checked
        again at most every SECRET_RECHECK_SECONDS."""
        now = self.clock.monotonic()
        checked: dict[Key, tuple[float, dict, str | None]] = {}
        for view in queued:
            refs = raw_secret_env(view.spec)
            if not refs:
                continue
            last = self._secrets_checked.get(view.key)
            if last is None or last[1] != view.spec or now - last[0] >= SECRET_RECHECK_SECONDS:
                _, waits = resolve_secret_env(refs, view.namespace, await self._read(view.namespace, refs))
                last = (now, view.spec, waits)
            checked[view.key] = last
        self._secrets_checked = checked
        return {key: waits for key, (_, _, waits) in checked.items() if waits is not None}

    async def _read(self, namespace: str, refs: tuple[SecretEnv, ...]) -> dict[str, SecretRead]:
        """Each Secret the references name, read once (no value is logged or kept here)."""
        read: dict[str, SecretRead] = {}
        for name in dict.fromkeys(r.secret for r in refs):
            if self.secrets is None:
                read[name] = SecretUnreadable("this operator reads no Secrets")
                continue
            try:
                read[name] = await self.secrets.data(namespace, name)
            except Exception as exc:  # noqa: BLE001 - the task waits with the reason; the next pass reads again
                read[name] = SecretUnreadable(exc.message if isinstance(exc, StoreError) else type(exc).__name__)
        return read
