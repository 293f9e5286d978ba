#!/usr/bin/env bash
# Commit messages since the rule began (the commit that added CONTRIBUTING.md): a subject of
# at most 72 characters, then a blank line and a body. Merge commits are exempt (git writes
# them). In a shallow clone, the commits it has are checked.
set -euo pipefail
cd "$(dirname "$0")/.."
MAX=72
start=$(git log --format=%H --diff-filter=A -1 -- CONTRIBUTING.md 2>/dev/null || true)
if [[ -z "$start" ]]; then
  echo "check-commits: CONTRIBUTING.md is not committed yet: nothing to check"
  exit 0
fi
bad=0
checked=0
while IFS= read -r sha; do
  checked=$((checked + 1))
  subject=$(git log -1 --format=%s "$sha")
  body=$(git log -1 --format=%b "$sha" | sed '/^[[:space:]]*$/d')
  if (( ${#subject} > MAX )); then
    echo "commit ${sha:0:10}: the subject is ${#subject} characters (at most $MAX): $subject"
    bad=1
  fi
  if [[ -z "$body" ]]; then
    echo "commit ${sha:0:10}: no body (say why in the body, after a blank line): $subject"
    bad=1
  fi
done < <(git rev-list --no-merges "$start^..HEAD" 2>/dev/null || { echo "$start"; git rev-list --no-merges "$start..HEAD"; })
if (( bad )); then
  echo "check-commits: see CONTRIBUTING.md, \"Commit messages\"" >&2
  exit 1
fi
echo "check-commits: $checked commit(s) since CONTRIBUTING.md, each with a subject of at most $MAX characters and a body"
