#!/usr/bin/env bash
# Builds the test control plane (kube-apiserver, etcd), kubectl and helm from Go modules at
# pinned versions, into a cache outside the repo so every clone shares it. Skips whatever is
# built. kubectl is built from the same Kubernetes release as the API server, so a fresh
# machine without kubectl runs the tests and the demo all the same (the testbed prefers this
# kubectl to one on PATH: the client matches the server).
#
# Why from source: these machines have no Docker (no kind) and no download site for release
# binaries, only the Go module proxy. This is the envtest layout: KUBEBUILDER_ASSETS, when it
# names a folder holding kube-apiserver and etcd, is used as-is and nothing is built.
#
# Prints the folder holding the binaries on its last line. With --monitoring-crds: the
# folder holding the Prometheus Operator's ServiceMonitor and PodMonitor CRDs instead, which
# it generates with controller-gen from the operator's published Go API module (the chart's
# ServiceMonitor/PodMonitor are dry-run against them; the API server has no other source).
set -euo pipefail

K8S_VERSION="${ARGUS_K8S_VERSION:-v1.34.4}"
ETCD_VERSION="${ARGUS_ETCD_VERSION:-v3.6.13}"   # the etcd 3.6 line is what Kubernetes 1.34 ships with
HELM_VERSION="${ARGUS_HELM_VERSION:-v3.19.0}"
MONITORING_VERSION="${ARGUS_MONITORING_API_VERSION:-v0.95.2}"   # github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring
CONTROLLER_TOOLS_VERSION="${ARGUS_CONTROLLER_TOOLS_VERSION:-v0.23.0}"
CACHE="${ARGUS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/argus}"
BIN="$CACHE/bin/k8s-$K8S_VERSION"
HELM_BIN="$CACHE/bin/helm-$HELM_VERSION"
CRD_DIR="$CACHE/crds/monitoring-$MONITORING_VERSION"
WORK="$CACHE/build"

log() { printf '[build-testbed-bins] %s\n' "$*" >&2; }

if [[ -n "${KUBEBUILDER_ASSETS:-}" && -x "$KUBEBUILDER_ASSETS/kube-apiserver" && -x "$KUBEBUILDER_ASSETS/etcd" ]]; then
  log "using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS (nothing built)"
  BIN="$KUBEBUILDER_ASSETS"
fi
mkdir -p "$BIN" "$HELM_BIN" "$WORK" "$CRD_DIR"
export GOFLAGS="${GOFLAGS:--buildvcs=false} -trimpath"

build_etcd() {
  local dir="$WORK/etcd-$ETCD_VERSION"
  mkdir -p "$dir"
  cat > "$dir/main.go" <<'GO'
// Command etcd is etcd's own main, wrapped so it can be built from the Go module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  # go's own chatter goes to go.log, shown when a step fails.
  if ! (cd "$dir" && rm -f go.mod go.sum go.log && go mod init argus.local/etcd >>go.log 2>&1 \
     && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >>go.log 2>&1 && go mod tidy >>go.log 2>&1); then
    tail -n 40 "$dir/go.log" >&2
    return 1
  fi
  # Built under a temporary name and renamed, so an interrupted build never leaves a
  # half-written binary that a later run would take as built.
  (cd "$dir" && go build -ldflags "-s -w" -o "$BIN/.etcd.tmp.$$" .)
  mv -f "$BIN/.etcd.tmp.$$" "$BIN/etcd"
}

# The wrapper module that k8s.io/kubernetes's commands (kube-apiserver, kubectl) are built in.
k8s_module() {
  local dir="$WORK/kube-apiserver-$K8S_VERSION"
  mkdir -p "$dir"
  local info kgomod
  info=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION")
  kgomod=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])' <<<"$info")
  # k8s.io/kubernetes replaces its staging modules with local folders; a wrapper module
  # requires the same versions and points each staging module at its published v0.<minor>.<patch>.
  python3 - "$kgomod" "$K8S_VERSION" > "$dir/go.mod" <<'PY'
import re, sys
src, version = open(sys.argv[1]).read(), sys.argv[2]
staging_version = "v0." + version.lstrip("v").split(".", 1)[1]
go_line = re.search(r"^go (\S+)", src, re.M).group(1)
requires = re.findall(r"^\s*([\w./-]+) (v\S+)(?: // indirect)?$", re.search(r"require \((.*?)\n\)", src, re.S).group(1), re.M)
blocks = re.findall(r"require \((.*?)\n\)", src, re.S)
reqs = []
for b in blocks:
    reqs += re.findall(r"^\s*([\w./-]+) (v\S+)", b, re.M)
replaces = re.findall(r"^\s*([\w./-]+) => (\S+)(?: (v\S+))?", "\n".join(re.findall(r"replace \((.*?)\n\)", src, re.S)), re.M)
print("module argus.local/kube-apiserver\n")
print(f"go {go_line}\n")
print("require (")
print(f"\tk8s.io/kubernetes {version}")
for mod, ver in reqs:
    print(f"\t{mod} {ver}")
print(")\n")
print("replace (")
for mod, target, ver in replaces:
    if target.startswith("./staging/"):
        print(f"\t{mod} => {mod} {staging_version}")
    else:
        print(f"\t{mod} => {target} {ver}")
print(")")
PY
  cat > "$dir/tools.go" <<'GO'
//go:build tools

// Package tools pins the kube-apiserver and kubectl main packages as dependencies of this
// wrapper module.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
}

# A command of k8s.io/kubernetes, built in the kube-apiserver's wrapper module with the
# release's version stamped in (kubectl version and the API server's /version read it).
build_k8s_command() {
  local name=$1 dir="$WORK/kube-apiserver-$K8S_VERSION" minor p
  minor=$(cut -d. -f2 <<<"$K8S_VERSION")
  local date; date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  local ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=$date"
  done
  (cd "$dir" && go mod tidy -e >/dev/null 2>&1 || true
   cd "$dir" && go build -ldflags "$ld" -o "$BIN/.$name.tmp.$$" "k8s.io/kubernetes/cmd/$name")
  mv -f "$BIN/.$name.tmp.$$" "$BIN/$name"
}

build_kube_apiserver() { k8s_module && build_k8s_command kube-apiserver; }
build_kubectl() { k8s_module && build_k8s_command kubectl; }

build_helm() {
  # go install writes the binary in one rename.
  GOBIN="$HELM_BIN" go install -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
}

build_monitoring_crds() {
  local dir="$WORK/monitoring-crds-$MONITORING_VERSION"
  mkdir -p "$dir"
  cat > "$dir/tools.go" <<'GO'
//go:build tools

// Package tools pins the API types and the generator as dependencies of this module.
package tools

import (
	_ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
GO
  if ! (cd "$dir" && rm -f go.mod go.sum go.log && go mod init argus.local/monitoring-crds >>go.log 2>&1 \
     && go get "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring@$MONITORING_VERSION" \
               "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_TOOLS_VERSION" >>go.log 2>&1 \
     && go mod tidy >>go.log 2>&1 && go build -o controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen >>go.log 2>&1 \
     && rm -rf out && ./controller-gen crd:crdVersions=v1 \
          paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1 output:crd:dir=out >>go.log 2>&1); then
    tail -n 40 "$dir/go.log" >&2
    return 1
  fi
  cp "$dir/out/monitoring.coreos.com_servicemonitors.yaml" "$dir/out/monitoring.coreos.com_podmonitors.yaml" "$CRD_DIR/"
}

timed() { local name=$1; shift; local t0=$SECONDS; log "building $name"; "$@"; log "built $name in $((SECONDS - t0)) s"; }

crds_built() { [[ -f "$CRD_DIR/monitoring.coreos.com_servicemonitors.yaml" && -f "$CRD_DIR/monitoring.coreos.com_podmonitors.yaml" ]]; }
built() { [[ -x "$BIN/etcd" && -x "$BIN/kube-apiserver" && -x "$BIN/kubectl" && -x "$HELM_BIN/helm" ]] && crds_built; }
if ! built; then
  command -v go >/dev/null || { log "go is not on PATH: install Go (or set KUBEBUILDER_ASSETS)"; exit 1; }
  # One build at a time per cache (parallel test workers, several clones): the others wait,
  # then find the binaries built.
  if command -v flock >/dev/null; then
    exec 9>"$CACHE/.build.lock"
    flock -n 9 || { log "another build holds $CACHE/.build.lock: waiting"; flock 9; }
    rm -f "$BIN"/.*.tmp.* 2>/dev/null || true  # left by an interrupted build
  fi
fi
# Side by side: each build spends part of its time fetching modules and linking (one core),
# which the others' compiling fills. Go's module and build caches are safe to share between
# concurrent builds. kubectl follows kube-apiserver: it reuses most of its compiled packages.
pids=()
[[ -x "$BIN/etcd" ]] || { timed "etcd $ETCD_VERSION" build_etcd & pids+=($!); }
{ [[ -x "$BIN/kube-apiserver" ]] || timed "kube-apiserver $K8S_VERSION" build_kube_apiserver
  [[ -x "$BIN/kubectl" ]] || timed "kubectl $K8S_VERSION" build_kubectl; } &
pids+=($!)
[[ -x "$HELM_BIN/helm" ]] || { timed "helm $HELM_VERSION" build_helm & pids+=($!); }
crds_built || { timed "ServiceMonitor/PodMonitor CRDs $MONITORING_VERSION (controller-gen $CONTROLLER_TOOLS_VERSION)" build_monitoring_crds & pids+=($!); }
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
[[ $failed == 0 ]] || { log "a build failed (its output is above)"; exit 1; }
ln -sf "$HELM_BIN/helm" "$BIN/helm" 2>/dev/null || true
if [[ "${1:-}" == "--monitoring-crds" ]]; then
  echo "$CRD_DIR"
else
  echo "$BIN"
fi
