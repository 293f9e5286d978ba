#!/usr/bin/env bash
# The test command: sets up whatever is missing (hack/setup.sh), then runs the whole suite
# against a real kube-apiserver + etcd and a real Ray cluster that the tests start.
# Extra arguments go to pytest (e.g. hack/test.sh -m unit). The unit tests need only the
# .venv: with -m unit, the testbed's binaries and environments are neither built nor waited for.
set -euo pipefail
cd "$(dirname "$0")/.."
only_unit=
for ((i = 1; i < $#; i++)); do
  [[ ${!i} == -m && ${@:i+1:1} == unit ]] && only_unit=1
done
bash hack/setup.sh ${only_unit:+--python-only}
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
