#!/usr/bin/env bash
# Builds a virtual environment holding an older Ray, for the integration test that runs the
# testbed's Ray cluster at the old end of the supported range (tests/integration/
# test_old_ray.py) while the operator keeps its own, newer client (.venv). Built once into
# the cache that every clone shares, beside the testbed binaries; skipped when built.
#
#   hack/build-ray-env.sh [VERSION]     (default $ARGUS_OLD_RAY_VERSION or 2.41.0)
#
# The environment holds ray[default]==VERSION, pyarrow (the verl stand-in's jobs read
# parquet) and hydra-core (the stand-in composes verl's config with Hydra, as verl does),
# pinned by hack/ray-VERSION-constraints.txt; its folder's name carries a hash of
# that file, so changing the pins builds a new one and never touches one in use.
# Locked (one build per cache at a time; the others wait, then find it built) and atomic in
# effect: the environment counts as built only once its stamp exists, written last by a
# rename; an interrupted build leaves no stamp and the next run starts it over. (It is built
# in place, not renamed into place: a virtual environment's scripts name its path.)
#
# Prints the environment's python on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION="${1:-${ARGUS_OLD_RAY_VERSION:-2.41.0}}"
PYTHON="${ARGUS_OLD_RAY_BASE_PYTHON:-python3}"
CACHE="${ARGUS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/argus}"
CONSTRAINTS="hack/ray-$VERSION-constraints.txt"

log() { printf '[build-ray-env] %s\n' "$*" >&2; }

# shellcheck source=hack/install-into.sh
source hack/install-into.sh

[[ -f $CONSTRAINTS ]] || { log "no $CONSTRAINTS: pin that Ray's environment first (pip freeze of a fresh install)"; exit 1; }
pyver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
pins=$(sha256sum "$CONSTRAINTS" | cut -c1-10)
ENV="$CACHE/ray-envs/ray-$VERSION-py$pyver-$pins"
STAMP="$ENV/.argus-built"

if [[ ! -f $STAMP ]]; then
  mkdir -p "$CACHE/ray-envs"
  exec 9>"$CACHE/ray-envs/.build.lock"
  flock -n 9 || { log "another build holds $CACHE/ray-envs/.build.lock: waiting"; flock 9; }
  if [[ ! -f $STAMP ]]; then
    t0=$SECONDS
    log "building Ray $VERSION for Python $pyver in $ENV"
    rm -rf "$ENV"  # what an interrupted build left
    "$PYTHON" -m venv "$ENV"
    if ! install_into "$ENV" -c "$CONSTRAINTS" "ray[default]==$VERSION" pyarrow hydra-core >"$ENV/.pip.log" 2>&1; then
      tail -n 40 "$ENV/.pip.log" >&2
      exit 1
    fi
    lazy_bytecode "$ENV"
    "$ENV/bin/python" -c "import ray, pyarrow, hydra; assert ray.__version__ == '$VERSION', ray.__version__"
    # What the processes of the version-range test's Ray cluster import.
    warm_bytecode "$ENV" ray.dashboard.dashboard ray.dashboard.agent ray._private.log_monitor \
      ray._private.runtime_env.agent.main ray.util.state ray.job_submission pyarrow.parquet hydra.compose
    echo "ray $VERSION python $pyver pins $pins built $(date -u +%FT%TZ) in $((SECONDS - t0)) s" > "$STAMP.tmp"
    mv -f "$STAMP.tmp" "$STAMP"
    log "built Ray $VERSION in $((SECONDS - t0)) s"
  fi
fi

# Measured for this environment: import ray and ray.dashboard took 1.6 s of CPU a process,
# 0.3 s with bytecode. An environment built before its processes wrote their own bytecode,
# and not compiled whole either (an interrupted compile), gets the hook now.
lazy_bytecode "$ENV"
echo "$ENV/bin/python"
