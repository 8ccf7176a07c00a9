#!/usr/bin/env bash
# The Prometheus Operator's CRD schemas (PrometheusRule, ServiceMonitor) for validating the
# chart's custom resources offline: @kubernetes-models/prometheus-operator from the npm
# registry (the schemas generated from the operator's CRDs, compiled to validators), installed
# once into .tools/crd-models with npm. Prints the directory. Idempotent.
set -euo pipefail

PACKAGE="@kubernetes-models/prometheus-operator@6.0.0"
here="$(cd "$(dirname "$0")/.." && pwd)"
target="$here/.tools/crd-models"
log() { echo "install-crd-models: $*" >&2; }

mkdir -p "$target"
# Beside the modules it imports (node resolves them from the script's directory); always
# the checkout's copy.
cp "$here/tools/validate-crd.mjs" "$target/validate-crd.mjs"
if [[ -f "$target/node_modules/@kubernetes-models/prometheus-operator/package.json" ]]; then
  echo "$target"
  exit 0
fi
command -v npm >/dev/null || { log "npm is required to fetch $PACKAGE"; exit 1; }
command -v node >/dev/null || { log "node is required to run the validators"; exit 1; }
log "fetching $PACKAGE"
npm install --silent --no-audit --no-fund --prefix "$target" "$PACKAGE" >&2
echo "$target"
