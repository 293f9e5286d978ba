"""The Kubernetes boundary (adapters/kube.py, adapters/secrets.py): the kubernetes client's
ApiException stops at the adapters, which raise the core's StoreError instead, worded as the
API server words it (its Status body's message: the verb, the resource and the identity RBAC
judged; "<status> <reason>" when the body has none). The controller reads only StoreError
(import-linter keeps the kubernetes client out of argus.controller)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from argus.adapters.kube import KubeClusterStore, KubeTaskStore, api_error, store_error
from argus.adapters.secrets import KubeTaskSecrets
from argus.core.store import StoreError, store_message

pytestmark = pytest.mark.unit

FORBIDDEN_MESSAGE = ('namespaces "team" is forbidden: User "system:serviceaccount:argus-system:argus" '
                     'cannot get resource "namespaces" in API group "" in the namespace "team"')


def refusal(status: int, reason: str, message: str | None = None) -> ApiException:
    """The ApiException the client raises, with the Status body the real API server sends."""
    exc = ApiException(status=status, reason=reason)
    if message is not None:
        exc.body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason, "code": status})
    return exc


class Refusing:
    """A client API whose every call raises ``exc``."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def __getattr__(self, name: str) -> Any:
        def call(*_: Any, **__: Any) -> Any:
            raise self.exc
        return call


def store_refusing(exc: Exception) -> KubeTaskStore:
    store = KubeTaskStore(now=lambda: dt.datetime(2026, 1, 1, tzinfo=dt.UTC), threads=1)
    store.core = store.custom = store.extensions = Refusing(exc)  # type: ignore[assignment]
    return store


def test_the_api_servers_refusal_becomes_a_store_error_with_its_own_message() -> None:
    store = store_refusing(refusal(403, "Forbidden", FORBIDDEN_MESSAGE))
    with pytest.raises(StoreError) as raised:
        asyncio.run(store.namespace_labels("team"))
    exc = raised.value
    assert (exc.status, exc.reason, exc.message, str(exc)) == (403, "Forbidden", FORBIDDEN_MESSAGE, FORBIDDEN_MESSAGE)
    assert exc.forbidden and not exc.not_found and not exc.changed_meanwhile
    assert isinstance(exc.__cause__, ApiException)  # the client's own error stays on the chain, for tracebacks
    # Worded as before the boundary: the words api_error gives the client's exception.
    assert store_message(exc) == api_error(exc) == api_error(refusal(403, "Forbidden", FORBIDDEN_MESSAGE))


def test_a_refusal_without_a_status_body_reads_status_and_reason() -> None:
    exc = store_error(refusal(409, "Conflict"))
    assert (exc.message, exc.changed_meanwhile) == ("409 Conflict", True)
    assert StoreError(409, "Conflict").message == api_error(refusal(409, "Conflict")) == "409 Conflict"


def test_what_never_reached_the_api_server_is_worded_as_before() -> None:
    """Transport errors are not the API server's answer: they pass as they are, and the
    controller's one line for them is what api_error gave."""
    down = ConnectionRefusedError("[Errno 111] Connection refused")
    assert store_message(down) == api_error(down) == "? [Errno 111] Connection refused"


def test_not_found_and_changed_meanwhile_are_answers_not_errors() -> None:
    gone = store_refusing(refusal(404, "Not Found"))
    assert asyncio.run(gone.namespace_labels("team")) is None
    assert asyncio.run(gone.patch_status("team", "t", {})) is False
    assert asyncio.run(gone.delete_task("team", "t")) is False
    assert asyncio.run(KubeTaskSecrets(gone).data("team", "wandb")) is None
    assert asyncio.run(KubeClusterStore(gone).ray_cluster("ray", "gpu")) is None
    changed = store_refusing(refusal(422, "Unprocessable Entity", "the server rejected our request due to an error in our request"))
    assert asyncio.run(changed.remove_finalizer("team", "t", ["argus.io/finalizer"])) is False
    assert asyncio.run(KubeClusterStore(changed).set_cluster_finalizers("a", [], ["x"])) is False


def test_the_cluster_store_and_the_secrets_raise_store_errors_too() -> None:
    refused = store_refusing(refusal(403, "Forbidden", 'secrets "wandb" is forbidden'))
    for call in (KubeTaskSecrets(refused).data("team", "wandb"), KubeClusterStore(refused).secret_value("argus-system", "ray-a", "token"),
                 KubeClusterStore(refused).list_clusters()):
        with pytest.raises(StoreError, match='secrets "wandb" is forbidden'):
            asyncio.run(call)
