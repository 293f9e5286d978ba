"""``argus doctor``: the pure verdicts on what a probe reports (``core.doctor``), the probe job
itself (named and pinned so that nothing mistakes it for a task, and taking no GPU), the
runner over the in-memory fake of Ray (``controller.doctor``: timeouts, history removal,
the label-selector fallback), and the CLI's table, JSON and exit codes. The real probe on a
real Ray cluster: tests/integration/test_doctor.py."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest

from argus.adapters.ray import RayJobsClient
from argus.cli import main
from argus.clusterctl import print_doctor
from argus.controller.doctor import Doctor
from argus.core.config import PlatformConfig
from argus.core.doctor import (
    CLUSTER,
    REPORT_MARKER,
    Check,
    DoctorSettings,
    Node,
    ProbeJob,
    ProbeOutcome,
    Row,
    Status,
    cluster_rows,
    failed,
    is_probe,
    parse_report,
    probe_job,
    probe_rows,
    rows_json,
    worker_resource_row,
)
from argus.core.rayjobs import RayNode, RayRefused
from argus.core.submission import submission_id_for
from fakes import FakeClock, FakeRay

pytestmark = pytest.mark.unit

CONFIG = PlatformConfig(root="/private")
SETTINGS = DoctorSettings(CONFIG)
WORKER = Node("f" * 56, "10.0.0.7", False, {"CPU": 8.0, "GPU": 2.0, "worker_node": 4.0, "node:10.0.0.7": 1.0})


def report(**changes: Any) -> dict[str, Any]:
    """A probe's report from a healthy node, with ``changes`` merged in."""
    base: dict[str, Any] = {
        "python": "/opt/conda/bin/python3", "python_version": "3.11.9", "uid": 1000, "gid": 1000, "path": "/opt/conda/bin:/usr/bin",
        "verl": {"path": "/private/common/code/verl/verl_repo", "present": True, "version": "0.9.1"},
        "private": {"root": "/private", "is_dir": True, "is_mount": True, "missing": []},
        "homes": {"count": 3, "checked": 3, "unwritable": []},
        "hf": {"env": None, "shared": "/private/hf", "is_dir": True, "writable": True},
        "gpus": {"cuda_visible_devices": None, "nvidia_smi": 2, "nvidia_smi_error": None},
    }
    for key, value in changes.items():
        base[key] = {**base[key], **value} if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return base


def outcome(rep: dict[str, Any] | None = None, status: str = "SUCCEEDED", log: str | None = None) -> ProbeOutcome:
    text = log if log is not None else "Runtime env is setting up.\n" + REPORT_MARKER + json.dumps(rep if rep is not None else report()) + "\n"
    return ProbeOutcome(status, "", text)


def by_check(rows: list[Row]) -> dict[Check, Row]:
    return {r.check: r for r in rows}


# ------------------------------------------------------------------------------ the probe job

def test_a_probe_is_never_taken_for_a_task() -> None:
    job = probe_job(SETTINGS, WORKER, "0a1b2c3d")
    assert job.submission_id == f"doctor-{'f' * 12}-0a1b2c3d"
    assert not job.submission_id.startswith("argus-")  # every task's id does
    assert submission_id_for("ns", "t", "uid-1").startswith("argus-") and not is_probe(submission_id_for("ns", "t", "uid-1"))
    assert is_probe(job.submission_id, job.metadata)
    assert not {"argus.io/namespace", "argus.io/name", "argus.io/uid", "argus.io/user"} & set(job.metadata)


def test_a_probe_goes_the_tasks_way_and_takes_no_gpu() -> None:
    job = probe_job(SETTINGS, WORKER, "n")
    assert job.entrypoint.startswith("bash -lc '")  # the configured entrypoint shell
    assert job.runtime_env["env_vars"]["PYTHONPATH"] == "/private/common/code/verl/verl_repo"
    assert job.entrypoint_resources == {"worker_node": 0.001}  # a share of a driver slot, no GPU, no CPU
    assert job.label_selector == {"ray.io/node-id": WORKER.node_id}
    assert job.fallback_resources == {"worker_node": 0.001, "node:10.0.0.7": 0.001}
    other = probe_job(DoctorSettings(PlatformConfig(entrypoint_shell="bash -c", worker_resource="argus_driver")), WORKER, "n")
    assert other.entrypoint.startswith("bash -c '") and other.entrypoint_resources == {}  # this node lacks that resource


def test_the_report_is_the_marker_line() -> None:
    log = f"noise\n{REPORT_MARKER}{{\"python\": null}}\nARGUS-DOCTOR-PATH /usr/bin:/bin\n"
    assert parse_report(log) == ({"python": None}, "/usr/bin:/bin")
    assert parse_report("no report\n") == (None, None)
    assert parse_report(f"{REPORT_MARKER}not json\n") == (None, None)


# ------------------------------------------------------------------------------ verdicts

def test_a_healthy_node() -> None:
    rows = by_check(probe_rows(DoctorSettings(CONFIG, expected_verl=("0.9.1",)), WORKER, outcome()))
    assert {c: r.status for c, r in rows.items()} == {c: Status.ok for c in rows}
    assert "verl 0.9.1 (as expected)" in rows[Check.verl].detail
    assert "nvidia-smi lists 2 GPU(s), as Ray counts" in rows[Check.gpus].detail
    assert "/opt/conda/bin/python3 (Python 3.11.9), uid 1000" == rows[Check.python3].detail


@pytest.mark.parametrize("changes,check,words", [
    ({"python": None}, Check.python3, "no python3 on the login shell's PATH"),
    ({"verl": {"present": False}}, Check.verl, "no verl snapshot at /private/common/code/verl/verl_repo"),
    ({"verl": {"version": "0.6.1"}}, Check.verl, "verl 0.6.1, Argus composes with verl 0.9.1"),
    ({"verl": {"version": None}}, Check.verl, "verl of unknown version, Argus composes with verl 0.9.1"),
    ({"private": {"is_dir": False}}, Check.private, "/private does not exist on this node"),
    ({"private": {"missing": ["users", "hf"]}}, Check.private, "/private lacks users/, hf/"),
    ({"homes": {"unwritable": [{"home": "bob", "error": "Permission denied"}]}}, Check.homes,
     "1 of 3 home(s) not writable by uid 1000: bob (Permission denied)"),
    ({"hf": {"is_dir": False}}, Check.hf_home, "the shared Hugging Face cache /private/hf does not exist"),
    ({"gpus": {"nvidia_smi": 1}}, Check.gpus, "nvidia-smi lists 1 GPU(s), Ray counts 2"),
    ({"gpus": {"nvidia_smi": None, "cuda_visible_devices": "0,1,2"}}, Check.gpus, "CUDA_VISIBLE_DEVICES names 3 GPU(s), Ray counts 2"),
])
def test_each_failure_has_its_row_and_fix(changes: dict[str, Any], check: Check, words: str) -> None:
    rows = by_check(probe_rows(DoctorSettings(CONFIG, expected_verl=("0.9.1",)), WORKER, outcome(report(**changes))))
    assert rows[check].status is Status.fail and words in rows[check].detail
    assert rows[check].fix
    assert [r.check for r in rows.values() if r.status is Status.fail] == [check]


def test_without_python3_the_rest_is_not_checked_and_the_path_is_shown() -> None:
    rows = by_check(probe_rows(SETTINGS, WORKER, outcome(log=f'{REPORT_MARKER}{{"python": null}}\nARGUS-DOCTOR-PATH /usr/bin:/bin\n')))
    assert rows[Check.python3].status is Status.fail and "(/usr/bin:/bin)" in rows[Check.python3].detail
    assert "profile.d" in rows[Check.python3].fix
    assert {rows[c].status for c in (Check.verl, Check.private, Check.homes, Check.hf_home, Check.gpus)} == {Status.skip}


def test_without_an_expected_version_the_snapshots_is_shown_not_compared(monkeypatch: pytest.MonkeyPatch) -> None:
    """argus doctor without --expect-verl (tests/integration/test_doctor_ray.py runs it with one
    on a real cluster): nothing to compare with, so the version passes, shown."""
    from argus.cli import build_parser
    monkeypatch.delenv("ARGUS_EXPECT_VERL", raising=False)
    assert build_parser().parse_args(["doctor"]).expect_verl is None
    row = by_check(probe_rows(SETTINGS, WORKER, outcome()))[Check.verl]
    assert row.status is Status.ok and row.detail == "/private/common/code/verl/verl_repo: verl 0.9.1 (no expected version given: not compared)"
    compared = by_check(probe_rows(DoctorSettings(CONFIG, expected_verl=("0.6.1",)), WORKER, outcome()))[Check.verl]
    assert compared.status is Status.fail and "verl 0.9.1, Argus composes with verl 0.6.1" in compared.detail


def test_what_is_shown_but_not_failed() -> None:
    rows = by_check(probe_rows(SETTINGS, WORKER, outcome(report(verl={"version": None}, homes={"count": 0, "checked": 0},
                                                                 hf={"writable": False}, gpus={"nvidia_smi": None}))))
    assert rows[Check.verl].status is Status.warn and "not compared" in rows[Check.verl].detail
    assert rows[Check.homes].status is Status.warn and "no homes under /private/users" in rows[Check.homes].detail
    assert rows[Check.hf_home].status is Status.warn
    assert rows[Check.gpus].status is Status.warn and "Ray counts 2 GPU(s); the node shows none" in rows[Check.gpus].detail
    assert not failed(list(rows.values()))
    assert by_check(probe_rows(DoctorSettings(PlatformConfig(root=CONFIG.root, hf_home="")), WORKER, outcome()))[Check.hf_home].status is Status.skip


def test_a_probe_that_never_started_or_gave_no_report() -> None:
    waiting = by_check(probe_rows(SETTINGS, WORKER, ProbeOutcome("NOT_STARTED", "still pending after 60 s")))
    assert waiting[Check.probe].status is Status.warn and "did not start" in waiting[Check.probe].detail
    assert waiting[Check.python3].status is Status.skip
    broken = by_check(probe_rows(SETTINGS, WORKER, ProbeOutcome("FAILED", "exit 127", "bash: not found\n", pinned_by="ip")))
    assert broken[Check.probe].status is Status.fail
    assert "FAILED: exit 127; its log ends: bash: not found (pinned by node:10.0.0.7" in broken[Check.probe].detail


def test_the_worker_resource() -> None:
    assert worker_resource_row(SETTINGS, WORKER).status is Status.ok
    assert "up to 4 driver(s) at once" in worker_resource_row(SETTINGS, WORKER).detail
    bare = Node("n2", "10.0.0.8", False, {"GPU": 8.0})
    row = worker_resource_row(SETTINGS, bare)
    assert row.status is Status.fail and "its 8 GPU(s) sit idle" in row.detail and "--resources" in row.fix
    assert worker_resource_row(SETTINGS, Node("n3", None, False, {"worker_node": 0.5})).status is Status.fail
    assert worker_resource_row(SETTINGS, Node("h", None, True, {"worker_node": 1.0})).status is Status.warn


@pytest.mark.parametrize("version,status", [("2.40.0", Status.fail), ("2.41.0", Status.ok), ("2.60.0", Status.ok), ("2.61.0", Status.warn)])
def test_the_ray_version_against_the_supported_range(version: str, status: Status) -> None:
    rows = by_check(cluster_rows(SETTINGS, version, None, [WORKER]))
    assert rows[Check.ray_version].status is status


def test_the_token_and_the_workers() -> None:
    refused = cluster_rows(SETTINGS, None, "HTTP 401: the Ray cluster requires a token and none was sent", [])
    assert [(r.check, r.status) for r in refused] == [(Check.token, Status.fail)] and "--ray-token-file" in refused[0].fix
    old = by_check(cluster_rows(DoctorSettings(CONFIG, token_configured=True), "2.41.0", None, [WORKER]))
    assert old[Check.token].status is Status.warn and "sent and ignored" in old[Check.token].detail
    none = by_check(cluster_rows(SETTINGS, "2.60.0", None, [Node("h", None, True, {}), Node("n", None, False, {"GPU": 1.0})]))
    assert none[Check.workers].status is Status.fail and "no task can start" in none[Check.workers].detail


# ------------------------------------------------------------------------------ the runner over the fake Ray

def fake_world(answer: Any = None) -> tuple[FakeRay, FakeClock, Doctor]:
    clock = FakeClock()
    ray = FakeRay(clock, worker_gpus=2)
    ray.nodes_ = [RayNode("head", {"CPU": 0.0}, is_head=True, node_ip="10.0.0.1"),
                  RayNode("w1" + "0" * 54, {"CPU": 1.0, "GPU": 2.0, "worker_node": 4.0}, node_ip="10.0.0.7")]
    ray.probe_answer = answer or (lambda probe, node: ("SUCCEEDED", REPORT_MARKER + json.dumps(report()) + "\n"))

    async def sleep(seconds: float) -> None:
        clock.advance(max(seconds, 0.01))

    return ray, clock, Doctor(ray, DoctorSettings(CONFIG, expected_verl=("0.9.1",)), start_timeout=30, run_timeout=60,
                              monotonic=clock.monotonic, sleep=sleep, nonce=lambda: "abcd0123")


def test_the_runner_probes_each_worker_and_leaves_the_history_clean() -> None:
    ray, _, doctor = fake_world()
    rows = asyncio.run(doctor.run())
    assert not failed(rows), rows
    assert [r.node for r in rows if r.check is Check.probe] == ["w10000000000 (10.0.0.7)"]  # not the head
    assert list(ray.probes) == ["doctor-w10000000000-abcd0123"] and ray.jobs == {}
    assert ray.deleted == ["doctor-w10000000000-abcd0123"]


def test_a_probe_ray_writes_back_after_its_removal_is_removed_again() -> None:
    ray, _, doctor = fake_world()
    ray.rewritten_after_delete.add("doctor-w10000000000-abcd0123")  # Ray's job monitor race (jobsync.HistoryRemovals)
    asyncio.run(doctor.run())
    assert ray.jobs == {} and ray.deleted == ["doctor-w10000000000-abcd0123"] * 2


def test_a_probe_that_cannot_start_is_stopped_removed_and_reported() -> None:
    ray, clock, doctor = fake_world(answer=lambda probe, node: None)  # stays PENDING: the node's driver slots are taken
    rows = by_check(asyncio.run(doctor.run())[3:])
    assert rows[Check.probe].status is Status.warn and "still pending after 30 s" in rows[Check.probe].detail
    assert ray.count("stop") >= 1 and ray.jobs == {}


def test_a_ray_without_label_selectors_pins_by_the_nodes_ip() -> None:
    ray, _, doctor = fake_world()
    ray.label_selector = False
    rows = by_check(asyncio.run(doctor.run())[3:])
    assert "pinned by node:10.0.0.7" in rows[Check.probe].detail and rows[Check.python3].status is Status.ok


def test_refused_credentials_and_an_unreachable_ray_are_one_row_each() -> None:
    ray, _, doctor = fake_world()
    ray.refuse_credentials = 401
    rows = asyncio.run(doctor.run())
    assert [(r.check, r.status) for r in rows] == [(Check.token, Status.fail)]
    ray.refuse_credentials, ray.reachable = None, False
    rows = asyncio.run(doctor.run())
    assert [(r.node, r.check, r.status) for r in rows] == [(CLUSTER, Check.ray_version, Status.fail)]
    assert "cannot reach the Ray dashboard" in rows[0].detail and ray.probes == {}


class OldJobsApi:
    """Ray's client against a Jobs API older than entrypoint_label_selector: the head refuses
    the unknown field (its request parser's TypeError, as a 400 with the traceback)."""

    def __init__(self) -> None:
        self.submitted: list[dict[str, Any]] = []

    def submit_job(self, **kwargs: Any) -> str:
        if kwargs.get("entrypoint_label_selector"):
            raise RuntimeError("Request failed with status code 400: Traceback (most recent call last):\n  ...\n"
                               "TypeError: JobSubmitRequest.__init__() got an unexpected keyword argument 'entrypoint_label_selector'")
        self.submitted.append(kwargs)
        return kwargs["submission_id"]


def test_the_adapter_falls_back_to_the_nodes_ip_resource() -> None:
    old = OldJobsApi()
    client = RayJobsClient("http://ray:8265", monotonic=FakeClock().monotonic, client_factory=lambda _: old, threads=1)
    job = probe_job(SETTINGS, WORKER, "n")
    assert asyncio.run(client.submit_probe(job)) == "ip"
    assert old.submitted[0]["entrypoint_resources"] == {"worker_node": 0.001, "node:10.0.0.7": 0.001}
    nowhere = ProbeJob(**{**job.__dict__, "fallback_resources": None})
    with pytest.raises(RayRefused, match="cannot pin a job to a node"):
        asyncio.run(client.submit_probe(nowhere))


# ------------------------------------------------------------------------------ the CLI

ROWS = [Row(CLUSTER, Check.ray_version, Status.ok, "Ray 2.60.0"),
        Row("w1 (10.0.0.7)", Check.python3, Status.fail, "no python3 on the login shell's PATH (/usr/bin)", "put it on PATH"),
        Row("w1 (10.0.0.7)", Check.gpus, Status.warn, "none shown", "install nvidia-smi")]


def test_the_table_and_the_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert print_doctor(ROWS, "table") == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NODE", "CHECK", "STATUS", "DETAIL"]
    assert lines[2].split()[:4] == ["w1", "(10.0.0.7)", "python3", "FAIL"] and lines[3].strip() == "fix: put it on PATH"
    assert lines[-1] == "1 failed, 1 warning(s), 1 ok, 0 not checked"
    assert print_doctor(ROWS[:1] + ROWS[2:], "table") == 0  # a warning alone does not fail


def test_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert print_doctor(ROWS, "json") == 1
    out = json.loads(capsys.readouterr().out)
    assert out == rows_json(ROWS)
    assert out["ok"] is False and out["summary"] == {"ok": 1, "warn": 1, "fail": 1, "skip": 0}
    assert out["checks"][1] == {"node": "w1 (10.0.0.7)", "check": "python3", "status": "fail",
                                "detail": "no python3 on the login shell's PATH (/usr/bin)", "fix": "put it on PATH"}


@pytest.mark.parametrize("argv,words", [
    (["--timeout", "0"], "--timeout: 0: must be positive"),
    (["--root", "relative"], "must be an absolute path"),
    (["--ray-token-file", "/nonexistent/token"], "--ray-token-file: cannot read the Ray token file"),
])
def test_usage_errors_are_one_line(argv: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", *argv], prog="argus") == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_an_unreachable_cluster_fails_with_one_row(capsys: pytest.CaptureFixture[str]) -> None:
    # Nothing listens on port 9 of loopback: the CLI's real client, one row, exit 1.
    assert main(["doctor", "--ray-address", "http://127.0.0.1:9", "-o", "json"], prog="argus") == 1
    out = json.loads(capsys.readouterr().out)
    assert [c["check"] for c in out["checks"]] == ["ray-version"] and "cannot reach the Ray dashboard at http://127.0.0.1:9" in out["checks"][0]["detail"]


# ------------------------------------------------------------------------------ the operator's loop

def test_the_operators_loop_sets_the_gauge_posts_an_event_and_logs(caplog: pytest.LogCaptureFixture) -> None:

    from argus.controller.doctor import DoctorLoop
    from argus.controller.metrics import Metrics
    ray, clock, doctor = fake_world()
    metrics = Metrics(clock)
    events: list[tuple[str, str, str]] = []

    async def post(type_: str, reason: str, message: str) -> None:
        events.append((type_, reason, message))

    loop = DoctorLoop(doctor, 3600, leads=lambda: True, observe=metrics.observe_doctor, post_event=post, monotonic=clock.monotonic)
    asyncio.run(loop.run_once())
    node = "w10000000000 (10.0.0.7)"
    assert metrics.registry.get_sample_value("argus_cluster_ready", {"node": node, "check": "python3", "cluster": ""}) == 1
    assert events[-1][:2] == ("Normal", "ClusterReady") and "every check passed on 1 worker node(s)" in events[-1][2]
    ray.probe_answer = lambda probe, n: ("SUCCEEDED", REPORT_MARKER + json.dumps(report(python=None)) + "\n")
    asyncio.run(loop.run_once())
    assert metrics.registry.get_sample_value("argus_cluster_ready", {"node": node, "check": "python3", "cluster": ""}) == 0
    assert metrics.registry.get_sample_value("argus_cluster_ready", {"node": node, "check": "verl-snapshot", "cluster": ""}) is None  # not checked: absent
    assert events[-1][:2] == ("Warning", "ClusterNotReady") and f"{node} python3: no python3" in events[-1][2]
    assert any("argus doctor:" in r.message and "python3 fail" in r.message and "fix: " in r.message for r in caplog.records)


def test_with_argus_clusters_the_loop_checks_each_and_keeps_its_verdict_for_the_status() -> None:
    """Each ArgusCluster is checked with its own Doctor; its verdict is kept for its status and
    its gauge series carry its name; --ray-address is not checked while ArgusClusters exist,
    and a cluster that is gone loses its verdict and its series."""
    from argus.controller.doctor import DoctorLoop
    from argus.controller.metrics import Metrics
    from argus.core.clusters import DoctorVerdict
    _, clock, implicit = fake_world()
    good_ray, _, good = fake_world()
    bad_ray, _, bad = fake_world(lambda probe, n: ("SUCCEEDED", REPORT_MARKER + json.dumps(report(python=None)) + "\n"))
    metrics = Metrics(clock)
    verdicts: dict[str, Any] = {}
    clusters = {"gpu-a": good, "gpu-b": bad}
    events: list[tuple[str, str, str]] = []

    async def named() -> list[tuple[str, Doctor]]:
        return list(clusters.items())

    async def post(type_: str, reason: str, message: str) -> None:
        events.append((type_, reason, message))

    loop = DoctorLoop(implicit, 3600, leads=lambda: True, observe=metrics.observe_doctor, post_event=post, monotonic=clock.monotonic,
                      named=named, verdicts=verdicts, now=lambda: "2026-12-05T10:00:00Z", forget=metrics.forget_doctor)
    asyncio.run(loop.run_once())
    node = "w10000000000 (10.0.0.7)"
    assert verdicts["gpu-a"].verdict == DoctorVerdict.Passed and verdicts["gpu-a"].failed == 0
    assert verdicts["gpu-a"].checked_at == "2026-12-05T10:00:00Z"
    assert verdicts["gpu-b"].verdict == DoctorVerdict.Failed and verdicts["gpu-b"].failed == 1
    assert f"{node} python3: no python3" in verdicts["gpu-b"].message
    ready = metrics.registry.get_sample_value
    assert ready("argus_cluster_ready", {"node": node, "check": "python3", "cluster": "gpu-a"}) == 1
    assert ready("argus_cluster_ready", {"node": node, "check": "python3", "cluster": "gpu-b"}) == 0
    assert ready("argus_cluster_ready", {"node": node, "check": "python3", "cluster": ""}) is None  # --ray-address: not checked
    assert [e[1] for e in events] == ["ClusterReady", "ClusterNotReady"] and events[1][2].startswith("ArgusCluster gpu-b: 1 check(s) failed")
    assert good_ray.probes and bad_ray.probes
    del clusters["gpu-b"]  # deleted
    asyncio.run(loop.run_once())
    assert set(verdicts) == {"gpu-a"}
    assert ready("argus_cluster_ready", {"node": node, "check": "python3", "cluster": "gpu-b"}) is None
    assert ready("argus_cluster_checked_timestamp_seconds", {"cluster": "gpu-b"}) is None
    clusters.clear()  # none left: --ray-address is checked again, as before any ArgusCluster
    asyncio.run(loop.run_once())
    # Its verdict is kept too (under the implicit cluster's name, ""): the queue holds a drifted one back.
    assert set(verdicts) == {""} and verdicts[""].verdict == DoctorVerdict.Passed
    assert ready("argus_cluster_ready", {"node": node, "check": "python3", "cluster": ""}) == 1
    assert ready("argus_cluster_ready", {"node": node, "check": "python3", "cluster": "gpu-a"}) is None


def test_the_operators_loop_runs_when_it_leads_and_then_every_interval() -> None:
    from argus.controller.doctor import DoctorLoop
    ray, clock, doctor = fake_world()
    leading = {"now": False}
    runs: list[float] = []

    async def sleep(seconds: float) -> None:
        clock.advance(seconds)
        leading["now"] = clock.mono >= 1030  # takes over after 30 s
        # Two intervals after taking over, plus one look (10 s) and one run (its removal
        # checks: 3 x 2 s) of slack for where the third run falls.
        if clock.mono > 1030 + 2 * 3600 + 10 + 6 + 5:
            raise asyncio.CancelledError

    loop = DoctorLoop(doctor, 3600, leads=lambda: leading["now"], observe=lambda rows, cluster: runs.append(clock.mono), post_event=None,
                      sleep=sleep, monotonic=clock.monotonic)
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(loop.run())
    # At once on leading (it looks every 10 s; the probe's removal checks take 6 s of it), then hourly.
    assert len(runs) == 3 and 1030 <= runs[0] <= 1030 + 10 + 6
    assert all(abs(b - a - 3600) < 10 for a, b in itertools.pairwise(runs))
