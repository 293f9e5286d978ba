"""The reconciler's first tick waits until kopf's index holds every ArgusTask the API
lists. Run in-process against the real kube-apiserver; the index is a plain set here
(kopf fills it in the running operator) so the test controls how complete it is."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest

from argus.controller.kube import Kube, load_config
from argus.controller.reconciler import Reconciler
from argus.controller.settings import OperatorConfig
from argus.core.config import PlatformConfig

pytestmark = pytest.mark.integration


def _task(name: str) -> dict[str, Any]:
    return {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask", "metadata": {"name": name},
            "spec": {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1,
                     "command": "python3 -m verl.trainer.main_ppo trainer.nnodes=1 trainer.n_gpus_per_node=1"}}


def test_first_tick_waits_for_a_complete_index(control_plane: Any, user_namespace: Callable[..., str], argus_root: Path) -> None:
    ns = user_namespace("alice")
    names = [f"idx-{i}" for i in range(7)]
    control_plane.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [_task(n) for n in names]}))
    load_config(str(control_plane.kubeconfig))
    index: set[tuple[str, str]] = set()
    config = OperatorConfig(platform=PlatformConfig(root=str(argus_root)), namespaces=(ns,))
    reconciler = Reconciler(config, ray=None, kube=Kube(), views=lambda: [SimpleNamespace(key=k) for k in index])  # type: ignore[arg-type]

    async def scenario() -> None:
        waiting = asyncio.create_task(reconciler.wait_for_index(timeout=60))
        for name in names[:-1]:  # kopf adds objects one by one; the gate stays shut until the last
            index.add((ns, name))
            await asyncio.sleep(0.6)
            assert not waiting.done(), f"the first tick started with {len(index)} of {len(names)} tasks indexed"
        index.add((ns, names[-1]))
        await asyncio.wait_for(waiting, timeout=5)

    asyncio.run(scenario())


def test_no_tasks_means_no_wait(control_plane: Any, user_namespace: Callable[..., str], argus_root: Path) -> None:
    ns = user_namespace("alice")
    load_config(str(control_plane.kubeconfig))
    reconciler = Reconciler(OperatorConfig(platform=PlatformConfig(root=str(argus_root)), namespaces=(ns,)),
                            ray=None, kube=Kube(), views=lambda: [])  # type: ignore[arg-type]
    asyncio.run(asyncio.wait_for(reconciler.wait_for_index(timeout=60), timeout=10))
