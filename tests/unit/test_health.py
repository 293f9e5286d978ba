"""The probes' server (host/health.py) over real HTTP on loopback, fed by plain
callables: liveness follows the watch's contact age, readiness the cache and the webhook."""

from __future__ import annotations

import asyncio
import json
import socket
import urllib.error
import urllib.request

import pytest

from argus.host.health import Checks, HealthServer

pytestmark = pytest.mark.unit


def get(port: int, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_probes_answer_what_the_checks_say() -> None:
    state = {"synced": False, "age": 0.0, "webhook": False}
    checks = Checks(synced=lambda: state["synced"], contact_age=lambda: state["age"],
                    webhook_listening=lambda: state["webhook"], stale_seconds=200)

    async def scenario() -> list[tuple[str, int]]:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        server = HealthServer(checks, "127.0.0.1", port)
        await server.start()
        seen = []
        try:
            async def probe(path: str) -> tuple[int, dict]:
                return await asyncio.to_thread(get, port, path)
            seen.append(("ready, nothing yet", (await probe("/readyz"))[0]))
            state["synced"] = True
            seen.append(("ready, cache only", (await probe("/readyz"))[0]))
            state["webhook"] = True
            status, body = await probe("/readyz")
            seen.append(("ready, both", status))
            assert body == {"ok": True, "cacheSynced": True, "webhookListening": True}
            seen.append(("alive, fresh", (await probe("/healthz"))[0]))
            state["age"] = 200.5
            status, body = await probe("/healthz")
            seen.append(("alive, stale", status))
            assert body["watchContactAgeSeconds"] == 200.5
            seen.append(("ready while stale", (await probe("/readyz"))[0]))
        finally:
            await server.stop()
        return seen

    assert asyncio.run(scenario()) == [("ready, nothing yet", 503), ("ready, cache only", 503), ("ready, both", 200),
                                       ("alive, fresh", 200), ("alive, stale", 500), ("ready while stale", 200)]


def test_without_a_webhook_readiness_is_the_cache_and_stale_zero_never_fails() -> None:
    checks = Checks(synced=lambda: True, contact_age=lambda: 1e9, stale_seconds=0)
    assert checks.readiness() == (True, {"cacheSynced": True})
    assert checks.liveness()[0] is True


def test_a_tick_that_runs_too_long_fails_liveness_and_zero_never_does() -> None:
    """A controller tick awaits only calls with deadlines: one that has run for minutes waits
    on something that will not end, and the kubelet should restart the pod."""
    state = {"tick": 0.0}
    checks = Checks(synced=lambda: True, contact_age=lambda: 1.0, tick_age=lambda: state["tick"], tick_stuck_seconds=300)
    assert checks.liveness() == (True, {"watchContactAgeSeconds": 1.0, "watchStaleSeconds": 300.0,
                                        "tickAgeSeconds": 0.0, "tickStuckSeconds": 300})
    state["tick"] = 299.0
    assert checks.liveness()[0] is True
    state["tick"] = 300.5
    ok, detail = checks.liveness()
    assert ok is False and detail["tickAgeSeconds"] == 300.5
    assert Checks(synced=lambda: True, contact_age=lambda: 1.0, tick_age=lambda: 1e9, tick_stuck_seconds=0).liveness()[0] is True
