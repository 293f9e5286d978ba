# Sourced by the scripts that build the cached Python environments (build-ray-env.sh,
# build-verl-oracle.sh), from the repository's root, with CACHE set.
#
# install_into ENV [pip install arguments]: uv when the project's .venv has it (hack/setup.sh
# installs the .venv first): it downloads in parallel and keeps one cache of wheels in
# $CACHE/uv, on the same file system as the environments, so an environment hard-links the
# wheels another one fetched (torch once for every verl oracle; measured: a cold 0.9.1
# oracle in 85 s against 702 s with pip, which caches nothing on these machines). Else pip.
install_into() {
  local env=$1; shift
  if [[ -x .venv/bin/uv ]]; then
    UV_CACHE_DIR="$CACHE/uv" .venv/bin/uv pip install -q --python "$env/bin/python" "$@"
  else
    "$env/bin/python" -m pip install -q --disable-pip-version-check "$@"
  fi
}

# lazy_bytecode ENV: ENV's processes write the bytecode of what they import, once, where
# PYTHONDONTWRITEBYTECODE is set (the test machines): else uv installs none and every process
# of the environment compiles what it imports from source again (torch and transformers for
# verl's, Ray for the old Ray's: a dozen processes a cluster). A .pth file in site-packages
# (run by `site` at each start) imports _argus_bytecode, which turns writing back on with
# Python's own sys.pycache_prefix set to ENV/.pycache: the bytecode of everything the
# environment's processes import (its packages, a verl snapshot, a job's code) goes into that
# tree, never beside a job's or a repository's files. Python writes each file by a rename, so
# processes importing side by side never read a partial one, and checks each against its
# source's size and time. It replaces a compileall of the whole environment (18,000 modules,
# most never imported: 200 s a verl environment on a loaded 2-core machine); the build's own
# imports then write the bytecode of what its entry points import. An environment compiled
# whole before this (ENV/.argus-bytecode) is left as it is.
lazy_bytecode() {
  local env=$1 site
  [[ -f $env/.argus-bytecode ]] && return 0
  site=$(echo "$env"/lib/python3*/site-packages)
  [[ -d $site ]] || { log "no site-packages in $env"; return 1; }
  [[ -f $site/_argus_bytecode.pth && -f $site/_argus_bytecode.py ]] && return 0
  cat > "$site/_argus_bytecode.py.tmp" <<'PY'
"""Written by Argus's hack/install-into.sh: this environment's processes write the bytecode
of what they import, though PYTHONDONTWRITEBYTECODE is set, into a tree of the environment's
own (sys.pycache_prefix: ENV/.pycache, unless PYTHONPYCACHEPREFIX names another), never beside
the sources. Run at each start by _argus_bytecode.pth."""
import os
import sys

if sys.dont_write_bytecode:
    sys.dont_write_bytecode = False
    if not sys.pycache_prefix:
        sys.pycache_prefix = os.path.join(sys.prefix, ".pycache")
PY
  mv -f "$site/_argus_bytecode.py.tmp" "$site/_argus_bytecode.py"
  echo "import _argus_bytecode" > "$site/_argus_bytecode.pth.tmp"
  mv -f "$site/_argus_bytecode.pth.tmp" "$site/_argus_bytecode.pth"
}

# warm_bytecode ENV MODULE...: imports each MODULE in ENV, and every module of Ray's dashboard
# (its head and agent import them all at start), so that their bytecode is written now, by
# one process (lazy_bytecode), not by each of a cluster's first processes side by side. A
# module that does not import is logged to ENV/.warm.log, never an error: warming is only
# for speed, and whatever it misses is written by the first process that imports it.
warm_bytecode() {
  local env=$1; shift
  (cd "$env" && "$env/bin/python" -W ignore - "$@" >"$env/.warm.log" 2>&1 <<'PY'
import importlib
import pkgutil
import sys

names = sys.argv[1:]
try:
    import ray.dashboard.modules as dashboard
    names += [m.name for m in pkgutil.walk_packages(dashboard.__path__, dashboard.__name__ + ".", onerror=lambda name: None)
              if ".tests" not in m.name and not m.name.endswith(("_test", ".conftest"))]
except ImportError:
    pass
failed = []
for name in names:
    try:
        importlib.import_module(name)
    except BaseException as exc:  # noqa: BLE001 - a module that fails to import is only not warmed
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
print(f"imported {len(names) - len(failed)} of {len(names)} modules", *failed, sep="\n")
PY
  ) || log "warming $env's bytecode failed (see $env/.warm.log): its processes write it as they import"
}
