"""``argus cancel``, ``argus suspend``, ``argus resume``, ``argus get`` and ``argus describe`` (operator/argus/taskctl.py)
against a small local HTTP server playing the API server: the merge patch each sends, the
namespace it is sent to (-n, else --context's namespace, else the current context's, as
kubectl resolves it), its one line, and a missing task's one-line error."""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from argus import cli

pytestmark = pytest.mark.unit

BASE = "/apis/argus.io/v1alpha1/namespaces"


class ApiServer(BaseHTTPRequestHandler):
    tasks: dict[str, Any] = {}   # path -> object (or a log's text)
    patches: list[tuple[str, str, Any]] = []  # (path, content type, body)

    def _send(self, code: int, body: Any) -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()  # a str: the log API's text
        self.send_response(code)
        self.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _missing(self) -> None:
        self._send(404, {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"})

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = self.path.split("?")[0]
        if path == "/apis/argus.io/v1alpha1/argustasks":  # every namespace
            return self._send(200, {"kind": "ArgusTaskList", "items": [t for p, t in self.tasks.items() if p.startswith(BASE + "/")]})
        if path.endswith("/argustasks"):
            return self._send(200, {"kind": "ArgusTaskList", "items": [t for p, t in self.tasks.items() if p.startswith(path + "/")]})
        task = self.tasks.get(path)
        self._send(200, task) if task is not None else self._missing()

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.patches.append((self.path, "POST", body))
        self.tasks[f"{self.path}/{body['metadata']['name']}"] = body
        self._send(201, body)

    def do_PATCH(self) -> None:  # noqa: N802
        path = self.path.split("?")[0]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.patches.append((path, self.headers["Content-Type"], body))
        task = self.tasks.get(path)
        if task is None:
            return self._missing()
        task["spec"].update(body["spec"])
        self._send(200, task)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[str, type[ApiServer]]]:
    handler = type("Api", (ApiServer,), {"tasks": {}, "patches": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "one",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "one", "context": {"cluster": "c", "user": "u", "namespace": "team-one"}},
                     {"name": "two", "context": {"cluster": "c", "user": "u", "namespace": "team-two"}}]}))
    try:
        yield str(kubeconfig), handler
    finally:
        server.shutdown()
        server.server_close()


def task(handler: type[ApiServer], namespace: str, name: str, phase: str = "Running", **spec: Any) -> str:
    path = f"{BASE}/{namespace}/argustasks/{name}"
    handler.tasks[path] = {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask", "metadata": {"name": name, "namespace": namespace},
                           "spec": {"cancel": False, "suspend": False, **spec}, "status": {"phase": phase}}
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cancel_patches_spec_cancel_in_the_current_contexts_namespace(api: Any, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig, handler = api
    path = task(handler, "team-one", "ppo")
    code, out, err = run(capsys, "cancel", "ppo", "--kubeconfig", kubeconfig)
    assert (code, err) == (0, "")
    assert out == "argustask team-one/ppo cancelled (spec.cancel): its Ray job is stopped, then it shows Stopped\n"
    assert handler.patches == [(path, "application/merge-patch+json", {"spec": {"cancel": True}})]


def test_context_and_namespace_are_resolved_as_kubectl_does(api: Any, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig, handler = api
    two = task(handler, "team-two", "ppo")
    three = task(handler, "team-three", "ppo")
    assert run(capsys, "suspend", "ppo", "--kubeconfig", kubeconfig, "--context", "two")[0] == 0  # the context's namespace
    assert run(capsys, "suspend", "ppo", "--kubeconfig", kubeconfig, "--context", "two", "-n", "team-three")[0] == 0  # -n wins
    assert [p for p, _, _ in handler.patches] == [two, three]


def test_suspend_and_resume_set_spec_suspend_both_ways(api: Any, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig, handler = api
    task(handler, "team-one", "ppo")
    code, out, _ = run(capsys, "suspend", "ppo", "--kubeconfig", kubeconfig)
    assert code == 0 and out.startswith("argustask team-one/ppo suspended (spec.suspend)") and out.count("\n") == 1
    code, out, _ = run(capsys, "resume", "ppo", "--kubeconfig", kubeconfig)
    assert code == 0 and out.startswith("argustask team-one/ppo resumed: it is queued again")
    assert [body for _, _, body in handler.patches] == [{"spec": {"suspend": True}}, {"spec": {"suspend": False}}]
    code, out, _ = run(capsys, "resume", "ppo", "--kubeconfig", kubeconfig)  # not suspended: nothing sent
    assert code == 0 and out == "argustask team-one/ppo is not suspended: nothing to resume (Running)\n" and len(handler.patches) == 2


def test_a_missing_task_is_one_line(api: Any, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig, handler = api
    for verb in ("cancel", "suspend", "resume"):
        code, out, err = run(capsys, verb, "nope", "--kubeconfig", kubeconfig)
        assert (code, out) == (1, "")
        assert err == f"argus {verb}: no ArgusTask 'nope' in namespace 'team-one'\n"
    assert handler.patches == []


def test_an_ended_task_is_not_suspended_and_a_cancel_says_it_has_ended(api: Any, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig, handler = api
    task(handler, "team-one", "done", phase="Succeeded")
    code, _, err = run(capsys, "suspend", "done", "--kubeconfig", kubeconfig)
    assert code == 1 and err == ("argus suspend: argustask team-one/done has ended (Succeeded): "
                                 "only a task that has not ended can be suspended\n")
    code, out, _ = run(capsys, "cancel", "done", "--kubeconfig", kubeconfig)
    assert code == 0 and out == "argustask team-one/done has already ended (Succeeded): nothing to cancel\n"
    assert handler.patches == []


def test_describe_shows_the_attempts_conditions_and_the_log_tail(api: Any, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig, handler = api
    path = task(handler, "team-one", "ppo", workload="ppo", kind="advanced", nnodes=1, nGpusPerNode=2, suspend=True)
    handler.tasks[path]["status"] = {
        "phase": "Queued", "reason": "Resumed", "message": "resumed (spec.suspend is false): attempt 2 waits in the queue", "user": "alice",
        "progress": {"summary": "40/300", "step": 40, "resumedFromStep": 30},
        "jobDir": {"userPath": "$HOME/jobs/team-one-ppo-1a2b3c4d"},
        "attempts": [{"attempt": 1, "submissionId": "argus-ppo-1", "startTime": "2026-12-06T08:00:00Z", "endTime": "2026-12-06T08:10:00Z",
                      "outcome": "Suspended", "lastStep": 40}],
        "conditions": [{"type": "Suspended", "status": "False", "reason": "Resumed", "message": "m", "lastTransitionTime": "2026-12-06T08:11:00Z"}]}
    handler.tasks["/apis/logs.argus.io/v1alpha1/namespaces/team-one/argustasks/ppo/log"] = "step:40 - loss:0.1\n"
    code, out, err = run(capsys, "describe", "ppo", "--kubeconfig", kubeconfig)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:2] == ["Name:        team-one/ppo", "Phase:       Queued (Resumed)"]
    assert "Task:        ppo, advanced, 1 node(s) x 2 GPU(s), priority 0, suspend" in lines
    assert "Progress:    40/300, resumed from step 30" in lines
    assert any(line.split() == ["1", "argus-ppo-1", "2026-12-06T08:00:00Z", "2026-12-06T08:10:00Z", "Suspended", "40"] for line in lines)
    assert any(line.split()[:3] == ["Suspended", "False", "Resumed"] for line in lines)
    assert lines[-2:] == ["Log (last 10 lines):", "  step:40 - loss:0.1"]


def test_describe_without_the_log_api_says_so_in_one_line(api: Any, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig, handler = api
    path = task(handler, "team-one", "ppo")
    handler.tasks[path]["status"]["attempts"] = [{"attempt": 1, "submissionId": "argus-ppo-1"}]
    code, out, _ = run(capsys, "describe", "ppo", "--kubeconfig", kubeconfig)
    assert code == 0 and out.splitlines()[-1] == "Log:         not served by the log API here (argus logs ppo says why)"
    code, _, err = run(capsys, "describe", "nope", "--kubeconfig", kubeconfig)
    assert (code, err) == (1, "argus describe: no ArgusTask 'nope' in namespace 'team-one'\n")


def test_rerun_creates_task_rerun_n_with_the_changes(api: Any, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig, handler = api
    task(handler, "team-two", "ppo", kind="basic", workload="grpo", nnodes=1, nGpusPerNode=1, modelId="m", cancel=True)
    task(handler, "team-two", "ppo-rerun-1")
    code, out, err = run(capsys, "rerun", "ppo", "--set", "learningRate=1e-6", "--set", "trainer.save_freq=5",
                         "--kubeconfig", kubeconfig, "--context", "two")
    assert (code, err) == (0, "")
    assert out == "argustask team-two/ppo-rerun-2 created from ppo (learningRate=1e-6, trainer.save_freq=5)\n"
    (path, method, body), = handler.patches
    assert (path, method) == (f"{BASE}/team-two/argustasks", "POST")
    assert body["metadata"] == {"name": "ppo-rerun-2", "namespace": "team-two", "annotations": {"argus.io/rerun-of": "ppo"}}
    assert body["spec"]["learningRate"] == 1e-6 and body["spec"]["overrides"] == ["trainer.save_freq=5"] and "cancel" not in body["spec"]
    code, out, _ = run(capsys, "rerun", "ppo", "--dry-run", "--kubeconfig", kubeconfig, "--context", "two")
    assert code == 0 and "name: ppo-rerun-3" in out and len(handler.patches) == 1
    code, _, err = run(capsys, "rerun", "ppo", "--set", "suspend=true", "--kubeconfig", kubeconfig, "--context", "two")
    assert code == 1 and err.startswith("argus rerun: --set suspend: a rerun starts afresh")


def _aged(handler: type[ApiServer], path: str, seconds: int, **status: Any) -> None:
    created = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=seconds)
    handler.tasks[path]["metadata"]["creationTimestamp"] = created.strftime("%Y-%m-%dT%H:%M:%SZ")
    handler.tasks[path]["status"] = status


def test_get_lists_the_namespaces_tasks_with_phase_reason_progress_place_and_age(api: Any, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig, handler = api
    _aged(handler, task(handler, "team-one", "ppo"), 7200, phase="Running", reason="RayJobRunning",
          progress={"step": 40, "totalSteps": 300, "summary": "40/300"})
    _aged(handler, task(handler, "team-one", "grpo"), 600, phase="Queued", reason="WaitingForGpus")
    handler.tasks[task(handler, "team-one", "sft")]["status"] = {}  # not seen by the operator yet, no creation time
    task(handler, "team-two", "elsewhere")
    handler.tasks["/apis/logs.argus.io/v1alpha1/namespaces/team-one/pendingtasks"] = {
        "kind": "PendingTaskList", "items": [{"metadata": {"namespace": "team-one", "name": "grpo"}, "position": 3}]}
    code, out, err = run(capsys, "get", "--kubeconfig", kubeconfig)
    assert (code, err) == (0, "")
    assert [line.split() for line in out.splitlines()] == [
        ["NAME", "PHASE", "REASON", "PROGRESS", "PLACE", "AGE"],
        ["grpo", "Queued", "WaitingForGpus", "-", "3", "10m"],
        ["ppo", "Running", "RayJobRunning", "40/300", "-", "2h"],
        ["sft", "New", "-", "-", "-", "?"]]
    assert out.splitlines()[0].index("PHASE") == out.splitlines()[1].index("Queued")  # aligned columns
    code, out, _ = run(capsys, "get", "ppo", "--kubeconfig", kubeconfig)  # one task
    assert code == 0 and [line.split()[:4] for line in out.splitlines()] == [["NAME", "PHASE", "REASON", "PROGRESS"],
                                                                            ["ppo", "Running", "RayJobRunning", "40/300"]]


def test_get_follows_kubectls_namespace_rules_and_minus_a_adds_a_namespace_column(api: Any, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig, handler = api
    task(handler, "team-one", "a")
    task(handler, "team-two", "b", phase="Succeeded")
    code, out, _ = run(capsys, "get", "--kubeconfig", kubeconfig, "--context", "two")  # the context's namespace
    assert code == 0 and [line.split()[:2] for line in out.splitlines()] == [["NAME", "PHASE"], ["b", "Succeeded"]]
    code, out, _ = run(capsys, "get", "--kubeconfig", kubeconfig, "--context", "two", "-n", "team-one")  # -n wins
    assert [line.split()[:2] for line in out.splitlines()][1:] == [["a", "Running"]]
    code, out, _ = run(capsys, "get", "-A", "--kubeconfig", kubeconfig)
    assert code == 0 and [line.split()[:3] for line in out.splitlines()] == [
        ["NAMESPACE", "NAME", "PHASE"], ["team-one", "a", "Running"], ["team-two", "b", "Succeeded"]]


def test_get_without_the_log_api_shows_no_place_and_says_why(api: Any, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig, handler = api
    task(handler, "team-one", "waiting", phase="Queued")
    code, out, err = run(capsys, "get", "--kubeconfig", kubeconfig)
    assert code == 0 and out.splitlines()[1].split()[:5] == ["waiting", "Queued", "-", "-", "?"]
    assert "logs.argus.io, which this cluster does not serve" in err and err.count("\n") == 1
    code, out, err = run(capsys, "get", "nope", "--kubeconfig", kubeconfig)
    assert (code, out, err) == (1, "", "argus get: no ArgusTask 'nope' in namespace 'team-one'\n")
    code, out, err = run(capsys, "get", "--kubeconfig", kubeconfig, "-n", "empty")
    assert (code, out, err) == (0, "", "No ArgusTasks found in namespace empty.\n")
    code, _, err = run(capsys, "get", "x", "-A", "--kubeconfig", kubeconfig)
    assert code == 1 and "do not go together" in err
