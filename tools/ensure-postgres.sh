#!/usr/bin/env bash
# Make sure PostgreSQL's server binaries exist for the archive's tests and `resetgate up`
# (services/ctl/localpg.py finds them on PATH or in /usr/lib/postgresql/<version>/bin):
# as root, the system package manager installs Debian's `postgresql`; otherwise say how.
set -euo pipefail
if command -v pg_ctl >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-postgres: installing postgresql from apt" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
  exit 0
fi
echo "ensure-postgres: no PostgreSQL server found; install the postgresql package" \
  "(the archive's tests and \`resetgate up\` need it)" >&2
exit 1
