#!/usr/bin/env bash
# `make test-clones N=20`: what CI does, N times in a row. Each run is a fresh clone of HEAD in
# a temporary directory and its `.ci/run` (so `make test` sets up its own virtualenv, tools and
# servers); the even-numbered runs go beside tools/cpu-hog.sh (LOAD=alternate, the default;
# LOAD=0 none, LOAD=1 every run). Prints one line per run (wall time of `.ci/run`, setup
# included, and `make test`'s own clock), then the median of the quiet and the loaded runs and
# the count of failures; exits 1 if any run failed. A failed run's clone and log are kept.
# Each run clones HEAD as it starts and names the commit it tested.
#
# Each run, and its hog, is a session of its own (setsid): the scheduler shares the CPU
# between sessions (autogroups) before processes, so a run started from a shell whose
# autogroup was given priority (`echo -15 >/proc/self/autogroup`, as benchmarks do) would
# hold its workers and hog above the redis-servers the tests start in sessions of their own,
# and starve them (they then miss their 10 s start). In its own session a run is scheduled as
# CI schedules it, whoever started it.
set -uo pipefail
runs="${N:-20}"
load="${LOAD:-alternate}"
root=$(git rev-parse --show-toplevel)
commit=$(git -C "$root" rev-parse --short HEAD)
work=$(mktemp -d "${TMPDIR:-/tmp}/test-clones.XXXXXX")
[ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ] &&
  echo "==> note: uncommitted changes are not in the clones; they test $commit"
session=""
clone=""
# Ends the run in progress: its session's process group, then what its test sessions started
# in sessions of their own (redis-servers, PostgreSQL, services), which no later session of
# that clone would reap (tests/support/leftovers.py).
stop_run() {
  [ -n "$session" ] || return 0
  kill -- "-$session" 2>/dev/null
  wait "$session" 2>/dev/null
  [ -x "$clone/.venv/bin/python" ] && (cd "$clone" && .venv/bin/python -c \
    'import sys; from pathlib import Path; from tests.support.leftovers import reap
print(f"==> reaped {len(reap(Path(sys.argv[1])).killed)} process(es) of the stopped run")' "$clone")
  session=""
}
trap 'stop_run; exit 130' INT TERM

# .ci/run in the clone $1, in a session of its own; with $2 = loaded, beside the hog started
# in that same session and ended with the run.
run_ci() {
  if [ "$2" = loaded ]; then
    setsid --wait bash -c '"$1" 3600 & hog=$!; cd "$2" && bash .ci/run; status=$?
      kill "$hog"; wait "$hog"; exit "$status"' _ "$root/tools/cpu-hog.sh" "$1" &
  else
    setsid --wait bash -c 'cd "$1" && exec bash .ci/run' _ "$1" &
  fi
  session=$!
  wait "$session"
  local status=$?
  session=""
  return "$status"
}

median() { sort -n | awk '{a[NR] = $1} END {if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2); else print "-"}'; }

failed=0
: >"$work/quiet"
: >"$work/loaded"
for i in $(seq "$runs"); do
  beside=quiet
  if [ "$load" = 1 ] || { [ "$load" = alternate ] && [ $((i % 2)) = 0 ]; }; then beside=loaded; fi
  clone="$work/run-$i"
  git clone -q "$root" "$clone"
  at=$(git -C "$clone" rev-parse --short HEAD)
  start=$(date +%s)
  run_ci "$clone" "$beside" >"$work/run-$i.log" 2>&1
  status=$?
  wall=$(( $(date +%s) - start ))
  own=$(sed -n 's/^==> make test: \([0-9]*\) s.*/\1/p' "$work/run-$i.log" | tail -n 1)
  if [ "$status" = 0 ]; then
    echo "$wall" >>"$work/$beside"
    echo "==> run $i/$runs ($beside, $at): passed, $wall s wall, make test ${own:-?} s"
    rm -rf "$clone" "$work/run-$i.log"
  else
    failed=$((failed + 1))
    echo "==> run $i/$runs ($beside, $at): FAILED after $wall s: $(grep -E '^(FAILED|ERROR) tests/|INTERNALERROR' "$work/run-$i.log" | head -n 3 | tr '\n' ' ')"
    echo "    log: $work/run-$i.log, clone: $clone"
  fi
done
echo "==> test-clones from $commit: $failed of $runs failed; median wall, passed runs: quiet $(median <"$work/quiet") s, beside the hog $(median <"$work/loaded") s"
[ "$failed" = 0 ]
