#!/usr/bin/env bash
# `make test-repeat TESTS="tests/x.py::test_y tests/z.py" N=20 LOAD=1 WORKERS=4`: runs the
# chosen tests N times, each run a fresh pytest (its fixtures and processes started again),
# and prints one line per run and the count of failures last; exits 1 if any run failed.
#
# LOAD=1 starts a CPU hog beside the runs: one busy-loop process per core, each of which stops
# by itself after HOG_SECONDS (default 3600) and is ended when this script ends. WORKERS=n
# runs each pass on n pytest-xdist workers (default: none, one process). A failed run's
# output is kept in a log whose path is printed.
set -uo pipefail
tests="${TESTS:?name the tests: TESTS=\"tests/path.py::test_name ...\"}"
runs="${N:-10}"
load="${LOAD:-0}"
workers="${WORKERS:-}"
hog_seconds="${HOG_SECONDS:-3600}"
python="${PYTHON:-.venv/bin/python}"
logs=$(mktemp -d "${TMPDIR:-/tmp}/test-repeat.XXXXXX")
hogs=()

stop_hogs() {
  for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
}
trap stop_hogs EXIT

# The scheduler shares the CPU between sessions (autogroups) before processes: from a session
# given priority, the tests and the hog would starve the servers they start in sessions of
# their own, a failure CI never sees.
case "$(cat /proc/self/autogroup 2>/dev/null)" in
  *" nice 0" | "") ;;
  *) echo "==> warning: this session's autogroup is $(cat /proc/self/autogroup); run from one at nice 0 (echo 0 >/proc/self/autogroup), or the servers tests start are starved" ;;
esac

if [ "$load" = 1 ]; then
  PYTHON="$python" tools/cpu-hog.sh "$hog_seconds" &
  hogs+=("$!")
  echo "==> beside $(nproc) busy-loop process(es) (tools/cpu-hog.sh, each stops after ${hog_seconds} s)"
fi

args=(-q -p no:cacheprovider)
[ -n "$workers" ] && args+=(-n "$workers")
failed=0
for i in $(seq "$runs"); do
  start=$(date +%s)
  # shellcheck disable=SC2086  # TESTS is a list of node ids
  if "$python" -m pytest "${args[@]}" $tests >"$logs/run-$i.log" 2>&1; then
    echo "==> run $i/$runs: passed in $(( $(date +%s) - start )) s"
    rm -f "$logs/run-$i.log"
  else
    failed=$((failed + 1))
    echo "==> run $i/$runs: FAILED in $(( $(date +%s) - start )) s: $(tail -n 1 "$logs/run-$i.log")"
    echo "    log: $logs/run-$i.log"
  fi
done
echo "==> test-repeat: $failed of $runs run(s) failed$([ "$load" = 1 ] && echo ", beside a CPU hog")"
[ "$failed" = 0 ]
