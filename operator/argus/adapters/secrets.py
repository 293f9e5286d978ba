"""The Secrets that tasks' ``spec.env`` names, read by name in the task's namespace:
``controller.ports.TaskSecrets``, ``get`` only, at a task's start, through a
``KubeTaskStore``'s client and threads (the API server's refusals raised as ``core.store``'s
StoreError). Nothing here logs or keeps a value."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

from ..core.store import StoreError
from .kube import REQUEST_TIMEOUT

if TYPE_CHECKING:
    from .kube import KubeTaskStore


class KubeTaskSecrets:
    def __init__(self, tasks: KubeTaskStore):
        self.core, self._run = tasks.core, tasks._run

    async def data(self, namespace: str, name: str) -> dict[str, str] | None:
        """The Secret's keys, each decoded as UTF-8 as it is (a Pod's env keeps a trailing
        newline too); None: no such Secret. Raises StoreError for any other refusal."""
        try:
            secret = await self._run(self.core.read_namespaced_secret, name, namespace, _request_timeout=REQUEST_TIMEOUT)
        except StoreError as exc:
            if exc.not_found:
                return None
            raise
        return {k: base64.b64decode(v).decode("utf-8", errors="replace") for k, v in (secret.data or {}).items()}
