"""What Ray's client errors mean for a task (``adapters.ray.classify``), on the texts Ray
2.x really raises (seen on the testbed: tests/integration exercise each against Ray)."""

from __future__ import annotations

import pytest
import requests

from argus.adapters.ray import classify
from argus.core.rayjobs import RayAuthFailed, RayJobExists, RayJobState, RayJobUnknown, RayRefused, RayUnreachable
from fakes import FakeClock

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
        self.submitted: dict[str, dict[str, object]] = {}  # what each submission asked for
        self.down = False

    def _up(self) -> None:
        if self.down:
            raise ConnectionError("Failed to connect to Ray at address: http://ray:8265.")

    def submit_job(self, *, entrypoint: str, submission_id: str, **options: object) -> str:
        self._up()
        if submission_id in self.jobs:
            raise RuntimeError(f"Request failed with status code 500: ValueError: Job with submission_id {submission_id} already exists. "
                               "Please use a different submission_id.")
        self.jobs[submission_id] = "PENDING"
        self.submitted[submission_id] = options
        return submission_id

    def get_job_info(self, submission_id: str) -> object:
        self._up()
        if submission_id not in self.jobs:
            raise RuntimeError(f"Request failed with status code 404: Job {submission_id} does not exist.")
        from types import SimpleNamespace
        return SimpleNamespace(status=self.jobs[submission_id], message="", driver_node_id=None, start_time=None, end_time=None,
                               metadata=(self.submitted.get(submission_id) or {}).get("metadata"))

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
    return RayJobsClient("http://ray:8265", monotonic=FakeClock().monotonic, client_factory=lambda _: fake, on_call=lambda op, out, _seconds: calls.append((op, out)), threads=1), fake, calls


def _plan(sid: str = "argus-ns-t-0a1b2c3d", entrypoint_num_gpus: int = 0) -> object:
    from argus.core.plan import DRIVER_GPUS_KEY
    from argus.core.submission import SubmissionPlan
    return SubmissionPlan(submission_id=sid, user="alice", command="x", entrypoint="bash -lc x", entrypoint_resources={"worker_node": 1},
                          entrypoint_num_gpus=entrypoint_num_gpus, runtime_env={},
                          metadata={DRIVER_GPUS_KEY: str(entrypoint_num_gpus)} if entrypoint_num_gpus else {}, job_dir="/j", gpus=1)


def test_a_driver_that_holds_gpus_reserves_them_through_the_entrypoint() -> None:
    """A torchrun plan's GPUs go to Ray as entrypoint_num_gpus (Ray counts them on the
    driver's node); the job's metadata says so, and the job read gives it back (Ray's job
    details leave entrypoint_num_gpus out). A verl plan sends none."""
    import asyncio
    client, fake, _ = _client()
    asyncio.run(client.submit(_plan("argus-ns-sft-0a1b2c3d", entrypoint_num_gpus=2)))
    asyncio.run(client.submit(_plan("argus-ns-ppo-0a1b2c3d")))
    assert fake.submitted["argus-ns-sft-0a1b2c3d"]["entrypoint_num_gpus"] == 2
    assert fake.submitted["argus-ns-sft-0a1b2c3d"]["entrypoint_resources"] == {"worker_node": 1}
    assert "entrypoint_num_gpus" not in fake.submitted["argus-ns-ppo-0a1b2c3d"]
    from argus.core.plan import driver_gpus
    assert driver_gpus(asyncio.run(client.job("argus-ns-sft-0a1b2c3d")).metadata) == 2.0
    assert driver_gpus(asyncio.run(client.job("argus-ns-ppo-0a1b2c3d")).metadata) == 0.0


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


# --------------------------------------------------------------------------- token authentication

def _ray_auth_error(message: str) -> Exception:
    from ray.exceptions import AuthenticationError  # what Ray 2.60's client raises on 401/403
    return AuthenticationError(message)


def _handshake_error(status: int) -> Exception:
    import aiohttp
    from multidict import CIMultiDict, CIMultiDictProxy
    from yarl import URL
    url = URL("http://ray:8265/api/jobs/x/logs/tail")
    info = aiohttp.RequestInfo(url, "GET", CIMultiDictProxy(CIMultiDict()), url)
    return aiohttp.WSServerHandshakeError(info, (), status=status, message="Invalid response status")


@pytest.mark.parametrize("make,status", [
    # Ray 2.60's client (texts as the testbed's token cluster sent them).
    (lambda: _ray_auth_error("Authentication required: Unauthorized: Missing authentication token\n\nToken authentication is enabled "
                             "but no authentication token was found"), 401),
    (lambda: _ray_auth_error("Authentication failed: Forbidden: Invalid authentication token\n\nToken authentication is enabled but "
                             "the authentication token is invalid or incorrect."), 403),
    # The log stream (aiohttp's websocket handshake).
    (lambda: _handshake_error(403), 403),
    # requests' raise_for_status, and an older client's RuntimeError or state API text.
    (lambda: requests.exceptions.HTTPError("401 Client Error", response=type("R", (), {"status_code": 401})()), 401),
    (lambda: RuntimeError("Request failed with status code 401: Unauthorized: Missing authentication token."), 401),
    (lambda: RuntimeError("Failed to parse Response(url=http://ray:8265/api/v0/nodes, status=403, text='Forbidden: Invalid "
                          "authentication token')"), 403),
])
def test_a_refusal_of_the_credentials_is_told_apart_from_an_outage(make, status: int) -> None:
    from argus.core.rayjobs import RayAuthFailed
    mapped = classify(make())
    assert type(mapped) is RayAuthFailed and mapped.status == status
    assert str(mapped).startswith(f"HTTP {status}: ")
    # Still a kind of RayUnreachable: whatever waits out an outage waits this out too.
    assert isinstance(mapped, RayUnreachable)


def test_other_4xx_and_wrapped_errors_are_no_auth_failure() -> None:
    from argus.core.rayjobs import RayAuthFailed
    assert not isinstance(classify(RuntimeError("Request failed with status code 404: Job x does not exist.")), RayAuthFailed)
    assert not isinstance(classify(RuntimeError("Request failed with status code 500: status code 403: runtime_env denied.")), RayAuthFailed)
    assert not isinstance(classify(RuntimeError("Request failed with status code 400: status code 4010 is odd.")), RayAuthFailed)


def test_the_token_is_scrubbed_from_what_ray_says() -> None:
    mapped = classify(RuntimeError("Request failed with status code 400: ValueError: bad header 'Bearer s3cr3t-t0ken'."), secret="s3cr3t-t0ken")
    assert type(mapped) is RayRefused and "s3cr3t-t0ken" not in str(mapped) and "***" in str(mapped)


def test_the_token_file_is_read_and_checked_without_showing_it(tmp_path) -> None:
    from argus.adapters.ray import RayJobsClient, RayTokenError, read_token_file
    token = tmp_path / "token"
    token.write_text("s3cr3t-t0ken\n")
    assert read_token_file(str(token)) == "s3cr3t-t0ken"
    for content, problem in (("", "is empty"), ("  \n", "is empty"), ("two words", "more than one word")):
        token.write_text(content)
        with pytest.raises(RayTokenError, match=problem) as caught:
            read_token_file(str(token))
        assert "two" not in str(caught.value)
    with pytest.raises(RayTokenError, match="cannot read the Ray token file .*missing"):
        read_token_file(str(tmp_path / "missing"))
    # Read afresh: a rotated Secret counts from the next client made.
    token.write_text("first")
    client = RayJobsClient("http://ray:8265", monotonic=FakeClock().monotonic, token_file=str(token), threads=1)
    assert client.auth_headers() == {"Authorization": "Bearer first"}
    token.write_text("second\n")
    assert client.auth_headers() == {"Authorization": "Bearer second"}
    assert RayJobsClient("http://ray:8265", monotonic=FakeClock().monotonic, threads=1).auth_headers() == {}


def test_every_ray_client_is_made_with_the_token(tmp_path, monkeypatch) -> None:
    """The Jobs API client and the state API client (nodes) both get the header; without a
    token file none is passed, so Ray's own RAY_AUTH_* handling applies."""
    import asyncio

    import argus.adapters.ray as adapter
    made: list[tuple[str, object]] = []

    class Recording:
        def __init__(self, address: str, headers: object = None) -> None:
            made.append(("jobs", headers))
            self.jobs = {"argus-ns-t-0a1b2c3d": "RUNNING"}

        def get_job_info(self, submission_id: str) -> object:
            from types import SimpleNamespace
            return SimpleNamespace(status="RUNNING", message="", driver_node_id=None, start_time=None, end_time=None)

        def gpus_used_by_node(self) -> dict[str, float]:
            return {}

    class State:
        def list(self, resource: object, options: object, raise_on_missing_output: bool) -> list[object]:
            return []

    monkeypatch.setattr(adapter, "_timed_client_class", lambda timeout: Recording)
    token = tmp_path / "token"
    token.write_text("s3cr3t-t0ken")

    def state(address: str, headers: dict[str, str]) -> State:
        made.append(("state", headers))
        return State()

    with_token = adapter.RayJobsClient("http://ray:8265", monotonic=FakeClock().monotonic, token_file=str(token), state_client_factory=state, threads=1)
    asyncio.run(with_token.job("argus-ns-t-0a1b2c3d"))
    asyncio.run(with_token.nodes())
    asyncio.run(with_token.placement_groups())
    without = adapter.RayJobsClient("http://ray:8265", monotonic=FakeClock().monotonic, state_client_factory=state, threads=1)
    asyncio.run(without.job("argus-ns-t-0a1b2c3d"))
    asyncio.run(without.nodes())
    asyncio.run(without.placement_groups())
    bearer = {"Authorization": "Bearer s3cr3t-t0ken"}
    assert made == [("jobs", bearer), ("state", bearer), ("state", bearer), ("jobs", None), ("state", {}), ("state", {})]


@pytest.mark.parametrize("said,state,unknown", [
    ("RUNNING", RayJobState.RUNNING, ""),
    ("succeeded", RayJobState.SUCCEEDED, ""),  # any case
    ("NEW_STATE", None, "NEW_STATE"),          # a newer Ray's state: not one Argus knows, its word kept
])
def test_ray_s_word_for_a_job_s_state_is_parsed_at_the_boundary(monkeypatch, said: str, state: RayJobState | None, unknown: str) -> None:
    """Ray's JobStatus (an enum whose value is its word, or a bare string) becomes a
    RayJobState; a word Argus does not know is kept, for the status and the messages, and
    counts as neither active nor ended."""
    import asyncio
    from enum import Enum
    from types import SimpleNamespace

    import argus.adapters.ray as adapter

    class JobStatus(str, Enum):  # as ray.job_submission.JobStatus
        word = said

    class Answering:
        def __init__(self, address: str, headers: object = None) -> None:
            pass

        def get_job_info(self, submission_id: str) -> object:
            return SimpleNamespace(status=JobStatus.word, message="", driver_node_id=None, start_time=None, end_time=None)

    monkeypatch.setattr(adapter, "_timed_client_class", lambda timeout: Answering)
    client = adapter.RayJobsClient("http://ray:8265", monotonic=FakeClock().monotonic, threads=1)
    job = asyncio.run(client.job("argus-ns-t-0a1b2c3d"))
    assert (job.status, job.unknown_status, job.reported) == (state, unknown, state.value if state else said)
    assert job.active == (state is RayJobState.RUNNING) and job.ended == (state is RayJobState.SUCCEEDED)


def test_a_refusal_is_logged_at_most_once_a_minute_and_never_with_the_token(tmp_path, caplog) -> None:
    import asyncio

    import argus.adapters.ray as adapter
    token = tmp_path / "token"
    token.write_text("s3cr3t-t0ken")
    clock = FakeClock()

    class Refusing:
        def get_job_info(self, submission_id: str) -> object:
            raise _ray_auth_error("Authentication failed: Forbidden: Invalid authentication token")

    calls: list[tuple[str, str]] = []
    client = adapter.RayJobsClient("http://ray:8265", monotonic=clock.monotonic, token_file=str(token), client_factory=lambda _: Refusing(),
                                   on_call=lambda op, out, *_: calls.append((op, out)), threads=1)
    client.auth_headers()  # as the real factory does: the token is known to the client
    with caplog.at_level("WARNING", logger="argus.adapters.ray"):
        for advance in (0, 30, 31):
            clock.advance(advance)
            with pytest.raises(RayAuthFailed):
                asyncio.run(client.job("argus-ns-t-0a1b2c3d"))
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2, warnings
    assert warnings[0] == (f"Ray at http://ray:8265 refused the operator's credentials on a status call (HTTP 403: the Ray cluster did not "
                           f"accept the token that was sent; the token in {token}): check the Ray token")
    assert calls == [("status", "RayAuthFailed")] * 3
    assert not any("s3cr3t-t0ken" in w for w in warnings)


# --------------------------------------------------------------------------- the cluster's version

@pytest.mark.parametrize("version,token,level,message", [
    ("2.60.0", True, "INFO", "the Ray cluster at http://ray:8265 runs Ray 2.60.0 (Argus is tested against Ray 2.41.0 to 2.60.0)"),
    ("2.41.0", False, "INFO", "the Ray cluster at http://ray:8265 runs Ray 2.41.0 (Argus is tested against Ray 2.41.0 to 2.60.0)"),
    # Between the ends: inside the range. Before 2.52 a token means nothing: said, not an error.
    ("2.47.1", True, "INFO", "the Ray cluster at http://ray:8265 runs Ray 2.47.1 (Argus is tested against Ray 2.41.0 to 2.60.0); "
                             "Ray before 2.52.0 has no token authentication: the token is sent and ignored"),
    ("2.52.0", True, "INFO", "the Ray cluster at http://ray:8265 runs Ray 2.52.0 (Argus is tested against Ray 2.41.0 to 2.60.0)"),
    ("2.40.0", False, "WARNING", "the Ray cluster at http://ray:8265 runs Ray 2.40.0, older than the supported range (Argus is tested "
                                 "against Ray 2.41.0 to 2.60.0); job submission, status or logs may fail"),
    ("2.61.0", False, "INFO", "the Ray cluster at http://ray:8265 runs Ray 2.61.0, newer than the tested range (Argus is tested against "
                              "Ray 2.41.0 to 2.60.0)"),
    ("2.60.1", False, "INFO", "the Ray cluster at http://ray:8265 runs Ray 2.60.1 (Argus is tested against Ray 2.41.0 to 2.60.0)"),
    ("3.0.0rc1", False, "INFO", "the Ray cluster at http://ray:8265 runs Ray 3.0.0rc1, newer than the tested range (Argus is tested "
                                "against Ray 2.41.0 to 2.60.0)"),
])
def test_what_the_operator_says_of_the_clusters_ray_version(version: str, token: bool, level: str, message: str) -> None:
    import logging

    from argus.adapters.ray import version_note
    assert version_note("http://ray:8265", version, token=token) == (getattr(logging, level), message)


def test_the_clusters_version_is_what_rays_client_learnt_when_it_connected() -> None:
    import asyncio

    from argus.adapters.ray import RayJobsClient

    class Connected:
        _server_ray_version = "2.41.0"

    class Refusing:
        def __init__(self) -> None:
            raise _ray_auth_error("Authentication required: Unauthorized: Missing authentication token")

    assert asyncio.run(RayJobsClient("http://ray:8265", monotonic=FakeClock().monotonic, client_factory=lambda _: Connected(), threads=1).cluster_version()) == "2.41.0"
    from argus.core.rayjobs import RayAuthFailed
    with pytest.raises(RayAuthFailed):
        asyncio.run(RayJobsClient("http://ray:8265", monotonic=FakeClock().monotonic, client_factory=lambda _: Refusing(), threads=1).cluster_version())


def test_a_refusal_counts_as_a_ray_error_in_the_metrics() -> None:
    from argus.controller.metrics import Metrics
    metrics = Metrics(FakeClock())

    def errors(operation: str) -> float:
        return metrics.registry.get_sample_value("argus_ray_api_errors_total", {"operation": operation, "cluster": ""}) or 0.0

    before = errors("nodes")
    metrics.count_ray_call("nodes", "RayAuthFailed")
    metrics.count_ray_call("nodes", "ok")
    metrics.count_ray_call("nodes", "RayJobUnknown")  # an answer, not an error
    assert errors("nodes") == before + 1


def test_a_token_file_that_goes_bad_sends_no_token_and_says_so_once(tmp_path, caplog) -> None:
    from argus.adapters.ray import RayJobsClient
    token = tmp_path / "token"
    token.write_text("s3cr3t-t0ken")
    client = RayJobsClient("http://ray:8265", monotonic=FakeClock().monotonic, token_file=str(token), threads=1)
    assert client.auth_headers() == {"Authorization": "Bearer s3cr3t-t0ken"}
    token.write_text("")
    with caplog.at_level("WARNING", logger="argus.adapters.ray"):
        assert client.auth_headers() == {} and client.auth_headers() == {}
    assert [r.getMessage() for r in caplog.records] == [f"the Ray token file {token} is empty; sending no token"]


def test_a_call_that_does_not_end_is_given_up_at_its_deadline() -> None:
    """requests' timeout bounds each connect and read, not the call: a dashboard that answers
    slowly enough must not hold the controller's tick (CALL_DEADLINE_FACTOR)."""
    import asyncio
    import threading

    from argus.adapters.ray import CALL_DEADLINE_FACTOR, RayJobsClient
    release = threading.Event()

    class Stuck(FakeJobSubmissionClient):
        def get_job_info(self, submission_id: str) -> object:
            release.wait(30)
            raise AssertionError("the deadline did not end the call")

    client = RayJobsClient("http://ray:8265", monotonic=FakeClock().monotonic, client_factory=Stuck, timeout=0.05, threads=1)
    try:
        with pytest.raises(RayUnreachable, match=f"within {0.05 * CALL_DEADLINE_FACTOR:.0f} s"):
            asyncio.run(client.job("argus-ns-t-0a1b2c3d"))
    finally:
        release.set()


def test_placement_groups_say_where_their_gpus_are() -> None:
    """Ray's state API details each bundle's node: a job's GPUs per node (what preemption frees
    where); a bundle not placed yet (no node_id) and GPU-less bundles count nowhere."""
    import asyncio
    from types import SimpleNamespace

    import argus.adapters.ray as adapter

    groups = [SimpleNamespace(creator_job_id="02000000", bundles=[
        {"bundle_id": "b0", "node_id": "n1", "unit_resources": {"GPU": 4.0, "CPU": 1.0}},
        {"bundle_id": "b1", "node_id": "n2", "unit_resources": {"GPU": 4.0}},
        {"bundle_id": "b2", "node_id": "n1", "unit_resources": {"GPU": 2.0}},
        {"bundle_id": "b3", "unit_resources": {"GPU": 1.0}},
        {"bundle_id": "b4", "node_id": "n3", "unit_resources": {"CPU": 8.0}},
    ]), SimpleNamespace(creator_job_id="03000000", bundles=[{"bundle_id": "c0", "node_id": "n1", "unit_resources": {"CPU": 1.0}}])]

    class State:
        def list(self, resource: object, options: object, raise_on_missing_output: bool) -> list[object]:
            return groups

    client = adapter.RayJobsClient("http://ray:8265", monotonic=FakeClock().monotonic, state_client_factory=lambda a, h: State(), threads=1)
    found = asyncio.run(client.placement_groups())
    assert [(g.creator_job_id, g.gpus, g.nodes) for g in found] == [("02000000", 11.0, (("n1", 6.0), ("n2", 4.0)))]
