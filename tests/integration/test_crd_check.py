"""The CRD check against the real kube-apiserver: an older ArgusTask CRD served (as after a
``helm upgrade``, which never upgrades crds/) is reported stale, in the log with both hashes
and in the gauge; the current CRD applied, the same check reports nothing. In-process, with
the operator's own adapter (KubeTaskStore) and check (controller.crdcheck)."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from argus.adapters.clock import SystemClock
from argus.adapters.kube import KubeTaskStore, load_kube_config
from argus.controller.crdcheck import CrdCheck
from argus.controller.metrics import Metrics
from argus.core.crd import CRD_NAME, SCHEMA_HASH_ANNOTATION, argustask_crd, built_schema_hash, schema_hash

pytestmark = pytest.mark.integration

CURRENT = Path(__file__).resolve().parents[2] / "crds" / "argus.io_argustasks.yaml"


def older_crd(*, annotated: bool) -> dict[str, Any]:
    """The CRD as an earlier release generated it: one status field fewer, and the hash of
    that schema (or, before the check existed, no hash at all)."""
    crd = copy.deepcopy(argustask_crd())
    del crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["progress"]
    if annotated:
        crd["metadata"]["annotations"][SCHEMA_HASH_ANNOTATION] = schema_hash(crd["spec"])
    else:
        del crd["metadata"]["annotations"][SCHEMA_HASH_ANNOTATION]
    return crd


def test_an_older_served_crd_is_reported_and_the_current_one_is_not(control_plane: Any, crd_installed: None,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    load_kube_config(str(control_plane.kubeconfig))
    clock = SystemClock()
    metrics = Metrics(clock)
    built = built_schema_hash()

    def apply(body: str) -> None:
        control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=body)
        control_plane.wait_established(CRD_NAME)

    async def scenario() -> None:
        check = CrdCheck(KubeTaskStore(now=clock.now), built, metrics)
        older = older_crd(annotated=True)
        await asyncio.to_thread(apply, json.dumps(older))
        caplog.clear()
        verdict = await check.check()
        assert verdict is not None and not verdict.current and verdict.served == schema_hash(older["spec"]) != built
        assert metrics.registry.get_sample_value("argus_crd_stale", {"crd": CRD_NAME}) == 1
        (error,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert verdict.served in error and built in error and "kubectl apply --server-side -f crds/" in error

        await asyncio.to_thread(apply, json.dumps(older_crd(annotated=False)))  # from before the check existed
        verdict = await check.check()
        assert verdict is not None and not verdict.current and verdict.served is None
        assert metrics.registry.get_sample_value("argus_crd_stale", {"crd": CRD_NAME}) == 1

        await asyncio.to_thread(apply, CURRENT.read_text())  # the upgrade's `kubectl apply --server-side -f crds/`
        caplog.clear()
        verdict = await check.check()
        assert verdict is not None and verdict.current and verdict.served == built
        assert metrics.registry.get_sample_value("argus_crd_stale", {"crd": CRD_NAME}) == 0
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

    try:
        with caplog.at_level(logging.INFO, logger="argus"):
            asyncio.run(scenario())
    finally:
        apply(CURRENT.read_text())  # the session's other tests need the current schema


def test_the_committed_crd_keeps_helms_keep_policy_when_served(control_plane: Any, crd_installed: None) -> None:
    served = json.loads(control_plane.kubectl("get", "crd", CRD_NAME, "-o", "json").stdout)
    assert served["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert served["metadata"]["annotations"][SCHEMA_HASH_ANNOTATION] == built_schema_hash()
