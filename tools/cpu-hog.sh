#!/usr/bin/env bash
# tools/cpu-hog.sh [SECONDS]: the CPU hog beside `make test-repeat LOAD=1` and
# `make test-clones`: one busy-loop process per core, until SECONDS (default 3600) have passed
# or this script is ended (TERM or INT), which ends them too.
set -u
seconds="${1:-3600}"
python="${PYTHON:-python3}"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; exit 0' TERM INT
for _ in $(seq "$(nproc)"); do
  "$python" -c "import sys, time
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    pass" "$seconds" &
  pids+=("$!")
done
wait
