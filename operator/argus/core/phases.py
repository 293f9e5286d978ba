"""From what Ray says to what ``.status`` says: the phase mapping and the conditions.

Pure functions over plain dicts, so the operator's status writes are computed here and
tested without a cluster.
"""

from __future__ import annotations

from typing import Any

from .spec import Phase

RAY_TO_PHASE = {
    "PENDING": Phase.Submitted,
    "RUNNING": Phase.Running,
    "SUCCEEDED": Phase.Succeeded,
    "FAILED": Phase.Failed,
    "STOPPED": Phase.Stopped,
}
ACTIVE_PHASES = (Phase.Submitted.value, Phase.Running.value)
TERMINAL_PHASES = tuple(p.value for p in Phase if p.terminal)


# How often active jobs' statuses are read: a young job often, an old one every poll
# interval; the fast reads of all jobs together stay within a budget per second.
FASTEST_POLL_SECONDS = 0.2
POLL_AGE_DIVISOR = 16
YOUNG_READS_PER_SECOND = 20.0


def poll_delay(age_seconds: float | None, poll_interval: float, active: int = 1) -> float:
    """Seconds between two status reads of an active job admitted `age_seconds` ago (None:
    not known), with `active` jobs active in all. A young job is read often (every age/16 s,
    0.2 s at first): most failures come in a job's first seconds (a wrong argument, a
    missing file) and short jobs end then, so both show at once and a freed slot is
    refilled at once. The reads of all active jobs together stay near
    YOUNG_READS_PER_SECOND (with 40 or more jobs, everything is read every poll interval), and
    no job is read less often than every poll interval: Ray calls grow with running jobs
    only, never beyond max(20/s, active / poll_interval)."""
    if age_seconds is None:
        return poll_interval
    floor = max(FASTEST_POLL_SECONDS, active / YOUNG_READS_PER_SECOND)
    return min(poll_interval, max(floor, age_seconds / POLL_AGE_DIVISOR))


def phase_for_ray(ray_status: str, *, cancelled: bool, deadline_exceeded: bool) -> tuple[Phase, str]:
    """The phase and reason for a Ray job status; a stop we asked for names its cause."""
    phase = RAY_TO_PHASE.get(ray_status.upper(), Phase.Submitted)
    if phase is Phase.Stopped or (phase is Phase.Failed and (cancelled or deadline_exceeded)):
        if deadline_exceeded:
            return Phase.Failed, "DeadlineExceeded"
        if cancelled:
            return Phase.Stopped, "Cancelled"
        return Phase.Stopped, "RayJobStopped"
    return phase, {
        Phase.Submitted: "RayJobPending",
        Phase.Running: "RayJobRunning",
        Phase.Succeeded: "RayJobSucceeded",
        Phase.Failed: "RayJobFailed",
    }[phase]


def set_condition(
    conditions: list[dict[str, Any]] | None,
    type_: str,
    status: bool | str,
    reason: str,
    message: str,
    *,
    now: str,
    generation: int | None,
) -> list[dict[str, Any]]:
    """Conditions with ``type_`` set; lastTransitionTime moves only when status changes."""
    value = status if isinstance(status, str) else ("True" if status else "False")
    out = [dict(c) for c in (conditions or [])]
    for c in out:
        if c.get("type") == type_:
            if c.get("status") != value:
                c["lastTransitionTime"] = now
            c.update(status=value, reason=reason, message=message[:32768])
            if generation is not None:
                c["observedGeneration"] = generation
            return out
    new = {"type": type_, "status": value, "reason": reason, "message": message[:32768], "lastTransitionTime": now}
    if generation is not None:
        new["observedGeneration"] = generation
    out.append(new)
    return out


def conditions_for_phase(
    conditions: list[dict[str, Any]] | None, phase: Phase, reason: str, message: str, *, now: str, generation: int | None
) -> list[dict[str, Any]]:
    """Admitted / Running / Complete / Failed as the phase implies."""
    c = conditions
    kw = {"now": now, "generation": generation}
    admitted = phase not in (Phase.Queued, Phase.Rejected)
    c = set_condition(c, "Admitted", admitted, "Admitted" if admitted else reason, message if not admitted else "admitted by the queue", **kw)
    c = set_condition(c, "Running", phase is Phase.Running, reason, message, **kw)
    c = set_condition(c, "Complete", phase is Phase.Succeeded, reason, message, **kw)
    c = set_condition(c, "Failed", phase in (Phase.Failed, Phase.Rejected), reason, message, **kw)
    return c


def status_delta(current: dict[str, Any], desired: dict[str, Any]) -> dict[str, Any]:
    """The part of ``desired`` that differs from ``current`` (a merge patch); empty when
    nothing changed, so the operator writes nothing. Nested dicts are diffed one level."""
    delta: dict[str, Any] = {}
    for key, value in desired.items():
        old = current.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            sub = {k: v for k, v in value.items() if old.get(k) != v}
            if sub:
                delta[key] = sub
        elif old != value:
            delta[key] = value
    return delta
