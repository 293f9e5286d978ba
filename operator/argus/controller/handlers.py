"""kopf handlers: short, named for what they react to. They read, call the core, patch.

- ``configure`` / ``start_queue``: the task cache (``cache.TaskCache``, list + watch) and
  the reconciler loop that reads it.
- ``on_task_created``: validate and expand (same code as ``argus validate``) -> Queued or
  Rejected; wakes the queue.
- ``on_cancel_requested``: wakes the queue, which stops the job (or closes a queued task).
- ``on_task_deleted``: the finalizer: stop the Ray job, then let the object go.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from typing import Any

import kopf
from kubernetes.client.exceptions import ApiException

from ..core.phases import TERMINAL_PHASES, conditions_for_phase
from ..core.plan import validate_task
from ..core.spec import GROUP, PLURAL, VERSION, Phase
from ..core.user import USER_LABEL, InvalidUserId, check_user_id
from . import metrics
from .cache import TaskCache
from .kube import Kube, load_config, now_rfc3339
from .leader import LeaderElection
from .ray_adapter import RayAdapter, RayUnreachable
from .reconciler import Reconciler
from .settings import OperatorConfig
from .view import TaskView, parse_time

log = logging.getLogger(__name__)
TASKS = (GROUP, VERSION, PLURAL)
FINALIZER = "argus.io/stop-ray-job"
WORKER_LIMIT = 64  # kopf workers (one per object with pending events) at once
WORKER_IDLE_SECONDS = 0.5


class Runtime:
    """What the handlers share; set up by ``main`` before kopf starts."""

    config: OperatorConfig
    kubeconfig: str | None = None
    reconciler: Reconciler | None = None
    cache: TaskCache | None = None
    kube: Kube | None = None
    leader: LeaderElection | None = None
    tasks: list[asyncio.Task[None]] = []

    def leads(self) -> bool:
        return self.leader is None or self.leader.is_leader

    def require_leadership(self) -> None:
        if not self.leads():
            raise kopf.TemporaryError("another replica holds the argus-operator lease; it acts", delay=5)


RUNTIME = Runtime()


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="argus.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix="argus.io", key="last-handled-configuration")
    settings.posting.level = logging.WARNING  # our own Events tell the story; no kopf chatter
    settings.watching.server_timeout = 300
    settings.networking.request_timeout = 60
    # Bounded: a first start over thousands of tasks no operator has handled yet would
    # otherwise patch them all at once (bench/run.py: 2.4 GB RSS over 5,000). Safe because
    # the operator declares no kopf index (with one, a limit deadlocks: nolar/kopf#1243).
    settings.queueing.worker_limit = WORKER_LIMIT
    # A worker holds its slot until its object has been quiet this long (kopf: 5 s), so with
    # a limit the default capped handling at limit/5 s objects a second (bench/run.py: 4/s).
    settings.queueing.idle_timeout = WORKER_IDLE_SECONDS
    load_config(RUNTIME.kubeconfig)
    config = RUNTIME.config
    ray = RayAdapter(config.ray_address, config.platform.worker_resource)
    RUNTIME.cache = TaskCache(config.namespaces, on_change=_wake_for_new_queued)
    RUNTIME.kube = Kube()
    RUNTIME.reconciler = Reconciler(config, ray, RUNTIME.kube, RUNTIME.cache)
    if config.leader_election_namespace:
        RUNTIME.leader = LeaderElection(config.leader_election_namespace, lease_seconds=config.leader_lease_seconds)
        RUNTIME.reconciler.leads = RUNTIME.leads


@kopf.on.startup()
async def start_queue(**_: Any) -> None:
    # The cache lists in its threads; the loop's first tick waits for that LIST.
    assert RUNTIME.reconciler is not None and RUNTIME.cache is not None
    RUNTIME.cache.start()
    RUNTIME.tasks.append(asyncio.create_task(RUNTIME.reconciler.run(), name="argus queue"))
    if RUNTIME.leader:
        RUNTIME.tasks.append(asyncio.create_task(RUNTIME.leader.run(), name="argus leader election"))


@kopf.on.cleanup()
async def stop_queue(**_: Any) -> None:
    for task in RUNTIME.tasks:
        task.cancel()
    if RUNTIME.cache:
        RUNTIME.cache.stop()
    if RUNTIME.leader:
        await asyncio.to_thread(RUNTIME.leader.release)


def api_error(exc: ApiException) -> str:
    """The API server's own one-line message (it names the verb, resource and identity)."""
    try:
        return str(json.loads(exc.body)["message"])
    except (TypeError, ValueError, KeyError):
        return f"{exc.status} {exc.reason}"


def _wake_for_new_queued(view: TaskView) -> None:
    """A task just marked Queued (its patch has landed): admit it now, not at the next poll."""
    if view.phase == Phase.Queued.value and view.status.get("queuePosition") is None and RUNTIME.reconciler:
        RUNTIME.reconciler.wake.set()


async def user_of_namespace(namespace: str) -> tuple[str | None, str, str]:
    """(user, reason, message) from the namespace's label, read live (one GET per new task:
    a label changed a moment ago counts at once); user None when the namespace cannot run
    tasks. Raises ApiException when it cannot be read."""
    if not namespace:
        return user_from_label(namespace, None)
    assert RUNTIME.kube is not None, "configure (a startup handler) sets it up before any handler or webhook runs"
    try:
        labels = await RUNTIME.kube.namespace_labels(namespace)
    except ApiException as exc:
        if exc.status == 404:
            return user_from_label(namespace, None)
        raise
    return user_from_label(namespace, labels.get(USER_LABEL))


def user_from_label(namespace: str, user: str | None) -> tuple[str | None, str, str]:
    """The same verdict from the label's value (the webhook also reads it live)."""
    if not user:
        return None, "NamespaceNotOnboarded", f"namespace {namespace} has no {USER_LABEL} label: ask an admin to run 'argus onboard <user> --namespace {namespace}'"
    try:
        return check_user_id(user), "", ""
    except InvalidUserId as exc:
        return None, "InvalidUser", f"namespace label {USER_LABEL}={user!r} is not a valid user id: {exc}"


@kopf.on.create(*TASKS)
async def on_task_created(body: kopf.Body, namespace: str, status: kopf.Status, meta: kopf.Meta, patch: kopf.Patch, **_: Any) -> None:
    if status.get("phase"):
        return  # already handled (the operator restarted after writing it)
    RUNTIME.require_leadership()
    now = now_rfc3339()
    generation = meta.get("generation")
    try:
        user, reason, message = await user_of_namespace(namespace)
    except ApiException as exc:  # e.g. RBAC: say which request was refused, then retry
        raise kopf.TemporaryError(f"cannot read namespace {namespace} to find its user: {api_error(exc)}", delay=10) from exc
    if user is None:
        _reject(patch, body, reason, message, now, generation)
        return
    verdict = validate_task(body, user, RUNTIME.config.platform)
    if not verdict.valid:
        _reject(patch, body, "InvalidSpec", "\n".join(verdict.error_lines()), now, generation, user=user)
        return
    warnings = verdict.warning_lines()
    patch.status.update({
        "phase": Phase.Queued.value, "reason": "Validated", "message": "validated; waiting in the queue",
        "user": user, "command": verdict.expanded_command, "warnings": warnings or None, "observedGeneration": generation,
        "conditions": conditions_for_phase(status.get("conditions"), Phase.Queued, "Validated", "waiting in the queue", now=now, generation=generation),
    })
    kopf.event(body, type="Normal", reason="Queued", message=f"validated for user {user}; queued")
    for warning in warnings:
        kopf.event(body, type="Warning", reason="WeakCheck", message=warning)


MAX_MESSAGE_LINES = 100


def _reject(patch: kopf.Patch, body: kopf.Body, reason: str, message: str, now: str, generation: int | None, user: str | None = None) -> None:
    lines = message.splitlines()
    if len(lines) > MAX_MESSAGE_LINES:  # a hostile command can produce thousands
        message = "\n".join(lines[:MAX_MESSAGE_LINES] + [f"... and {len(lines) - MAX_MESSAGE_LINES} more problems (argus validate shows them all)"])
    patch.status.update({
        "phase": Phase.Rejected.value, "reason": reason, "message": message, "user": user, "observedGeneration": generation,
        "conditions": conditions_for_phase(None, Phase.Rejected, reason, message.splitlines()[0][:300], now=now, generation=generation),
    })
    kopf.event(body, type="Warning", reason=reason, message=message[:1000])


@kopf.on.field(*TASKS, field="spec.cancel", new=True)
async def on_cancel_requested(**_: Any) -> None:
    if RUNTIME.reconciler:
        RUNTIME.reconciler.wake.set()


@kopf.on.delete(*TASKS)
async def on_task_deleted(body: kopf.Body, meta: kopf.Meta, logger: kopf.Logger, **_: Any) -> None:
    view = TaskView.from_body(body)
    RUNTIME.require_leadership()
    # Ended tasks hold no job, except one failed for an unreachable Ray: its job may
    # still run once Ray answers again. Queued ones are tried too: the operator may have
    # died between submitting and writing Submitted.
    if view.phase in TERMINAL_PHASES and view.status.get("reason") != "RayUnreachable":
        return
    assert RUNTIME.reconciler is not None
    try:
        outcome = await RUNTIME.reconciler.stop_for_delete(view, parse_time(meta.get("deletionTimestamp")))
    except RayUnreachable as exc:
        metrics.RAY_ERRORS.labels("stop").inc()
        raise kopf.TemporaryError(f"Ray is unreachable; will retry stopping the job before deleting: {exc}", delay=5) from exc
    if outcome.startswith("Ray unreachable"):
        kopf.event(body, type="Warning", reason="FinalizerReleased", message=outcome)
    logger.info(outcome)


def seconds_since(text: str | None) -> float:
    t = parse_time(text)
    return (dt.datetime.now(dt.timezone.utc) - t).total_seconds() if t else 0.0
