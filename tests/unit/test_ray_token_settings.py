"""The Ray token setting of the operator (``--ray-token-file`` / ARGUS_RAY_TOKEN_FILE) and of
``argus logs``: where it comes from, and a file that cannot be used is one line at start,
naming the file and never showing what is in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus.cli import main as argus_main
from argus.controller.settings import operator_config
from argus.host.main import build_parser
from argus.host.main import main as operator_main
from argus.platform import platform_config

pytestmark = pytest.mark.unit


def config(argv: list[str]):  # noqa: ANN201
    args = build_parser().parse_args(argv)
    return operator_config(args, platform_config(args))


def test_the_operator_takes_the_token_file_from_the_flag_or_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = tmp_path / "token"
    token.write_text("s3cr3t-t0ken\n")
    assert config([]).ray_token_file is None
    assert config(["--ray-token-file", str(token)]).ray_token_file == str(token)
    monkeypatch.setenv("ARGUS_RAY_TOKEN_FILE", str(token))
    assert config([]).ray_token_file == str(token)


def test_argus_logs_takes_the_token_file_from_the_flag_or_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """(tests/integration/test_ray_token.py reads a token cluster's log with the flag and with
    Ray's own variables.)"""
    from argus.cli import build_parser
    token = tmp_path / "token"
    monkeypatch.delenv("ARGUS_RAY_TOKEN_FILE", raising=False)
    assert build_parser().parse_args(["logs", "t"]).ray_token_file is None
    assert build_parser().parse_args(["logs", "t", "--ray-token-file", str(token)]).ray_token_file == str(token)
    monkeypatch.setenv("ARGUS_RAY_TOKEN_FILE", str(token))
    assert build_parser().parse_args(["logs", "t"]).ray_token_file == str(token)


@pytest.mark.parametrize("content,problem", [(None, "cannot read the Ray token file"), ("", "is empty"), ("a b", "more than one word")])
def test_an_unusable_token_file_stops_the_operator_at_start(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            content: str | None, problem: str) -> None:
    token = tmp_path / "token"
    if content is not None:
        token.write_text(content)
    assert operator_main(["--ray-token-file", str(token)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("argus-operator: ") and problem in err and str(token) in err and len(err.splitlines()) == 1
    assert "a b" not in err


def test_argus_logs_says_an_unusable_token_file_before_asking_anyone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope"
    # A kubeconfig that does not exist: the token file is checked first, so it is never read.
    code = argus_main(["logs", "t", "-n", "ns", "--kubeconfig", str(tmp_path / "no-kubeconfig"), "--ray-token-file", str(missing)])
    err = capsys.readouterr().err
    assert code == 2 and err == f"argus logs: --ray-token-file: cannot read the Ray token file {missing}: No such file or directory\n"
