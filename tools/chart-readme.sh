#!/usr/bin/env bash
# Regenerates the "Parameters" tables of charts/resetgate/README.md from the `## @param`
# comments in values.yaml (bitnami's readme-generator, pinned), and fails if a value has
# no @param or a @param names no value. Run it after changing values.yaml.
#
#   tools/chart-readme.sh           rewrite the README in place
#   tools/chart-readme.sh --check   fail (and show the difference) if the committed README
#                                   is not what the generator writes; `make test` runs this
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
chart="$repo_root/charts/resetgate"
generate() {
  npx --yes @bitnami/readme-generator-for-helm@2.7.2 --values "$chart/values.yaml" --readme "$1" \
    | { grep -v '^Skipping check for ' || true; }
}

if [[ "${1:-}" != "--check" ]]; then
  generate "$chart/README.md"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$chart/README.md" "$work/README.md"
generate "$work/README.md" >/dev/null
if ! diff -u "$chart/README.md" "$work/README.md"; then
  echo "chart-readme: charts/resetgate/README.md is stale; run tools/chart-readme.sh and commit it" >&2
  exit 1
fi
echo "chart-readme: charts/resetgate/README.md is current"
