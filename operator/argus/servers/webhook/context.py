"""What the admission webhook reads from the operator it is served from: ``WebhookContext``,
made by the process host (``host.operator``) and handed to the webhook's kopf handlers
(``server``) in kopf's memo, typed (``WebhookMemo``). The webhook needs no more of the
operator than this, and the host's composition root stays out of the servers' imports.

Kept apart from ``server`` (which imports kopf and the kubernetes client, and is loaded only
with ``--webhook``): the composition root imports this module whether the webhook runs or not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import Histogram

from ...core.clock import Clock
from ...core.config import PlatformConfig
from ...core.inputs import InputPath
from ...core.verlconfig import Composer
from .settings import WebhookSettings


class Serving(Protocol):
    """The webhook's HTTPS server, as readiness (/readyz) asks it."""

    listening: bool


@dataclass
class WebhookContext:
    settings: WebhookSettings
    clock: Clock
    reviews: Histogram  # argus_webhook_review_duration_seconds, by operation and result
    platform: PlatformConfig  # validate_task's, as the controller's
    composer: Composer | None  # the default verl release's
    namespaces: Collection[str]  # the operator's --namespace (empty: all): the configuration's selector
    replicated: bool  # leader election is on: several replicas may each serve the webhook
    # (user, reason, message) from the namespace's argus.io/user label, read live; raises
    # core.store's StoreError when the namespace cannot be read.
    user_of_namespace: Callable[[str], Awaitable[tuple[str | None, str, str]]]
    # Admission warnings for the files a task reads that are not in the shared tree.
    input_warnings: Callable[[Sequence[InputPath]], Awaitable[list[str]]]
    # Set when kopf starts the webhook (server.start_webhook):
    server: Serving | None = None
    configuration_manager: asyncio.Task[None] | None = None  # writes the ValidatingWebhookConfiguration
    # The composer of the verl release a new task is composed for (its clusters', as intake
    # chooses: core.verlchoice); None: ``composer`` for every task.
    composer_for: Callable[[Mapping[str, Any]], Composer | None] | None = None

    def listening(self) -> bool:
        return bool(self.server and self.server.listening)


class WebhookMemo(Protocol):
    """kopf's memo as the webhook's handlers read it: the host puts the context under
    ``webhook`` (``host.handlers.OperatorMemo``)."""

    webhook: WebhookContext
