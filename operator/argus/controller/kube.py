"""Kubernetes writes the reconciler makes outside kopf handlers: status merge-patches
and Events. The official ``kubernetes`` client, run in a thread pool of its own (see
ray_adapter: Ray calls must not queue behind a burst of writes here)."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from ..core.spec import GROUP, KIND, PLURAL, VERSION

log = logging.getLogger(__name__)


def now_rfc3339() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def load_config(kubeconfig: str | None = None) -> None:
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config(config_file=kubeconfig)


class Kube:
    def __init__(self) -> None:
        settings = client.Configuration.get_default_copy()
        settings.connection_pool_maxsize = 16  # one connection per pool thread, reused
        api = client.ApiClient(settings)
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.component = "argus-operator"
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="argus-kube")

    async def _run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> bool:
        """Merge-patch ``.status``; False when the object is gone."""
        try:
            await self._run(
                self.custom.patch_namespaced_custom_object_status,
                GROUP, VERSION, namespace, PLURAL, name, {"status": status},
            )
            return True
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise

    async def namespace_labels(self, namespace: str) -> dict[str, str]:
        """The namespace's labels, read live. Raises ApiException (404: no such namespace)."""
        ns = await self._run(lambda: self.core.read_namespace(namespace, _request_timeout=5))
        return dict(ns.metadata.labels or {})

    async def event(self, namespace: str, name: str, uid: str, type_: str, reason: str, message: str) -> None:
        """Post an Event on the task (kubectl describe shows it). Best effort."""
        now = dt.datetime.now(dt.timezone.utc)
        body = client.CoreV1Event(
            metadata=client.V1ObjectMeta(name=f"{name}.{uuid.uuid4().hex[:12]}", namespace=namespace),
            involved_object=client.V1ObjectReference(api_version=f"{GROUP}/{VERSION}", kind=KIND, name=name, namespace=namespace, uid=uid),
            type=type_, reason=reason, message=message[:1024], first_timestamp=now, last_timestamp=now, count=1,
            source=client.V1EventSource(component=self.component), reporting_component=self.component,
            reporting_instance=self.component, action=reason,
        )
        try:
            await self._run(self.core.create_namespaced_event, namespace, body)
        except ApiException as exc:
            log.warning("could not post event %s on %s/%s: %s", reason, namespace, name, exc.reason)
