#!/usr/bin/env bash
# Removes requirements/image-prune.txt's paths from a virtual environment's site-packages
# (the image's build stage runs it; so does tests/integration/test_lock_install.py).
#   hack/prune-venv.sh VENV [PRUNE_LIST]
set -euo pipefail
venv=$1
list=${2:-"$(dirname "$0")/../requirements/image-prune.txt"}
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
while IFS= read -r pattern; do
  [[ -z "$pattern" || "$pattern" == \#* ]] && continue
  # shellcheck disable=SC2086 - the pattern is a glob
  for path in "$site"/$pattern; do
    [[ -e "$path" ]] && rm -rf "$path"
  done
done < "$list"
find "$site" -name __pycache__ -type d -prune -exec rm -rf {} +
