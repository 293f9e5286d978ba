"""Leader election on a coordination.k8s.io Lease, so that two replicas never both act: only
the holder runs the controller loop (the others keep their cache warm and serve the
admission webhook).

Time is only ever measured on this process's own monotonic clock, as client-go's
leaderelection does: the Lease's ``renewTime`` is written for people to read and never
compared with the local clock, so two machines whose clocks disagree (by seconds or hours)
still never both lead.

- A follower notes *when it saw* the Lease record change (its resourceVersion). The holder
  is taken to be gone only when the record has not changed for ``leaseDurationSeconds``
  of the follower's own time.
- The leader counts its term from the moment *before* it sent the renewal that succeeded,
  and stops acting ``renew_deadline`` later (two thirds of the lease) unless it renewed
  again. Any follower waits a whole lease from a moment after that renewal, so the two
  windows never overlap (only a difference in clock *rates* could eat into the third of a
  lease between them).

Why not ``kubernetes.leaderelection`` (the client's module): it measures with the wall
clock (``time.time()``), so a clock step on the node moves its expiry; it blocks a thread
per candidate and returns for good after losing the lease once; and it cannot hand the
lease over on shutdown. This is the same algorithm in about a hundred lines, on asyncio,
with the clock injectable for tests (tests/unit/test_leader.py runs two candidates on
skewed clocks).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable
from typing import Any

from kubernetes.client.exceptions import ApiException

from ..controller.metrics import Metrics
from ..core.clock import Clock

log = logging.getLogger(__name__)

DEFAULT_NAME = "argus-operator"


def default_identity() -> str:
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}-{uuid.uuid4().hex[:6]}"


class LeaderElection:
    def __init__(self, namespace: str, name: str = DEFAULT_NAME, identity: str | None = None, lease_seconds: float = 15.0, *,
                 clock: Clock, metrics: Metrics, api: Any = None):
        self.namespace = namespace
        self.name = name
        self.identity = identity or default_identity()
        self.lease_seconds = float(lease_seconds)
        self.renew_deadline = self.lease_seconds * 2 / 3
        self.retry_seconds = max(0.2, self.lease_seconds * 2 / 15)  # 2 s for a 15 s lease, as client-go
        self.monotonic = clock.monotonic
        self.wall = clock.now  # only for the renewTime/acquireTime written for people to read
        self.metrics = metrics
        self._api = api
        self._renewed_at: float | None = None  # monotonic time before our last successful renewal
        self._seen_version: str | None = None  # the Lease's resourceVersion when we last saw it change
        self._seen_at: float = 0.0             # monotonic time we saw that
        self.holder: str | None = None         # who holds the lease, as last read

    @property
    def api(self) -> Any:
        if self._api is None:
            from kubernetes import client  # noqa: PLC0415 - after the kubeconfig is loaded
            self._api = client.CoordinationV1Api()
        return self._api

    @property
    def is_leader(self) -> bool:
        # A leader that cannot renew steps down well before anyone may take over.
        return self._renewed_at is not None and self.monotonic() - self._renewed_at < self.renew_deadline

    async def run(self) -> None:
        self.metrics.leader.set(0)
        while True:
            was = self.is_leader
            try:
                await asyncio.to_thread(self.try_acquire_or_renew)
            except Exception as exc:  # noqa: BLE001 - API hiccups: keep trying; the term runs out by itself
                log.warning("leader election (Lease %s/%s): %s", self.namespace, self.name, exc)
            now = self.is_leader
            if was != now:
                log.warning("leader election: %s is %s the leader (Lease %s/%s)", self.identity,
                            "now" if now else "no longer", self.namespace, self.name)
            self.metrics.leader.set(1 if now else 0)
            await asyncio.sleep(self.retry_seconds)

    def try_acquire_or_renew(self) -> bool:
        """One round: True if we hold the lease now (``is_leader`` follows)."""
        from kubernetes import client  # noqa: PLC0415

        started = self.monotonic()
        stamp = self.wall()
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
            body = client.V1Lease(
                metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
                spec=client.V1LeaseSpec(holder_identity=self.identity, lease_duration_seconds=self._duration(),
                                        acquire_time=stamp, renew_time=stamp, lease_transitions=0),
            )
            return self._write(self.api.create_namespaced_lease, started, self.namespace, body)
        spec = lease.spec
        version = lease.metadata.resource_version
        if version != self._seen_version:
            self._seen_version, self._seen_at = version, self.monotonic()
        self.holder = spec.holder_identity or None
        duration = float(spec.lease_duration_seconds or self.lease_seconds)
        if self.holder not in (None, self.identity) and self.monotonic() - self._seen_at < duration:
            self._renewed_at = None
            return False  # held by someone else, and we saw it renewed within its lease
        if self.holder != self.identity:
            spec.acquire_time = stamp
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
        spec.holder_identity = self.identity
        spec.renew_time = stamp
        spec.lease_duration_seconds = self._duration()
        # resourceVersion is kept: a concurrent writer makes this fail with 409 Conflict.
        return self._write(self.api.replace_namespaced_lease, started, self.name, self.namespace, lease)

    def _duration(self) -> int:
        return max(1, int(round(self.lease_seconds)))

    def _write(self, fn: Callable[..., Any], started: float, *args: Any) -> bool:
        try:
            written = fn(*args)
        except ApiException as exc:
            if exc.status == 409:
                return False  # someone else wrote first; read again next round
            raise
        self._renewed_at = started
        self.holder = self.identity
        version = getattr(getattr(written, "metadata", None), "resource_version", None)
        if version:
            self._seen_version, self._seen_at = version, self.monotonic()
        return True

    def release(self) -> None:
        """Hand the lease over at once on a clean shutdown."""
        if not self.is_leader:
            return
        self._renewed_at = None
        self.metrics.leader.set(0)
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace)
            if lease.spec.holder_identity == self.identity:
                lease.spec.holder_identity = None
                lease.spec.renew_time = None
                lease.spec.acquire_time = None
                self.api.replace_namespaced_lease(self.name, self.namespace, lease)
        except Exception as exc:  # noqa: BLE001
            log.warning("could not release the lease: %s", exc)
