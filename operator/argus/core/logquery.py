"""The log API's query, parsed and checked as ``kubectl logs`` checks a pod log's:
``GET .../argustasks/NAME/log?follow=&tailLines=&attempt=&sinceSeconds=``; a mistake is one
line naming the parameter, its value and the rule. Pure: the HTTP server (servers/logapi/server.py) and the CLI
use it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .jobscript import attempt_log_name

PARAMETERS = ("follow", "tailLines", "attempt", "sinceSeconds")
MAX_TAIL_LINES = 1_000_000
MAX_SINCE_SECONDS = 10 * 365 * 24 * 3600


class LogQueryError(ValueError):
    """A query the API refuses (HTTP 400): one line naming the parameter, value and rule."""


@dataclass(frozen=True)
class LogQuery:
    follow: bool = False
    tail_lines: int | None = None      # only the last N lines (0: none of the past, with follow only what comes)
    attempt: int | None = None         # None: the task's current attempt
    since_seconds: int | None = None   # only lines that arrived in the last S seconds

    def params(self) -> dict[str, str]:
        """The query string's parameters for this query (the CLI sends these)."""
        out: dict[str, str] = {}
        if self.follow:
            out["follow"] = "true"
        if self.tail_lines is not None:
            out["tailLines"] = str(self.tail_lines)
        if self.attempt is not None:
            out["attempt"] = str(self.attempt)
        if self.since_seconds is not None:
            out["sinceSeconds"] = str(self.since_seconds)
        return out


def _bool(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("", "true", "1"):
        return True
    if v in ("false", "0"):
        return False
    raise LogQueryError(f"{name}: {value!r}: must be true or false")


def _int(name: str, value: str, low: int, high: int, rule: str) -> int:
    text = value.strip()
    if not text or not (text.isdigit() or (text[0] in "+-" and text[1:].isdigit())):
        raise LogQueryError(f"{name}: {value!r}: must be {rule}")
    number = int(text)
    if number < low or number > high:
        raise LogQueryError(f"{name}: {value!r}: must be {rule}")
    return number


def parse_log_query(items: Iterable[tuple[str, str]] | Mapping[str, str]) -> LogQuery:
    """The query from its (name, value) pairs; raises LogQueryError on the first mistake.
    Unknown and repeated parameters are mistakes too (a misspelt ``tail=5`` must not
    silently print the whole log)."""
    pairs = list(items.items()) if isinstance(items, Mapping) else list(items)
    seen: dict[str, str] = {}
    for name, value in pairs:
        if name not in PARAMETERS:
            raise LogQueryError(f"{name}: {value!r}: unknown parameter; allowed: {', '.join(PARAMETERS)}")
        if name in seen:
            raise LogQueryError(f"{name}: {value!r}: given more than once")
        seen[name] = value
    return LogQuery(
        follow=_bool("follow", seen["follow"]) if "follow" in seen else False,
        tail_lines=_int("tailLines", seen["tailLines"], 0, MAX_TAIL_LINES, f"a whole number from 0 to {MAX_TAIL_LINES}")
        if "tailLines" in seen else None,
        attempt=_int("attempt", seen["attempt"], 1, 10_000, "a whole number, 1 or more") if "attempt" in seen else None,
        since_seconds=_int("sinceSeconds", seen["sinceSeconds"], 1, MAX_SINCE_SECONDS, "a whole number of seconds, 1 or more")
        if "sinceSeconds" in seen else None,
    )


def tail_text(text: str, lines: int | None) -> str:
    """The last ``lines`` lines of ``text`` (all of it for None; a last line without its
    newline counts as a line)."""
    if lines is None:
        return text
    if lines == 0:
        return ""
    parts = text.splitlines(keepends=True)
    return "".join(parts[-lines:])


@dataclass(frozen=True)
class AttemptLog:
    """Where an attempt's log is: its Ray submission id and its file in the job folder."""

    attempt: int
    submission_id: str | None
    user_path: str | None   # as the user sees it: $HOME/jobs/.../attempt-N.log
    job_path: str | None    # as the job (and a reader of the shared tree) sees it
    current: bool


def attempt_log(status: Mapping[str, object], wanted: int | None) -> AttemptLog:
    """The attempt's log location from a task's status; LogQueryError for an attempt the
    task has not had."""
    current = int(status.get("attempt") or 1)  # type: ignore[call-overload]
    attempt = wanted or current
    if attempt > current:
        raise LogQueryError(f"attempt: '{attempt}': the task has had {current} attempt(s)")
    sid: str | None = None
    for record in status.get("attempts") or []:  # type: ignore[attr-defined]
        if isinstance(record, Mapping) and record.get("attempt") == attempt:
            sid = record.get("submissionId")
    if sid is None and attempt == current:
        sid = (status.get("rayJob") or {}).get("submissionId")  # type: ignore[attr-defined]
    job_dir = status.get("jobDir") or {}
    user_path = job_path = None
    if isinstance(job_dir, Mapping) and job_dir.get("jobPath"):
        name = attempt_log_name(attempt)
        job_path = f"{job_dir['jobPath']}/{name}"
        user_path = f"{job_dir.get('userPath') or job_dir['jobPath']}/{name}"
    return AttemptLog(attempt, sid, user_path, job_path, attempt == current)


# Why a log is not read from Ray, said alike by the log API and ``argus logs --direct-ray``.
def removed_from_history(submission_id: str) -> str:
    return f"Ray's job history no longer holds {submission_id} (removed after the task ended)"


def forgotten_by_ray(submission_id: str) -> str:
    return f"Ray no longer has job {submission_id} (the head restarted, or the job left its history)"


def where_the_file_is(why: str, where: AttemptLog) -> str:
    """One line: why Ray's copy cannot be read, and where the attempt's log file is."""
    if where.job_path is None:
        return f"{why}; the task's status names no job folder"
    return f"{why}; the log is in the job folder: {where.user_path} (on the workers: {where.job_path})"
