"""Leader election (host/leader.py) over an in-memory Lease store that behaves as the
API server does for a Lease (404 when absent, 409 when the resourceVersion is stale or the
name is taken), with two candidates whose clocks disagree.

Each candidate gets its own monotonic clock (an arbitrary offset: monotonic clocks of two
machines have nothing in common) and its own wall clock, skewed by an hour either way. Time
itself is one number the test moves forward. What must hold (client-go's guarantee): never
two leaders at once, whatever the skew; a follower takes over a dead leader's lease after
one lease of its own time (plus at most one retry period), never before.
"""

from __future__ import annotations

import copy
import datetime as dt
from dataclasses import dataclass

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from argus.controller.metrics import Metrics
from argus.host.leader import LeaderElection

pytestmark = pytest.mark.unit

LEASE = 15.0
EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class FakeLeases:
    """One namespace's Leases, as the API server keeps them."""

    def __init__(self, clock: World) -> None:
        self.clock = clock
        self.objects: dict[str, client.V1Lease] = {}
        self.version = 0
        self.writes: list[tuple[str, str, float]] = []  # (name, holder, time) of every accepted write

    def _stored(self, body: client.V1Lease) -> client.V1Lease:
        self.version += 1
        stored = copy.deepcopy(body)
        stored.metadata.resource_version = str(self.version)
        self.objects[stored.metadata.name] = stored
        self.writes.append((stored.metadata.name, stored.spec.holder_identity, self.clock.now))
        return copy.deepcopy(stored)

    def read_namespaced_lease(self, name: str, namespace: str) -> client.V1Lease:
        if name not in self.objects:
            raise ApiException(status=404, reason="Not Found")
        return copy.deepcopy(self.objects[name])

    def create_namespaced_lease(self, namespace: str, body: client.V1Lease) -> client.V1Lease:
        if body.metadata.name in self.objects:
            raise ApiException(status=409, reason="AlreadyExists")
        return self._stored(body)

    def replace_namespaced_lease(self, name: str, namespace: str, body: client.V1Lease) -> client.V1Lease:
        current = self.objects.get(name)
        if current is None:
            raise ApiException(status=404, reason="Not Found")
        if body.metadata.resource_version != current.metadata.resource_version:
            raise ApiException(status=409, reason="Conflict")
        return self._stored(body)


@dataclass
class CandidateClock:
    """One candidate's clocks: the world's time, with its own monotonic origin and wall skew."""
    world: World
    monotonic_offset: float
    wall_skew: dt.timedelta

    def now(self) -> dt.datetime:
        return EPOCH + dt.timedelta(seconds=self.world.now) + self.wall_skew

    def monotonic(self) -> float:
        return self.world.now + self.monotonic_offset


class World:
    def __init__(self) -> None:
        self.now = 0.0
        self.leases = FakeLeases(self)

    def candidate(self, identity: str, *, monotonic_offset: float, wall_skew: dt.timedelta) -> LeaderElection:
        clock = CandidateClock(self, monotonic_offset, wall_skew)
        return LeaderElection("ns", "argus-test", identity, lease_seconds=LEASE, api=self.leases, clock=clock, metrics=Metrics(clock))


def run(world: World, until: float, candidates: list[LeaderElection], alive: dict[str, bool], step: float = 0.25) -> list[tuple[float, set[str]]]:
    """Every candidate that is alive tries once per its retry period, offset a little from
    the others; returns who believed they led at each step."""
    due = {c.identity: world.now + i * 0.1 for i, c in enumerate(candidates)}
    seen: list[tuple[float, set[str]]] = []
    while world.now < until:
        for c in candidates:
            if alive[c.identity] and world.now >= due[c.identity]:
                c.try_acquire_or_renew()
                due[c.identity] = world.now + c.retry_seconds
        leaders = {c.identity for c in candidates if alive[c.identity] and c.is_leader}
        seen.append((world.now, leaders))
        world.now += step
    return seen


@pytest.mark.parametrize("skew", [dt.timedelta(hours=1), dt.timedelta(hours=-1), dt.timedelta(seconds=5)],
                         ids=["follower-clock-1h-ahead", "follower-clock-1h-behind", "follower-clock-5s-ahead"])
def test_skewed_clocks_never_make_two_leaders_and_takeover_waits_one_lease(skew: dt.timedelta) -> None:
    world = World()
    a = world.candidate("a", monotonic_offset=1000.0, wall_skew=dt.timedelta(0))
    b = world.candidate("b", monotonic_offset=7.5, wall_skew=skew)
    alive = {"a": True, "b": True}

    seen = run(world, 60.0, [a, b], alive)
    assert all(len(leaders) <= 1 for _, leaders in seen)
    assert seen[-1][1] == {"a"}  # a got there first and kept renewing; b never took over
    assert [holder for _, holder, _ in world.leases.writes] == ["a"] * len(world.leases.writes)

    alive["a"] = False  # a dies without a word (SIGKILL, a partitioned node)
    a_last_renewal = world.leases.writes[-1][2]
    seen = run(world, 120.0, [a, b], alive)
    assert all(len(leaders) <= 1 for _, leaders in seen)
    took_over = next(t for t, leaders in seen if "b" in leaders)
    # Not before one whole lease after a's last renewal, and within one lease plus a retry
    # period (and a step of this simulation) of it.
    assert a_last_renewal + LEASE <= took_over <= a_last_renewal + LEASE + b.retry_seconds + 0.5
    assert world.leases.objects["argus-test"].spec.holder_identity == "b"
    assert world.leases.objects["argus-test"].spec.lease_transitions == 1


def test_a_leader_that_cannot_renew_steps_down_before_anyone_may_take_over() -> None:
    world = World()
    a = world.candidate("a", monotonic_offset=0.0, wall_skew=dt.timedelta(0))
    assert a.try_acquire_or_renew() and a.is_leader
    renewed = world.now
    # The API server stops answering a: it keeps acting only for its renew deadline.
    world.now = renewed + a.renew_deadline - 0.01
    assert a.is_leader
    world.now = renewed + a.renew_deadline
    assert not a.is_leader
    assert a.renew_deadline < LEASE


def test_a_released_lease_is_taken_at_once() -> None:
    world = World()
    a = world.candidate("a", monotonic_offset=0.0, wall_skew=dt.timedelta(0))
    b = world.candidate("b", monotonic_offset=0.0, wall_skew=dt.timedelta(hours=3))
    assert a.try_acquire_or_renew()
    world.now += 1
    assert not b.try_acquire_or_renew()
    a.release()
    assert not a.is_leader
    world.now += 0.5
    assert b.try_acquire_or_renew() and b.is_leader


def test_two_candidates_racing_for_a_new_lease_one_wins() -> None:
    world = World()
    a = world.candidate("a", monotonic_offset=0.0, wall_skew=dt.timedelta(0))
    b = world.candidate("b", monotonic_offset=0.0, wall_skew=dt.timedelta(0))
    stale = world.leases.read_namespaced_lease  # both read "absent" before either creates

    def absent(name: str, namespace: str) -> client.V1Lease:
        raise ApiException(status=404, reason="Not Found")

    world.leases.read_namespaced_lease = absent  # type: ignore[method-assign]
    results = [a.try_acquire_or_renew(), b.try_acquire_or_renew()]
    world.leases.read_namespaced_lease = stale  # type: ignore[method-assign]
    assert results == [True, False] and a.is_leader and not b.is_leader
