"""Issue 21 on the real API server: the operator composes each task's configuration with
verl's config tree (here the pinned 0.9.1 release from the cache: the testbed's verl
snapshot is the stand-in, which has no config tree) and checks what verl will see.

- an override typo is Rejected by the operator, and refused by the webhook at
  ``kubectl apply``, in Hydra's own words;
- a task without ``trainer.default_local_dir`` gets a checkpoint folder in its job folder
  in ``status.command``, with a warning, and ``status.verl`` names the tree;
- hostile configurations (an instantiation key in a list, a path assembled by
  interpolation) are refused at apply time."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from argus_testbed.harness import OperatorProcess, advanced_task, apply_text, ppo_command, wait_for, wait_phase
from argus_testbed.ports import free_port

pytestmark = pytest.mark.integration

TYPO = "Could not override 'trainer.n_gpus_per_nod'. To append to your config use +trainer.n_gpus_per_nod=1"
DENIED = 'admission webhook "validate-argustask.argus.io" denied the request'


def test_a_typo_is_rejected_in_hydras_words_and_checkpoints_land_in_the_job_folder(control_plane, user_namespace, run_operator,
                                                                                  argus_root):
    ns = user_namespace("alice")
    op = run_operator([ns])
    apply_text(control_plane, ns, advanced_task("typo", ppo_command(extra="trainer.n_gpus_per_nod=1")))
    task = wait_phase(control_plane, ns, "typo", "Rejected", op=op)
    assert TYPO in task["status"]["message"], task["status"]["message"]
    assert "verl 0.9.1" in task["status"]["message"]

    apply_text(control_plane, ns, advanced_task("no-ckpt", ppo_command(steps=1)))
    task = wait_phase(control_plane, ns, "no-ckpt", ("Queued", "Submitted", "Running", "Succeeded", "Failed"), op=op)
    status = task["status"]
    uid8 = task["metadata"]["uid"].replace("-", "")[:8]
    job_dir = f"{argus_root}/users/alice/jobs/{ns}-no-ckpt-{uid8}"
    assert f"trainer.default_local_dir={job_dir}/checkpoints/" in status["command"], status["command"]
    assert any("absolute under the job folder" in w for w in status["warnings"]), status["warnings"]
    # The testbed's shared tree holds a verl snapshot with 0.9.1's real config tree (the
    # stand-in's), so the operator composes with the cluster's own tree.
    assert status["verl"] == {"version": "0.9.1", "source": "cluster"}
    assert not any("not the cluster's own" in w for w in status["warnings"]), status["warnings"]


@pytest.fixture
def webhook_operator(control_plane: Any, run_operator: Callable[..., OperatorProcess]) -> Iterator[Callable[[list[str]], OperatorProcess]]:
    names: list[str] = []

    def start(namespaces: list[str]) -> OperatorProcess:
        port, name = free_port(), f"argus-test-{uuid.uuid4().hex[:8]}"
        names.append(name)
        return run_operator(namespaces, extra_args=["--webhook", "--webhook-listen-host", "127.0.0.1", "--webhook-port", str(port),
                                                    "--webhook-url", f"https://127.0.0.1:{port}", "--webhook-config-name", name])

    yield start
    for name in names:
        control_plane.kubectl("delete", "validatingwebhookconfiguration", name, "--ignore-not-found", check=False)


def test_the_webhook_refuses_what_verl_would_see_at_apply(control_plane, user_namespace, webhook_operator, argus_root):
    ns = user_namespace("alice")
    webhook_operator([ns])
    typo = advanced_task("typo", ppo_command(extra="trainer.n_gpus_per_nod=1"))

    def denied() -> Any:
        # A server-side dry run creates nothing while the webhook is not called yet (its
        # failure policy is Ignore): a created task would be an UPDATE afterwards.
        out = control_plane.kubectl("apply", "--dry-run=server", "-n", ns, "-f", "-", input=typo, check=False)
        return out if out.returncode != 0 and DENIED in out.stderr else None

    out = wait_for(denied, 60, "the webhook to refuse the typo")
    assert TYPO in out.stderr, out.stderr
    out = apply_text(control_plane, ns, typo, check=False)
    assert out.returncode != 0 and TYPO in out.stderr, out.stderr
    for name, extra, needle in (
        ("target-in-list", "'+actor_rollout_ref.actor.x=[{_target_: os.system}]'", "(actor_rollout_ref.actor.x[0]._target_)"),
        # The root cut in two: each half is harmless text, the resolved whole is bob's home.
        ("assembled-path", f"+x.p={str(argus_root)[:-3]} '+x.q=${{x.p}}{str(argus_root)[-3:]}/users/bob/f'", "another user's home (bob)"),
        ("runtime-env", "+ray_kwargs.ray_init.runtime_env.env_vars.LD_PRELOAD=$HOME/x.so", "LD_PRELOAD"),
    ):
        out = apply_text(control_plane, ns, advanced_task(name, ppo_command(extra=extra)), check=False)
        assert out.returncode != 0 and DENIED in out.stderr and needle in out.stderr, (name, out.stderr)
