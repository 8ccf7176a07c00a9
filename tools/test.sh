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

echo "==> make test: $(elapsed) s, $([ "$failed" = 0 ] && echo "all passed" || echo FAILED)"
exit "$failed"
