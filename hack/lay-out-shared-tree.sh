#!/usr/bin/env bash
# Lays out the shared tree Argus's jobs use (docs/ray-image.md, "The shared tree"), on a machine
# where it is mounted, as root (it sets owners):
#
#   hack/lay-out-shared-tree.sh [--uid N] [--gid N] [--verl VERSION] ROOT [USER...]
#
#   ROOT/users/                          root, 0755
#   ROOT/users/USER/{datasets,models,code,jobs,checkpoints}
#                                        the Ray worker's uid:gid, 0750 (every job runs as that uid)
#   ROOT/datasets/, ROOT/common/{datasets,models}/
#                                        root, 0755: shared and read-only to the jobs
#   ROOT/hf/                             the worker's uid, 0755: the shared Hugging Face cache (HF_HOME)
#   ROOT/common/code/verl/verl_repo/verl the verl package of the release Argus composes with (the
#                                        operator's --verl-code-path default), unpacked from the
#                                        pinned wheel, its sha256 checked (hack/fetch-verl.sh)
#
# --uid/--gid: the Ray worker's (default 1000:100, the rayproject/ray images' user ray).
# --verl: default the first release of operator/argus/verl-releases.txt. An existing snapshot
# of another version is replaced (the old one is kept beside it as verl_repo.old-<version>).
# Idempotent: run it again to add users or fix owners and modes. The homes are the same as
# `argus onboard USER --shared-tree ROOT` makes (argus.core.sharedtree).
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: $0 [--uid N] [--gid N] [--verl VERSION] ROOT [USER...]" >&2; exit 2; }
log() { printf '[lay-out-shared-tree] %s\n' "$*" >&2; }

uid=1000 gid=100 verl=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --uid) uid="${2:?}"; shift 2 ;;
    --gid) gid="${2:?}"; shift 2 ;;
    --verl) verl="${2:?}"; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    --*) usage ;;
    *) break ;;
  esac
done
[[ $# -ge 1 ]] || usage
root="$1"; shift
[[ $uid =~ ^[0-9]+$ && $gid =~ ^[0-9]+$ ]] || { log "--uid and --gid are numbers"; exit 2; }
[[ $root == /* ]] || { log "ROOT must be an absolute path: $root"; exit 2; }
for user in "$@"; do
  [[ $user =~ ^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$ ]] || { log "user id $user: must match ^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$"; exit 2; }
done
verl="${verl:-$(awk '!/^#/ && NF {print $1; exit}' operator/argus/verl-releases.txt)}"

# Shared and read-only to the jobs.
install -d -o 0 -g 0 -m 0755 "$root" "$root/users" "$root/datasets" "$root/common" \
  "$root/common/datasets" "$root/common/models" "$root/common/code" "$root/common/code/verl"
# The shared Hugging Face cache: the worker downloads into it.
install -d -o "$uid" -g "$gid" -m 0755 "$root/hf"

# The verl snapshot: the pinned wheel, checked and unpacked into the cache, then copied in.
repo="$root/common/code/verl/verl_repo"
have=""
[[ -f $repo/verl/version/version ]] && have=$(tr -d '[:space:]' < "$repo/verl/version/version")
if [[ $have != "$verl" ]]; then
  src=$(bash hack/fetch-verl.sh "$verl" | tail -n1)
  tmp="$root/common/code/verl/.verl_repo.tmp"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  cp -R "$src/verl" "$tmp/verl"
  chown -R 0:0 "$tmp"
  chmod -R u=rwX,go=rX "$tmp"
  if [[ -e $repo ]]; then
    rm -rf "$repo.old-${have:-unknown}"
    mv "$repo" "$repo.old-${have:-unknown}"
  fi
  mv "$tmp" "$repo"
  log "verl $verl at $repo${have:+ (was $have: kept as $repo.old-$have)}"
else
  log "verl $verl at $repo already"
fi

# The homes (argus.core.sharedtree.home_folders / HOME_MODE).
for user in "$@"; do
  home="$root/users/$user"
  install -d -o "$uid" -g "$gid" -m 0750 "$home" "$home/datasets" "$home/models" "$home/code" "$home/jobs" "$home/checkpoints"
  log "home $home (uid $uid, gid $gid, 0750)"
done
echo "$root"
