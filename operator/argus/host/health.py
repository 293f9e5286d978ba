"""The kubelet's probes, on a small aiohttp server of our own (``--health-port``):

- ``GET /healthz`` (liveness): 200 while the event loop answers, the task cache has heard
  from the API server within ``--watch-stale-seconds`` and no controller tick has been
  running for longer than ``--tick-stuck-seconds``; 500 otherwise, so a watch that went
  silently stale (a half-open connection the client-side timeouts somehow did not catch, a
  wedged thread) or a tick that waits on something that never ends gets the pod restarted.
- ``GET /readyz`` (readiness): 200 once the task cache holds the first full LIST and, with
  ``--webhook``, the webhook's HTTPS server listens; 503 before. ``helm --wait``, Argo CD
  and the webhook Service's endpoints wait for it, so the API server never calls a replica
  whose webhook is not up yet.

Not kopf's ``--liveness`` endpoint: kopf serves one path whose answer is the result of its
``@kopf.on.probe`` handlers, cached for 10 s, so liveness and readiness could not differ,
and a readiness that flips while the operator starts would restart the pod instead. Both
answers are small JSON documents saying why.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

log = logging.getLogger(__name__)


@dataclass
class Checks:
    """What the probes look at; plain callables so that tests can build them."""

    synced: Callable[[], bool]
    contact_age: Callable[[], float]
    webhook_listening: Callable[[], bool] | None = None  # None: no webhook
    logs_api_listening: Callable[[], bool] | None = None  # None: no log API (--logs-api)
    stale_seconds: float = 300.0  # 0: never fail liveness on the watch
    tick_age: Callable[[], float] | None = None  # seconds the controller's current tick has run (0 between ticks)
    tick_stuck_seconds: float = 300.0  # 0: never fail liveness on a tick

    def liveness(self) -> tuple[bool, dict[str, Any]]:
        age = self.contact_age()
        ok = self.stale_seconds <= 0 or age <= self.stale_seconds
        detail: dict[str, Any] = {"watchContactAgeSeconds": round(age, 1), "watchStaleSeconds": self.stale_seconds}
        if self.tick_age is not None:
            tick = self.tick_age()
            ok = ok and (self.tick_stuck_seconds <= 0 or tick <= self.tick_stuck_seconds)
            detail.update(tickAgeSeconds=round(tick, 1), tickStuckSeconds=self.tick_stuck_seconds)
        return ok, detail

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        detail: dict[str, Any] = {"cacheSynced": self.synced()}
        if self.webhook_listening is not None:
            detail["webhookListening"] = self.webhook_listening()
        if self.logs_api_listening is not None:
            detail["logsApiListening"] = self.logs_api_listening()
        return all(detail.values()), detail


class HealthServer:
    def __init__(self, checks: Checks, host: str = "0.0.0.0", port: int = 8080) -> None:
        self.checks, self.host, self.port = checks, host, port
        self._runner: web.AppRunner | None = None
        self._last: dict[str, bool] = {}

    def _answer(self, probe: str, ok: bool, detail: dict[str, Any], failing_status: int) -> web.Response:
        if self._last.get(probe) != ok:
            (log.info if ok else log.warning)("%s probe: %s %s", probe, "ok" if ok else "FAILING", detail)
            self._last[probe] = ok
        return web.json_response({"ok": ok, **detail}, status=200 if ok else failing_status)

    async def _healthz(self, _request: web.Request) -> web.Response:
        return self._answer("liveness", *self.checks.liveness(), failing_status=500)

    async def _readyz(self, _request: web.Request) -> web.Response:
        return self._answer("readiness", *self.checks.readiness(), failing_status=503)

    async def start(self) -> None:
        app = web.Application()
        app.add_routes([web.get("/healthz", self._healthz), web.get("/readyz", self._readyz)])
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        log.info("health probes on http://%s:%s/healthz and /readyz", self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
