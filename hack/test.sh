#!/usr/bin/env bash
# The test command: sets up whatever is missing (hack/setup.sh), then runs the suite against a
# real kube-apiserver + etcd and real Ray clusters that the tests start. Extra arguments go to
# pytest. The tiers:
#   hack/test.sh                   everything but the slower suite (what CI runs)
#   hack/test.sh -m unit           pure logic: needs only the .venv (no Go build, no verl runtime)
#   hack/test.sh -m "not slow"     the inner loop: no real verl, no verl oracle, no old Ray
#                                  (the testbed binaries, not the Python environments)
#   hack/test.sh -m slower         the slower suite, which no other run selects: real verl PPO
#                                  with a critic and a KL (tests/conftest.py)
# The tests run side by side in pytest-xdist workers, a test module to a worker (its module
# fixtures start once): the integration tests mostly wait on real processes, not on the CPU.
# ARGUS_TEST_WORKERS sets how many (default 3; `-n 0` or `-p no:xdist` runs them in this one
# process). After every run, build/test-report.txt says where the time went (setup steps
# included).
set -euo pipefail
cd "$(dirname "$0")/.."
args=("$@")
markexpr=
parallel=1
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in
    -m) markexpr=${args[i + 1]:-} ;;
    -m?*) markexpr=${args[i]#-m} ;;
    -n | -n?* | --numprocesses | --numprocesses=* | no:xdist) parallel= ;;
  esac
done
case $markexpr in
  unit) setup=--python-only ;;
  *"not slow"*) setup=--no-slow ;;
  *) setup= ;;
esac
bash hack/setup.sh ${setup:+"$setup"}
export ARGUS_SETUP_TIMES=${ARGUS_SETUP_TIMES:-$PWD/build/setup-times.txt}
printf '\n==> pytest\n' >&2
if [[ -n $parallel ]]; then
  args=(-n "${ARGUS_TEST_WORKERS:-3}" --dist loadfile --no-loadscope-reorder "${args[@]}")
fi
set +e
.venv/bin/python -m pytest "${args[@]}"
rc=$?
set -e
if [[ $rc -eq 5 ]]; then
  echo "test.sh: pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit $rc
