"""Running ``argus doctor`` against a Ray cluster: the Ray calls around the pure checks of
``core.doctor``. Shared by the CLI (``argus doctor``) and the operator (at start and every
``--doctor-interval``, on each ArgusCluster: ``DoctorLoop``).

For each alive non-head node, one probe job pinned to it, all at once: submitted, followed
until it ends (or stopped when it has not started within ``start_timeout`` or not ended
within ``run_timeout``), its log read, and then removed from Ray's job history, made to
stick as the operator's removals are (``jobsync.HistoryRemovals``: Ray's job monitor may
write a just-ended job's record again).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable

from ..core.clusters import IMPLICIT_CLUSTER, ClusterDoctor, DoctorVerdict, doctor_summary
from ..core.doctor import (
    CLUSTER,
    Check,
    DoctorSettings,
    Node,
    ProbeOutcome,
    Row,
    Status,
    cluster_rows,
    nodes_to_probe,
    probe_job,
    probe_rows,
    worker_resource_row,
)
from ..core.rayjobs import RayAuthFailed, RayJobState, RayJobUnknown, RayRefused, RayUnreachable
from .jobsync import HistoryRemovals
from .ports import RayJobs

log = logging.getLogger(__name__)

REMOVAL_SETTLE_SECONDS = 2.0  # a probe's record is looked at again this long after its removal


class Doctor:
    def __init__(self, ray: RayJobs, settings: DoctorSettings, *, address: str = "", start_timeout: float = 60.0,
                 run_timeout: float = 120.0, poll: float = 0.25, monotonic: Callable[[], float],
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep, nonce: Callable[[], str] = lambda: secrets.token_hex(4)):
        self.ray = ray
        self.settings = settings
        self.address = address
        self.start_timeout = start_timeout
        self.run_timeout = run_timeout
        self.poll = poll
        self.monotonic = monotonic
        self.sleep = sleep
        self.nonce = nonce

    async def run(self) -> list[Row]:
        """Every check's row, cluster rows first, then node by node."""
        where = f" at {self.address}" if self.address else ""
        version: str | None = None
        try:
            version = await self.ray.cluster_version()
            found = await self.ray.nodes()
        except RayAuthFailed as exc:
            return cluster_rows(self.settings, None, str(exc), [])
        except (RayUnreachable, RayRefused) as exc:
            return [Row(CLUSTER, Check.ray_version, Status.fail, f"cannot reach the Ray dashboard{where}: {exc}",
                        "check --ray-address (the head's dashboard Service, port 8265) and that the head runs")]
        nodes = [Node(n.node_id, n.node_ip, n.is_head, dict(n.resources_total)) for n in found]
        rows = cluster_rows(self.settings, version, None, nodes)
        targets = nodes_to_probe(nodes)
        outcomes = await asyncio.gather(*(self.probe(node) for node in targets))
        for node, outcome in zip(targets, outcomes, strict=True):
            rows.append(worker_resource_row(self.settings, node))
            rows.extend(probe_rows(self.settings, node, outcome))
        return rows

    async def probe(self, node: Node) -> ProbeOutcome:
        job = probe_job(self.settings, node, self.nonce())
        sid = job.submission_id
        try:
            pinned = await self.ray.submit_probe(job)
        except (RayUnreachable, RayRefused) as exc:
            return ProbeOutcome("NOT_SUBMITTED", f"Ray refused the probe job: {exc}")
        started = self.monotonic()
        reported, message, running_since = RayJobState.PENDING.value, "", None
        try:
            while True:
                info = await self.ray.job(sid)
                reported, message = info.reported, info.message
                if info.ended:
                    break
                now = self.monotonic()
                if info.status == RayJobState.RUNNING and running_since is None:
                    running_since = now
                if running_since is None and now - started > self.start_timeout:
                    await self._stop(sid)
                    await self._remove(sid)
                    return ProbeOutcome("NOT_STARTED", f"still pending after {now - started:.0f} s", pinned_by=pinned,
                                        waited_seconds=now - started)
                if running_since is not None and now - running_since > self.run_timeout:
                    await self._stop(sid)
                    message = f"stopped: still running after {self.run_timeout:.0f} s"
                    reported = RayJobState.STOPPED.value
                    break
                await self.sleep(self.poll)
            text = await self.ray.logs(sid)
        except (RayUnreachable, RayRefused, RayJobUnknown) as exc:
            await self._stop(sid)
            return ProbeOutcome("LOST", f"lost track of the probe: {exc}", pinned_by=pinned)
        await self._remove(sid)
        return ProbeOutcome(reported, message, text, pinned_by=pinned, waited_seconds=self.monotonic() - started)

    async def _stop(self, sid: str) -> None:
        try:
            await self.ray.stop(sid)
            for _ in range(40):  # until Ray says it ended (then it may leave the history)
                if (await self.ray.job(sid)).ended:
                    return
                await self.sleep(self.poll)
        except (RayUnreachable, RayRefused, RayJobUnknown):
            pass

    async def _remove(self, sid: str) -> None:
        """Remove the probe from Ray's job history, and make sure it stays removed."""
        ray = self.ray
        removals = HistoryRemovals(lambda _cluster: ray, self.monotonic, settle=REMOVAL_SETTLE_SECONDS)
        await removals.remove(((sid, ""),))
        for _ in range(10):  # a few settle periods at most (Ray unreachable meanwhile: given up)
            due = removals.due_in()
            if due is None:
                return
            await self.sleep(max(0.0, due))
            await removals.check()


# The ArgusClusters to check, each with its Doctor (its client, and the platform as its jobs see it).
NamedDoctors = Callable[[], Awaitable[list[tuple[str, Doctor]]]]


class DoctorLoop:
    """The operator's ``argus doctor``: at start and every ``interval`` seconds (while this
    replica leads). It checks the ArgusClusters, each with its own client and platform
    (``named``), or, while there is none, the cluster of --ray-address (``doctor``), as Argus
    places tasks on the one or the others. Each cluster's rows go to the log (one line per
    failure or warning, with its fix), to ``observe`` (the ``argus_cluster_ready`` gauge,
    under the cluster's name) and, as one Event, to ``post_event`` (on the leader Lease:
    ``kubectl describe lease``); an ArgusCluster's verdict also goes to ``verdicts``, which
    its status shows (``controller.clusterstatus``)."""

    def __init__(self, doctor: Doctor, interval: float, *, leads: Callable[[], bool],
                 observe: Callable[[list[Row], str], None], post_event: Callable[[str, str, str], Awaitable[None]] | None,
                 monotonic: Callable[[], float], sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 named: NamedDoctors | None = None, verdicts: dict[str, ClusterDoctor] | None = None,
                 now: Callable[[], str] | None = None, forget: Callable[[set[str]], None] | None = None):
        self.doctor = doctor
        self.monotonic = monotonic
        self.interval = interval
        self.leads = leads
        self.observe = observe
        self.post_event = post_event
        self.sleep = sleep
        self.named = named
        self.verdicts = verdicts if verdicts is not None else {}
        self.now = now
        self.forget = forget  # the metric series of clusters no longer checked
        self.last: list[Row] | None = None
        self._checked: set[str] = set()

    async def run_once(self) -> list[Row]:
        """Every cluster's checks; the rows of the last one checked."""
        named = await self.named() if self.named is not None else []
        targets = named or [(IMPLICIT_CLUSTER, self.doctor)]
        checking = {name for name, _ in targets}
        for name in set(self.verdicts) - checking:
            del self.verdicts[name]  # an ArgusCluster that is gone
        if self.forget is not None and self._checked - checking:
            self.forget(self._checked - checking)
        self._checked = checking
        for name, doctor in targets:
            rows = await doctor.run()
            self.last = rows
            await self._report(name, rows, doctor.settings.expected_verl)
        return self.last or []

    async def _report(self, cluster: str, rows: list[Row], supported_verl: tuple[str, ...] = ()) -> None:
        self.observe(rows, cluster)
        where = f"ArgusCluster {cluster}: " if cluster else ""
        verdict = doctor_summary(rows, self.now() if self.now is not None else "", supported_verl)
        # Every cluster's verdict is kept for the queue (the implicit cluster's too: a drifted
        # --ray-address holds new tasks back as an ArgusCluster does); only an ArgusCluster's
        # status shows it, and so keeps it across a restart.
        if self.now is not None:
            before = self.verdicts.get(cluster)
            if verdict.verl_versions is None and before is not None and before.verl_versions:
                # No probe read the snapshot this time (Ray unreachable, no probe started): the
                # version last read stands, so a drifted cluster is not released by a run
                # that did not look (core.queue.Room.verl_drift).
                verdict = verdict.model_copy(update={"verl_versions": before.verl_versions})
            self.verdicts[cluster] = verdict
        for r in rows:
            if r.status in (Status.fail, Status.warn):
                level = logging.WARNING if r.status is Status.fail else logging.INFO
                log.log(level, "argus doctor: %s%s %s %s: %s%s", where, r.node, r.check.value, r.status.value, r.detail,
                        f" (fix: {r.fix})" if r.fix else "")
        failing = verdict.verdict == DoctorVerdict.Failed
        if failing:
            message = f"{where}{verdict.failed} check(s) failed on the Ray cluster: {verdict.message}"
            log.warning("argus doctor: %s%d check(s) failed (argus doctor shows each with its fix)", where, verdict.failed)
        else:
            probed = len({r.node for r in rows if r.check is Check.probe})
            message = f"{where}every check passed on {probed} worker node(s)" + (
                f" ({verdict.warnings} warning(s): {verdict.message})" if verdict.warnings else "")
            log.info("argus doctor: %s", message)
        if self.post_event is not None:
            await self.post_event("Warning" if failing else "Normal", "ClusterNotReady" if failing else "ClusterReady", message)

    async def run(self, look_every: float = 10.0) -> None:
        """At once when this replica leads (at start, or when it takes over), then every
        ``interval``; a replica that does not lead looks again every ``look_every`` seconds."""
        last: float | None = None
        while True:
            if self.leads() and (last is None or self.monotonic() - last >= self.interval):
                last = self.monotonic()
                try:
                    await self.run_once()
                except Exception:  # noqa: BLE001 - the next run tries again; the controller goes on
                    log.exception("argus doctor failed")
            await self.sleep(min(self.interval, look_every))
