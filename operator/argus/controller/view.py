"""A task as the reconciler sees it: the parts of an ArgusTask body it acts on,
copied out of the watch stream (``cache.TaskCache``) so no API read is needed per tick."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..core.queue import QueuedTask


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def parse_time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass
class TaskView:
    namespace: str
    name: str
    uid: str
    generation: int | None
    created: str
    deleting: bool
    spec: dict[str, Any]
    status: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> "TaskView":
        meta = body.get("metadata", {})
        status = _plain(body.get("status") or {})
        status.pop("kopf", None)
        return cls(
            namespace=meta.get("namespace", ""), name=meta.get("name", ""), uid=meta.get("uid", ""),
            generation=meta.get("generation"), created=meta.get("creationTimestamp", ""),
            deleting=bool(meta.get("deletionTimestamp")), spec=_plain(body.get("spec") or {}), status=status,
        )

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def phase(self) -> str | None:
        return self.status.get("phase")

    @property
    def cancel(self) -> bool:
        return bool(self.spec.get("cancel"))

    @property
    def gpus(self) -> int:
        try:
            return int(self.spec.get("nnodes", 1)) * int(self.spec.get("nGpusPerNode", 1))
        except (TypeError, ValueError):
            return 0

    @property
    def submission_id(self) -> str | None:
        return (self.status.get("rayJob") or {}).get("submissionId")

    def as_queued(self) -> QueuedTask:
        return QueuedTask(self.namespace, self.name, int(self.spec.get("priority") or 0), self.created, self.gpus)

    def deadline_exceeded(self, now: dt.datetime) -> bool:
        seconds = self.spec.get("activeDeadlineSeconds")
        admitted = parse_time(self.status.get("admittedAt"))
        return bool(seconds and admitted and (now - admitted).total_seconds() >= seconds)
