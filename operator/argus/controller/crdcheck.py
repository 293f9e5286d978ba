"""Are the served CRDs (ArgusTask's and ArgusCluster's, one check each) the ones this operator
was built with? Helm installs a chart's
``crds/`` once and never upgrades them, so after ``helm upgrade`` the API server can still
serve the old schema, and it silently drops every status field the old schema lacks. The
check compares the served CRD's ``argus.io/schema-hash`` annotation with this build's
(``core.crd.compare_served``), at start and every ``--crd-check-interval``, on every
replica: a stale CRD is an error in the log that names both hashes and the command that
applies the new CRD, and the ``argus_crd_stale`` gauge. It changes nothing else: the
operator keeps running and ready (a stale CRD loses new status fields, it does not stop
tasks), and the gauge (labelled with the CRD's name) returns to 0 once the new CRD is applied.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from ..core.crd import CRD_NAME, KIND, CrdUnreadable, CrdVerdict, compare_served
from .metrics import Metrics
from .ports import CrdReader

log = logging.getLogger(__name__)


class CrdCheck:
    def __init__(self, reader: CrdReader, built: str, metrics: Metrics, *, kind: str = KIND, name: str = CRD_NAME,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.reader = reader
        self.built = built
        self.kind = kind
        self.name = name
        self.metrics = metrics
        self.sleep = sleep
        self.last: CrdVerdict | None = None

    async def check(self) -> CrdVerdict | None:
        """One comparison, reported; None when the CRD could not be read (the gauge keeps
        its value, a warning says why)."""
        try:
            annotations = await self.reader.crd_annotations(self.name)
        except CrdUnreadable as exc:
            log.warning("cannot read the %s CRD (%s) to compare its schema with this operator's (%s): %s", self.kind, self.name,
                        self.built, exc)
            return None
        verdict = compare_served(annotations, self.built, kind=self.kind, name=self.name)
        self.metrics.crd_stale.labels(self.name).set(0 if verdict.current else 1)
        if not verdict.current:
            log.error("%s", verdict.message())  # every check while it lasts: loud on purpose
        elif self.last is None or not self.last.current:
            log.info("%s", verdict.message())
        self.last = verdict
        return verdict

    async def run(self, interval: float) -> None:
        """At start, then every ``interval`` seconds (0: at start only)."""
        while True:
            try:
                await self.check()
            except Exception:  # noqa: BLE001 - a failed check must not stop the operator
                log.exception("the %s CRD check failed", self.kind)
            if interval <= 0:
                return
            await self.sleep(interval)
