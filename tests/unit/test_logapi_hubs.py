"""The log API's shared streams (servers/logapi/server.py LogHubs) over an in-memory Ray: one Ray
log stream per followed job whatever the number of followers, every follower gets the log from
its own start, the stream closes with the last follower; and the --logs-api flags' mistakes."""

from __future__ import annotations

import argparse
import asyncio

import pytest

from argus.servers.logapi.server import LogHubs
from argus.servers.logapi.settings import add_logapi_flags, logapi_settings
from fakes import FakeClock


class FakeRay:
    def __init__(self) -> None:
        self.streams = 0
        self.open = 0
        self.lines: list[str] = []
        self.done = False

    async def logs(self, sid: str) -> str:
        return "".join(self.lines)

    async def tail_logs(self, sid: str):  # type: ignore[no-untyped-def]
        self.streams += 1
        self.open += 1
        try:
            pos = 0
            while True:
                if pos < len(self.lines):
                    yield "".join(self.lines[pos:pos + 10])
                    pos = min(len(self.lines), pos + 10)
                    continue
                if self.done:
                    return
                await asyncio.sleep(0.001)
        finally:
            self.open -= 1


def test_one_ray_stream_for_all_followers_of_a_job() -> None:
    async def run() -> None:
        ray = FakeRay()
        hubs = LogHubs(ray, reader_buffer=1 << 20)
        ray.lines = [f"line {i}\n" for i in range(25)]
        snapshot = await ray.logs("sid")
        joined = [hubs.join("sid", len(snapshot)) for _ in range(5)]
        late_start = len("".join(ray.lines[:5]))
        joined.append(hubs.join("sid", late_start))  # printed only 5 lines so far
        ray.lines += [f"line {i}\n" for i in range(25, 40)]
        ray.done = True
        for _hub, reader, _ in joined:
            while not reader.closed:
                await asyncio.sleep(0.005)
        texts = ["".join(reader.take()) for _, reader, _ in joined]
        assert all(t == "".join(ray.lines[25:]) for t in texts[:5])
        assert texts[5] == "".join(ray.lines[5:])
        assert ray.streams == 1 and hubs.streams == 1
        for hub, reader, _ in joined:
            hubs.leave("sid", hub, reader)
        assert hubs.streams == 0
    asyncio.run(run())


def test_the_last_follower_leaving_closes_the_stream() -> None:
    async def run() -> None:
        ray = FakeRay()
        hubs = LogHubs(ray, reader_buffer=1 << 20)
        a = hubs.join("sid", 0)
        b = hubs.join("sid", 0)
        await asyncio.sleep(0.02)
        assert ray.open == 1
        hubs.leave("sid", a[0], a[1])
        await asyncio.sleep(0.02)
        assert ray.open == 1
        hubs.leave("sid", b[0], b[1])
        await asyncio.sleep(0.02)
        assert ray.open == 0 and hubs.streams == 0
    asyncio.run(run())


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_logapi_flags(parser)
    return parser.parse_args(list(argv))


def test_flags() -> None:
    assert logapi_settings(parse()) is None
    s = logapi_settings(parse("--logs-api", "--logs-api-cert-file=c", "--logs-api-key-file=k", "--logs-api-allowed-names=a, b"))
    assert s is not None and s.allowed_names == ("a", "b") and s.max_followers_per_user == 5 and not s.shared_tree
    with pytest.raises(ValueError, match=r"^--logs-api-cert-file and --logs-api-key-file: both are needed"):
        logapi_settings(parse("--logs-api"))
    with pytest.raises(ValueError, match=r"^--logs-api-max-followers: -1: must be 0 \(no limit\) or more$"):
        logapi_settings(parse("--logs-api", "--logs-api-cert-file=c", "--logs-api-key-file=k", "--logs-api-max-followers=-1"))


class ForgetfulRay(FakeRay):
    async def logs(self, sid: str) -> str:
        from argus.core.rayjobs import RayJobUnknown
        raise RayJobUnknown(sid)


def test_a_forgotten_job_comes_from_the_file_or_a_line_naming_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from argus.controller.view import TaskView
    from argus.core.logquery import attempt_log
    from argus.servers.logapi.server import LogApi
    from argus.servers.logapi.settings import LogApiSettings

    job = tmp_path / "jobs" / "ns-t-1234"
    job.mkdir(parents=True)
    (job / "attempt-1.log").write_text("from the file\n")
    view = TaskView(namespace="ns", name="t", uid="u", generation=1, created="", spec={}, status={
        "phase": "Succeeded", "attempt": 1, "rayJob": {"submissionId": "sid-1"},
        "jobDir": {"userPath": "$HOME/jobs/ns-t-1234", "jobPath": str(job)}})
    where = attempt_log(view.status, None)

    async def run(shared: bool) -> tuple[str | None, str]:
        api = LogApi(LogApiSettings(shared_tree=shared), ForgetfulRay(), lambda key: view, None, None,  # type: ignore[arg-type]
                     clock=FakeClock())
        return await api._text(view, where)

    assert asyncio.run(run(True)) == ("from the file\n", "")
    text, why = asyncio.run(run(False))
    assert text is None and why == (f"Ray no longer has job sid-1 (the head restarted, or the job left its history); the log is in "
                                    f"the job folder: $HOME/jobs/ns-t-1234/attempt-1.log (on the workers: {job}/attempt-1.log)")
