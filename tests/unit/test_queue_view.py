"""The queue on demand (servers/logapi/queueview.py, issue 26): the waiting tasks in queue
order with their places, per namespace or whole, each request checked like the log's. The
handler runs in aiohttp's real server on loopback; the front proxy's check and the
SubjectAccessReview are in-memory fakes of their callables."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from argus.adapters.kubeauth import Access
from argus.controller.view import TaskView
from argus.core.queue import QueueSettings
from argus.servers.logapi.queueview import QueueView, pending_items

pytestmark = pytest.mark.unit

NOW = dt.datetime(2026, 12, 3, 12, 0, 0, tzinfo=dt.UTC)
GV = "logs.argus.io/v1alpha1"


class FixedClock:
    def now(self) -> dt.datetime:
        return NOW

    def monotonic(self) -> float:
        return 0.0


def task(ns: str, name: str, created: str, phase: str | None = "Queued", priority: int = 0, **extra: Any) -> TaskView:
    return TaskView.from_body({
        "metadata": {"namespace": ns, "name": name, "uid": f"uid-{name}", "creationTimestamp": created, **extra.pop("meta", {})},
        "spec": {"kind": "advanced", "priority": priority, "nnodes": 1, "nGpusPerNode": 2, **extra.pop("spec", {})},
        "status": {"phase": phase, "user": ns, "reason": "Queued", "message": "waiting for a free slot (4 tasks may run at once)"}
        if phase else {},
    })


TASKS = [
    task("alice", "a1", "2026-12-03T11:00:01Z"),
    task("bob", "b1", "2026-12-03T11:00:02Z", priority=5),
    task("alice", "a2", "2026-12-03T11:00:03Z"),
    task("alice", "running", "2026-12-03T10:00:00Z", phase="Running"),
    task("alice", "new", "2026-12-03T11:00:04Z", phase=None),
    task("alice", "cancelled", "2026-12-03T11:00:00Z", spec={"cancel": True}),
    task("bob", "deleting", "2026-12-03T11:00:00Z", meta={"deletionTimestamp": "2026-12-03T11:30:00Z"}),
]


def test_the_whole_queue_in_order_with_places_and_only_waiting_tasks() -> None:
    items = pending_items(TASKS, QueueSettings(), NOW, None)
    assert [(i["metadata"]["namespace"], i["metadata"]["name"], i["position"]) for i in items] == [
        ("bob", "b1", 1), ("alice", "a1", 2), ("alice", "a2", 3)]
    assert items[0]["gpus"] == 2 and items[0]["priority"] == 5 and items[0]["user"] == "bob"
    assert items[0]["reason"] == "Queued" and items[0]["message"].startswith("waiting for a free slot")


def test_a_namespace_sees_its_tasks_with_their_places_in_the_whole_queue() -> None:
    items = pending_items(TASKS, QueueSettings(), NOW, "alice")
    assert [(i["metadata"]["name"], i["position"]) for i in items] == [("a1", 2), ("a2", 3)]


# --------------------------------------------------------------------------- over HTTP

def _serve(allowed: set[tuple[str, str]], failing_review: bool = False) -> web.Application:
    """``allowed``: (user, namespace or "" for the cluster) that may list pendingtasks."""
    def caller(request: web.Request) -> tuple[Access | None, web.Response | None]:
        user = request.headers.get("X-Remote-User")
        if not user:
            return None, web.json_response({"code": 401}, status=401)
        return Access(user=user, groups=()), None

    async def authorize(access: Access, *, namespace: str, group: str, resource: str, subresource: str, name: str,
                        verb: str) -> tuple[bool, str]:
        if failing_review:
            raise RuntimeError("connection refused")
        assert (group, resource, subresource, name, verb) == ("logs.argus.io", "pendingtasks", "", "", "list")
        return (access.user, namespace) in allowed, ""

    def error(code: int, reason: str, message: str) -> web.Response:
        return web.json_response({"kind": "Status", "code": code, "reason": reason, "message": message}, status=code)

    view = QueueView(lambda: TASKS, QueueSettings(), caller, authorize, error, GV, clock=FixedClock())
    app = web.Application()
    app.add_routes(view.routes())
    return app


async def _get(app: web.Application, path: str, user: str | None) -> tuple[int, dict[str, Any]]:
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        response = await client.get(path, headers={"X-Remote-User": user} if user else {})
        return response.status, await response.json()


def test_a_user_lists_their_namespace_and_not_the_whole_queue() -> None:
    app = _serve({("alice", "alice")})
    code, body = asyncio.run(_get(app, f"/apis/{GV}/namespaces/alice/pendingtasks", "alice"))
    assert code == 200 and body["kind"] == "PendingTaskList" and body["apiVersion"] == GV
    assert [(i["metadata"]["name"], i["position"]) for i in body["items"]] == [("a1", 2), ("a2", 3)]
    code, body = asyncio.run(_get(_serve({("alice", "alice")}), f"/apis/{GV}/pendingtasks", "alice"))
    assert code == 403 and body["reason"] == "Forbidden"
    assert body["message"] == ('pendingtasks.logs.argus.io is forbidden: User "alice" cannot list resource "pendingtasks" '
                               'in API group "logs.argus.io" at the cluster scope')
    code, body = asyncio.run(_get(_serve({("alice", "alice")}), f"/apis/{GV}/namespaces/bob/pendingtasks", "alice"))
    assert code == 403 and 'in the namespace "bob"' in body["message"]


def test_an_admin_lists_the_whole_queue() -> None:
    code, body = asyncio.run(_get(_serve({("root", "")}), f"/apis/{GV}/pendingtasks", "root"))
    assert code == 200 and [i["position"] for i in body["items"]] == [1, 2, 3]


def test_no_user_or_a_failed_review_is_refused() -> None:
    code, _ = asyncio.run(_get(_serve({("alice", "alice")}), f"/apis/{GV}/namespaces/alice/pendingtasks", None))
    assert code == 401
    code, body = asyncio.run(_get(_serve({("alice", "alice")}, failing_review=True), f"/apis/{GV}/namespaces/alice/pendingtasks", "alice"))
    assert code == 503 and "SubjectAccessReview failed" in body["message"]
