"""The Ray Jobs API and Ray's node list: Ray's own ``JobSubmissionClient`` and state API, with
their errors mapped to what they mean for a task: already exists -> adopt;
unknown id -> lost; unreachable -> retry later; HTTP 401/403 -> the credentials were refused
(retry later too, told apart); anything else Ray says -> refused.

The one Ray client of Argus: the operator (submit, status, stop, nodes) and ``argus logs``
(logs) both use it. Calls are synchronous in Ray's client, so the async methods run them in
a thread pool of their own, so that they never wait behind Kubernetes writes (asyncio's
shared default pool has only cpu+4 threads: on 2 cores, a burst of status patches delayed
each Ray call). Every HTTP request has a timeout (Ray's client sets none, and a half-open
connection would hold a pool thread for ever), and every call a deadline on top of it
(``CALL_DEADLINE_FACTOR``): requests' timeout bounds each connect and each read, not the
call, so a dashboard that answers slowly enough could otherwise hold the controller's tick
that awaits it.

Token authentication (Ray >= 2.52, ``RAY_AUTH_MODE=token`` on the cluster): with a token file
(``--ray-token-file``) every request carries ``Authorization: Bearer <token>``, the file
read afresh whenever a client is made (after an outage or a refusal: a rotated Secret is
picked up). Without one, Ray's own client still does what Ray documents: in a process with
``RAY_AUTH_MODE=token`` it sends the token of ``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or
``~/.ray/auth_token`` (``get_auth_headers_if_auth_enabled``); an explicit Authorization
header wins over those, as Ray intends. The token never appears in a message: the error
texts Argus keeps are scrubbed of it (and Ray's own errors do not carry it).
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..core.doctor import ProbeJob
from ..core.rayjobs import PlacementGroup, RayAuthFailed, RayJob, RayJobExists, RayJobState, RayJobUnknown, RayNode, RayRefused, RayUnreachable
from ..core.rayversion import TESTED_RAY, TOKEN_AUTH_SINCE
from ..core.rayversion import release as _release
from ..core.submission import SubmissionPlan

DEFAULT_TIMEOUT = 10.0
# A call's deadline, in request timeouts: a connect and a read may each take one; past three
# the call is given up (RayUnreachable) and its thread left to finish on its own.
CALL_DEADLINE_FACTOR = 3.0
AUTH_WARNING_SECONDS = 60.0  # the operator's log says a refusal at most this often

log = logging.getLogger(__name__)


class RayTokenError(ValueError):
    """The token file cannot be used (a configuration mistake, said in one line)."""


def read_token_file(path: str) -> str:
    """The token in ``path`` (surrounding whitespace removed). Raises RayTokenError; the
    message names the file, never its content."""
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except OSError as exc:
        raise RayTokenError(f"cannot read the Ray token file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise RayTokenError(f"the Ray token file {path} is not UTF-8 text") from None
    if not token:
        raise RayTokenError(f"the Ray token file {path} is empty")
    if any(c.isspace() for c in token):
        raise RayTokenError(f"the Ray token file {path} holds more than one word (expected the token alone)")
    return token


_AUTH_TEXT = re.compile(r"status code (401|403)\b|status=(401|403)\b")


def _auth_status(exc: Exception, text: str) -> int | None:
    """401 or 403 when the exception is Ray refusing the credentials, else None (0: a
    refusal whose status is not known)."""
    if type(exc).__name__ == "AuthenticationError":  # ray.exceptions (Ray >= 2.52's client)
        return 401 if text.startswith("Authentication required") else 403 if text.startswith("Authentication failed") else 0
    for status in (getattr(exc, "status", None), getattr(getattr(exc, "response", None), "status_code", None)):
        if status in (401, 403):  # aiohttp (the log stream), requests
            return int(status)
    found = _AUTH_TEXT.search(text)  # an older client's RuntimeError, or the state API's
    if found and "status code 5" not in text:
        return int(found.group(1) or found.group(2))
    return None


def classify(exc: Exception, secret: str | None = None) -> Exception:
    """The domain meaning of an exception raised by Ray's client (``secret``, the token, is
    scrubbed from any text kept)."""
    text = str(exc)
    if secret:
        text = text.replace(secret, "***")
    auth = _auth_status(exc, text)
    if auth is not None:
        return RayAuthFailed(auth or None)
    if "already exists" in text:
        return RayJobExists(text[-300:])
    if "does not exist" in text or "status code 404" in text:
        return RayJobUnknown(text)
    if isinstance(exc, (ConnectionError, OSError, TimeoutError)) or "Failed to connect" in text or "Connection" in type(exc).__name__:
        return RayUnreachable(f"{type(exc).__name__}: {text[:300]}")
    try:
        import requests  # ray's client is built on it
        if isinstance(exc, requests.exceptions.RequestException):
            return RayUnreachable(f"{type(exc).__name__}: {text[:300]}")
    except ImportError:  # pragma: no cover
        pass
    # The head wraps its agent's 4xx in a 500: only a bare 5xx is a (transient) outage.
    if "status code 5" in text and "status code 4" not in text:
        return RayUnreachable(text[:300])
    # Ray's errors carry a server traceback; its last line says what went wrong.
    return RayRefused(text.strip().rstrip('.').splitlines()[-1][:500] if text.strip() else type(exc).__name__)


def scrub(text: str, plan: SubmissionPlan) -> str:
    """``text`` with every Secret's value of the plan replaced by what it is shown as."""
    for variable, value in plan.secret_values.items():
        if value.get_secret_value():
            text = text.replace(value.get_secret_value(), plan.secret_env.get(variable, "<from secret>"))
    return text


def client_version() -> str:
    """The version of the ray package this process talks to Ray with."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("ray")
    except PackageNotFoundError:  # pragma: no cover
        return "unknown"


def version_note(address: str, version: str, *, token: bool) -> tuple[int, str]:
    """(log level, message) that the operator says once about the cluster's Ray version:
    where it stands against the tested range, and what a configured token does there."""
    oldest, newest = TESTED_RAY
    tested = f"Argus is tested against Ray {oldest} to {newest}"
    level, message = logging.INFO, f"the Ray cluster at {address} runs Ray {version} ({tested})"
    if _release(version) < _release(oldest):
        level, message = logging.WARNING, (f"the Ray cluster at {address} runs Ray {version}, older than the supported range ({tested}); "
                                           "job submission, status or logs may fail")
    elif _release(version)[:2] > _release(newest)[:2]:
        message = f"the Ray cluster at {address} runs Ray {version}, newer than the tested range ({tested})"
    if token and _release(version) < _release(TOKEN_AUTH_SINCE):
        message += f"; Ray before {TOKEN_AUTH_SINCE} has no token authentication: the token is sent and ignored"
    return level, message


_import_lock = threading.Lock()


def _import_ray() -> None:
    """Import Ray's client modules once, one thread at a time: two pool threads importing
    ray at once (a status read and the version read at start) left 'partially initialized
    module ray' behind, and every later call failed with it."""
    with _import_lock:
        import ray.job_submission  # noqa: F401
        import ray.util.state.api  # noqa: F401
        import ray.util.state.common  # noqa: F401


def _state_client(address: str, headers: dict[str, str]) -> Any:
    _import_ray()
    from ray.util.state.api import StateApiClient
    return StateApiClient(address=address, headers={"Content-Type": "application/json", **headers})


def _timed_client_class(timeout: float) -> type:
    _import_ray()
    from ray.job_submission import JobSubmissionClient

    class TimedJobSubmissionClient(JobSubmissionClient):
        def _do_request(self, method: str, endpoint: str, **kwargs: Any) -> Any:
            kwargs.setdefault("timeout", timeout)
            return super()._do_request(method, endpoint, **kwargs)

        def gpus_used_by_node(self) -> dict[str, float] | None:
            """GPUs in use per node id, from the dashboard's cluster status (what `ray status`
            shows); None when this Ray does not report use per node."""
            r = self._do_request("GET", "/api/cluster_status?format=0")
            if r.status_code != 200:
                self._raise_error(r)
            report = (((r.json().get("data") or {}).get("clusterStatus") or {}).get("loadMetricsReport") or {})
            by_node = report.get("usageByNode")
            if not isinstance(by_node, dict):
                return None
            return {node: float((usage.get("GPU") or [0.0, 0.0])[0]) for node, usage in by_node.items() if isinstance(usage, dict)}

    return TimedJobSubmissionClient


class RayConnection:
    """The plumbing of ``RayJobsClient``: Ray's clients at ``address`` (the dashboard, e.g.
    http://ray-head-svc.ray.svc:8265), made on demand with the token's header and made again after an
    outage; the thread pool the calls run in; every call timed, told to ``on_call`` and its
    error mapped (``classify``), a refusal of the credentials logged at most every
    AUTH_WARNING_SECONDS.

    ``on_call(operation, outcome, seconds)`` is told of every call and how long it took (the
    operator counts them in its metrics; the CLI passes nothing). ``token_file``: the cluster's
    token, sent on every request (see the module's docstring). ``monotonic``: the clock calls
    are timed with (and the warning about refused credentials is spaced by)."""

    def __init__(self, address: str, *, monotonic: Callable[[], float], timeout: float = DEFAULT_TIMEOUT,
                 on_call: Callable[[str, str, float | None], None] | None = None, threads: int = 16,
                 client_factory: Callable[[str], Any] | None = None, token_file: str | None = None,
                 state_client_factory: Callable[[str, dict[str, str]], Any] | None = None,
                 token: Callable[[], str | None] | None = None, token_where: str = "its Secret"):
        self.address = address.rstrip("/")
        # An ArgusCluster's token, from its Secret (controller.fleet), instead of a file.
        self.token_source = token
        self.token_where = token_where
        self.timeout = timeout
        self.token_file = token_file
        self.monotonic = monotonic
        self._on_call = on_call or (lambda operation, outcome, seconds: None)
        self._token: str | None = None  # the last token read (scrubbed from messages)
        # Ray's JobSubmissionClient (with request timeouts) and state API client; unit tests
        # pass fakes of them.
        self._client_factory = client_factory or (
            lambda address: _timed_client_class(timeout)(address, headers=self.auth_headers() or None))
        self._state_client_factory = state_client_factory or _state_client
        self._warned_at: float | None = None
        self._token_problem: str | None = None
        self._client: Any = None
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="argus-ray")

    # -- plumbing ------------------------------------------------------------------
    def auth_headers(self) -> dict[str, str]:
        """The Authorization header from the token file ({} without one). The file is read
        each time: a rotated Secret counts from the next client made. An unreadable file
        sends no token (the refusal that follows says what to check)."""
        if self.token_source is not None:
            token = self.token_source()
            if token:
                self._token = token
                return {"Authorization": f"Bearer {token}"}
            return {}
        if not self.token_file:
            return {}
        try:
            self._token = read_token_file(self.token_file)
        except RayTokenError as exc:
            if str(exc) != self._token_problem:  # said once per problem, not at every read
                log.warning("%s; sending no token", exc)
            self._token_problem = str(exc)
            return {}
        self._token_problem = None
        return {"Authorization": f"Bearer {self._token}"}

    def _refused(self, operation: str, exc: RayAuthFailed) -> None:
        now = self.monotonic()
        if self._warned_at is None or now - self._warned_at >= AUTH_WARNING_SECONDS:
            self._warned_at = now
            where = (f"the token in {self.token_where}" if self.token_source is not None else
                     f"the token in {self.token_file}" if self.token_file else "no --ray-token-file set")
            log.warning("Ray at %s refused the operator's credentials on a %s call (%s; %s): check the Ray token",
                        self.address, operation, exc, where)

    async def _run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        deadline = self.timeout * CALL_DEADLINE_FACTOR
        call = asyncio.get_running_loop().run_in_executor(self._pool, lambda: fn(*args, **kwargs))
        try:
            return await asyncio.wait_for(call, deadline)
        except TimeoutError:
            raise RayUnreachable(f"no answer from Ray at {self.address} within {deadline:.0f} s") from None

    def reconnect(self) -> None:
        """Make a new client at the next call (a new token to send)."""
        with self._lock:
            self._client = None

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = self._client_factory(self.address)
            return self._client

    def _call(self, operation: str, fn: Callable[[], Any]) -> Any:
        started = self.monotonic()
        try:
            result = fn()
        except Exception as exc:  # noqa: BLE001 - every Ray error is mapped below
            mapped = classify(exc, self._token)
            if isinstance(mapped, RayAuthFailed):  # also a RayUnreachable: the token file is read again
                self._refused(operation, mapped)
            if isinstance(mapped, RayUnreachable):
                with self._lock:
                    self._client = None  # reconnect next time (the head may have restarted)
            self._on_call(operation, type(mapped).__name__, self.monotonic() - started)
            raise mapped from exc
        self._on_call(operation, "ok", self.monotonic() - started)
        return result

    def _jobs(self, operation: str, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._call(operation, lambda: getattr(self._get_client(), method)(*args, **kwargs))


class RayJobsClient(RayConnection):
    """Ray's job and node APIs at ``address``, as the operator and ``argus logs`` use them
    (the connection, the token and the call accounting: ``RayConnection``)."""

    # -- jobs ------------------------------------------------------------------------
    async def submit(self, plan: SubmissionPlan) -> bool:
        """Submit the plan under its submission id. True if submitted now, False if Ray
        already had it (adopted: never a second job for one task)."""
        assert plan.submission_id
        try:
            await self._run(self._call, "submit", lambda: self._submit_job(plan))
            return True
        except RayJobExists:
            return False

    def _submit_job(self, plan: SubmissionPlan) -> None:
        try:
            self._get_client().submit_job(
                entrypoint=plan.entrypoint,
                submission_id=plan.submission_id,
                entrypoint_resources=plan.entrypoint_resources,
                # Only when the driver takes GPUs (a torchrun launch): Ray then places it
                # on a node with that many free, counts them and sets CUDA_VISIBLE_DEVICES.
                **({"entrypoint_num_gpus": plan.entrypoint_num_gpus} if plan.entrypoint_num_gpus else {}),
                runtime_env=plan.submitted_runtime_env(),
                metadata=plan.metadata,
            )
        except Exception as exc:
            # Ray's answer may quote the runtime env: cleaned of the Secrets' values before
            # anything reads, cuts or logs it (the same exception, its text replaced).
            if plan.secret_values:
                exc.args = (scrub(str(exc), plan),)
            raise

    async def submit_probe(self, probe: ProbeJob) -> str:
        """Submit an ``argus doctor`` probe pinned to its node: by the ``ray.io/node-id`` label
        selector, or, when the cluster's Jobs API refuses that field (a Ray older than the
        selector), by the node's ``node:<ip>`` resource. Returns how it was pinned: "label"
        or "ip". Raises as submit does (RayRefused when it cannot be pinned at all)."""
        def send(label: bool) -> None:
            pin: dict[str, Any] = ({"entrypoint_resources": probe.entrypoint_resources or None, "entrypoint_label_selector": probe.label_selector}
                                   if label else {"entrypoint_resources": probe.fallback_resources})
            self._jobs("submit", "submit_job", entrypoint=probe.entrypoint, submission_id=probe.submission_id,
                       runtime_env=probe.runtime_env, metadata=probe.metadata, **pin)
        try:
            await self._run(send, True)
            return "label"
        except (RayRefused, TypeError) as exc:  # TypeError: a Ray client without the keyword
            if "label" not in str(exc).lower() and not isinstance(exc, TypeError):
                raise
            if not probe.fallback_resources:
                raise RayRefused(f"this Ray cluster cannot pin a job to a node by its id, and the node's IP is unknown: {exc}") from None
        await self._run(send, False)
        return "ip"

    async def job(self, submission_id: str) -> RayJob:
        info = await self._run(self._jobs, "status", "get_job_info", submission_id)
        said = str(getattr(info.status, "value", info.status))  # Ray's JobStatus, or its word as a string
        state = RayJobState.parse(said)
        return RayJob(
            submission_id=submission_id, status=state, unknown_status="" if state is not None else said, message=info.message or "",
            driver_node_id=info.driver_node_id, start_time_ms=info.start_time, end_time_ms=info.end_time,
            job_id=getattr(info, "job_id", None),
            metadata=dict(info.metadata) if isinstance(getattr(info, "metadata", None), dict) else {},
        )

    async def stop(self, submission_id: str) -> bool:
        """Ask Ray to stop the job; False if it had already ended. Raises RayJobUnknown."""
        return bool(await self._run(self._jobs, "stop", "stop_job", submission_id))

    async def delete(self, submission_id: str) -> bool:
        """Remove an ended job from Ray's job history (its log files stay on the nodes).
        Raises RayJobUnknown; RayRefused for a job that has not ended."""
        return bool(await self._run(self._jobs, "delete", "delete_job", submission_id))

    async def logs(self, submission_id: str) -> str:
        return str(await self._run(self._jobs, "logs", "get_job_logs", submission_id))

    async def tail_logs(self, submission_id: str) -> AsyncIterator[str]:
        """The job's log from its beginning, then as the driver writes it, until it ends."""
        try:
            client = await self._run(self._get_client)
            self._on_call("logs", "ok", None)
            async for chunk in client.tail_job_logs(submission_id):
                yield chunk
        except Exception as exc:  # noqa: BLE001
            mapped = classify(exc, self._token)
            if isinstance(mapped, RayAuthFailed):
                self._refused("logs", mapped)
            raise mapped from exc

    async def cluster_version(self) -> str:
        """The Ray version the cluster's dashboard reports (Ray's client asks for it when it
        connects). Raises as the other calls do; not counted in the metrics."""
        def read() -> str:
            client = self._get_client()
            version = getattr(client, "_server_ray_version", None)
            if version is None:
                response = client._do_request("GET", "/api/version")
                response.raise_for_status()
                version = response.json()["ray_version"]
            return str(version)
        try:
            return await self._run(read)
        except Exception as exc:  # noqa: BLE001 - mapped as every call's
            raise classify(exc, self._token) from None

    # -- nodes ------------------------------------------------------------------------
    async def nodes(self) -> list[RayNode]:
        """The alive nodes, their total resources and the GPUs in use on each."""
        def read() -> list[RayNode]:
            _import_ray()
            from ray.util.state.common import ListApiOptions, StateResource
            client = self._state_client_factory(self.address, self.auth_headers())
            found = client.list(StateResource.NODES, options=ListApiOptions(filters=[("state", "=", "ALIVE")], timeout=int(self.timeout)),
                                raise_on_missing_output=False)
            used = self._get_client().gpus_used_by_node()
            return [RayNode(node_id=n.node_id, resources_total={k: float(v) for k, v in (n.resources_total or {}).items()},
                            is_head=bool(getattr(n, "is_head_node", False)),
                            gpus_used=None if used is None else used.get(n.node_id, 0.0),
                            node_ip=getattr(n, "node_ip", None)) for n in found]
        return await self._run(self._call, "nodes", read)

    async def placement_groups(self) -> list[PlacementGroup]:
        """Created placement groups holding GPUs (verl's workers live in them)."""
        def read() -> list[PlacementGroup]:
            _import_ray()
            from ray.util.state.common import ListApiOptions, StateResource
            client = self._state_client_factory(self.address, self.auth_headers())
            found = client.list(StateResource.PLACEMENT_GROUPS, options=ListApiOptions(filters=[("state", "=", "CREATED")], detail=True,
                                                                                        timeout=int(self.timeout), limit=10000),
                                raise_on_missing_output=False)
            out = []
            for pg in found:
                bundles = [b for b in (pg.bundles or []) if isinstance(b, dict)]
                gpus = sum(float((b.get("unit_resources") or {}).get("GPU", 0.0)) for b in bundles)
                if gpus and pg.creator_job_id:
                    out.append(PlacementGroup(creator_job_id=str(pg.creator_job_id), gpus=gpus, nodes=_bundle_nodes(bundles)))
            return out
        return await self._run(self._call, "nodes", read)


def _bundle_nodes(bundles: list[dict]) -> tuple[tuple[str, float], ...]:
    """GPUs per node of a placement group's bundles, as Ray's state API details them (each
    bundle's ``node_id``; a bundle not placed yet has none and is left out)."""
    per_node: dict[str, float] = {}
    for b in bundles:
        gpus = float((b.get("unit_resources") or {}).get("GPU", 0.0))
        if gpus and b.get("node_id"):
            per_node[str(b["node_id"])] = per_node.get(str(b["node_id"]), 0.0) + gpus
    return tuple(sorted(per_node.items()))
