#!/usr/bin/env bash
# `make test-clones N=20`: what CI does, N times in a row. Each run is a fresh clone of HEAD in
# a temporary directory and its `.ci/run` (so `make test` sets up its own virtualenv, tools and
# servers); the even-numbered runs go beside tools/cpu-hog.sh (LOAD=alternate, the default;
# LOAD=0 none, LOAD=1 every run). Prints one line per run (wall time of `.ci/run`, setup
# included, and `make test`'s own clock), then the median of the quiet and the loaded runs and
# the count of failures; exits 1 if any run failed. A failed run's clone and log are kept.
# Each run clones HEAD as it starts and names the commit it tested.
set -uo pipefail
runs="${N:-20}"
load="${LOAD:-alternate}"
root=$(git rev-parse --show-toplevel)
commit=$(git -C "$root" rev-parse --short HEAD)
work=$(mktemp -d "${TMPDIR:-/tmp}/test-clones.XXXXXX")
[ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ] &&
  echo "==> note: uncommitted changes are not in the clones; they test $commit"
hog=""
stop_hog() { [ -n "$hog" ] && kill "$hog" 2>/dev/null && wait "$hog" 2>/dev/null; hog=""; }
trap stop_hog EXIT

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
  [ "$beside" = loaded ] && { "$root/tools/cpu-hog.sh" 3600 & hog=$!; }
  start=$(date +%s)
  (cd "$clone" && bash .ci/run) >"$work/run-$i.log" 2>&1
  status=$?
  wall=$(( $(date +%s) - start ))
  stop_hog
  own=$(sed -n 's/^==> make test: \([0-9]*\) s.*/\1/p' "$work/run-$i.log" | tail -n 1)
  if [ "$status" = 0 ]; then
    echo "$wall" >>"$work/$beside"
    echo "==> run $i/$runs ($beside, $at): passed, $wall s wall, make test ${own:-?} s"
    rm -rf "$clone" "$work/run-$i.log"
  else
    failed=$((failed + 1))
    echo "==> run $i/$runs ($beside, $at): FAILED after $wall s: $(grep -E '^(FAILED|ERROR)|INTERNALERROR' "$work/run-$i.log" | head -n 3 | tr '\n' ' ')"
    echo "    log: $work/run-$i.log, clone: $clone"
  fi
done
echo "==> test-clones from $commit: $failed of $runs failed; median wall, passed runs: quiet $(median <"$work/quiet") s, beside the hog $(median <"$work/loaded") s"
[ "$failed" = 0 ]
