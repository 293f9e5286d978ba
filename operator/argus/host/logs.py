"""How the process logs (``--log-format``, ``--log-level``): text lines for people, or one
JSON object per line for a log pipeline (Loki, Elasticsearch, Cloud Logging) with the fields
``time`` (RFC 3339, UTC), ``level``, ``logger``, ``message`` and, where the log call names
one task (``extra=core.vocabulary.task_log(namespace, name)``), ``task`` as
``namespace/name``; a traceback goes to ``exc_info``. Set up once by the entry point, before
kopf starts (kopf's own loggers write through the same root handler).

The formatter is the standard library's ``json`` over a ``logging.Formatter``: a dozen lines,
and no dependency for the image to carry.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys

from ..core.vocabulary import LOG_TASK_FIELD

FORMATS = ("text", "json")
LEVELS = ("debug", "info", "warning", "error")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        task = getattr(record, LOG_TASK_FIELD, None)
        if task:
            line[LOG_TASK_FIELD] = task
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


class TextLines(logging.Formatter):
    """The text format, with the task appended as ``[task ns/name]`` where the call names one."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        task = getattr(record, LOG_TASK_FIELD, None)
        return f"{text} [task {task}]" if task and task not in record.getMessage() else text


def configure_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines() if fmt == "json" else TextLines(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
