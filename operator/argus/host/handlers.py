"""kopf's part: it hosts the process; login, signals, the admission webhook, and
starts and stops the ``Operator`` it is handed as ``memo.operator`` (whose own small server
answers the kubelet's probes: ``health``). The memo is typed (``OperatorMemo``): the Operator
for these handlers, and for the webhook's only its ``WebhookContext``.

There are no per-object kopf handlers: the controller is level-triggered over its own
task cache (``control_loop``), so creation, cancel and deletion are all seen as states of the
object, and no kopf bookkeeping annotations are written on the tasks.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from ..servers.webhook.context import WebhookContext
from ..servers.webhook.settings import WebhookSettings
from .operator import Operator

log = logging.getLogger(__name__)
WORKER_LIMIT = 64  # kopf workers (the webhook's) at once
WORKER_IDLE_SECONDS = 0.5


class OperatorMemo(kopf.Memo):
    """kopf's memo for this process (kopf hands each handler a shallow copy: the same objects)."""

    operator: Operator
    webhook: WebhookContext | None  # servers.webhook.context.WebhookMemo: the webhook's handlers read it


def operator_memo(operator: Operator) -> OperatorMemo:
    return OperatorMemo(operator=operator, webhook=operator.webhook)


async def start(settings: kopf.OperatorSettings, memo: OperatorMemo, **_: Any) -> None:
    settings.posting.level = logging.WARNING  # our own Events tell the story; no kopf chatter
    settings.networking.request_timeout = 60
    settings.queueing.worker_limit = WORKER_LIMIT
    settings.queueing.idle_timeout = WORKER_IDLE_SECONDS
    await memo.operator.start()


async def stop(memo: OperatorMemo, **_: Any) -> None:
    await memo.operator.stop()


def registry(webhook: WebhookSettings | None) -> kopf.OperatorRegistry:
    """The handlers of one operator process, on a registry of its own."""
    reg = kopf.OperatorRegistry()
    # A registry of our own has none of kopf's defaults: log in as the kubernetes client does
    # (the kubeconfig named by --kubeconfig, else in-cluster).
    kopf.on.login(id="login", registry=reg)(kopf.login_via_client)
    kopf.on.startup(id="start-operator", registry=reg)(start)
    kopf.on.cleanup(id="stop-operator", registry=reg)(stop)
    if webhook is not None:
        from ..servers.webhook import server as admission  # noqa: PLC0415 - only with --webhook
        admission.register(reg, webhook)
    return reg
