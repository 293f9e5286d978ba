"""What the log API (servers/logapi/server.py) asks the Kubernetes API: the front proxy's
client CA and header names (the ``extension-apiserver-authentication`` ConfigMap in
kube-system, which kube-apiserver publishes from its ``--requestheader-*`` flags), and a
SubjectAccessReview for a proxied user. Thin: the kubernetes client, run in a thread."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

AUTH_CONFIGMAP = ("kube-system", "extension-apiserver-authentication")


@dataclass(frozen=True)
class FrontProxy:
    """How to recognise the API server as the front proxy and read the user it sends."""

    ca_pem: str
    allowed_names: tuple[str, ...] = ()    # the client certificate's CN must be one (empty: any the CA signed)
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_headers_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)


def _list(data: dict[str, str], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    raw = data.get(key)
    if not raw:
        return default
    try:
        value = json.loads(raw)
    except ValueError:
        return default
    return tuple(str(v) for v in value) if isinstance(value, list) else default


def front_proxy_from_configmap(data: dict[str, str]) -> FrontProxy | None:
    """None when the API server publishes no requestheader CA (no aggregation layer)."""
    ca = data.get("requestheader-client-ca-file")
    if not ca:
        return None
    return FrontProxy(
        ca_pem=ca,
        allowed_names=_list(data, "requestheader-allowed-names", ()),
        username_headers=_list(data, "requestheader-username-headers", ("X-Remote-User",)),
        group_headers=_list(data, "requestheader-group-headers", ("X-Remote-Group",)),
        extra_headers_prefixes=_list(data, "requestheader-extra-headers-prefix", ("X-Remote-Extra-",)),
    )


async def read_front_proxy() -> FrontProxy | None:
    """From the ConfigMap (needs `get` on it: the extension-apiserver-authentication-reader Role)."""
    from kubernetes import client

    def read() -> dict[str, str]:
        cm = client.CoreV1Api().read_namespaced_config_map(AUTH_CONFIGMAP[1], AUTH_CONFIGMAP[0], _request_timeout=30)
        return dict(cm.data or {})

    return front_proxy_from_configmap(await asyncio.to_thread(read))


@dataclass(frozen=True)
class Access:
    user: str
    groups: tuple[str, ...] = ()
    extra: dict[str, list[str]] = field(default_factory=dict)
    uid: str | None = None


async def subject_access_review(access: Access, *, namespace: str, group: str, resource: str, subresource: str,
                                name: str, verb: str = "get") -> tuple[bool, str]:
    """(allowed, the authorizer's reason) for the user (needs `create` on
    subjectaccessreviews: the system:auth-delegator ClusterRole)."""
    from kubernetes import client

    def review() -> tuple[bool, str]:
        body = client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
            user=access.user, groups=list(access.groups), extra=access.extra or None, uid=access.uid,
            resource_attributes=client.V1ResourceAttributes(
                namespace=namespace, verb=verb, group=group, resource=resource, subresource=subresource, name=name),
        ))
        out = client.AuthorizationV1Api().create_subject_access_review(body, _request_timeout=30)
        status = out.status
        return bool(status and status.allowed), (status.reason or "") if status else ""

    return await asyncio.to_thread(review)
