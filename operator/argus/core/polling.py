"""When the operator reads a Ray job's status: a young job often, an old one every poll
interval, and all fast reads together within a budget per second. Pure: the controller's
job sync asks ``poll_delay`` for each task it follows. Also how long a watch of the tasks
may stay silent (``read_slack``)."""

from __future__ import annotations

# How often active jobs' statuses are read: a young job often, an old one every poll
# interval; the fast reads of all jobs together stay within a budget per second.
FASTEST_POLL_SECONDS = 0.2
POLL_AGE_DIVISOR = 16
YOUNG_READS_PER_SECOND = 20.0
# A job whose log says it ended (its stream closed, its exit marker appeared) is read at once,
# and then every ENDING_READ_SECONDS until Ray says it ended too (the exit marker appears a few
# milliseconds before Ray's job supervisor notices: it looks every 0.1 s), for ENDING_READS_FOR
# seconds at most: a wrong signal costs 40 reads, and the end is seen 12 ms after Ray's on average.
ENDING_READ_SECONDS = 0.025
ENDING_READS_FOR = 1.0


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


def read_slack(watch_seconds: float) -> float:
    """How much longer than asked a task watch may stay silent before its socket read fails
    (adapters/taskcache.py): half the watch's time, between 5 and 30 s (30 s for the default
    120 s watch). Here, not in the cache, because the flags' check (controller.settings)
    uses it too, and the flags are read before the kubernetes client may be imported."""
    return max(5.0, min(30.0, watch_seconds / 2))
