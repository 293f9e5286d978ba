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
