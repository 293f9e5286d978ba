"""The Ray Jobs API, through ray's own ``JobSubmissionClient``, with its errors mapped to
what they mean for a task: already exists -> adopt; unknown id -> lost; unreachable ->
retry later. Calls run in threads (the client is synchronous), in a pool of their own so
that they never wait behind Kubernetes writes (asyncio's shared default pool has only
cpu+4 threads: on 2 cores, a burst of status patches delayed each Ray call).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, AsyncIterator

from ..core.plan import SubmissionPlan
from ..core.queue import Capacity
from . import metrics

log = logging.getLogger(__name__)


class RayUnreachable(Exception):
    """The dashboard did not answer; try again later."""


class RayJobUnknown(Exception):
    """Ray does not know this submission id (a restarted head forgets its jobs)."""


class RayJobExists(Exception):
    """Ray already has a job with this submission id: adopt it."""


class RayRefused(Exception):
    """Ray answered, but refused the request (a bug or a misconfiguration)."""


@dataclass(frozen=True)
class RayJob:
    submission_id: str
    status: str
    message: str
    driver_node_id: str | None
    start_time_ms: int | None
    end_time_ms: int | None


def _classify(exc: Exception) -> Exception:
    text = str(exc)
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


class RayAdapter:
    def __init__(self, address: str, worker_resource: str, timeout: float = 10.0):
        self.address = address
        self.worker_resource = worker_resource
        self.timeout = timeout
        self._client: Any = None
        self._lock = threading.Lock()
        self.calls = 0  # Ray API calls made, for metrics and the scale benchmark
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="argus-ray")

    async def _run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, lambda: fn(*args, **kwargs))

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is None:
                from ray.job_submission import JobSubmissionClient
                self._client = JobSubmissionClient(self.address)
            return self._client

    def _call(self, fn_name: str, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        metrics.RAY_CALLS.inc()
        try:
            return getattr(self._get_client(), fn_name)(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - every Ray error is mapped below
            mapped = _classify(exc)
            if isinstance(mapped, RayUnreachable):
                with self._lock:
                    self._client = None  # reconnect next time (the head may have restarted)
            raise mapped from exc

    async def submit(self, plan: SubmissionPlan) -> bool:
        """Submit the plan under its submission id. True if submitted now, False if Ray
        already had it (adopted: never a second job for one task)."""
        assert plan.submission_id
        try:
            await self._run(
                self._call, "submit_job",
                entrypoint=plan.entrypoint,
                submission_id=plan.submission_id,
                entrypoint_resources=plan.entrypoint_resources,
                runtime_env=plan.runtime_env,
                metadata=plan.metadata,
            )
            return True
        except RayJobExists:
            return False

    async def job(self, submission_id: str) -> RayJob:
        info = await self._run(self._call, "get_job_info", submission_id)
        status = getattr(info.status, "value", str(info.status))
        return RayJob(
            submission_id=submission_id, status=str(status), message=info.message or "",
            driver_node_id=info.driver_node_id, start_time_ms=info.start_time, end_time_ms=info.end_time,
        )

    async def stop(self, submission_id: str) -> bool:
        """Ask Ray to stop the job; False if it had already ended. Raises RayJobUnknown."""
        return bool(await self._run(self._call, "stop_job", submission_id))

    async def logs(self, submission_id: str) -> str:
        return str(await self._run(self._call, "get_job_logs", submission_id))

    async def tail_logs(self, submission_id: str) -> AsyncIterator[str]:
        async for chunk in self._get_client().tail_job_logs(submission_id):
            yield chunk

    async def capacity(self) -> Capacity:
        """GPUs on alive worker nodes (those carrying the worker resource)."""
        def read() -> Capacity:
            self.calls += 1
            metrics.RAY_CALLS.inc()
            try:
                from ray.util.state import list_nodes
                nodes = list_nodes(address=self.address, filters=[("state", "=", "ALIVE")], timeout=int(self.timeout), raise_on_missing_output=False)
            except Exception as exc:  # noqa: BLE001
                raise _classify(exc) from exc
            total = sum(float(n.resources_total.get("GPU", 0)) for n in nodes if self.worker_resource in (n.resources_total or {}))
            return Capacity(total_gpus=total, available_gpus=total)
        return await self._run(read)

    async def worker_node_ids(self) -> set[str]:
        def read() -> set[str]:
            from ray.util.state import list_nodes
            try:
                nodes = list_nodes(address=self.address, timeout=int(self.timeout), raise_on_missing_output=False)
            except Exception as exc:  # noqa: BLE001
                raise _classify(exc) from exc
            return {n.node_id for n in nodes if self.worker_resource in (n.resources_total or {})}
        return await self._run(read)
