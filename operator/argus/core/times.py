"""Timestamps as the Kubernetes API writes them and Ray reports them: RFC 3339 (UTC, whole
seconds, ``Z``) and milliseconds since the epoch. One place, so that the status, the
lifecycle and the metrics read and write times the same way.
"""

from __future__ import annotations

import datetime as dt

UTC = dt.UTC


def format_time(t: dt.datetime) -> str:
    """``2026-12-03T08:00:00Z`` (metav1.Time's wire form: whole seconds)."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> dt.datetime | None:
    """An RFC 3339 timestamp as a UTC datetime; None for empty or unreadable text (a status
    written by hand must not crash the operator)."""
    if not text:
        return None
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def from_epoch_ms(ms: int | float | None) -> str | None:
    """Ray's job start/end time (epoch milliseconds; 0 or None when not set) as RFC 3339."""
    if not ms:
        return None
    return format_time(dt.datetime.fromtimestamp(ms / 1000, UTC))

