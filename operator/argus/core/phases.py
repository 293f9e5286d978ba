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


# The shortest time between two status reads of one job, and how a young job's reads
# spread out as it ages (every age/8 seconds).
FASTEST_POLL_SECONDS = 0.2
POLL_AGE_DIVISOR = 8


def poll_delay(age_seconds: float | None, poll_interval: float) -> float:
    """Seconds between two status reads of an active job that was admitted `age_seconds`
    ago (None: not known). A young job is read often, an eighth of its age apart: most
    failures come in a job's first seconds (a wrong argument, a missing file) and short
    jobs end then, so both show at once and a freed slot is refilled at once. From an age
    of 8 x poll_interval on, a job is read every poll_interval. The extra reads per job are
    bounded (about 8 ln(8 x poll_interval / 0.2) + 8, some 40 with the default 2 s), so Ray
    calls still grow with running jobs only."""
    if age_seconds is None:
        return poll_interval
    return min(poll_interval, max(FASTEST_POLL_SECONDS, age_seconds / POLL_AGE_DIVISOR))


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
