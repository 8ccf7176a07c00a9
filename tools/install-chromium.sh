#!/bin/sh
# Install Debian's chromium and chromium-driver when absent (the console's browser tests).
#
# Idempotent: exits at once when /usr/bin/chromium and /usr/bin/chromedriver are there.
# Debian's packages, not a browser build of its own: this project's machines reach only
# package registries, and the distribution's chromedriver always matches its chromium.
# The browser tests call it (tests/console/browser), so a fresh machine needs no manual step.
set -eu

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "install-chromium: chromium is missing and installing it needs root" >&2
    echo "  run as root: apt-get update && apt-get install -y chromium chromium-driver" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# Another apt run on the same machine holds the lock for a while; wait for it, not fail.
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
    chromium chromium-driver fonts-dejavu-core >/dev/null

[ -x /usr/bin/chromium ] || { echo "install-chromium: chromium still missing" >&2; exit 1; }
[ -x /usr/bin/chromedriver ] || { echo "install-chromium: chromedriver still missing" >&2; exit 1; }
/usr/bin/chromium --version
