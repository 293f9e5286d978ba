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

# write_bytecode ENV LOCK: the bytecode of every module of ENV, written once, under LOCK (the
# build's lock file). uv installs none, and where PYTHONDONTWRITEBYTECODE is set (the test
# machines) no process writes any, so without it every process of the environment compiles
# what it imports from source again (torch and transformers for verl's, Ray for the old
# Ray's: a dozen processes a cluster). Behind a stamp of its own (ENV/.argus-bytecode), apart
# from the build's, so an environment built before this step gets it too; Python writes
# each file by a rename, so a process importing meanwhile never reads a partial one. Not
# every file compiles (torch ships tests in Python 3.12's syntax); each one that does is kept.
write_bytecode() {
  local env=$1 lock=$2 stamp="$1/.argus-bytecode" t0
  [[ -f $stamp ]] && return 0
  exec 9>"$lock"
  flock -n 9 || { log "another build holds $lock: waiting"; flock 9; }
  if [[ ! -f $stamp ]]; then
    t0=$SECONDS
    env -u PYTHONPYCACHEPREFIX "$env/bin/python" -m compileall -q -j 0 "$env/lib" >"$env/.compile.log" 2>&1 || \
      log "$(grep -c '^\*\*\* Error' "$env/.compile.log") files did not compile (see $env/.compile.log)"
    echo "compiled $(date -u +%FT%TZ) in $((SECONDS - t0)) s" > "$stamp.tmp"
    mv -f "$stamp.tmp" "$stamp"
    log "wrote $env's bytecode in $((SECONDS - t0)) s"
  fi
}
