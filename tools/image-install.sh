#!/bin/sh
# The image's two install steps, shared by the Dockerfile and tests/image (which replays them
# into a temporary directory, no container engine needed), so what is tested is what ships.
#
#   image-install.sh deps VENV LOCK       a virtualenv holding exactly the locked dependencies:
#                                         hash-checked, wheels only, no project code
#   image-install.sh app VENV SOURCE APP  the code: services/ and shared/ from SOURCE into APP
#                                         (its only copy), byte-compiled, importable from VENV's
#                                         python, and the `resetgate` command in VENV/bin
#
# Two steps so the dependency layer is cached until requirements.lock changes, whatever
# happens to the code.
set -eu

deps() {
  venv="$1" lock="$2"
  "${PYTHON:-python3}" -m venv "$venv"
  "$venv/bin/python" -m pip install --disable-pip-version-check --no-deps \
    --require-hashes --only-binary=:all: -r "$lock"
}

app() {
  venv="$1" source="$2" app="$3"
  mkdir -p "$app"
  cp -R "$source/services" "$source/shared" "$app/"
  find "$app" -name __pycache__ -type d -prune -exec rm -rf {} +
  # unchecked-hash: the .pyc files are used without looking at source timestamps (the root
  # filesystem is read-only and nothing may be compiled at run time), and they carry no
  # build time, so two builds of the same code give the same bytes.
  "$venv/bin/python" -m compileall -q --invalidation-mode unchecked-hash "$app/services" "$app/shared"
  # The code is not pip-installed (that would be a second copy in site-packages): a .pth
  # file puts APP on the venv's import path, and `resetgate` is the console script pip
  # would have written for [project.scripts].
  site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$app" > "$site/resetgate-app.pth"
  cat > "$venv/bin/resetgate" <<SCRIPT
#!$venv/bin/python
import sys
from services.ctl.main import main
sys.exit(main())
SCRIPT
  chmod 0755 "$venv/bin/resetgate"
}

step="${1:-}"
case "$step" in
  deps) shift; deps "$@" ;;
  app) shift; app "$@" ;;
  *) echo "usage: $0 deps VENV LOCK | app VENV SOURCE APP" >&2; exit 2 ;;
esac
