#!/usr/bin/env bash
# End to end on a real cluster, for machines with Docker and kind: creates a kind cluster,
# builds the operator image (Dockerfile) and loads it, deploys a tiny Ray head + worker
# (deploy/kind/ray-cluster.yaml, with a /private tree made here and mounted through kind),
# installs the Helm chart (admission webhook on), onboards alice, checks that the webhook
# refuses a hostile task, applies examples/ppo-advanced.yaml and waits for Succeeded.
#
# Where Docker or kind is missing (or the Docker daemon is not running) it prints
# "skipped: docker/kind not available (...)" and exits 0. The pytest suite runs without
# Docker against its own API server, or against any cluster via ARGUS_TEST_KUBECONFIG.
#
# Environment:
#   ARGUS_KIND_CLUSTER  cluster name (default argus-e2e)
#   ARGUS_KIND_KEEP=1   leave the cluster up at the end (prints how to use it)
#   ARGUS_RAY_IMAGE     Ray image to use instead of building one (default: built here from
#                       deploy/ray-image/Dockerfile, VARIANT=kind, on rayproject/ray:<the
#                       operator image's ray version>-py311: hydra-core, pyarrow, verl, torch and
#                       the rest at the testbed's pins, deploy/ray-image/kind-constraints.txt)
#   PYTHON              Python with this project and pyarrow (default .venv/bin/python;
#                       hack/setup.sh makes it)
set -euo pipefail
cd "$(dirname "$0")/.."

skip() { echo "kind-e2e: skipped: docker/kind not available ($*)"; exit 0; }
command -v docker >/dev/null 2>&1 || skip "no docker command"
docker info >/dev/null 2>&1 || skip "the Docker daemon is not running or not reachable"
command -v kind >/dev/null 2>&1 || skip "no kind command"
command -v kubectl >/dev/null 2>&1 || { echo "kind-e2e: kubectl is required" >&2; exit 1; }

log() { printf '\n==> %s\n' "$*" >&2; }
die() { echo "kind-e2e: FAILED: $*" >&2; exit 1; }

CLUSTER="${ARGUS_KIND_CLUSTER:-argus-e2e}"
KEEP="${ARGUS_KIND_KEEP:-0}"
PY="${PYTHON:-.venv/bin/python}"
IMAGE="argus-operator:e2e"
[[ -x "$PY" ]] || die "$PY not found: run hack/setup.sh (or set PYTHON to a Python with this project installed)"
if command -v helm >/dev/null 2>&1; then
  HELM=helm
else
  HELM="$(bash hack/build-testbed-bins.sh | tail -n1)/helm"
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/argus-kind-e2e.XXXXXX")"
export KUBECONFIG="$WORK/kubeconfig"
PF_PID=""
cleanup() {
  local rc=$?
  [[ -n "$PF_PID" ]] && kill "$PF_PID" 2>/dev/null || true
  if [[ $rc -ne 0 ]]; then
    echo "---- diagnostics ----" >&2
    kubectl get pods -A -o wide >&2 || true
    kubectl -n argus-system logs deploy/argus --tail=80 >&2 || true
    kubectl get argustasks -A -o wide >&2 || true
  fi
  if [[ "$KEEP" == "1" ]]; then
    echo "kind-e2e: cluster $CLUSTER left up: export KUBECONFIG=$KUBECONFIG (delete: kind delete cluster --name $CLUSTER)" >&2
  else
    kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
    rm -rf "$WORK"
  fi
  exit $rc
}
trap cleanup EXIT

log "a /private tree (shared data, alice's home, the verl stand-in as the verl code) in $WORK/private"
"$PY" - "$WORK/private" <<'PY'
import shutil, sys
from pathlib import Path
from argus_testbed.private_tree import STANDIN, make_private_tree
root = make_private_tree(Path(sys.argv[1]))
code = root / "common" / "code" / "verl" / "verl_repo"  # the operator's default --verl-code-path
code.mkdir(parents=True, exist_ok=True)
shutil.copytree(STANDIN / "verl", code / "verl", dirs_exist_ok=True)
PY
chmod -R a+rwX "$WORK/private"  # the Ray image runs as uid 1000 (no chown: the script may run unprivileged)

log "kind cluster $CLUSTER"
cat > "$WORK/kind.yaml" <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
    extraMounts:
      - hostPath: $WORK/private
        containerPath: /private
EOF
kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
kind create cluster --name "$CLUSTER" --config "$WORK/kind.yaml" --kubeconfig "$KUBECONFIG" --wait 180s

log "operator image $IMAGE (Dockerfile), loaded into kind"
# The Dockerfile wants its base pinned by digest: ARGUS_BASE_IMAGE, or the current digest of
# python:3.11-slim-bookworm (hack/pin-base-image.sh; needs the registry).
docker build --build-arg "BASE_IMAGE=${ARGUS_BASE_IMAGE:-$(bash hack/pin-base-image.sh)}" -t "$IMAGE" .
kind load docker-image "$IMAGE" --name "$CLUSTER"

RAY_VERSION="$(docker run --rm --entrypoint python "$IMAGE" -c 'import ray; print(ray.__version__)')"
if [[ -n "${ARGUS_RAY_IMAGE:-}" ]]; then
  RAY_IMAGE="$ARGUS_RAY_IMAGE"
else
  # The stock Ray image lacks what the trainer imports (hydra-core for the stand-in; verl,
  # torch, transfer_queue, cachetools for real verl): the kind variant of the worker image.
  RAY_IMAGE="argus-ray:kind"
  log "Ray image $RAY_IMAGE (deploy/ray-image/Dockerfile, VARIANT=kind), loaded into kind"
  docker build -f deploy/ray-image/Dockerfile --build-arg "BASE_IMAGE=rayproject/ray:${RAY_VERSION}-py311" \
    --build-arg VARIANT=kind -t "$RAY_IMAGE" .
  kind load docker-image "$RAY_IMAGE" --name "$CLUSTER"
fi
log "Ray head + worker ($RAY_IMAGE)"
sed "s|__RAY_IMAGE__|$RAY_IMAGE|g" deploy/kind/ray-cluster.yaml | kubectl apply -f -
kubectl -n ray rollout status deploy/ray-head --timeout=900s
kubectl -n ray rollout status deploy/ray-worker --timeout=900s

log "Helm chart (webhook on)"
"$HELM" upgrade --install argus charts/argus --namespace argus-system --create-namespace \
  --set image.repository=docker.io/library/argus-operator --set image.tag=e2e --set image.pullPolicy=Never \
  --set operator.rayAddress=http://ray-head.ray.svc.cluster.local:8265 \
  --set webhook.enabled=true --wait --timeout 5m
kubectl -n argus-system rollout status deploy/argus --timeout=300s

log "onboard alice"
"$PY" -m argus.cli onboard alice --kubeconfig "$KUBECONFIG"

log "the webhook refuses a hostile task at apply time"
denied=""
for _ in $(seq 1 60); do
  if out=$(kubectl apply --dry-run=server -n alice -f examples/hostile-other-user.yaml 2>&1); then
    sleep 2  # admitted: the webhook is not registered yet
  elif grep -q "denied the request" <<<"$out"; then
    denied=1; echo "$out" | head -n 3; break
  else
    sleep 2
  fi
done
[[ -n "$denied" ]] || die "the webhook never denied examples/hostile-other-user.yaml: $out"

log "examples/ppo-advanced.yaml -> Succeeded"
kubectl apply -n alice -f examples/ppo-advanced.yaml
phase=""
for _ in $(seq 1 300); do
  phase=$(kubectl get argustask ppo-advanced -n alice -o 'jsonpath={.status.phase}' 2>/dev/null || true)
  case "$phase" in
    Succeeded) break ;;
    Failed|Rejected|Stopped)
      kubectl get argustask ppo-advanced -n alice -o yaml >&2
      die "ppo-advanced ended $phase" ;;
  esac
  sleep 2
done
[[ "$phase" == "Succeeded" ]] || die "ppo-advanced still '$phase' after 10 minutes"
kubectl get argustasks -n alice -o wide
driver=$(kubectl get argustask ppo-advanced -n alice -o 'jsonpath={.status.rayJob.driverNodeId}')
echo "driver node: $driver"

log "its log (argus logs through a port-forward to the dashboard)"
kubectl -n ray port-forward svc/ray-head 18265:8265 >/dev/null 2>&1 &
PF_PID=$!
sleep 3
"$PY" -m argus.cli logs ppo-advanced -n alice --kubeconfig "$KUBECONFIG" --ray-address http://127.0.0.1:18265 --tail 8 || true

echo
echo "kind-e2e: PASSED (ppo-advanced Succeeded on the kind cluster $CLUSTER)"
