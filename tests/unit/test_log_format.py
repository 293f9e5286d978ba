"""--log-format and --log-level (argus.host.logs): one JSON object per line with time, level,
logger, message and the task where the call names one; text lines otherwise; the flags'
ARGUS_* defaults, and a bad one said in one line."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator

import pytest

from argus.core.vocabulary import task_log
from argus.host.logs import JsonLines, TextLines, configure_logging
from argus.host.main import build_parser
from argus.host.main import main as operator_main

pytestmark = pytest.mark.unit


def record(message: str, *args: object, level: int = logging.INFO, **extra: str) -> logging.LogRecord:
    logger = logging.getLogger("argus.controller.reconcile")
    return logger.makeRecord(logger.name, level, __file__, 1, message, args, None, extra=extra or None)


def test_a_json_line_has_time_level_logger_message_and_the_task() -> None:
    line = json.loads(JsonLines().format(record("submitted %s/%s as Ray job %s", "team", "t1", "argus-x", **task_log("team", "t1"))))
    assert set(line) == {"time", "level", "logger", "message", "task"}
    assert line["level"] == "info" and line["logger"] == "argus.controller.reconcile"
    assert line["message"] == "submitted team/t1 as Ray job argus-x"
    assert line["task"] == "team/t1"
    assert line["time"].endswith("Z") and "T" in line["time"]


def test_a_line_about_no_task_has_no_task_field_and_a_traceback_stays_in_the_line() -> None:
    assert "task" not in json.loads(JsonLines().format(record("listed %d ArgusTasks", 3)))
    try:
        raise ValueError("boom")
    except ValueError:
        rec = logging.getLogger("argus").makeRecord("argus", logging.ERROR, __file__, 1, "tick failed", (), sys.exc_info())
    text = JsonLines().format(rec)
    assert "\n" not in text  # one line per record, whatever the traceback
    line = json.loads(text)
    assert line["level"] == "error" and "ValueError: boom" in line["exc_info"]


def test_text_lines_name_the_task_only_when_the_message_does_not() -> None:
    fmt = TextLines("%(levelname)s %(name)s: %(message)s")
    assert fmt.format(record("released %s/%s", "team", "t1", **task_log("team", "t1"))) == "INFO argus.controller.reconcile: released team/t1"
    assert fmt.format(record("could not stop it", **task_log("team", "t1"))).endswith("could not stop it [task team/t1]")


@pytest.fixture
def root_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_configure_logging_sets_the_root_level_and_format(root_logging: None, monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    configure_logging("warning", "json")
    logging.getLogger("argus.x").info("not shown")
    logging.getLogger("argus.x").warning("shown %d", 1, extra=task_log("team", "t1"))
    (line,) = [json.loads(x) for x in out.getvalue().splitlines()]
    assert line["message"] == "shown 1" and line["level"] == "warning" and line["task"] == "team/t1"


def test_flags_default_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    args = build_parser().parse_args([])
    assert (args.log_format, args.log_level) == ("text", "info")
    monkeypatch.setenv("ARGUS_LOG_FORMAT", "json")
    monkeypatch.setenv("ARGUS_LOG_LEVEL", "debug")
    args = build_parser().parse_args([])
    assert (args.log_format, args.log_level) == ("json", "debug")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--log-format", "yaml"])


def test_a_bad_environment_default_is_one_line_naming_the_variable(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ARGUS_LOG_LEVEL", "loud")
    with pytest.raises(SystemExit) as exc:
        operator_main([])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--log-level: 'loud': must be one of debug, info, warning, error (env ARGUS_LOG_LEVEL)" in err


def test_no_kubeconfig_and_no_pod_stops_the_operator_in_one_line(tmp_path, capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))  # main points it at --kubeconfig; monkeypatch restores it
    missing = tmp_path / "no-kubeconfig"
    assert operator_main(["--kubeconfig", str(missing)]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if " INFO " not in line]  # the start-up's own info lines aside
    assert len(errors) == 1 and errors[0].startswith("argus-operator: cannot use kubeconfig") and str(missing) in errors[0], err
    assert "Traceback" not in err
