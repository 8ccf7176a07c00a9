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
side=(lint typecheck deadcode chart-lint chart-readme test-cluster)

elapsed() { echo $(( $(date +%s) - start )); }

# `make test` must leave nothing untracked in the tree: what git would list as untracked
# (ignored files, e.g. .venv or caches, are not) before, compared with after.
untracked() { git ls-files --others --exclude-standard 2>/dev/null | sort; }
untracked >"$logs/untracked-before"

for check in "${side[@]}"; do
  (
    $make "$check" >"$logs/$check" 2>&1
    status=$?
    echo "$status" >"$logs/$check.status"
    echo "==> $check: $([ "$status" = 0 ] && echo ok || echo "FAILED (exit $status)") after $(elapsed) s"
  ) &
done

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
