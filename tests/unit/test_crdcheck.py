"""The served ArgusTask CRD against the one the operator was built with: the comparison
(core.crd), and the check's report (controller.crdcheck) over the fake API server: the
log line names both hashes and the command, the gauge says stale, the operator goes on."""

from __future__ import annotations

import asyncio
import copy
import logging

import pytest

from argus.controller.crdcheck import CrdCheck
from argus.controller.metrics import Metrics
from argus.core.crd import (
    CRD_NAME,
    SCHEMA_HASH_ANNOTATION,
    CrdUnreadable,
    argustask_crd,
    built_schema_hash,
    compare_served,
    schema_hash,
)
from fakes import FakeClock, FakeCluster

pytestmark = pytest.mark.unit


def test_the_generated_crd_carries_the_hash_of_its_own_spec_and_helms_keep_policy() -> None:
    crd = argustask_crd()
    annotations = crd["metadata"]["annotations"]
    assert annotations[SCHEMA_HASH_ANNOTATION] == schema_hash(crd["spec"]) == built_schema_hash()
    assert annotations["helm.sh/resource-policy"] == "keep"
    assert crd["metadata"]["name"] == CRD_NAME


def test_the_hash_follows_the_schema_and_nothing_else() -> None:
    spec = argustask_crd()["spec"]
    older = copy.deepcopy(spec)
    del older["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["progress"]
    assert schema_hash(older) != schema_hash(spec)
    reordered = dict(reversed(list(spec.items())))  # the same schema, keys in another order
    assert schema_hash(reordered) == schema_hash(spec)
    assert len(schema_hash(spec)) == 16


def test_the_comparison() -> None:
    built = "0123456789abcdef"
    current = compare_served({SCHEMA_HASH_ANNOTATION: built, "other": "x"}, built)
    assert current.current and current.found
    stale = compare_served({SCHEMA_HASH_ANNOTATION: "fedcba9876543210"}, built)
    assert not stale.current and stale.served == "fedcba9876543210"
    assert "fedcba9876543210" in stale.message() and built in stale.message()
    assert "kubectl apply --server-side -f crds/" in stale.message()
    unmarked = compare_served({}, built)  # applied before the CRD carried its hash
    assert not unmarked.current and unmarked.served is None and SCHEMA_HASH_ANNOTATION in unmarked.message()
    missing = compare_served(None, built)
    assert not missing.current and not missing.found and "serves no ArgusTask CRD" in missing.message()


def run(check: CrdCheck):  # type: ignore[no-untyped-def]
    return asyncio.run(check.check())


def test_a_stale_crd_is_an_error_naming_both_hashes_and_the_command_and_the_gauge_says_so(caplog: pytest.LogCaptureFixture) -> None:
    cluster, metrics = FakeCluster(FakeClock()), Metrics(FakeClock())
    built = built_schema_hash()
    cluster.crds[CRD_NAME] = {SCHEMA_HASH_ANNOTATION: "00000000deadbeef", "helm.sh/resource-policy": "keep"}
    check = CrdCheck(cluster, built, metrics)
    with caplog.at_level(logging.INFO, logger="argus"):
        verdict = run(check)
    assert verdict is not None and not verdict.current
    assert metrics.registry.get_sample_value("argus_crd_stale", {"crd": CRD_NAME}) == 1
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "00000000deadbeef" in errors[0] and built in errors[0] and "kubectl apply --server-side" in errors[0]

    # The new CRD applied: the gauge goes back to 0 and an info line says so, no error.
    caplog.clear()
    cluster.crds[CRD_NAME] = {SCHEMA_HASH_ANNOTATION: built}
    with caplog.at_level(logging.INFO, logger="argus"):
        verdict = run(check)
    assert verdict is not None and verdict.current
    assert metrics.registry.get_sample_value("argus_crd_stale", {"crd": CRD_NAME}) == 0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("is the one this operator was built with" in r.getMessage() for r in caplog.records)


def test_no_crd_is_stale_too() -> None:
    cluster, metrics = FakeCluster(FakeClock()), Metrics(FakeClock())
    verdict = run(CrdCheck(cluster, built_schema_hash(), metrics))
    assert verdict is not None and not verdict.found
    assert metrics.registry.get_sample_value("argus_crd_stale", {"crd": CRD_NAME}) == 1


def test_an_unreadable_crd_is_a_warning_and_changes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    cluster, metrics = FakeCluster(FakeClock()), Metrics(FakeClock())
    built = built_schema_hash()
    cluster.crds[CRD_NAME] = {SCHEMA_HASH_ANNOTATION: "00000000deadbeef"}
    check = CrdCheck(cluster, built, metrics)
    run(check)
    # Without get on the ArgusTask CRD (tests/integration/test_chart.py's trimmed roles): the API server's own words.
    cluster.crd_error = CrdUnreadable('customresourcedefinitions.apiextensions.k8s.io "argustasks.argus.io" is forbidden: User '
                                      '"system:serviceaccount:argus-system:argus" cannot get resource "customresourcedefinitions" '
                                      'in API group "apiextensions.k8s.io" at the cluster scope')
    with caplog.at_level(logging.WARNING, logger="argus"):
        assert run(check) is None
    assert metrics.registry.get_sample_value("argus_crd_stale", {"crd": CRD_NAME}) == 1  # the last verdict stands
    assert any('cannot get resource "customresourcedefinitions"' in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)


def test_the_loop_checks_at_start_then_every_interval() -> None:
    cluster, metrics = FakeCluster(FakeClock()), Metrics(FakeClock())
    built = built_schema_hash()
    cluster.crds[CRD_NAME] = {SCHEMA_HASH_ANNOTATION: "00000000deadbeef"}
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 1:
            cluster.crds[CRD_NAME] = {SCHEMA_HASH_ANNOTATION: built}  # applied meanwhile
        else:
            raise asyncio.CancelledError

    check = CrdCheck(cluster, built, metrics, sleep=sleep)
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(check.run(600))
    assert sleeps == [600, 600]
    assert check.last is not None and check.last.current
    assert metrics.registry.get_sample_value("argus_crd_stale", {"crd": CRD_NAME}) == 0

    once = CrdCheck(cluster, built, metrics, sleep=sleep)
    asyncio.run(once.run(0))  # 0: at start only, and returns
    assert once.last is not None and once.last.current


def test_the_arguscluster_crd_is_checked_too_under_its_own_name(caplog: pytest.LogCaptureFixture) -> None:
    """Both generated CRDs carry their hash; a stale ArgusCluster CRD (it would drop
    status.doctor and refuse spec.rayClusterRef) is its own error and its own series."""
    from argus.core.crd import arguscluster_crd, built_crds
    built = {c.name: c for c in built_crds()}
    assert set(built) == {CRD_NAME, "argusclusters.argus.io"}
    assert built["argusclusters.argus.io"].schema_hash == arguscluster_crd()["metadata"]["annotations"][SCHEMA_HASH_ANNOTATION]
    assert built["argusclusters.argus.io"].kind == "ArgusCluster" and built[CRD_NAME].schema_hash == built_schema_hash()
    cluster, metrics = FakeCluster(FakeClock()), Metrics(FakeClock())
    mine = built["argusclusters.argus.io"]
    cluster.crds[CRD_NAME] = {SCHEMA_HASH_ANNOTATION: built_schema_hash()}
    cluster.crds[mine.name] = {SCHEMA_HASH_ANNOTATION: "00000000deadbeef"}
    with caplog.at_level(logging.INFO, logger="argus"):
        tasks = run(CrdCheck(cluster, built_schema_hash(), metrics))
        clusters = run(CrdCheck(cluster, mine.schema_hash, metrics, kind=mine.kind, name=mine.name))
    assert tasks is not None and tasks.current and clusters is not None and not clusters.current
    assert metrics.registry.get_sample_value("argus_crd_stale", {"crd": CRD_NAME}) == 0
    assert metrics.registry.get_sample_value("argus_crd_stale", {"crd": "argusclusters.argus.io"}) == 1
    (error,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert error.startswith("the served ArgusCluster CRD (argusclusters.argus.io) is stale: its schema hash is 00000000deadbeef")
    del cluster.crds[mine.name]  # an install from before ArgusClusters
    missing = run(CrdCheck(cluster, mine.schema_hash, metrics, kind=mine.kind, name=mine.name))
    assert missing is not None and "serves no ArgusCluster CRD (argusclusters.argus.io)" in missing.message()
