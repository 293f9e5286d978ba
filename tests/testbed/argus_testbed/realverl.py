"""Real verl on this CPU-only machine, for the integration tests and the demo.

    from argus_testbed.realverl import runtime, snapshot, assets, node_env, lay_out_home

- ``runtime()``: the Python environment that trains: the verl oracle's (hack/build-verl-oracle.sh:
  the real verl release with torch, transformers and Ray at the pins of
  hack/verl-VERSION-oracle-constraints.txt), built once into the shared cache.
- ``snapshot()``: a verl code snapshot as the operator puts it first on a job's PYTHONPATH
  (``--verl-code-path``), as a cluster's ``/private/common/code/verl/verl_repo`` is: the
  release's own ``verl/`` package from its wheel, unedited, with the CPU plugins
  (hack/verl-cpu/argus_verl_cpu) beside it. Built once per plugin content and release.
- ``assets()``: the tiny model (a random Qwen2 of about 100k parameters with a tokenizer
  trained offline) and the SFT and RL parquet files (hack/verl-cpu/make_tiny_assets.py, run
  with the runtime's Python), built once per script content.
- ``node_env()``: what the Ray nodes' environment carries so that every verl process loads
  the plugins (``VERL_USE_EXTERNAL_MODULES``, verl's own hook) and selects the CPU platform,
  as a worker image's environment would; and the Hub switched off (there is none here).
- ``lay_out_home()``: a user's home with the model, the data and a reward function, as
  ``$HOME/models``, ``$HOME/datasets`` and ``$HOME/code`` hold them.

On this one-machine testbed the Ray head and worker share one session folder (the head reads
a job's driver log there: with a folder of its own, the worker's driver output never reaches
the Jobs API's log), so both nodes' log monitors forward each line an actor prints, and
main_ppo's lines (its TaskRunner is an actor) appear twice in the job's log. A cluster of one
node a machine has no such doubles; the progress reader takes a step seen twice as one.

Measured on the 2-core machine: SFT, 4 steps, about 25 s and 2 GiB; GRPO,
3 steps through main_ppo, about 2.5 min and 5 GiB; twice that under a loaded machine.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from .controlplane import repo_root
from .verl import _cache, release_dir, releases

REPO = repo_root()
PLUGINS = REPO / "hack" / "verl-cpu"
ASSETS_SCRIPT = PLUGINS / "make_tiny_assets.py"
PLUGIN_MODULE = "argus_verl_cpu"
EXAMPLES = REPO / "examples" / "real-verl"  # the tasks, as alice applies them
RUN_TIMEOUT = 900  # seconds; a GRPO or PPO run takes 2-5 minutes here, more on a loaded machine

# The Ray cluster that runs real verl: logical GPUs (verl's resource pool counts Ray's "GPU"),
# and enough logical CPUs for main_ppo's actors (TaskRunner, workers, reward loop, agent loop,
# the transfer queue's controller and storage unit): with too few the run hangs silently
# after printing its config.
WORKER_CPUS = 16
WORKER_GPUS = 2


def _digest(*paths: Path, extra: str = "") -> str:
    h = hashlib.sha256(extra.encode())
    for root in paths:
        files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts) if root.is_dir() else [root]
        for p in files:
            h.update(str(p.relative_to(root.parent)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:12]


@functools.cache
def runtime(version: str | None = None, timeout: float = 3600) -> Path:
    """The python of the environment that trains with real verl ``version`` (default: the
    newest supported); built when missing (minutes from an empty cache)."""
    version = version or releases()[0]
    proc = subprocess.run(["bash", str(REPO / "hack" / "build-verl-oracle.sh"), version], stdout=subprocess.PIPE,
                          stderr=None, text=True, timeout=timeout, cwd=REPO)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"hack/build-verl-oracle.sh {version} failed with exit code {proc.returncode}")
    return Path(lines[-1].strip())


def _build_once(dest: Path, build: functools.partial[None]) -> Path:
    """Build into a temporary sibling, then rename into place (another process may win)."""
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        build(tmp)
        tmp.rename(dest)
    except OSError:
        if not dest.is_dir():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _copy_snapshot(version: str, tmp: Path) -> None:
    shutil.copytree(release_dir(version) / "verl", tmp / "verl", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(PLUGINS / PLUGIN_MODULE, tmp / PLUGIN_MODULE, ignore=shutil.ignore_patterns("__pycache__"))


@functools.cache
def snapshot(version: str | None = None) -> Path:
    """The real verl snapshot (the release's ``verl/`` and the CPU plugins), in the cache."""
    version = version or releases()[0]
    dest = _cache() / "verl-real" / f"{version}-{_digest(PLUGINS / PLUGIN_MODULE, extra=version)}"
    return _build_once(dest, functools.partial(_copy_snapshot, version))


def _make_assets(python: Path, tmp: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run([str(python), str(ASSETS_SCRIPT), str(tmp)], capture_output=True, text=True, env=env, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"{ASSETS_SCRIPT.name} failed: {proc.stderr[-3000:]}")


@functools.cache
def assets(version: str | None = None) -> Path:
    """The tiny model and the parquet files, in the cache: model/, sft/, rl/."""
    python = runtime(version)
    dest = _cache() / "verl-tiny" / _digest(ASSETS_SCRIPT, extra=str(python))
    return _build_once(dest, functools.partial(_make_assets, python))


def node_env() -> dict[str, str]:
    """The Ray nodes' environment for real verl (what a CPU worker image would set)."""
    return {
        "VERL_USE_EXTERNAL_MODULES": PLUGIN_MODULE,  # verl/__init__.py imports it in every verl process
        "VERL_PLATFORM": "cpu",                      # and this selects the platform it registers
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        # Two cores: one thread a process, or verl's dozen processes fight over them.
        "OMP_NUM_THREADS": "1",
    }


REWARD_PY = '''"""alice's reward function for the real-verl runs: verl imports it by path and calls it
for every response. Its print is what shows, in the job's log, that verl ran it."""


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    truth = str(ground_truth)
    answer = solution_str.split("####")[-1].strip()
    # Full marks for the answer; some for the answer's digits anywhere (a random tiny model
    # seldom gets the answer, and GRPO learns nothing from rewards that are all equal).
    score = 1.0 if answer == truth else 0.5 * len(set(truth) & set(solution_str)) / len(set(truth))
    print(f"alice-reward: ground_truth={ground_truth} score={score:.2f}", flush=True)
    return score
'''
REWARD_MARKER = "alice-reward: ground_truth="


def lay_out_home(home: Path, version: str | None = None) -> Path:
    """Put the tiny model, the data and a reward function into a user's home:
    ``models/tiny-qwen2``, ``datasets/{sft,rl}/{train,test}.parquet``, ``code/real_reward.py``."""
    src = assets(version)
    shutil.copytree(src / "model", home / "models" / "tiny-qwen2", dirs_exist_ok=True)
    for kind in ("sft", "rl"):
        shutil.copytree(src / kind, home / "datasets" / kind, dirs_exist_ok=True)
    (home / "code").mkdir(parents=True, exist_ok=True)
    (home / "code" / "real_reward.py").write_text(REWARD_PY)
    return home


def example(name: str, *, spec: dict[str, Any] | None = None, replace: dict[str, str] | None = None) -> str:
    """An example of examples/real-verl/ as JSON, its spec updated with ``spec`` and its
    command's text ``replace``d (each old text must be there)."""
    doc = yaml.safe_load((EXAMPLES / name).read_text())
    doc["spec"].update(spec or {})
    for old, new in (replace or {}).items():
        assert old in doc["spec"]["command"], old
        doc["spec"]["command"] = doc["spec"]["command"].replace(old, new)
    return json.dumps(doc)
