"""The read-only aggregated API ``logs.argus.io/v1alpha1`` (docs/logs.md): a task's log
through the Kubernetes API server, with the caller's Kubernetes identity.

    GET /apis/logs.argus.io/v1alpha1/namespaces/NS/argustasks/NAME/log
        ?follow=true&tailLines=N&attempt=K&sinceSeconds=S

The API server (the aggregator, registered by the chart's APIService) authenticates the
user, checks RBAC on the path and proxies the request here over TLS, presenting its front-
proxy client certificate (``--proxy-client-cert-file``) and the user in ``X-Remote-User`` /
``X-Remote-Group``. This server:

1. refuses any request whose client certificate was not signed by the requestheader CA
   (``--requestheader-client-ca-file``, read from the ``extension-apiserver-authentication``
   ConfigMap, or ``--logs-api-client-ca-file``) or whose CN is not an allowed name: those
   headers are only believed from the front proxy (401);
2. checks ``get`` on ``argustasks/log`` (group logs.argus.io) in the namespace for that user
   with a SubjectAccessReview (403): it does not rely on the API server's own check alone;
3. serves the log: from Ray while Ray has the job, else from the attempt's log file when
   the shared tree is mounted here (``--logs-api-shared-tree``), else a one-line 404 naming
   the file. ``follow`` on a running job joins one shared Ray log stream per job
   (``core.fanout``): bounded per reader (a slow reader skips with a marker), and at most
   ``--logs-api-max-followers`` followers per user (429).

It also serves the queue on demand (``queueview``: ``pendingtasks``, the waiting tasks
with their places), with the same front-proxy check and its own SubjectAccessReview.

The serving certificate (``--logs-api-cert-file``/``--logs-api-key-file``, a mounted Secret)
is re-read when its files change, on the next connection, without a restart (``tls``).

Discovery (``/apis``, ``/apis/logs.argus.io``, ``/apis/logs.argus.io/v1alpha1``) is served to
the front proxy without a user check: the aggregator's availability check reads it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import web

from ...adapters.kubeauth import Access, FrontProxy
from ...controller.view import TaskView
from ...core.clock import Clock
from ...core.fanout import Broadcast, FollowerLimit, Reader
from ...core.logquery import (
    AttemptLog,
    LogQuery,
    LogQueryError,
    attempt_log,
    forgotten_by_ray,
    parse_log_query,
    removed_from_history,
    tail_text,
    where_the_file_is,
)
from ...core.queue import QueueSettings
from ...core.rayjobs import RayJobUnknown, RayRefused, RayUnreachable
from ...core.times import parse_time
from ...core.vocabulary import Key
from .queueview import QueueView
from .settings import LogApiSettings
from .tls import ReloadingServerContext

log = logging.getLogger(__name__)

GROUP = "logs.argus.io"
VERSION = "v1alpha1"
GROUP_VERSION = f"{GROUP}/{VERSION}"
RESOURCE, SUBRESOURCE = "argustasks", "log"
RECONNECT_SECONDS = 2.0
IDLE_CHECK_SECONDS = 15.0
# Followers joining a job within this long share one read of the log so far (Ray's Jobs API
# returns a whole log: 50 followers arriving at once must not hold 50 copies).
SNAPSHOT_REUSE_SECONDS = 1.0


class LogRay(Protocol):
    async def logs(self, submission_id: str) -> str: ...
    def tail_logs(self, submission_id: str) -> Any: ...  # AsyncIterator[str]


Authorize = Callable[..., Awaitable[tuple[bool, str]]]


def status_doc(code: int, reason: str, message: str) -> web.Response:
    """A metav1.Status, as the API server's own errors are (kubectl and the client read it)."""
    return web.json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": message, "reason": reason, "code": code}, status=code)


def discovery(*more: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The discovery documents; ``more``: resources served besides the log (the queue view)."""
    version = {"groupVersion": GROUP_VERSION, "version": VERSION}
    group = {"name": GROUP, "versions": [version], "preferredVersion": version}
    return {
        "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]},
        f"/apis/{GROUP}": {"kind": "APIGroup", "apiVersion": "v1", **group},
        f"/apis/{GROUP_VERSION}": {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION, "resources": [
            {"name": f"{RESOURCE}/{SUBRESOURCE}", "singularName": "", "namespaced": True, "kind": "ArgusTaskLog", "verbs": ["get"]},
            *more,
        ]},
    }


@dataclass
class _Hub:
    """One Ray log stream shared by every follower of a job."""

    broadcast: Broadcast
    events: dict[int, asyncio.Event] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None

    def wake(self) -> None:
        for reader in self.broadcast.readers:
            if reader.has_data or reader.closed:
                ev = self.events.get(id(reader))
                if ev is not None:
                    ev.set()


class LogHubs:
    """The shared streams, by submission id: opened by the first follower, closed with the last."""

    def __init__(self, ray: LogRay, reader_buffer: int) -> None:
        self.ray = ray
        self.reader_buffer = reader_buffer
        self.hubs: dict[str, _Hub] = {}

    def join(self, sid: str, start: int | None) -> tuple[_Hub, Reader, asyncio.Event]:
        hub = self.hubs.get(sid)
        if hub is None or hub.broadcast.closed:
            hub = _Hub(Broadcast(self.reader_buffer))
            self.hubs[sid] = hub
            hub.task = asyncio.create_task(self._pump(sid, hub), name=f"argus log stream {sid}")
        reader = hub.broadcast.join(start)
        event = asyncio.Event()
        hub.events[id(reader)] = event
        return hub, reader, event

    def leave(self, sid: str, hub: _Hub, reader: Reader) -> None:
        hub.broadcast.leave(reader)
        hub.events.pop(id(reader), None)
        if not hub.broadcast.readers:
            if hub.task:
                hub.task.cancel()
            if self.hubs.get(sid) is hub:
                del self.hubs[sid]

    async def _pump(self, sid: str, hub: _Hub) -> None:
        try:
            while True:
                try:
                    async for chunk in self.ray.tail_logs(sid):
                        hub.broadcast.publish(chunk)
                        hub.wake()
                    return  # the job ended
                except RayJobUnknown:
                    return
                except (RayUnreachable, RayRefused, OSError) as exc:
                    log.debug("shared log stream of %s broke (%s); opening it again", sid, exc)
                except Exception as exc:  # noqa: BLE001 - its followers end; the next follower opens a new one
                    log.warning("shared log stream of %s failed: %r", sid, exc)
                    return
                await asyncio.sleep(RECONNECT_SECONDS)
                hub.broadcast.restart()
        finally:
            hub.broadcast.close()
            hub.wake()

    def close(self) -> None:
        for hub in self.hubs.values():
            if hub.task:
                hub.task.cancel()
        self.hubs.clear()

    @property
    def streams(self) -> int:
        return len(self.hubs)


class LogSnapshots:
    """The log so far of a followed job, one Ray read shared by the followers that join
    within SNAPSHOT_REUSE_SECONDS (Ray's Jobs API returns a whole log: 50 followers arriving
    at once must not hold 50 copies)."""

    def __init__(self, ray: LogRay, monotonic: Callable[[], float]) -> None:
        self.ray = ray
        self.monotonic = monotonic
        self._locks: dict[str, asyncio.Lock] = {}
        self._texts: dict[str, tuple[float, str | None]] = {}

    async def get(self, sid: str) -> str | None:
        """The log so far (None: Ray cannot say now)."""
        lock = self._locks.setdefault(sid, asyncio.Lock())
        async with lock:
            now = self.monotonic()
            for key, (at, _) in list(self._texts.items()):
                if now - at >= SNAPSHOT_REUSE_SECONDS:
                    del self._texts[key]
                    other = self._locks.get(key)
                    if key != sid and other is not None and not other.locked():
                        del self._locks[key]  # kept only for jobs joined lately
            if sid in self._texts:
                return self._texts[sid][1]
            try:
                text: str | None = await self.ray.logs(sid)
            except (RayJobUnknown, RayUnreachable, RayRefused):
                text = None
            self._texts[sid] = (self.monotonic(), text)
        return text


class LogApi:
    def __init__(self, settings: LogApiSettings, ray: LogRay, get_task: Callable[[Key], TaskView | None],
                 authorize: Authorize, front_proxy: Callable[[], Awaitable[FrontProxy | None]],
                 read_file: Callable[[str], str] | None = None, *, clock: Clock,
                 queue: tuple[Callable[[], list[TaskView]], QueueSettings] | None = None) -> None:
        self.settings = settings
        self.ray = ray
        self.get_task = get_task
        self.authorize = authorize
        self.front_proxy = front_proxy
        self.read_file = read_file or _read_text
        self.now = clock.now
        self.proxy: FrontProxy | None = None
        # The queue on demand (queueview.py): every task in the cache, and the queue's settings.
        self.queue = QueueView(queue[0], queue[1], self._caller, authorize, status_doc, GROUP_VERSION, clock=clock) if queue else None
        self.hubs = LogHubs(ray, settings.reader_buffer)
        self.limit = FollowerLimit(settings.max_followers_per_user)
        self._runner: web.AppRunner | None = None
        self.tls: ReloadingServerContext | None = None
        self.listening = False
        self.snapshots = LogSnapshots(ray, clock.monotonic)

    # ---- the server

    async def load_front_proxy(self) -> FrontProxy:
        """The front proxy's CA and names: the flag's file, else the ConfigMap (retried until
        the API server has published it)."""
        s = self.settings
        while True:
            proxy: FrontProxy | None = None
            if s.client_ca_file:
                with open(s.client_ca_file, encoding="ascii") as f:
                    proxy = FrontProxy(ca_pem=f.read(), allowed_names=s.allowed_names or ())
            else:
                try:
                    proxy = await self.front_proxy()
                except Exception as exc:  # noqa: BLE001 - said, then retried
                    log.warning("log API: cannot read the front proxy's CA from kube-system/extension-apiserver-authentication "
                                "(%s); trying again", exc)
                if proxy is not None and s.allowed_names is not None:
                    proxy = FrontProxy(proxy.ca_pem, s.allowed_names, proxy.username_headers, proxy.group_headers,
                                       proxy.extra_headers_prefixes)
            if proxy is not None:
                return proxy
            await asyncio.sleep(5)

    def app(self) -> web.Application:
        app = web.Application()
        app.add_routes([
            web.get("/apis", self._discovery), web.get(f"/apis/{GROUP}", self._discovery),
            web.get(f"/apis/{GROUP_VERSION}", self._discovery),
            web.get(f"/apis/{GROUP_VERSION}/namespaces/{{namespace}}/{RESOURCE}/{{name}}/{SUBRESOURCE}", self._log),
            *(self.queue.routes() if self.queue is not None else ()),
        ])
        return app

    async def start(self) -> None:
        self.proxy = await self.load_front_proxy()
        self._runner = web.AppRunner(self.app(), handle_signals=False, access_log=None)
        await self._runner.setup()
        assert self.settings.cert_file and self.settings.key_file
        self.tls = ReloadingServerContext(self.settings.cert_file, self.settings.key_file, self.proxy.ca_pem)
        site = web.TCPSite(self._runner, self.settings.host, self.settings.port, ssl_context=self.tls.context)
        await site.start()
        self.listening = True
        log.info("log API (%s) on https://%s:%s, front proxy names %s", GROUP_VERSION, self.settings.host, self.settings.port,
                 list(self.proxy.allowed_names) or "(any the CA signed)")

    async def stop(self) -> None:
        self.hubs.close()
        if self._runner is not None:
            await self._runner.cleanup()
        self.listening = False

    # ---- who is calling

    def _front_proxy_ok(self, request: web.Request) -> str | None:
        """None when the request comes from the front proxy, else why not."""
        assert self.proxy is not None
        transport = request.transport
        cert = transport.get_extra_info("peercert") if transport else None
        if not cert:
            return "no client certificate from the front proxy"
        names = [v for rdn in cert.get("subject", ()) for (k, v) in rdn if k == "commonName"]
        if self.proxy.allowed_names and not set(names) & set(self.proxy.allowed_names):
            return f"client certificate {names[0] if names else '?'!r} is not an allowed front proxy name"
        return None

    def _access(self, request: web.Request) -> Access | None:
        assert self.proxy is not None
        user = next((request.headers[h] for h in self.proxy.username_headers if request.headers.get(h)), None)
        if not user:
            return None
        groups = tuple(g for h in self.proxy.group_headers for g in request.headers.getall(h, []))
        extra: dict[str, list[str]] = {}
        for prefix in self.proxy.extra_headers_prefixes:
            for key, value in request.headers.items():
                if key.lower().startswith(prefix.lower()):
                    extra.setdefault(key[len(prefix):].lower(), []).append(value)
        return Access(user=user, groups=groups, extra=extra)

    async def _discovery(self, request: web.Request) -> web.Response:
        why = self._front_proxy_ok(request)
        if why:
            return status_doc(401, "Unauthorized", why)
        more = (QueueView.discovery(),) if self.queue is not None else ()
        return web.json_response(discovery(*more)[request.path.rstrip("/")])

    def _caller(self, request: web.Request) -> tuple[Access | None, web.Response | None]:
        """The user behind the front proxy, or the refusal (401) to answer with."""
        why = self._front_proxy_ok(request)
        if why:
            return None, status_doc(401, "Unauthorized", why)
        access = self._access(request)
        if access is None:
            return None, status_doc(401, "Unauthorized", "no user in the front proxy's headers")
        return access, None

    # ---- the log

    async def _log(self, request: web.Request) -> web.StreamResponse:
        access, refused = self._caller(request)
        if refused is not None:
            return refused
        assert access is not None
        ns, name = request.match_info["namespace"], request.match_info["name"]
        try:
            query = parse_log_query(list(request.query.items()))
        except LogQueryError as exc:
            return status_doc(400, "BadRequest", str(exc))
        try:
            allowed, reason = await self.authorize(access, namespace=ns, group=GROUP, resource=RESOURCE,
                                                   subresource=SUBRESOURCE, name=name)
        except Exception as exc:  # noqa: BLE001 - a failed review refuses
            log.warning("log API: SubjectAccessReview for %s failed: %s", access.user, exc)
            return status_doc(503, "ServiceUnavailable", "cannot check access now (SubjectAccessReview failed); try again")
        if not allowed:
            return status_doc(403, "Forbidden", f'{RESOURCE}.{GROUP} "{name}" is forbidden: User "{access.user}" cannot get '
                              f'resource "{RESOURCE}/{SUBRESOURCE}" in API group "{GROUP}" in the namespace "{ns}"'
                              + (f": {reason}" if reason else ""))
        view = self.get_task((ns, name))
        if view is None or view.deletion_timestamp:
            return status_doc(404, "NotFound", f'argustasks.argus.io "{name}" not found')
        try:
            where = attempt_log(view.status, query.attempt)
        except LogQueryError as exc:
            return status_doc(400, "BadRequest", str(exc))
        if not where.submission_id:
            phase = view.phase or "new"
            return status_doc(400, "BadRequest", f"ArgusTask {ns}/{name} has not been submitted to Ray yet (phase {phase})")
        live = where.current and view.active and not view.state.status.ray_jobs_removed
        if query.follow and live:
            return await self._follow(request, access, where, query)
        return await self._whole(view, where, query)

    def _since_cut(self, view: TaskView, query: LogQuery) -> bool:
        """For a log read whole (no arrival times): True when the task ended before the
        sinceSeconds window, so nothing of it is that recent."""
        if query.since_seconds is None:
            return False
        ended = parse_time(view.state.status.finished_at)
        return ended is not None and (self.now() - ended).total_seconds() > query.since_seconds

    async def _text(self, view: TaskView, where: AttemptLog) -> tuple[str | None, str]:
        """(the log, or None with a one-line reason) from Ray, else the file."""
        sid = where.submission_id
        assert sid
        why = removed_from_history(sid)
        if not view.state.status.ray_jobs_removed:
            try:
                return await self.ray.logs(sid), ""
            except RayJobUnknown:
                why = forgotten_by_ray(sid)
            except (RayUnreachable, RayRefused) as exc:
                why = f"the Ray cluster cannot be read now ({exc})"
        if where.job_path is not None and self.settings.shared_tree:
            try:
                return await asyncio.to_thread(self.read_file, where.job_path), ""
            except OSError:
                pass
        return None, where_the_file_is(why, where)

    async def _whole(self, view: TaskView, where: AttemptLog, query: LogQuery) -> web.StreamResponse:
        text, why = await self._text(view, where)
        if text is None:
            return status_doc(404, "NotFound", why)
        if self._since_cut(view, query):
            text = ""
        return web.Response(text=tail_text(text, query.tail_lines), content_type="text/plain", charset="utf-8")

    async def _follow(self, request: web.Request, access: Access, where: AttemptLog, query: LogQuery) -> web.StreamResponse:
        sid = where.submission_id
        assert sid
        if not self.limit.acquire(access.user):
            return status_doc(429, "TooManyRequests",
                              f"user {access.user!r} already follows {self.limit.active.get(access.user, 0)} task logs, the most "
                              f"allowed at once (--logs-api-max-followers {self.limit.per_user}): stop one, or read without --follow")
        try:
            return await self._stream(request, sid, query)
        finally:
            self.limit.release(access.user)

    async def _stream(self, request: web.Request, sid: str, query: LogQuery) -> web.StreamResponse:
        # The log so far first, then the shared stream from where that snapshot ends
        # (offsets from the log's start: nothing lost, nothing twice).
        snapshot = await self.snapshots.get(sid)
        past = tail_text(snapshot or "", query.tail_lines)
        if query.since_seconds is not None:
            past = ""  # no arrival times for the past: only what arrives from now on
        hub, reader, event = self.hubs.join(sid, None if snapshot is None else len(snapshot))
        response = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-cache"})
        try:
            await response.prepare(request)
            if past:
                await response.write(past.encode())
            while True:
                chunks = reader.take()
                if chunks:
                    await response.write("".join(chunks).encode())  # waits while the client is slow: the reader's limit bounds what piles up
                    continue
                if reader.closed:
                    break
                event.clear()
                if reader.has_data or reader.closed:
                    continue
                try:
                    await asyncio.wait_for(event.wait(), IDLE_CHECK_SECONDS)
                except TimeoutError:
                    if request.transport is None or request.transport.is_closing():
                        break
            await response.write_eof()
            return response
        except ConnectionResetError:  # the reader went away (aiohttp's ClientConnectionResetError too): not an error
            log.debug("a follower of %s went away", sid)
            return response
        finally:
            self.hubs.leave(sid, hub, reader)


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()

