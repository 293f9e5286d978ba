#!/usr/bin/env bash
# The test command: sets up whatever is missing (hack/setup.sh), then runs the whole suite
# against a real kube-apiserver + etcd and a real Ray cluster that the tests start.
# Extra arguments go to pytest (e.g. hack/test.sh -m unit).
set -euo pipefail
cd "$(dirname "$0")/.."
bash hack/setup.sh
printf '\n==> pytest\n' >&2
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [[ $rc -eq 5 ]]; then
  echo "test.sh: pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit $rc
