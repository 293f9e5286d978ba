"""The platform's settings as command-line flags with ARGUS_* environment defaults: where the
data lives, which entrypoints may run, which Ray resource marks a worker; one
definition that ``argus validate|render`` and ``argus-operator`` share, so the CLI checks
a task exactly as the operator will."""

from __future__ import annotations

import argparse
import os
from typing import Any

from .core.config import DEFAULT_ENTRYPOINT_ALLOWLIST, DEFAULT_ENTRYPOINT_SHELL, DEFAULT_ROOT, DEFAULT_WORKER_RESOURCE, PlatformConfig


def env_bool(name: str, default: bool = False) -> bool:
    """A boolean flag's ARGUS_* default: 1, true, yes or on (any case) is true; unset or
    empty is ``default``; anything else is false."""
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


class UsageError(Exception):
    """A mistake in how the command was called: exit 2 with one line."""


def add_platform_flags(parser: argparse.ArgumentParser) -> None:
    """Flags shared with the operator, each with an ARGUS_* environment default."""
    env = os.environ.get
    parser.add_argument("--root", default=env("ARGUS_ROOT", DEFAULT_ROOT), help="paths root (default /private, env ARGUS_ROOT)")
    parser.add_argument("--worker-resource", default=env("ARGUS_WORKER_RESOURCE", DEFAULT_WORKER_RESOURCE), help="Ray resource that marks worker nodes (env ARGUS_WORKER_RESOURCE)")
    parser.add_argument("--verl-code-path", default=env("ARGUS_VERL_CODE_PATH"), help="verl code snapshot put on PYTHONPATH (default <root>/common/code/verl/verl_repo)")
    parser.add_argument("--hf-home", default=env("ARGUS_HF_HOME"),
                        help="the shared Hugging Face cache, given to every job as HF_HOME unless its command exports its own "
                             "(default <root>/hf; an empty value: none; env ARGUS_HF_HOME)")
    parser.add_argument("--entrypoint-shell", default=env("ARGUS_ENTRYPOINT_SHELL", DEFAULT_ENTRYPOINT_SHELL), help="shell that runs the command (default 'bash -lc')")
    allow_env = env("ARGUS_ENTRYPOINT_ALLOWLIST")
    parser.add_argument(
        "--allow-entrypoint", action="append", dest="allowlist",
        default=[e.strip() for e in allow_env.split(",") if e.strip()] if allow_env else None,
        help=f"allowed entrypoint '<program> -m <module glob>', repeatable (default {', '.join(DEFAULT_ENTRYPOINT_ALLOWLIST)}; env ARGUS_ENTRYPOINT_ALLOWLIST, comma-separated)",
    )
    rollouts_env = env("ARGUS_VERL_PLUGIN_ROLLOUTS")
    parser.add_argument(
        "--verl-plugin-rollout", action="append", dest="verl_plugin_rollouts", metavar="NAME",
        default=[r.strip() for r in rollouts_env.split(",") if r.strip()] if rollouts_env else None,
        help="a rollout engine (actor_rollout_ref.rollout.name) that the cluster's verl plugins register beside verl's own "
             "vllm, sglang and trtllm, accepted by the start-up check; repeatable (env ARGUS_VERL_PLUGIN_ROLLOUTS, comma-separated)",
    )
    parser.add_argument("--preemption-opt-out", action=argparse.BooleanOptionalAction, default=env_bool("ARGUS_PREEMPTION_OPT_OUT", True),
                        help="let a task opt out of preemption with spec.preemptible: false (default true; --no-preemption-opt-out "
                             "rejects such a task; env ARGUS_PREEMPTION_OPT_OUT)")
    add_verl_config_flag(parser)


def add_verl_config_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--verl-config", default=os.environ.get("ARGUS_VERL_CONFIG") or None, metavar="VERSION|DIR",
                        help="the verl config tree to compose tasks' configurations with: a pinned verl version "
                             "(from the cache, or the image) or a folder holding verl/trainer/config (default: the "
                             "cluster's verl snapshot, --verl-code-path, when it is readable here, else the newest pinned "
                             "release; the operator without it also composes each task for the pinned release its "
                             "cluster runs, as argus doctor reads it; env ARGUS_VERL_CONFIG)")


def verl_composer(args: argparse.Namespace, platform: PlatformConfig, *, fetch: bool = False) -> Any:
    """The composer over the chosen verl config tree (argus.adapters.verlcompose)."""
    from .adapters.verlcompose import ConfigTreeError, HydraComposer, find_tree  # noqa: PLC0415

    try:
        return HydraComposer(find_tree(args.verl_config, platform, fetch=fetch))
    except ConfigTreeError as exc:
        raise UsageError(str(exc)) from None


def verl_composers(args: argparse.Namespace, platform: PlatformConfig) -> Any:
    """The operator's composers (core.verlchoice.Composers): the chosen tree's, and, unless
    --verl-config names one tree, one per pinned release present here, built on first use."""
    import logging  # noqa: PLC0415

    from .adapters.verlcompose import ConfigTreeError, HydraComposer, find_tree, present_releases  # noqa: PLC0415
    from .core.verlchoice import Composers  # noqa: PLC0415

    default = verl_composer(args, platform)
    if args.verl_config is not None:
        return Composers(default)

    def build(version: str) -> Any:
        try:
            return HydraComposer(find_tree(version, platform))
        except ConfigTreeError as exc:  # gone since the start: the default tree serves its clusters' tasks
            logging.getLogger("argus").warning("cannot compose for verl %s any more: %s", version, exc)
            raise
    return Composers(default, present_releases(), build)


def platform_config(args: argparse.Namespace) -> PlatformConfig:
    try:
        return PlatformConfig.from_allowlist(
            args.allowlist, root=args.root, worker_resource=args.worker_resource,
            verl_code_path=args.verl_code_path, entrypoint_shell=args.entrypoint_shell, hf_home=args.hf_home,
            verl_plugin_rollouts=tuple(getattr(args, "verl_plugin_rollouts", None) or ()),
            preemption_opt_out=getattr(args, "preemption_opt_out", True),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
