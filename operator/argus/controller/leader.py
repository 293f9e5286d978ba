"""Leader election on a coordination.k8s.io Lease, as controller-runtime does it, so that
two replicas never both act: only the holder runs the queue and the kopf handlers that
change anything (the others retry later). kopf's own peering pauses handlers only, not the
queue loop, hence this.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import socket
import time
import uuid

from kubernetes import client
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)


def default_identity() -> str:
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}-{uuid.uuid4().hex[:6]}"


class LeaderElection:
    def __init__(self, namespace: str, name: str = "argus-operator", identity: str | None = None, lease_seconds: float = 15.0):
        self.namespace = namespace
        self.name = name
        self.identity = identity or default_identity()
        self.lease_seconds = lease_seconds
        self._renewed_at: float | None = None  # monotonic time of our last successful renewal

    @property
    def is_leader(self) -> bool:
        # A leader that cannot renew steps down before its lease could be taken over.
        return self._renewed_at is not None and time.monotonic() - self._renewed_at < self.lease_seconds * 0.8

    async def run(self) -> None:
        api = client.CoordinationV1Api()
        while True:
            was = self.is_leader
            try:
                if await asyncio.to_thread(self._acquire_or_renew, api):
                    self._renewed_at = time.monotonic()
                elif self._renewed_at is not None and not self.is_leader:
                    self._renewed_at = None
            except Exception as exc:  # noqa: BLE001 - API hiccups: keep trying, step down by time
                log.warning("leader election: %s", exc)
            if was != self.is_leader:
                log.warning("leader election: %s is %s the leader", self.identity, "now" if self.is_leader else "no longer")
            await asyncio.sleep(self.lease_seconds / 3)

    def _acquire_or_renew(self, api: client.CoordinationV1Api) -> bool:
        now = dt.datetime.now(dt.timezone.utc)
        try:
            lease = api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
            body = client.V1Lease(
                metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
                spec=client.V1LeaseSpec(holder_identity=self.identity, lease_duration_seconds=int(self.lease_seconds),
                                        acquire_time=now, renew_time=now, lease_transitions=0),
            )
            try:
                api.create_namespaced_lease(self.namespace, body)
                return True
            except ApiException as exc2:
                if exc2.status == 409:
                    return False
                raise
        spec = lease.spec
        expired = spec.renew_time is None or (spec.renew_time + dt.timedelta(seconds=spec.lease_duration_seconds or self.lease_seconds)) < now
        if spec.holder_identity not in (None, "", self.identity) and not expired:
            return False
        if spec.holder_identity != self.identity:
            spec.acquire_time = now
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
        spec.holder_identity = self.identity
        spec.renew_time = now
        spec.lease_duration_seconds = int(self.lease_seconds)
        try:
            api.replace_namespaced_lease(self.name, self.namespace, lease)  # resourceVersion: optimistic
            return True
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise

    def release(self) -> None:
        """Hand the lease over at once on a clean shutdown."""
        if not self.is_leader:
            return
        api = client.CoordinationV1Api()
        try:
            lease = api.read_namespaced_lease(self.name, self.namespace)
            if lease.spec.holder_identity == self.identity:
                lease.spec.holder_identity = None
                lease.spec.renew_time = None
                api.replace_namespaced_lease(self.name, self.namespace, lease)
        except Exception as exc:  # noqa: BLE001
            log.warning("could not release the lease: %s", exc)
        self._renewed_at = None
