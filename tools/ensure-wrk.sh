#!/usr/bin/env bash
# Make sure wrk (the HTTP load generator benchmarks/admission.py drives) exists for
# `make bench`: as root, the system package manager installs Debian's `wrk`; otherwise say how.
set -euo pipefail
command -v wrk >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-wrk: installing wrk from apt" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >&2
  exit 0
fi
echo "ensure-wrk: wrk not found; install the wrk package (benchmarks/admission.py needs it)" >&2
exit 1
