"""Every ArgusTask in scope, kept by one LIST and then a WATCH: from the list's
resourceVersion, as controller-runtime's informers do, the adapter between the API server's
list+watch and the controller, which reads it instead of the API on every tick.

The cache does not know what the controller keeps of a task: the composition root hands it
``convert`` (``controller.view.TaskView.from_body``), which copies out of each body what the
loop acts on. It feeds the level-triggered controller loop (``controller.loop``), which acts
on what it holds; ``on_change(old, new)`` tells the loop when something happened that it should look
at now (a new task, a spec change such as cancel, a deletion). It replaced kopf's
per-event handlers and indexes: kopf holds every handler until each index holds every
listed object, so a restart over N tasks cost O(N^2) (125 s over 5,000), and each kopf
handler wrote its own bookkeeping annotations. Here the LIST is paged, the first tick waits
for it (``synced``), and a broken or expired watch lists again.

The watch runs in a thread per scope (the ``kubernetes`` client is synchronous); every
change is applied on the event loop, so the loop reads the map without locks.

Every request has a client-side timeout: a watch the server ends after ``watch_seconds``
must show a byte (an event, a bookmark, its end) within ``watch_seconds + read_slack()`` or
the socket read fails and the cache lists again; a LIST page gets ``LIST_TIMEOUT``. So a
half-open connection (a silently dropped NAT entry, a frozen load balancer) costs at most
that long. ``contact_age()`` says how long ago the API server last answered (any event,
bookmark, page, or a watch that ended as asked); the health endpoint fails liveness when it
exceeds ``--watch-stale-seconds``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from ..core.polling import read_slack
from ..core.spec import GROUP, PLURAL, VERSION
from ..core.vocabulary import Key
from .kube import api_error

log = logging.getLogger(__name__)
CONNECT_TIMEOUT = 10.0
LIST_TIMEOUT = 60.0   # seconds for one LIST page to arrive


class Keyed(Protocol):
    """What the cache stores per object: anything that knows its (namespace, name)."""
    @property
    def key(self) -> Key: ...


V = TypeVar("V", bound=Keyed)


class TaskCache(Generic[V]):
    def __init__(self, convert: Callable[[dict[str, Any]], V], namespaces: tuple[str, ...] = (),
                 on_change: Callable[[V | None, V | None], None] | None = None,
                 page_size: int = 500, watch_seconds: int = 300, *, monotonic: Callable[[], float]):
        self.convert = convert
        self.scopes: tuple[str | None, ...] = tuple(namespaces) or (None,)  # None: all namespaces
        self.on_change = on_change
        self.page_size = page_size
        self.watch_seconds = watch_seconds
        self.monotonic = monotonic
        self._contact: dict[str | None, float] = {scope: monotonic() for scope in self.scopes}
        self._views: dict[Key, V] = {}
        self._listed: set[str | None] = set()
        self.synced = asyncio.Event()
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._api = client.CustomObjectsApi()

    # -- reads (event loop) -------------------------------------------------------------
    def views(self) -> list[V]:
        return list(self._views.values())

    def get(self, key: Key) -> V | None:
        return self._views.get(key)

    def __len__(self) -> int:
        return len(self._views)

    def contact_age(self) -> float:
        """Seconds since the API server last answered the list/watch of the quietest scope."""
        now = self.monotonic()
        return max(now - t for t in self._contact.values())

    def _heard(self, scope: str | None) -> None:
        self._contact[scope] = self.monotonic()  # a float store: safe from the watch threads

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        for scope in self.scopes:
            threading.Thread(target=self._follow, args=(scope,), name=f"argus cache {scope or '*'}", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    # -- the threads ------------------------------------------------------------------
    def _list_fn(self, scope: str | None) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        if scope:
            return self._api.list_namespaced_custom_object, (GROUP, VERSION, scope, PLURAL)
        return self._api.list_cluster_custom_object, (GROUP, VERSION, PLURAL)

    def _follow(self, scope: str | None) -> None:
        fn, args = self._list_fn(scope)
        while not self._stop.is_set():
            try:
                version = self._list(scope, fn, args)
                while not self._stop.is_set():
                    # Ends normally after watch_seconds; then go on from the last version seen.
                    w = watch.Watch()
                    for event in w.stream(fn, *args, resource_version=version, allow_watch_bookmarks=True,
                                          timeout_seconds=self.watch_seconds,
                                          _request_timeout=(CONNECT_TIMEOUT, self.watch_seconds + read_slack(self.watch_seconds))):
                        self._heard(scope)
                        if event["type"] != "BOOKMARK":
                            self._post(self._apply_event, event["type"], event["object"])
                        if self._stop.is_set():
                            return
                    self._heard(scope)  # the server ended the watch as asked
                    version = w.resource_version or version
            except ApiException as exc:
                if exc.status != 410:  # 410 Gone: the version expired; list again at once
                    # The API server's own words name the verb, resource and identity (RBAC).
                    log.warning("ArgusTask list/watch (%s) failed: %s %s: %s; listing again", scope or "all namespaces",
                                exc.status, exc.reason, api_error(exc))
                    self._stop.wait(1)
            except Exception as exc:  # noqa: BLE001 - the API server may be restarting; list again
                log.warning("ArgusTask watch (%s) broke: %s; listing again", scope or "all namespaces", exc)
                self._stop.wait(1)

    def _list(self, scope: str | None, fn: Callable[..., Any], args: tuple[Any, ...]) -> str:
        """One paged LIST; replaces what the cache holds for the scope. Returns its version."""
        views: dict[Key, V] = {}
        token: str | None = None
        while True:
            page = fn(*args, limit=self.page_size, _request_timeout=(CONNECT_TIMEOUT, LIST_TIMEOUT),
                      **({"_continue": token} if token else {}))
            self._heard(scope)
            for item in page["items"]:
                view = self.convert(item)
                views[view.key] = view
            token = page["metadata"].get("continue")
            if not token:
                self._post(self._replace, scope, views)
                return str(page["metadata"]["resourceVersion"])

    def _post(self, fn: Callable[..., None], *args: Any) -> None:
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop has closed: the operator is stopping
            self._stop.set()

    # -- applied on the event loop ---------------------------------------------------------
    def _replace(self, scope: str | None, views: dict[Key, V]) -> None:
        for key in [k for k in self._views if scope is None or k[0] == scope]:
            if key not in views:
                self._changed(self._views.pop(key), None)
        old = {k: self._views.get(k) for k in views}
        self._views.update(views)
        if scope not in self._listed:
            self._listed.add(scope)
            log.info("listed %d ArgusTasks in %s", len(views), scope or "all namespaces")
            if len(self._listed) == len(self.scopes):
                self.synced.set()
        for key, view in views.items():
            self._changed(old[key], view)

    def _apply_event(self, kind: str, body: dict[str, Any]) -> None:
        view = self.convert(body)
        old = self._views.get(view.key)
        if kind == "DELETED":
            self._views.pop(view.key, None)
            self._changed(old, None)
            return
        self._views[view.key] = view
        self._changed(old, view)

    def _changed(self, old: V | None, new: V | None) -> None:
        if self.on_change:
            try:
                self.on_change(old, new)
            except Exception:  # noqa: BLE001 - a callback must not break the cache
                log.exception("cache change callback failed")

