#!/usr/bin/env bash
# `make test` after setup: the independent checks side by side, then the `serial` tests alone.
#
# The main pytest pass runs in the foreground, so its progress is what you watch; lint, mypy,
# helm lint and the Redis Cluster pass run beside it, each into its own log, with one line
# when each ends (and its log when it fails). Prints the total time last.
set -uo pipefail
make="${MAKE:-make} --no-print-directory"
start=$(date +%s)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
side=(lint typecheck deadcode chart-lint chart-readme)
# The pytest passes that start after the warm-up below (each collects its tests anew).
after_warmup=(test-cluster)

# pytest rewrites every test module's asserts as it imports it and caches the result beside
# it (the Makefile lets Python write caches): from a fresh clone the six workers and the
# Cluster pass's two started together and each rewrote all of them, 14 CPU-s to collect
# against 5-6 with the cache. Written once here first, the cache serves all of them.

elapsed() { echo $(( $(date +%s) - start )); }

# `make test` must leave nothing untracked in the tree: what git would list as untracked
# (ignored files, e.g. .venv or caches, are not) before, compared with after.
untracked() { git ls-files --others --exclude-standard 2>/dev/null | sort; }
untracked >"$logs/untracked-before"

beside() {
  for check in "$@"; do
    (
      $make "$check" >"$logs/$check" 2>&1
      status=$?
      echo "$status" >"$logs/$check.status"
      echo "==> $check: $([ "$status" = 0 ] && echo ok || echo "FAILED (exit $status)") after $(elapsed) s"
    ) &
  done
}

beside "${side[@]}"
echo "==> collecting once, which writes pytest's assertion-rewrite cache"
$make collect >"$logs/collect" 2>&1 || cat "$logs/collect"  # the passes report it again
beside "${after_warmup[@]}"
side+=("${after_warmup[@]}")

echo "==> tests on parallel workers; beside them: ${side[*]}"
$make unit-parallel
failed=$?
wait

for check in "${side[@]}"; do
  if [ "$(cat "$logs/$check.status")" != 0 ]; then
    echo "==> $check log:"
    cat "$logs/$check"
    failed=1
  fi
done

echo "==> serial tests, alone"
$make unit-serial || failed=1

left=$(untracked | comm -13 "$logs/untracked-before" -)
if [ -n "$left" ]; then
  echo "==> make test left untracked files in the tree (a test writes where it should use tmp_path):"
  echo "$left"
  failed=1
fi

echo "==> make test: $(elapsed) s, $([ "$failed" = 0 ] && echo "all passed" || echo FAILED)"
exit "$failed"
