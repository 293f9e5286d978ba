"""``argus logs`` against a cluster that does not serve logs.argus.io: a small local HTTP
server plays the API server (Go's plain ``404 page not found`` for a group nobody serves, as
kube-apiserver answers), and the CLI says in one line that the log API is not served, how an
admin turns it on, and where the task's log file is; the log API's own 404 is printed as is."""

from __future__ import annotations

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

LOG_PATH = "/apis/logs.argus.io/v1alpha1/namespaces/team-a/argustasks/ppo/log"
TASK_PATH = "/apis/argus.io/v1alpha1/namespaces/team-a/argustasks/ppo"
TASK = {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask", "metadata": {"name": "ppo", "namespace": "team-a"},
        "status": {"phase": "Running", "attempt": 1, "rayJob": {"submissionId": "argus-ppo-1"},
                   "jobDir": {"userPath": "$HOME/jobs/team-a-ppo-1a2b3c4d", "jobPath": "/private/users/alice/jobs/team-a-ppo-1a2b3c4d"}}}


class ApiServer(BaseHTTPRequestHandler):
    routes: dict[str, tuple[int, str, bytes]] = {}

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        code, kind, body = self.routes.get(self.path.split("?")[0], (404, "text/plain; charset=utf-8", b"404 page not found\n"))
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def api_server(tmp_path: Path) -> Iterator[tuple[str, dict[str, tuple[int, str, bytes]]]]:
    routes: dict[str, tuple[int, str, bytes]] = {}
    handler = type("Routes", (ApiServer,), {"routes": routes})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "users": [{"name": "alice", "user": {"token": "alice-token"}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "alice", "namespace": "team-a"}}]}))
    try:
        yield str(kubeconfig), routes
    finally:
        server.shutdown()
        server.server_close()


def logs(capsys: pytest.CaptureFixture[str], kubeconfig: str) -> tuple[int, str, str]:
    code = cli.main(["logs", "ppo", "--kubeconfig", kubeconfig])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_cluster_without_the_log_api_is_said_in_one_line(api_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig, routes = api_server
    routes[TASK_PATH] = (200, "application/json", json.dumps(TASK).encode())
    code, out, err = logs(capsys, kubeconfig)
    assert code == 1 and out == ""
    assert err == ("argus logs: this cluster does not serve the log API logs.argus.io/v1alpha1: an admin turns it on with the "
                   "Argus chart's value logsApi.enabled=true (helm upgrade ... --set logsApi.enabled=true; docs/logs.md); "
                   "meanwhile the log is in the job folder: $HOME/jobs/team-a-ppo-1a2b3c4d/attempt-1.log\n")


def test_without_the_task_the_line_still_says_how_to_enable_it(api_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig, routes = api_server
    routes[TASK_PATH] = (404, "application/json", json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404,
                                                             "reason": "NotFound", "message": 'argustasks.argus.io "ppo" not found'}).encode())
    code, _, err = logs(capsys, kubeconfig)
    assert code == 1 and len(err.splitlines()) == 1
    assert "does not serve the log API logs.argus.io/v1alpha1" in err and err.rstrip().endswith("--set logsApi.enabled=true; docs/logs.md)")
    assert "404 page not found" not in err


def test_the_log_apis_own_not_found_is_printed_as_is(api_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig, routes = api_server
    routes[LOG_PATH] = (404, "application/json", json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404,
                                                            "reason": "NotFound", "message": 'argustasks.argus.io "ppo" not found'}).encode())
    code, _, err = logs(capsys, kubeconfig)
    assert (code, err) == (1, 'argus logs: argustasks.argus.io "ppo" not found\n')


def test_the_log_is_printed_when_served(api_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig, routes = api_server
    routes[LOG_PATH] = (200, "text/plain; charset=utf-8", "step 1\nstep 2 ✓\n".encode())
    code, out, err = logs(capsys, kubeconfig)
    assert (code, out, err) == (0, "step 1\nstep 2 ✓\n", "")
