"""The task cache (list + watch) against the real kube-apiserver, in-process: it is synced
only once its LIST is complete, follows creates, status patches and deletes, and pages
the LIST."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from argus.adapters.clock import SystemClock
from argus.adapters.kube import load_kube_config
from argus.adapters.taskcache import TaskCache
from argus.controller.view import TaskView, worth_a_look

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
        cache = TaskCache(TaskView.from_body, (ns,), on_change=on_change, page_size=3, monotonic=SystemClock().monotonic)  # 3 pages
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
        cache = TaskCache(TaskView.from_body, (ns,), monotonic=SystemClock().monotonic)
        cache.start()
        try:
            await asyncio.wait_for(cache.synced.wait(), 30)
            assert cache.views() == []
        finally:
            cache.stop()

    asyncio.run(scenario())


def test_a_silent_watch_fails_liveness_until_the_api_server_is_heard_again(
        control_plane: Any, user_namespace: Callable[..., str], run_operator: Any, tmp_path: Any) -> None:
    """The operator talks to the API server through a relay that is then frozen (a half-open
    connection: nothing moves, nothing closes). /healthz fails once the watch has been silent
    longer than --watch-stale-seconds; thawed, the cache lists again, /healthz recovers, and a
    task created during the freeze is handled. Readiness stays true (the cache is synced)."""
    import urllib.error
    import urllib.request

    from argus_testbed.harness import advanced_task, apply_text, ppo_command, wait_for, wait_phase
    from argus_testbed.ports import free_port
    from argus_testbed.tcpproxy import FreezableProxy

    ns = user_namespace("alice")
    relay = FreezableProxy(int(control_plane.server.rsplit(":", 1)[1]))
    config = json.loads(control_plane.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{relay.port}"
    through_relay = tmp_path / "relay.kubeconfig"
    through_relay.write_text(json.dumps(config))
    health = free_port()
    op = run_operator([ns], kubeconfig=through_relay,
                      extra_args=[f"--health-port={health}", "--health-host=127.0.0.1", "--watch-timeout=4", "--watch-stale-seconds=12"])

    def probe(path: str) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{health}{path}", timeout=3) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return 0
    try:
        wait_for(lambda: probe("/readyz") == 200, 60, "the operator to be ready", on_timeout=op.log_tail)
        assert probe("/healthz") == 200
        relay.freeze()
        wait_for(lambda: probe("/healthz") == 500, 60, "liveness to fail on the silent watch", on_timeout=op.log_tail)
        assert probe("/readyz") == 200
        apply_text(control_plane, ns, advanced_task("during-freeze", ppo_command(steps=1)))  # straight to the API server
        relay.thaw()
        wait_for(lambda: probe("/healthz") == 200, 60, "liveness to recover once the API server is heard", on_timeout=op.log_tail)
        wait_phase(control_plane, ns, "during-freeze", ("Queued", "Submitted", "Running", "Succeeded", "Failed"), timeout=60, op=op)
        log = op.log_path.read_text()
        assert "liveness probe: FAILING" in log and "liveness probe: ok" in log
        # The client-side read timeout, not the server, ended the silent watch.
        assert "ArgusTask watch" in log and "timed out" in log.lower(), op.log_tail(40)
    finally:
        op.stop()
        relay.stop()
