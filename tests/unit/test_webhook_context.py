"""The admission webhook's handlers (servers/webhook/server.py) read the operator only through
the ``WebhookContext`` the host puts in kopf's memo (servers/webhook/context.py), typed: what
they answer, what they count, and what they leave for the host's readiness probe.
(tests/integration/test_webhook.py serves them to a real API server.)"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import kopf
import pytest
from prometheus_client import CollectorRegistry, Histogram

from argus.core.config import PlatformConfig
from argus.core.inputs import InputPath
from argus.core.store import StoreError
from argus.core.user import user_from_label
from argus.core.verlconfig import ConfigTree
from argus.servers.webhook.context import WebhookContext
from argus.servers.webhook.server import FORBIDDEN, start_webhook, stop_webhook, validate_argustask
from argus.servers.webhook.settings import WebhookSettings
from fakes import FakeClock, FakeComposer, forbidden

pytestmark = pytest.mark.unit


def context_with(users: dict[str, str | None] | None = None, refusal: StoreError | None = None) -> WebhookContext:
    async def user_of_namespace(namespace: str) -> tuple[str | None, str, str]:
        if refusal is not None:
            raise refusal
        return user_from_label(namespace, (users or {}).get(namespace))

    async def input_warnings(found: Sequence[InputPath]) -> list[str]:
        return []

    reviews = Histogram("reviews_seconds", "reviews", ["operation", "result"], registry=CollectorRegistry())
    return WebhookContext(settings=WebhookSettings(url="https://127.0.0.1:9443"), clock=FakeClock(), reviews=reviews,
                          platform=PlatformConfig(), composer=None, namespaces=("team",), replicated=False,
                          user_of_namespace=user_of_namespace, input_warnings=input_warnings)


def review(context: WebhookContext, operation: str = "CREATE", namespace: str = "team", spec: dict | None = None) -> kopf.AdmissionError | None:
    body = kopf.Body({"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask", "metadata": {"name": "t", "namespace": namespace},
                      "spec": spec or {}})
    try:
        asyncio.run(validate_argustask(body=body, namespace=namespace, name="t", dryrun=False, warnings=[], memo=kopf.Memo(webhook=context),
                                       operation=operation, old=body, new=body))
    except kopf.AdmissionError as exc:
        return exc
    return None


def counted(context: WebhookContext, operation: str, result: str) -> float | None:
    """How many reviews the context's histogram holds for this operation and result."""
    (count,) = [s.value for m in context.reviews.collect() for s in m.samples
                if s.name.endswith("_count") and s.labels == {"operation": operation, "result": result}]
    return count


def test_a_namespace_without_a_user_is_refused_and_counted() -> None:
    context = context_with({"team": None})
    refused = review(context)
    assert refused is not None and refused.code == FORBIDDEN and "argus.io/user" in str(refused)
    assert counted(context, "CREATE", "denied") == 1


def test_a_namespace_the_operator_cannot_read_is_an_error_in_the_api_servers_words() -> None:
    refusal = forbidden("get", "namespaces", "team")
    context = context_with(refusal=refusal)
    refused = review(context)
    assert refused is not None and refused.code == 500
    assert str(refused) == f"cannot read namespace team to find its user: {refusal.message}"
    assert counted(context, "CREATE", "error") == 1


def test_an_update_that_leaves_the_spec_alone_is_allowed_without_reading_the_namespace() -> None:
    context = context_with(refusal=StoreError(500, "the namespace is not read on UPDATE"))
    assert review(context, operation="UPDATE") is None
    assert counted(context, "UPDATE", "allowed") == 1


def test_the_server_and_its_configuration_writer_are_kept_on_the_context() -> None:
    """start_webhook leaves its server on the context (readiness asks it whether it listens)
    and its configuration writer (stop_webhook cancels it)."""
    context = context_with()

    async def scenario() -> tuple[bool, bool]:
        settings = kopf.OperatorSettings()
        memo = kopf.Memo(webhook=context)
        await start_webhook(settings, memo)
        assert context.server is settings.admission.server and not context.listening()
        manager = context.configuration_manager
        assert manager is not None and not manager.done()
        await stop_webhook(memo)
        await asyncio.sleep(0)
        return manager.cancelled(), context.listening()

    assert asyncio.run(scenario()) == (True, False)


def test_a_new_task_is_checked_with_the_release_its_clusters_run() -> None:
    """The host's ``composer_for`` (host.operator.Operator.composer_for: core.verlchoice, as
    intake chooses) gives the composer; the default one is not asked."""
    old = FakeComposer({}, {}, tree=ConfigTree("0.6.1", "/trees/0.6.1", "release"))
    asked: list[str] = []

    def composer_for(body: Mapping[str, Any]) -> Any:
        asked.append(body["metadata"]["name"])
        return old

    context = context_with({"team": "alice"})
    context.composer, context.composer_for = FakeComposer({}, {}), composer_for
    spec = {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1,
            "command": "python3 -m verl.trainer.main_ppo trainer.nnodes=1 trainer.n_gpus_per_node=1 data.train_files=$HOME/datasets/a.parquet"}
    refused = review(context, spec=spec)
    assert asked == ["t"] and refused is not None and "verl 0.6.1 (the pinned release, /trees/0.6.1)" in str(refused), refused
    assert old.requests and not context.composer.requests  # type: ignore[union-attr]
