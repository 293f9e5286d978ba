"""The Kubernetes API, through the official ``kubernetes`` client: loading credentials, the
API server's own error text, and the writes the controller makes (status merge-patches,
the finalizer, Events) plus the live reads it needs (a namespace's user label, the served
ArgusTask CRD's schema hash).

Calls run in a thread pool of their own (see ``adapters.ray``: Ray calls must not queue
behind a burst of writes here). The client's ``ApiException`` stops here: every call through
the pool raises the core's ``StoreError`` instead (``core.store``), with the same one-line
message ``api_error`` gives, so the controller never imports the kubernetes client.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..core.lifecycle import FINALIZER
from ..core.spec import GROUP, KIND, PLURAL, VERSION
from ..core.store import StoreError
from ..core.vocabulary import task_log

log = logging.getLogger(__name__)
JSON_PATCH = "application/json-patch+json"
REQUEST_TIMEOUT = 30


def secret_key(secret: Any, key: str) -> str | None:
    """A V1Secret's key, decoded and stripped (None: no such key, or empty)."""
    import base64
    raw = (secret.data or {}).get(key)
    value = base64.b64decode(raw).decode("utf-8", errors="replace").strip() if raw else ""
    return value or None


class KubeConfigError(Exception):
    """No usable credentials."""


def load_kube_config(kubeconfig: str | None = None, context: str | None = None) -> None:
    """Credentials as kubectl finds them: an explicit file or context, else $KUBECONFIG or
    ~/.kube/config, else the pod's service account (in-cluster)."""
    from kubernetes import config

    if kubeconfig or context:
        try:
            config.load_kube_config(config_file=kubeconfig, context=context)
            return
        except (config.ConfigException, OSError) as exc:
            raise KubeConfigError(f"cannot use kubeconfig {kubeconfig or '(default)'}{f' context {context}' if context else ''}: {exc}") from None
    try:
        config.load_kube_config()
    except (config.ConfigException, OSError) as first:
        try:
            config.load_incluster_config()
        except config.ConfigException:
            raise KubeConfigError(f"no usable kubeconfig ({first}) and not running in a pod") from None


def api_error(exc: Any) -> str:
    """The API server's own one-line message (it names the verb, resource and identity)."""
    if isinstance(exc, StoreError):
        return exc.message
    try:
        return str(json.loads(exc.body)["message"])
    except (TypeError, ValueError, KeyError, AttributeError):
        return f"{getattr(exc, 'status', '?')} {getattr(exc, 'reason', exc)}"


def store_error(exc: Any) -> StoreError:
    """The client's ApiException as the core's StoreError, worded as ``api_error`` words it."""
    return StoreError(exc.status, str(exc.reason), api_error(exc))


def _finalizer_ops(before: list[str], after: list[str]) -> list[dict[str, Any]]:
    """JSON patch: the finalizers from ``before`` (tested: another writer's are never lost) to ``after``."""
    if before:
        return [{"op": "test", "path": "/metadata/finalizers", "value": before},
                {"op": "replace", "path": "/metadata/finalizers", "value": after}]
    return [{"op": "add", "path": "/metadata/finalizers", "value": after}]


def _annotation_ops(annotations: dict[str, str], annotated: bool) -> list[dict[str, Any]]:
    """JSON patch: set these annotations (``annotated``: the object has an annotations map)."""
    if not annotated:
        return [{"op": "add", "path": "/metadata/annotations", "value": dict(annotations)}]
    escape = lambda key: key.replace("~", "~0").replace("/", "~1")  # noqa: E731 - RFC 6901
    return [{"op": "add", "path": f"/metadata/annotations/{escape(k)}", "value": v} for k, v in annotations.items()]


class KubeTaskStore:
    """Writes to ArgusTasks and reads of namespaces, for the controller and the webhook."""

    def __init__(self, *, now: Callable[[], dt.datetime], component: str = "argus-operator", threads: int = 16,
                 event_threads: int = 4) -> None:
        from kubernetes import client

        self.now = now  # the wall clock Events are stamped with

        settings = client.Configuration.get_default_copy()
        settings.connection_pool_maxsize = threads + event_threads  # one connection per pool thread, reused
        api = client.ApiClient(settings)
        self._client = client
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.extensions = client.ApiextensionsV1Api(api)
        self.component = component
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="argus-kube")
        # Events have threads of their own: a burst of them (a first start posts one or two a
        # task) never queues ahead of the status writes that the tasks' phases wait for.
        self._event_pool = ThreadPoolExecutor(max_workers=event_threads, thread_name_prefix="argus-kube-events")

    async def _run(self, fn: Any, *args: Any, pool: ThreadPoolExecutor | None = None, **kwargs: Any) -> Any:
        """``fn`` in the pool; the API server's refusal raised as a StoreError."""
        from kubernetes.client.exceptions import ApiException
        try:
            return await asyncio.get_running_loop().run_in_executor(pool or self._pool, lambda: fn(*args, **kwargs))
        except ApiException as exc:
            raise store_error(exc) from exc

    @staticmethod
    def _unread(fn: Any) -> Callable[..., None]:
        """``fn`` whose answer is not needed: the body is read and dropped, not turned into the
        client's objects (a typed Event costs more to build from JSON than to send)."""
        def call(*args: Any, **kwargs: Any) -> None:
            response = fn(*args, _preload_content=False, **kwargs)
            response.data  # noqa: B018 - read to the end, so the connection goes back to the pool
            response.release_conn()
        return call

    async def _unless_gone(self, fn: Any, *args: Any, **kwargs: Any) -> bool:
        """``_run``: True once done, False when the object is gone (404)."""
        try:
            await self._run(fn, *args, **kwargs)
            return True
        except StoreError as exc:
            if exc.not_found:
                return False
            raise

    async def patch_status(self, namespace: str, name: str, patch: dict[str, Any]) -> bool:
        """Merge-patch ``.status``; False when the object is gone."""
        return await self._unless_gone(self._unread(self.custom.patch_namespaced_custom_object_status), GROUP, VERSION, namespace, PLURAL,
                                       name, {"status": patch}, _request_timeout=REQUEST_TIMEOUT)

    async def add_finalizer(self, namespace: str, name: str, finalizers: list[str], annotations: dict[str, str] | None = None,
                            *, resource_version: str | None = None, annotated: bool = True) -> bool:
        """Append the finalizer to ``finalizers`` (the list as last seen), and set
        ``annotations`` in the same patch. A JSON patch that first tests the list, so another
        writer's finalizer is never lost: on a conflict (422) the caller sees False and tries
        again with a fresh view. ``annotated`` False (the object had no annotation) adds the
        whole map, which must not replace annotations written meanwhile: the patch then also
        tests ``resource_version`` (the object as last seen)."""
        after = finalizers if FINALIZER in finalizers else [*finalizers, FINALIZER]
        extra: list[dict[str, Any]] = []
        if annotations:
            if resource_version and not annotated:
                extra.append({"op": "test", "path": "/metadata/resourceVersion", "value": resource_version})
            extra += _annotation_ops(annotations, annotated)
        return await self._patch_finalizers(namespace, name, finalizers, after, extra)

    async def remove_finalizer(self, namespace: str, name: str, finalizers: list[str]) -> bool:
        return await self._patch_finalizers(namespace, name, finalizers, [f for f in finalizers if f != FINALIZER])

    async def _patch_finalizers(self, namespace: str, name: str, before: list[str], after: list[str],
                                extra: list[dict[str, Any]] | None = None) -> bool:
        ops = [*_finalizer_ops(before, after), *(extra or [])]
        try:
            await self._run(self.custom.patch_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, name, ops,
                            _content_type=JSON_PATCH, _request_timeout=REQUEST_TIMEOUT)
            return True
        except StoreError as exc:
            if exc.not_found:
                return False
            if exc.changed_meanwhile:
                log.info("finalizers of %s/%s changed meanwhile; retrying with a fresh view", namespace, name, extra=task_log(namespace, name))
                return False
            raise

    async def delete_task(self, namespace: str, name: str) -> bool:
        """Delete the ArgusTask (its finalizer, if any, still runs). False when already gone."""
        return await self._unless_gone(self.custom.delete_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, name,
                                       _request_timeout=REQUEST_TIMEOUT)

    async def user_namespaces(self) -> dict[str, tuple[str, int | None, dict[str, str]]]:
        """Every namespace labelled with a user: namespace -> (user, its GPU quota or None,
        its labels: the ArgusClusters' namespaceSelector is matched against them)."""
        from ..core.user import GPU_QUOTA_ANNOTATION, USER_LABEL, quota_from_annotation
        found = await self._run(self.core.list_namespace, label_selector=USER_LABEL, _request_timeout=REQUEST_TIMEOUT)
        return {ns.metadata.name: (ns.metadata.labels[USER_LABEL], quota_from_annotation((ns.metadata.annotations or {}).get(GPU_QUOTA_ANNOTATION)),
                                   dict(ns.metadata.labels))
                for ns in found.items}

    async def namespace_labels(self, namespace: str) -> dict[str, str] | None:
        """The namespace's labels, read live; None when there is no such namespace.
        Raises StoreError otherwise (e.g. 403)."""
        try:
            ns = await self._run(self.core.read_namespace, namespace, _request_timeout=5)
        except StoreError as exc:
            if exc.not_found:
                return None
            raise
        return dict(ns.metadata.labels or {})

    async def crd_annotations(self, name: str) -> dict[str, str] | None:
        """The CustomResourceDefinition's annotations; None when there is none. Raises
        CrdUnreadable (the API server's message) otherwise."""
        from urllib3.exceptions import HTTPError

        from ..core.crd import CrdUnreadable
        try:
            crd = await self._run(self.extensions.read_custom_resource_definition, name, _request_timeout=REQUEST_TIMEOUT)
        except StoreError as exc:
            if exc.not_found:
                return None
            raise CrdUnreadable(exc.message) from None
        except HTTPError as exc:
            raise CrdUnreadable(str(exc)) from None
        return dict(crd.metadata.annotations or {})

    async def event(self, namespace: str, name: str, uid: str, type_: str, reason: str, message: str) -> None:
        """Post an Event on the task (kubectl describe shows it). Best effort."""
        await self.event_on(f"{GROUP}/{VERSION}", KIND, namespace, name, uid, type_, reason, message)

    async def event_on(self, api_version: str, kind: str, namespace: str, name: str, uid: str | None, type_: str, reason: str,
                       message: str) -> None:
        """Post an Event on any object (the operator's Lease: argus doctor's verdict). Best effort."""
        c = self._client
        now = self.now()
        body = c.CoreV1Event(
            metadata=c.V1ObjectMeta(name=f"{name}.{uuid.uuid4().hex[:12]}", namespace=namespace),
            involved_object=c.V1ObjectReference(api_version=api_version, kind=kind, name=name, namespace=namespace, uid=uid),
            type=type_, reason=reason, message=message[:1024], first_timestamp=now, last_timestamp=now, count=1,
            source=c.V1EventSource(component=self.component), reporting_component=self.component,
            reporting_instance=self.component, action=reason,
        )
        try:
            await self._run(self._unread(self.core.create_namespaced_event), namespace, body, pool=self._event_pool,
                            _request_timeout=REQUEST_TIMEOUT)
        except StoreError as exc:
            log.warning("could not post event %s on %s/%s: %s", reason, namespace, name, exc.message,
                        extra=task_log(namespace, name) if kind == KIND else None)


class KubeClusterStore:
    """The ArgusClusters (cluster-scoped) and the Secrets their tokens are in
    (``controller.ports.ClusterStore``), through a ``KubeTaskStore``'s client and threads."""

    def __init__(self, tasks: KubeTaskStore):
        self.custom, self.core, self._run, self._unless_gone = tasks.custom, tasks.core, tasks._run, tasks._unless_gone

    async def list_clusters(self) -> list[dict[str, Any]]:
        from ..core.clusters import CLUSTER_PLURAL
        found = await self._run(self.custom.list_cluster_custom_object, GROUP, VERSION, CLUSTER_PLURAL, _request_timeout=REQUEST_TIMEOUT)
        return list(found.get("items") or [])

    async def patch_cluster_status(self, name: str, patch: dict[str, Any]) -> bool:
        from ..core.clusters import CLUSTER_PLURAL
        return await self._unless_gone(self.custom.patch_cluster_custom_object_status, GROUP, VERSION, CLUSTER_PLURAL, name,
                                       {"status": patch}, _request_timeout=REQUEST_TIMEOUT)

    async def set_cluster_finalizers(self, name: str, before: list[str], after: list[str]) -> bool:
        from ..core.clusters import CLUSTER_PLURAL
        try:
            await self._run(self.custom.patch_cluster_custom_object, GROUP, VERSION, CLUSTER_PLURAL, name, _finalizer_ops(before, after),
                            _content_type=JSON_PATCH, _request_timeout=REQUEST_TIMEOUT)
            return True
        except StoreError as exc:
            if exc.not_found or exc.changed_meanwhile:
                return False
            raise

    async def secret_value(self, namespace: str, name: str, key: str) -> str | None:
        """A Secret's key, decoded (None: no such key, or empty). Raises StoreError (404
        included: a missing Secret is the admin's to fix, and the message says which)."""
        return secret_key(await self._run(self.core.read_namespaced_secret, name, namespace, _request_timeout=REQUEST_TIMEOUT), key)

    async def ray_cluster(self, namespace: str, name: str) -> dict[str, Any] | None:
        """KubeRay's RayCluster (ray.io/v1); None: there is none (or KubeRay's CRD is not installed)."""
        from ..core.clusters import KUBERAY_GROUP, KUBERAY_PLURAL, KUBERAY_VERSION
        try:
            return dict(await self._run(self.custom.get_namespaced_custom_object, KUBERAY_GROUP, KUBERAY_VERSION, namespace,
                                        KUBERAY_PLURAL, name, _request_timeout=REQUEST_TIMEOUT))
        except StoreError as exc:
            if exc.not_found:
                return None
            raise

    async def service(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A Service, as JSON (camelCase); None: there is none."""
        try:
            found = await self._run(self.core.read_namespaced_service, name, namespace, _request_timeout=REQUEST_TIMEOUT)
        except StoreError as exc:
            if exc.not_found:
                return None
            raise
        return dict(self.core.api_client.sanitize_for_serialization(found))
