"""The queue, on demand: the waiting tasks in queue order with their places; served by the
operator's aggregated API (the same server and front-proxy checks as the log; docs/queue.md):

    GET /apis/logs.argus.io/v1alpha1/pendingtasks                       (the whole queue)
    GET /apis/logs.argus.io/v1alpha1/namespaces/NS/pendingtasks         (one namespace's tasks)

Kueue serves its pending workloads the same way (its visibility API) and for the same
reason: a place in the queue moves whenever a task ahead starts, so writing it into every
waiting task's status cost a write per waiting task per admission (30 per task in a
27-minute run with 1,000 waiting: issue 26). Here a waiting task's status holds only what
changes rarely (its reason and message), and its place is computed when someone asks.

The places come from the tasks alone (``core.queue.positions``: the queue's order under
its policy, as the admission pass uses it), so every replica answers the same from its own
cache, leader or not. Each request is checked with a SubjectAccessReview: ``list`` on
``pendingtasks`` (group logs.argus.io) in the namespace, or cluster-wide for the whole
queue; a namespace's view still gives each task its place in the whole queue.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from ...adapters.kubeauth import Access
from ...controller.queuesnapshot import usage_records
from ...controller.view import TaskView, in_queue
from ...core.clock import Clock
from ...core.queue import QueueSettings, decayed_usage, positions

PENDING = "pendingtasks"
PENDING_KIND = "PendingTask"

# (request) -> (the caller, or a ready error response): the server's front-proxy check and
# the caller's identity from its headers.
Caller = Callable[[web.Request], tuple[Access | None, web.Response | None]]
Authorize = Callable[..., Awaitable[tuple[bool, str]]]
ErrorDoc = Callable[[int, str, str], web.Response]


def waiting(views: list[TaskView]) -> list[TaskView]:
    """The tasks that hold a place: Queued, not cancelled or suspended, not being deleted."""
    return [v for v in views if in_queue(v)]


def pending_items(views: list[TaskView], settings: QueueSettings, now: Any, namespace: str | None) -> list[dict[str, Any]]:
    """The waiting tasks in queue order (of ``namespace`` only, when given), each with its
    place in the whole queue."""
    queued = waiting(views)
    usage = decayed_usage(usage_records(views), now, settings.half_life) if settings.policy == "fair" else {}
    tasks = {v.key: v.as_queued() for v in queued}
    places = positions(tasks.values(), settings, usage, now)
    items = [{
        "metadata": {"name": v.name, "namespace": v.namespace, "uid": v.uid, "creationTimestamp": v.created},
        "position": places[v.key], "user": v.state.status.user or "", "priority": tasks[v.key].priority, "gpus": v.gpus,
        "reason": v.state.status.reason or "", "message": v.state.status.message or "",
    } for v in queued if namespace is None or v.namespace == namespace]
    return sorted(items, key=lambda item: item["position"])


class QueueView:
    def __init__(self, tasks: Callable[[], list[TaskView]], settings: QueueSettings, caller: Caller, authorize: Authorize,
                 error: ErrorDoc, group_version: str, *, clock: Clock):
        self.tasks = tasks
        self.settings = settings
        self.caller = caller
        self.authorize = authorize
        self.error = error
        self.group_version = group_version
        self.clock = clock

    def routes(self) -> list[web.RouteDef]:
        return [web.get(f"/apis/{self.group_version}/{PENDING}", self._list),
                web.get(f"/apis/{self.group_version}/namespaces/{{namespace}}/{PENDING}", self._list)]

    @staticmethod
    def discovery() -> dict[str, Any]:
        return {"name": PENDING, "singularName": "pendingtask", "namespaced": True, "kind": PENDING_KIND, "verbs": ["list"]}

    async def _list(self, request: web.Request) -> web.Response:
        access, refused = self.caller(request)
        if refused is not None:
            return refused
        assert access is not None
        namespace = request.match_info.get("namespace")
        group = self.group_version.split("/")[0]
        try:
            allowed, reason = await self.authorize(access, namespace=namespace or "", group=group, resource=PENDING,
                                                   subresource="", name="", verb="list")
        except Exception:  # noqa: BLE001 - a failed review refuses
            return self.error(503, "ServiceUnavailable", "cannot check access now (SubjectAccessReview failed); try again")
        if not allowed:
            where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
            return self.error(403, "Forbidden", f'{PENDING}.{group} is forbidden: User "{access.user}" cannot list resource '
                              f'"{PENDING}" in API group "{group}" {where}' + (f": {reason}" if reason else ""))
        items = pending_items(self.tasks(), self.settings, self.clock.now(), namespace)
        return web.json_response({"kind": f"{PENDING_KIND}List", "apiVersion": self.group_version, "metadata": {}, "items": items})
