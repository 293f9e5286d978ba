"""How often a Ray job's status is read (pure: ``core.polling``)."""

import pytest

from argus.core.polling import FASTEST_POLL_SECONDS, YOUNG_READS_PER_SECOND, poll_delay

pytestmark = pytest.mark.unit


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
