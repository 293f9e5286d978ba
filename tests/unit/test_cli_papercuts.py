"""Regression tests of the CLI's papercuts: ``--context`` takes the context's namespace as
kubectl does; an API server that cannot be reached is one line and a non-zero exit from every
cluster command, never a traceback; ``argus doctor`` without Ray says Ray is missing (not the
address); ``argus validate`` never takes this machine's login as the user."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from argus import cli, clusterctl

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def closed_port() -> int:
    """A loopback port nothing listens on (bound by us, then closed: connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kubeconfig(tmp_path: Path, server: str = "https://127.0.0.1:1") -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "one",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "one", "context": {"cluster": "c", "user": "u", "namespace": "team-one"}},
                     {"name": "two", "context": {"cluster": "c", "user": "u", "namespace": "team-two"}},
                     {"name": "bare", "context": {"cluster": "c", "user": "u"}}]}))
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- --context and the namespace ----------------------------------------------------------

def test_context_namespace_is_the_contexts_own(tmp_path: Path) -> None:
    config = str(kubeconfig(tmp_path))
    assert clusterctl.current_namespace(config, None) == "team-one"  # the current context's
    assert clusterctl.current_namespace(config, "two") == "team-two"  # --context's, as kubectl (it was "default")
    assert clusterctl.current_namespace(config, "bare") == "default"
    assert clusterctl.current_namespace(str(tmp_path / "missing"), "two") == "default"


def test_logs_with_context_asks_the_contexts_namespace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = str(kubeconfig(tmp_path, f"https://127.0.0.1:{closed_port()}"))
    seen: list[str] = []
    from argus import logsctl
    original = logsctl._logs_via_api

    def spy(args: Any, namespace: str) -> int:
        seen.append(namespace)
        return int(original(args, namespace))
    mp = pytest.MonkeyPatch()
    mp.setattr(logsctl, "_logs_via_api", spy)
    try:
        run(capsys, "logs", "t", "--kubeconfig", config, "--context", "two")
        run(capsys, "logs", "t", "--kubeconfig", config, "--context", "two", "-n", "mine")
    finally:
        mp.undo()
    assert seen == ["team-two", "mine"]


# --- an API server that cannot be reached -------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["queue"], ["queue", "-n", "alice"], ["logs", "t"], ["onboard", "bob"], ["doctor", "--cluster", "gpu"],
    ["validate", "-f", str(REPO / "examples" / "grpo-basic.yaml")],
], ids=lambda a: " ".join(a[:2]))
def test_unreachable_api_server_is_one_line(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARGUS_USER", raising=False)
    port = closed_port()
    code, out, err = run(capsys, *argv, "--kubeconfig", str(kubeconfig(tmp_path, f"https://127.0.0.1:{port}")))
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert f"cannot reach the Kubernetes API server at https://127.0.0.1:{port}" in err and "Connection refused" in err
    assert err.startswith(f"argus {argv[0]}: ")
    assert code == (2 if argv[0] == "validate" else 1) and out == ""


def test_unexpected_api_refusal_is_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from kubernetes.client.exceptions import ApiException

    def refuse(args: Any) -> int:
        exc = ApiException(status=500, reason="Internal Server Error")
        exc.body = '{"message": "etcdserver: request timed out"}'
        raise exc
    monkeypatch.setattr(clusterctl, "cmd_queue", refuse)
    parser_func = cli.build_parser
    monkeypatch.setattr(cli, "build_parser", lambda prog="argus": _with_func(parser_func(prog), "queue", refuse))
    code, _, err = run(capsys, "queue")
    assert code == 1 and err == "argus queue: the Kubernetes API server refused: etcdserver: request timed out\n"


def _with_func(parser: Any, command: str, func: Any) -> Any:
    sub = next(a for a in parser._actions if a.dest == "command")
    sub.choices[command].set_defaults(func=func)
    return parser


def test_other_errors_still_raise(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    parser_func = cli.build_parser

    def boom(args: Any) -> int:
        raise RuntimeError("a bug")
    monkeypatch.setattr(cli, "build_parser", lambda prog="argus": _with_func(parser_func(prog), "queue", boom))
    with pytest.raises(RuntimeError):
        cli.main(["queue"])


# --- doctor without Ray -------------------------------------------------------------------

def test_doctor_without_ray_says_ray_is_missing(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray.job_submission", None)  # import ray.job_submission now fails
    code, out, err = run(capsys, "doctor", "--ray-address", "http://127.0.0.1:1")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("argus doctor: Ray's client is not installed here") and "pip install 'ray>=2.41'" in err
    assert "--ray-address" not in err and "reach" not in err


def test_logs_direct_ray_without_ray_says_ray_is_missing(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    task = {"status": {"phase": "Running", "attempt": 1, "rayJob": {"submissionId": "argus-a-t-1234abcd", "dashboardUrl": "http://ray:8265"},
                       "attempts": [{"attempt": 1, "submissionId": "argus-a-t-1234abcd"}]}}
    from argus import logsctl
    monkeypatch.setattr(logsctl, "get_task", lambda *a: task)
    monkeypatch.setitem(sys.modules, "ray.job_submission", None)
    code, _, err = run(capsys, "logs", "t", "-n", "a", "--direct-ray")
    assert code == 1 and "Ray's client is not installed here" in err and err.count("\n") == 1


# --- validate's user ----------------------------------------------------------------------

def test_validate_never_defaults_to_the_login(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARGUS_USER", raising=False)
    code, out, err = run(capsys, "validate", "-f", str(REPO / "examples" / "grpo-basic.yaml"),
                         "--kubeconfig", str(tmp_path / "no-such-kubeconfig"))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("argus validate: --user is required here: ") and "pass --user USER or set ARGUS_USER" in err


class FakeCore:
    def __init__(self, labels: dict[str, dict[str, str]]) -> None:
        self.labels, self.read = labels, []

    def read_namespace(self, name: str, _request_timeout: float) -> Any:
        from kubernetes.client.exceptions import ApiException
        self.read.append(name)
        if name not in self.labels:
            exc = ApiException(status=404, reason="Not Found")
            exc.body = f'{{"message": "namespaces \\"{name}\\" not found"}}'
            raise exc
        return SimpleNamespace(metadata=SimpleNamespace(labels=self.labels[name]))


def test_validate_takes_the_user_from_the_namespace_label(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARGUS_USER", raising=False)
    core = FakeCore({"team-two": {"argus.io/user": "alice"}, "lab": {"argus.io/user": "bob"}, "plain": {}})
    monkeypatch.setattr(clusterctl, "load_kube", lambda kubeconfig, context: SimpleNamespace(CoreV1Api=lambda: core))
    config = str(kubeconfig(tmp_path))
    task = str(REPO / "examples" / "grpo-basic.yaml")
    code, out, err = run(capsys, "validate", "-f", task, "--kubeconfig", config, "--context", "two", "-o", "json")
    assert code == 0 and "/private/users/alice/" in out
    assert err == "argus validate: user alice: the argus.io/user label of namespace team-two\n"
    code, out, _ = run(capsys, "validate", "-f", task, "--kubeconfig", config, "-n", "lab", "-o", "json")
    assert code == 0 and "/private/users/bob/" in out
    code, _, err = run(capsys, "validate", "-f", task, "--kubeconfig", config, "-n", "plain")
    assert code == 2 and "namespace plain has no argus.io/user label" in err
    code, _, err = run(capsys, "validate", "-f", task, "--kubeconfig", config, "-n", "nope")
    assert code == 2 and 'namespaces "nope" not found' in err
    assert core.read == ["team-two", "lab", "plain", "nope"]
    # --user and $ARGUS_USER are taken as they are: no cluster is asked.
    run(capsys, "validate", "-f", task, "--kubeconfig", config, "--user", "carol")
    monkeypatch.setenv("ARGUS_USER", "dave")
    run(capsys, "validate", "-f", task, "--kubeconfig", config)
    assert core.read == ["team-two", "lab", "plain", "nope"]
