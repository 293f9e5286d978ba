#!/usr/bin/env bash
# Builds the verl oracle: a virtual environment holding the real verl (with torch and the
# rest of its dependencies, about 6 GB) for tests/integration/test_verl_oracle.py, which runs
# verl's own composition, validate_config and config dataclasses on every example, every
# basic template and a corpus of commands, side by side with Argus's restated start-up
# checks (argus.core.verlconfig.startup). The product's .venv never gets torch: the test
# runs this environment's python as a subprocess.
#
# The same environment is the real-verl testbed's runtime: the Ray cluster of
# tests/integration/test_real_verl.py and the demo run its Ray, and their jobs train with its
# torch (argus_testbed.realverl). So it also holds what verl imports at run time without
# declaring it: uvicorn and fastapi (verl.trainer.sft_trainer, through
# verl.workers.rollout.utils) and, from verl 0.9, transferqueue (verl's verl-core extra;
# main_ppo imports transfer_queue) and cachetools.
#
#   hack/build-verl-oracle.sh [VERSION]    (default: the first release in operator/argus/verl-releases.txt)
#
# Built once into the cache that every clone shares, beside the testbed binaries; skipped
# when built. Pinned by hack/verl-VERSION-oracle-constraints.txt (pip freeze of a fresh
# install); the folder's name carries a hash of that file, so changing the pins builds a new
# one and never touches one in use. Locked (one build per environment at a time; the others wait,
# then find it built); it counts as built only once its stamp exists, written last by a
# rename, so an interrupted build is started over.
#
# Prints the environment's python on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION="${1:-$(awk '!/^#/ && NF {print $1; exit}' operator/argus/verl-releases.txt)}"
PYTHON="${ARGUS_VERL_ORACLE_BASE_PYTHON:-python3}"
CACHE="${ARGUS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/argus}"
CONSTRAINTS="hack/verl-$VERSION-oracle-constraints.txt"

log() { printf '[build-verl-oracle] %s\n' "$*" >&2; }

# shellcheck source=hack/install-into.sh
source hack/install-into.sh

[[ -f $CONSTRAINTS ]] || { log "no $CONSTRAINTS: pin that verl's environment first (pip freeze of a fresh install)"; exit 1; }
pyver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
pins=$(sha256sum "$CONSTRAINTS" | cut -c1-10)
ENV="$CACHE/verl-oracle/verl-$VERSION-py$pyver-$pins"
STAMP="$ENV/.argus-built"
# One lock per environment: two releases build side by side (hack/setup.sh), one release once.
lock="$CACHE/verl-oracle/.build-$(basename "$ENV").lock"

if [[ ! -f $STAMP ]]; then
  mkdir -p "$CACHE/verl-oracle"
  exec 9>"$lock"
  flock -n 9 || { log "another build holds $lock: waiting"; flock 9; }
  if [[ ! -f $STAMP ]]; then
    t0=$SECONDS
    log "building verl $VERSION (with torch: several GB, minutes) for Python $pyver in $ENV"
    rm -rf "$ENV"  # what an interrupted build left
    "$PYTHON" -m venv "$ENV"
    # What verl imports at run time without declaring it (see the top of this file).
    undeclared=(uvicorn fastapi)
    case $VERSION in 0.[0-8].*) ;; *) undeclared+=(transferqueue cachetools) ;; esac
    if ! install_into "$ENV" -c "$CONSTRAINTS" "verl==$VERSION" "${undeclared[@]}" >"$ENV/.pip.log" 2>&1; then
      tail -n 40 "$ENV/.pip.log" >&2
      exit 1
    fi
    lazy_bytecode "$ENV"
    # What the oracle test imports, on CPU: verl's config checks and Hydra.
    if ! "$ENV/bin/python" -W ignore -c "
import verl, hydra
from verl.utils.config import validate_config
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.trainer.sft_trainer import SFTTrainer
assert verl.__version__ == '$VERSION', verl.__version__
if not verl.__version__.startswith(('0.6.', '0.7.', '0.8.')):
    import transfer_queue, cachetools  # main_ppo's undeclared imports
import importlib.util, os
assert os.path.exists(importlib.util.cache_from_source(verl.__file__)), 'no bytecode written (lazy_bytecode)'
" >"$ENV/.check.log" 2>&1; then
      tail -n 40 "$ENV/.check.log" >&2
      exit 1
    fi
    # What else the oracle runner, verl's entry points and workers, and the Ray cluster that
    # runs them import from this environment (the real-verl jobs import verl itself from a
    # snapshot: argus_testbed.realverl).
    case $VERSION in 0.[0-8].*) trainers=(verl.trainer.fsdp_sft_trainer verl.workers.fsdp_workers) ;;
                     *) trainers=(verl.trainer.sft_trainer verl.workers.engine_workers) ;; esac
    warm_bytecode "$ENV" torch transformers transformers.models.qwen2.modeling_qwen2 verl.trainer.main_ppo \
      verl.trainer.ppo.ray_trainer "${trainers[@]}" ray.dashboard.dashboard ray.dashboard.agent \
      ray._private.log_monitor ray._private.runtime_env.agent.main ray.util.state ray.job_submission
    echo "verl $VERSION python $pyver pins $pins built $(date -u +%FT%TZ) in $((SECONDS - t0)) s" > "$STAMP.tmp"
    mv -f "$STAMP.tmp" "$STAMP"
    log "built verl $VERSION in $((SECONDS - t0)) s"
  fi
fi

# Measured for this environment: the oracle runner's imports took 15 s of CPU, 7 s with
# bytecode. An environment built before its processes wrote their own bytecode, and not
# compiled whole either (an interrupted compile), gets the hook now.
lazy_bytecode "$ENV"
echo "$ENV/bin/python"
