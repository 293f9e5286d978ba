"""A task as the controller sees it: the parts of an ArgusTask body it acts on, copied out
of the watch stream (``adapters.taskcache.TaskCache``) so that no API read is needed per tick,
and turned into the lifecycle's ``TaskState`` on demand.

Three shapes of one task, kept on purpose: ``TaskView`` is the watch's copy (the raw body,
read leniently: a hand-written status field must not stop the operator), ``TaskState``
(``core.lifecycle``) and ``QueuedTask`` (``core.queue``) are what the pure core's two
decisions need, typed. The core cannot know ``TaskView`` (it is the controller's), and both
are derived from it here (``state``, ``as_queued``), never stored apart, so they cannot
drift; the words they share (phases, Key, the GPU count) come from ``core.vocabulary``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from pydantic import ValidationError

from ..core.clusters import PLACEMENT_ANNOTATION, placed_on
from ..core.gitops import HELM_RELEASE, TRACKING_ID
from ..core.lifecycle import FINALIZER, TaskState
from ..core.queue import QueuedTask
from ..core.spec import ArgusTaskStatus, Phase, RestartPolicy
from ..core.times import parse_time
from ..core.verlchoice import Composers
from ..core.verlconfig import Composer
from ..core.vocabulary import Key, is_active, spec_gpus, task_shape

STATUS_FIELDS = frozenset(f.alias or name for name, f in ArgusTaskStatus.model_fields.items())
RESTART_POLICIES = frozenset(p.value for p in RestartPolicy)
# Only the annotations the lifecycle reads are kept (core.gitops): a task's annotations may hold
# a whole kubectl last-applied-configuration, and the cache holds every task.
KEPT_ANNOTATIONS = (TRACKING_ID, HELM_RELEASE, PLACEMENT_ANNOTATION)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def parse_status(raw: Mapping[str, Any]) -> ArgusTaskStatus:
    """The typed status; a field that does not parse (written by hand, say) is dropped
    rather than stopping the operator."""
    known = {k: v for k, v in raw.items() if k in STATUS_FIELDS}
    while True:
        try:
            return ArgusTaskStatus.model_validate(known)
        except ValidationError as exc:
            bad = {str(e["loc"][0]) for e in exc.errors() if e["loc"]}
            if not bad & known.keys():
                return ArgusTaskStatus()
            for key in bad:
                known.pop(key, None)


@dataclass(frozen=True)
class TaskView:
    namespace: str
    name: str
    uid: str
    generation: int | None
    created: str
    spec: dict[str, Any]
    status: dict[str, Any] = field(default_factory=dict)
    finalizers: tuple[str, ...] = ()
    deletion_timestamp: str | None = None
    resource_version: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)  # KEPT_ANNOTATIONS only
    annotated: bool = False  # whether the object has any annotation (a JSON patch adds to the map, or makes it)

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> TaskView:
        meta = body.get("metadata", {})
        status = {k: v for k, v in _plain(body.get("status") or {}).items() if k in STATUS_FIELDS}
        return cls(
            namespace=meta.get("namespace", ""), name=meta.get("name", ""), uid=meta.get("uid", ""),
            generation=meta.get("generation"), created=meta.get("creationTimestamp", ""),
            spec=_plain(body.get("spec") or {}), status=status,
            finalizers=tuple(meta.get("finalizers") or ()), deletion_timestamp=meta.get("deletionTimestamp"),
            resource_version=str(meta.get("resourceVersion", "")),
            labels=dict(meta.get("labels") or {}),
            annotations={k: v for k, v in (meta.get("annotations") or {}).items() if k in KEPT_ANNOTATIONS},
            annotated=bool(meta.get("annotations")),
        )

    def with_changes(self, **changes: Any) -> TaskView:
        return replace(self, **changes)

    @cached_property
    def key(self) -> Key:
        return (self.namespace, self.name)

    @property
    def phase(self) -> str | None:
        """The phase as written, not parsed: one this operator does not know (written by hand,
        or by a newer operator) is not taken for a new task's (None). The other status fields
        are read typed, through ``state.status``."""
        return self.status.get("phase")

    @property
    def deleting(self) -> bool:
        return bool(self.deletion_timestamp)

    @property
    def cancel(self) -> bool:
        return self.spec.get("cancel") is True

    @property
    def suspend(self) -> bool:
        return self.spec.get("suspend") is True

    @property
    def holds_finalizer(self) -> bool:
        return FINALIZER in self.finalizers

    @property
    def active(self) -> bool:
        """Ray has the task's job: it holds its GPUs."""
        return is_active(self.phase)

    @property
    def gpus(self) -> int:
        return spec_gpus(self.spec)

    @property
    def job_cluster(self) -> str:
        """The cluster the current attempt's job is on, or would be if it reached Ray: the
        placement written before its submission, else the status's (the empty name: the
        implicit cluster of --ray-address)."""
        placed = placed_on(self.annotations, self.state.attempt)
        return placed if placed is not None else (self.state.status.cluster or "")

    def cluster_of_job(self, submission_id: str) -> str:
        """The cluster an attempt's job went to (its attempt record), else ``job_cluster``."""
        for record in self.state.status.attempts or ():
            if record.submission_id == submission_id and record.cluster is not None:
                return record.cluster
        return self.job_cluster

    def as_queued(self, clusters: tuple[str, ...] | None = None, verl: str | None = None) -> QueuedTask:
        """As the queue sees it; ``verl``: the verl release it is composed for and started with
        (queuesnapshot.QueueSnapshot; None: the one its status says it was composed for, if any)."""
        nnodes, per_node = task_shape(self.spec)
        status = self.state.status
        composed = status.verl.version if status.verl is not None else None
        return QueuedTask(self.namespace, self.name, self.priority, self.created, gpus_per_node=per_node, nnodes=nnodes,
                          user=status.user or "", clusters=clusters, verl=verl or composed or None)

    @property
    def priority(self) -> int:
        return _spec_int(self.spec, "priority") or 0

    @cached_property
    def state(self) -> TaskState:
        policy = self.spec.get("restartPolicy")
        backoff = _spec_int(self.spec, "backoffLimit")
        return TaskState(
            namespace=self.namespace, name=self.name, uid=self.uid, generation=self.generation,
            status=parse_status(self.status), cancel=self.cancel, suspend=self.suspend,
            active_deadline_seconds=_spec_int(self.spec, "activeDeadlineSeconds"),
            deleting_since=parse_time(self.deletion_timestamp) if self.deletion_timestamp else None,
            holds_finalizer=self.holds_finalizer,
            restart_policy=policy if policy in RESTART_POLICIES else RestartPolicy.Never.value,
            backoff_limit=backoff if backoff is not None else 3,
            ttl_seconds_after_finished=_spec_int(self.spec, "ttlSecondsAfterFinished"),
            labels=self.labels, annotations=self.annotations,
        )


def in_queue(view: TaskView) -> bool:
    """The task holds a place in the queue: Queued, not cancelled or suspended, not being deleted."""
    return view.phase == Phase.Queued.value and not view.cancel and not view.suspend and not view.deleting


def composed_with(composers: Composers | None, view: TaskView) -> Composer | None:
    """The composer of the verl release the task is composed for (its status.verl): its start,
    its checkpointing and its inputs are planned with the same tree its queue place assumed."""
    verl = view.state.status.verl
    return composers.of(verl.version if verl is not None else None) if composers is not None else None


def _spec_int(spec: Mapping[str, Any], field: str) -> int | None:
    """An integer field of the spec; anything else (the schema allows none) counts as unset."""
    value = spec.get(field)
    return value if type(value) is int else None


def worth_a_look(old: TaskView | None, new: TaskView | None) -> bool:
    """Whether a change should wake the controller at once: a new task, a spec change (such
    as cancel), a deletion starting or ending. The operator's own status writes come back
    through the watch too; they wake nothing (the loop already knows)."""
    if old is None or new is None:
        return True
    return old.generation != new.generation or old.deleting != new.deleting or old.uid != new.uid
