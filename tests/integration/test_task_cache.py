"""The task cache (list + watch) against the real kube-apiserver, in-process: it is synced
only once its LIST is complete, follows creates, status patches and deletes, and pages
the LIST."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable

import pytest

from argus.adapters.kube import load_kube_config
from argus.controller.cache import TaskCache, worth_a_look

pytestmark = pytest.mark.integration


def _task(name: str) -> dict[str, Any]:
    return {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask", "metadata": {"name": name},
            "spec": {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1,
                     "command": "python3 -m verl.trainer.main_ppo trainer.nnodes=1 trainer.n_gpus_per_node=1"}}


async def _until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def test_cache_lists_in_pages_then_follows_the_watch(control_plane: Any, user_namespace: Callable[..., str]) -> None:
    ns, other = user_namespace("alice"), user_namespace("bob")
    names = [f"c-{i}" for i in range(7)]
    control_plane.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [_task(n) for n in names]}))
    control_plane.kubectl("apply", "-n", other, "-f", "-", input=json.dumps(_task("elsewhere")))
    load_kube_config(str(control_plane.kubeconfig))
    changes: list[tuple[str, str]] = []
    looks: list[tuple[str, str]] = []

    def on_change(old: Any, new: Any) -> None:
        changes.append((old or new).key)
        if worth_a_look(old, new):
            looks.append((old or new).key)

    async def scenario() -> None:
        cache = TaskCache((ns,), on_change=on_change, page_size=3)  # 3 pages
        assert not cache.synced.is_set()
        cache.start()
        try:
            await asyncio.wait_for(cache.synced.wait(), 30)
            # Synced means complete: every task of the scope, nothing from another namespace.
            assert sorted(v.name for v in cache.views()) == names
            assert cache.get((other, "elsewhere")) is None
            await asyncio.to_thread(control_plane.kubectl, "apply", "-n", ns, "-f", "-", input=json.dumps(_task("late")))
            await _until(lambda: cache.get((ns, "late")) is not None, 30, "the created task")
            await asyncio.to_thread(control_plane.kubectl, "patch", "argustask", "c-0", "-n", ns, "--subresource=status",
                                    "--type=merge", "-p", '{"status":{"phase":"Queued"}}')
            await _until(lambda: cache.get((ns, "c-0")).phase == "Queued", 30, "the status patch")
            assert (ns, "c-0") in changes
            assert looks.count((ns, "c-0")) == 1  # listed; a status patch (the operator's own writes) wakes nothing
            assert (ns, "late") in looks
            await asyncio.to_thread(control_plane.kubectl, "delete", "argustask", "c-1", "-n", ns)
            await _until(lambda: cache.get((ns, "c-1")) is None, 30, "the delete")
            assert looks.count((ns, "c-1")) == 2  # listed, then deleted
            assert len(cache) == len(names)  # 7 - 1 deleted + 1 created
        finally:
            cache.stop()

    asyncio.run(scenario())


def test_an_empty_scope_is_synced_at_once(control_plane: Any, user_namespace: Callable[..., str]) -> None:
    ns = user_namespace("alice")
    load_kube_config(str(control_plane.kubeconfig))

    async def scenario() -> None:
        cache = TaskCache((ns,))
        cache.start()
        try:
            await asyncio.wait_for(cache.synced.wait(), 30)
            assert cache.views() == []
        finally:
            cache.stop()

    asyncio.run(scenario())
