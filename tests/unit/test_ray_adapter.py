"""What Ray's client errors mean for a task (``adapters.ray.classify``), on the texts Ray
2.x really raises (seen on the testbed: tests/integration exercise each against Ray)."""

from __future__ import annotations

import pytest
import requests

from argus.adapters.ray import RayJobExists, RayJobUnknown, RayRefused, RayUnreachable, classify

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("error,meaning", [
    # submit_job with a submission id Ray already has: adopt, never a second job.
    (RuntimeError("Request failed with status code 500: Traceback (most recent call last):\n...\n"
                  "ValueError: Job with submission_id argus-ns-t-0a1b2c3d already exists. Please use a different submission_id."),
     RayJobExists),
    # get_job_info / stop_job on an id a restarted head never heard of: the job is lost.
    (RuntimeError("Request failed with status code 404: Job argus-ns-t-0a1b2c3d does not exist."), RayJobUnknown),
    # The dashboard is down or cut off: wait (the grace period).
    (ConnectionError("Failed to connect to Ray at address: http://127.0.0.1:8265."), RayUnreachable),
    (requests.exceptions.ReadTimeout("HTTPConnectionPool(host='ray-head', port=8265): Read timed out."), RayUnreachable),
    (RuntimeError("Request failed with status code 503: Service Unavailable."), RayUnreachable),
    # The head wraps its agent's 4xx in a 500: a refusal, not an outage.
    (RuntimeError("Request failed with status code 500: status code 400: runtime_env: unknown field 'pip2'."), RayRefused),
    (RuntimeError("Request failed with status code 400: entrypoint_resources: not a dict."), RayRefused),
])
def test_classify(error: Exception, meaning: type) -> None:
    assert type(classify(error)) is meaning


def test_a_refusal_keeps_rays_last_line() -> None:
    mapped = classify(RuntimeError("Request failed with status code 400: Traceback:\n  File x\nValueError: bad runtime_env."))
    assert str(mapped) == "ValueError: bad runtime_env"


class FakeJobSubmissionClient:
    """The methods of Ray's JobSubmissionClient the adapter calls, answering as Ray does."""

    def __init__(self, address: str) -> None:
        self.jobs: dict[str, str] = {}
        self.down = False

    def _up(self) -> None:
        if self.down:
            raise ConnectionError("Failed to connect to Ray at address: http://ray:8265.")

    def submit_job(self, *, entrypoint: str, submission_id: str, **_: object) -> str:
        self._up()
        if submission_id in self.jobs:
            raise RuntimeError(f"Request failed with status code 500: ValueError: Job with submission_id {submission_id} already exists. "
                               "Please use a different submission_id.")
        self.jobs[submission_id] = "PENDING"
        return submission_id

    def get_job_info(self, submission_id: str) -> object:
        self._up()
        if submission_id not in self.jobs:
            raise RuntimeError(f"Request failed with status code 404: Job {submission_id} does not exist.")
        from types import SimpleNamespace
        return SimpleNamespace(status=self.jobs[submission_id], message="", driver_node_id=None, start_time=None, end_time=None)

    def stop_job(self, submission_id: str) -> bool:
        self._up()
        if submission_id not in self.jobs:
            raise RuntimeError(f"Request failed with status code 404: Job {submission_id} does not exist.")
        was = self.jobs[submission_id] in ("PENDING", "RUNNING")
        self.jobs[submission_id] = "STOPPED"
        return was


def _client() -> tuple[object, FakeJobSubmissionClient, list[tuple[str, str]]]:
    import asyncio  # noqa: F401
    from argus.adapters.ray import RayJobsClient
    fake = FakeJobSubmissionClient("http://ray:8265")
    calls: list[tuple[str, str]] = []
    return RayJobsClient("http://ray:8265", client_factory=lambda _: fake, on_call=lambda op, out: calls.append((op, out)), threads=1), fake, calls


def _plan(sid: str = "argus-ns-t-0a1b2c3d") -> object:
    from argus.core.plan import SubmissionPlan
    return SubmissionPlan(submission_id=sid, user="alice", command="x", entrypoint="bash -lc x", entrypoint_resources={"worker_node": 1},
                          runtime_env={}, metadata={}, job_dir="/j", gpus=1)


def test_submitting_an_id_ray_already_has_is_an_adoption() -> None:
    import asyncio
    client, fake, calls = _client()
    assert asyncio.run(client.submit(_plan())) is True
    assert asyncio.run(client.submit(_plan())) is False  # adopted: no error, no second job
    assert list(fake.jobs) == ["argus-ns-t-0a1b2c3d"]
    assert calls == [("submit", "ok"), ("submit", "RayJobExists")]


def test_an_unknown_job_and_an_unreachable_ray_are_told_apart() -> None:
    import asyncio
    client, fake, calls = _client()
    with pytest.raises(RayJobUnknown):
        asyncio.run(client.job("argus-ns-gone-00000000"))
    with pytest.raises(RayJobUnknown):
        asyncio.run(client.stop("argus-ns-gone-00000000"))
    fake.down = True
    with pytest.raises(RayUnreachable):
        asyncio.run(client.job("argus-ns-t-0a1b2c3d"))
    assert calls[-1] == ("status", "RayUnreachable")
