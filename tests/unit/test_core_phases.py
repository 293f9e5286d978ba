"""Ray status -> phase/reason, conditions, minimal status patches (pure)."""

import pytest

from argus.core.phases import (
    FASTEST_POLL_SECONDS, YOUNG_READS_PER_SECOND, conditions_for_phase, phase_for_ray, poll_delay, set_condition, status_delta,
)
from argus.core.spec import Phase

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("ray,cancelled,late,expected", [
    ("PENDING", False, False, (Phase.Submitted, "RayJobPending")),
    ("RUNNING", False, False, (Phase.Running, "RayJobRunning")),
    ("SUCCEEDED", False, False, (Phase.Succeeded, "RayJobSucceeded")),
    ("FAILED", False, False, (Phase.Failed, "RayJobFailed")),
    ("STOPPED", False, False, (Phase.Stopped, "RayJobStopped")),
    ("STOPPED", True, False, (Phase.Stopped, "Cancelled")),
    ("STOPPED", False, True, (Phase.Failed, "DeadlineExceeded")),
    ("STOPPED", True, True, (Phase.Failed, "DeadlineExceeded")),
    ("SUCCEEDED", True, False, (Phase.Succeeded, "RayJobSucceeded")),  # finished before the stop: the truth
])
def test_phase_for_ray(ray, cancelled, late, expected):
    assert phase_for_ray(ray, cancelled=cancelled, deadline_exceeded=late) == expected


def test_last_transition_time_moves_only_when_the_status_changes():
    c = set_condition(None, "Running", True, "RayJobRunning", "m", now="t1", generation=1)
    c = set_condition(c, "Running", True, "RayJobRunning", "m2", now="t2", generation=1)
    assert c[0]["lastTransitionTime"] == "t1" and c[0]["message"] == "m2"
    c = set_condition(c, "Running", False, "RayJobSucceeded", "done", now="t3", generation=2)
    assert c[0]["lastTransitionTime"] == "t3" and c[0]["status"] == "False" and c[0]["observedGeneration"] == 2


def test_conditions_for_phases():
    c = conditions_for_phase(None, Phase.Succeeded, "RayJobSucceeded", "ok", now="t", generation=1)
    assert {x["type"]: x["status"] for x in c} == {"Admitted": "True", "Running": "False", "Complete": "True", "Failed": "False"}
    c = conditions_for_phase(None, Phase.Rejected, "InvalidSpec", "bad", now="t", generation=1)
    assert {x["type"]: x["status"] for x in c} == {"Admitted": "False", "Running": "False", "Complete": "False", "Failed": "True"}


def test_status_delta_is_empty_when_nothing_changed():
    current = {"phase": "Running", "rayJob": {"status": "RUNNING", "submissionId": "x"}}
    assert status_delta(current, {"phase": "Running", "rayJob": {"status": "RUNNING"}}) == {}
    assert status_delta(current, {"phase": "Succeeded", "rayJob": {"status": "SUCCEEDED", "submissionId": "x"}}) == {
        "phase": "Succeeded", "rayJob": {"status": "SUCCEEDED"}}
    assert status_delta({}, {"queuePosition": None}) == {}


def test_young_jobs_are_read_often_old_ones_every_poll_interval():
    assert poll_delay(0, 2.0) == FASTEST_POLL_SECONDS
    assert poll_delay(3.0, 2.0) == FASTEST_POLL_SECONDS
    assert poll_delay(8.0, 2.0) == 0.5
    assert poll_delay(32.0, 2.0) == 2.0
    assert poll_delay(3600, 2.0) == 2.0
    assert poll_delay(None, 2.0) == 2.0  # age unknown: the plain interval
    assert poll_delay(0, 0.1) == 0.1  # never slower than the configured interval


def test_fast_reads_share_a_budget():
    assert poll_delay(0, 2.0, active=4) == FASTEST_POLL_SECONDS  # 4 jobs: 20 reads a second
    assert poll_delay(0, 2.0, active=10) == 0.5  # 10 young jobs: still 20 a second in all
    assert poll_delay(0, 2.0, active=50) == 2.0  # many jobs: every poll interval, as old ones
    for active in (1, 4, 10, 39, 40, 50, 500):
        rate = active / poll_delay(0, 2.0, active=active)
        assert rate <= max(YOUNG_READS_PER_SECOND, active / 2.0) + 1e-9, active


def test_reads_per_job_stay_bounded():
    """Over a long life a job costs a fixed handful of extra reads, then one per interval."""
    t, reads = 0.0, 0
    while t < 600:
        t += poll_delay(t, 2.0)
        reads += 1
    assert reads <= 600 / 2.0 + 60
