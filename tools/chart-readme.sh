#!/usr/bin/env bash
# Regenerates the "Parameters" tables of charts/resetgate/README.md from the `## @param`
# comments in values.yaml (bitnami's readme-generator, pinned), and fails if a value has
# no @param or a @param names no value. Run it after changing values.yaml.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
chart="$repo_root/charts/resetgate"
exec npx --yes @bitnami/readme-generator-for-helm@2.7.2 \
  --values "$chart/values.yaml" --readme "$chart/README.md"
