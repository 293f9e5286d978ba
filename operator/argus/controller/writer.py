"""The one writer of task status: it turns the lifecycle's typed status into the smallest
merge patch (nothing when nothing changed), posts one Event per phase change but the quiet
ones (``core.vocabulary.QUIET_PHASE_CHANGES``, and a first status in ``QUIET_FIRST_PHASES``)
and the lifecycle's other events off the critical path, adds and removes the finalizer, and
remembers what it wrote until the watch shows it (read your own writes).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.lifecycle import FINALIZER, PostEvent
from ..core.patch import apply_merge_patch, merge_patch
from ..core.spec import ArgusTaskStatus, Phase
from ..core.vocabulary import QUIET_FIRST_PHASES, QUIET_PHASE_CHANGES, Key
from .metrics import Metrics
from .ports import TaskStore
from .view import TaskView

log = logging.getLogger(__name__)
# A write the watch has not shown after this long is forgotten (the watch is the truth).
OVERLAY_SECONDS = 60.0


@dataclass
class _Written:
    at: float
    status: dict[str, Any] | None = None
    finalizers: tuple[str, ...] | None = None
    annotations: dict[str, str] | None = None  # set with the finalizer (the placement)


def status_document(status: ArgusTaskStatus) -> dict[str, Any]:
    """The status as the API stores it (camelCase, no nulls)."""
    return status.model_dump(by_alias=True, exclude_none=True, mode="json")


def phase_event(old_phase: str | None, status: ArgusTaskStatus) -> PostEvent:
    failed = status.phase in (Phase.Failed.value, Phase.Rejected.value)
    text = f"{old_phase or 'new'} -> {status.phase}"
    return PostEvent("Warning" if failed else "Normal", status.reason or str(status.phase),
                     f"{text}: {status.message}" if status.message else text)


class StatusWriter:
    def __init__(self, store: TaskStore, metrics: Metrics, monotonic: Callable[[], float]) -> None:
        self.store = store
        self.metrics = metrics
        # The loop's clock: the overlay's age is compared with the loop's ``now``, so both
        # must read the same clock (a fake one in tests, whatever the machine's uptime).
        self.monotonic = monotonic
        self._written: dict[Key, _Written] = {}
        self._background: set[asyncio.Task[Any]] = set()

    # -- read your own writes -----------------------------------------------------
    def overlays(self, views: list[TaskView], now: float) -> list[TaskView]:
        """``overlay`` over a whole list; the common case (nothing written lately) costs nothing per view."""
        if not self._written:
            return views
        written = self._written
        return [self.overlay(v, now) if v.key in written else v for v in views]

    def overlay(self, view: TaskView, now: float | None = None) -> TaskView:
        """The view with what this process wrote that the watch may not show yet."""
        written = self._written.get(view.key)
        if written is None:
            return view
        now = self.monotonic() if now is None else now
        status = written.status
        finalizers = written.finalizers
        annotations = written.annotations
        if status is not None and not merge_patch(view.status, status):
            status = None  # the watch has it
        if finalizers is not None and tuple(view.finalizers) == finalizers:
            finalizers = None
        if annotations is not None and all(view.annotations.get(k) == v for k, v in annotations.items()):
            annotations = None
        if (status is None and finalizers is None and annotations is None) or now - written.at > OVERLAY_SECONDS:
            self._written.pop(view.key, None)
            return view
        changes: dict[str, Any] = {}
        if status is not None:
            changes["status"] = status
        if finalizers is not None:
            changes["finalizers"] = finalizers
        if annotations is not None:
            changes["annotations"], changes["annotated"] = {**view.annotations, **annotations}, True
        return view.with_changes(**changes)

    def forget(self, key: Key) -> None:
        self._written.pop(key, None)

    # -- writes ----------------------------------------------------------------------
    async def write(self, view: TaskView, status: ArgusTaskStatus, events: tuple[PostEvent, ...] = (), *,
                    shown: asyncio.Event | None = None) -> TaskView:
        """Patch what changed from ``view``'s status to ``status``; post the phase-change
        Event and ``events``. Returns the view as it now is (unchanged if the object is gone).
        ``shown``: the status is shown in ``overlay`` before the patch is sent, and ``shown``
        set then (a job's end: the freed slot is given out while its end is written); if the
        patch fails, the overlay is as before."""
        document = status_document(status)
        patch = merge_patch(view.status, document)
        if patch:
            document = apply_merge_patch(view.status, patch)
            if shown is not None:
                before = self._show(view.key, document)
                shown.set()
            patched = False
            try:
                patched = await self.store.patch_status(view.namespace, view.name, patch)
            finally:
                if shown is not None and not patched:  # failed, or the object is gone
                    self._unshow(view.key, before)
            if not patched:
                return view  # deleted meanwhile
            self._remember(view.key, status=document)
            if patch.get("phase"):
                quiet = QUIET_PHASE_CHANGES if view.phase else QUIET_PHASE_CHANGES + QUIET_FIRST_PHASES
                if (status.phase, status.reason) not in quiet:
                    events = (phase_event(view.phase, status), *events)
                self.metrics.observe_phase_change(view.phase, status.phase, status.reason)
            view = view.with_changes(status=document)
        self.post(view, events)
        return view

    def post(self, view: TaskView, events: tuple[PostEvent, ...]) -> None:
        """Post Events on the task, in the background: nothing waits for them."""
        for event in events:
            self.in_background(self.store.event(view.namespace, view.name, view.uid, event.type, event.reason, event.message))

    async def add_finalizer(self, view: TaskView, annotations: dict[str, str] | None = None) -> TaskView | None:
        """The view with the finalizer (and ``annotations``) on it; None if that failed
        (retry with a fresh view)."""
        annotations = {k: v for k, v in (annotations or {}).items() if view.annotations.get(k) != v}
        if view.holds_finalizer and not annotations:
            return view
        if annotations:
            added = await self.store.add_finalizer(view.namespace, view.name, list(view.finalizers), annotations,
                                                   resource_version=view.resource_version or None, annotated=view.annotated)
        else:
            added = await self.store.add_finalizer(view.namespace, view.name, list(view.finalizers))
        if not added:
            return None
        finalizers = view.finalizers if view.holds_finalizer else (*view.finalizers, FINALIZER)
        self._remember(view.key, finalizers=finalizers, annotations=annotations)
        return view.with_changes(finalizers=finalizers, annotations={**view.annotations, **annotations},
                                 annotated=view.annotated or bool(annotations))

    async def remove_finalizer(self, view: TaskView) -> bool:
        if not view.holds_finalizer:
            return True
        if not await self.store.remove_finalizer(view.namespace, view.name, list(view.finalizers)):
            return False
        self._remember(view.key, finalizers=tuple(f for f in view.finalizers if f != FINALIZER))
        return True

    def _remember(self, key: Key, *, status: dict[str, Any] | None = None, finalizers: tuple[str, ...] | None = None,
                  annotations: dict[str, str] | None = None) -> None:
        written = self._written.setdefault(key, _Written(at=0.0))
        written.at = self.monotonic()
        if status is not None:
            written.status = status
        if finalizers is not None:
            written.finalizers = finalizers
        if annotations:
            written.annotations = {**(written.annotations or {}), **annotations}

    def _show(self, key: Key, status: dict[str, Any]) -> _Written | None:
        """Remember ``status`` before it is written; the memory it replaces, for ``_unshow``."""
        before = self._written.get(key)
        self._written[key] = _Written(at=self.monotonic(), status=status, finalizers=before.finalizers if before is not None else None,
                                      annotations=before.annotations if before is not None else None)
        return before

    def _unshow(self, key: Key, before: _Written | None) -> None:
        if before is None:
            self._written.pop(key, None)
        else:
            self._written[key] = before

    def in_background(self, coro: Any) -> None:
        """Best-effort work that nothing waits for (Events)."""
        task = asyncio.create_task(coro)
        self._background.add(task)  # a reference, or the task may be collected mid-flight
        task.add_done_callback(self._background.discard)

    async def drain(self) -> None:
        """Wait for the background work (tests)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
