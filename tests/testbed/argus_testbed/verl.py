"""verl's own configuration, for the tests: the releases Argus supports (fetched once into the
shared cache by hack/fetch-verl.sh), the verl call a checked command makes (entry module,
config name, Hydra overrides), and its composition with a release's config tree as the
operator composes it.

    from argus_testbed.verl import releases, verl_call, compose, task_calls
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
RELEASES_FILE = REPO / "operator" / "argus" / "verl-releases.txt"
STANDIN_SOURCE = REPO / "hack" / "verl-standin"

PPO = "verl.trainer.main_ppo"
SFT = "verl.trainer.sft_trainer"
LEGACY_SFT = "verl.trainer.fsdp_sft_trainer"
# Each entry module's primary config (its @hydra.main config_name).
PRIMARY_CONFIG = {PPO: "ppo_trainer", SFT: "sft_trainer_engine", LEGACY_SFT: "sft_trainer"}


def releases() -> list[str]:
    """The supported verl releases, newest (the default) first."""
    out = []
    for line in RELEASES_FILE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            out.append(line.split()[0])
    return out


@functools.cache
def release_dir(version: str) -> Path:
    """The release's unpacked wheel in the shared cache (fetched when missing)."""
    done = subprocess.run(["bash", str(REPO / "hack" / "fetch-verl.sh"), version], check=True,
                          capture_output=True, text=True)
    return Path(done.stdout.strip().splitlines()[-1])


def config_dir(version: str) -> Path:
    return release_dir(version) / "verl" / "trainer" / "config"


def _cache() -> Path:
    base = os.environ.get("ARGUS_CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                            os.path.expanduser("~/.cache"), "argus")
    return Path(base)


@functools.cache
def standin_snapshot(version: str | None = None) -> Path:
    """A verl code snapshot for the tests and the demo: the verl stand-in (hack/verl-standin)
    with the real config tree and version file of verl ``version`` (default: the newest
    supported) copied in, so that its ``@hydra.main`` composes what verl composes. The
    stand-in's entry modules that the release does not have are left out (verl 0.9 has no
    fsdp_sft_trainer). Built once per stand-in content and release, in the shared cache;
    the repository never holds verl's files."""
    version = version or releases()[0]
    files = sorted(p for p in STANDIN_SOURCE.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    digest = hashlib.sha256(version.encode())
    for path in files:
        digest.update(str(path.relative_to(STANDIN_SOURCE)).encode() + b"\0" + path.read_bytes())
    dest = _cache() / "verl-standin" / f"{version}-{digest.hexdigest()[:12]}"
    if (dest / "verl" / "version" / "version").is_file():
        return dest
    release = release_dir(version) / "verl"
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=dest.parent))
    shutil.copytree(STANDIN_SOURCE, tmp, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    for module in (tmp / "verl" / "trainer").glob("*.py"):
        if not module.name.startswith("_") and not (release / "trainer" / module.name).is_file():
            module.unlink()
    shutil.copytree(release / "trainer" / "config", tmp / "verl" / "trainer" / "config")
    (tmp / "verl" / "version").mkdir()
    shutil.copy(release / "version" / "version", tmp / "verl" / "version" / "version")
    try:
        tmp.rename(dest)
    except OSError:  # another process built it first
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


@dataclass(frozen=True)
class VerlCall:
    """What a command hands verl: the entry module, its primary config, the overrides."""

    entry: str
    config_name: str
    overrides: tuple[str, ...]


def verl_call(argv: Iterable[str]) -> VerlCall:
    """The verl call in an entrypoint's words (``-m MODULE`` then the module's arguments)."""
    words = list(argv)
    i = words.index("-m")
    entry, rest = words[i + 1], words[i + 2:]
    config_name = PRIMARY_CONFIG.get(entry, "")
    overrides: list[str] = []
    j = 0
    while j < len(rest):
        word = rest[j]
        if word.startswith("--config-name="):
            config_name = word.split("=", 1)[1]
        elif word == "--config-name":
            j += 1
            config_name = rest[j]
        elif word.startswith("--config-path") or word.startswith("--config-dir"):
            path = word.split("=", 1)[1] if "=" in word else rest[j + 1]
            j += 0 if "=" in word else 1
            # verl's scripts name verl's own config folder, relative to the entry point
            assert path.removeprefix("./").rstrip("/") == "config", f"{word}: only verl's own config folder is composed here"
        else:
            overrides.append(word)
        j += 1
    return VerlCall(entry, config_name, tuple(overrides))


@functools.cache
def operator_composer(version: str) -> Any:
    """The operator's composer (adapters.verlcompose.HydraComposer: the fast path, held equal
    to Hydra's compose by tests/unit/test_verl_compose_fast.py) over ``version``'s own tree."""
    from argus.adapters.verlcompose import HydraComposer
    from argus.core.verlconfig import ConfigTree

    return HydraComposer(ConfigTree(version, str(release_dir(version)), "release"))


def compose(version: str, call: VerlCall, job_dir: str = "/private/users/alice/jobs/alice-t-12345678") -> Any:
    """The job's configuration as the operator composes it for verl ``version`` (an
    argus.core.verlconfig.Composed: the resolved config, or Hydra's or OmegaConf's refusal)."""
    from argus.core.verlconfig import ComposeRequest

    return operator_composer(version).compose(ComposeRequest(call.entry, tuple(call.overrides), {}, job_dir, config_name=call.config_name))


@dataclass(frozen=True)
class TaskCall:
    """One task's verl call, as Argus generates it for ``version``."""

    label: str
    version: str
    call: VerlCall


def task_calls(manifest: Mapping[str, Any], version: str, *, label: str, user: str = "alice") -> TaskCall:
    """Argus's command for ``manifest`` (basic: the template for ``version``; advanced: the
    user's command), checked by Argus's command checks, as a verl call."""
    from argus.core.command import check_command
    from argus.core.config import PlatformConfig
    from argus.core.expand import expand
    from argus.core.plan import validate_task
    from argus.core.policy import Findings, PathPolicy
    from argus.core.template import basic_command

    config = PlatformConfig()
    verdict = validate_task(manifest, user, config)
    assert verdict.valid and verdict.spec is not None, (label, verdict.error_lines())
    spec = verdict.spec
    policy = PathPolicy(config, user)
    findings = Findings()
    if spec.kind == "basic":
        meta = manifest.get("metadata", {})
        text = basic_command(spec, home=policy.home, experiment=f"default-{meta.get('name')}",
                             uid=meta.get("uid", "0000-uid"), verl_version=version)
    else:
        assert spec.command is not None
        text = expand(spec.command, user, config)
    checked = check_command(label, text, policy=policy, nnodes=spec.nnodes, gpus_per_node=spec.n_gpus_per_node,
                            findings=findings)
    assert checked is not None, (label, [str(p) for p in findings.errors])
    return TaskCall(label, version, verl_call(checked.argv))

