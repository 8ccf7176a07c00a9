#!/bin/sh
# Install promtool and prometheus from the Debian package `prometheus` when absent.
#
# Idempotent: exits at once when both binaries are on PATH. The alert tests call it
# (tests/alerts/test_rules.py) so a fresh machine needs no manual step.
#
# The package's postinst would start a prometheus service on :9090. Nothing of ours may
# depend on that daemon (tests start their own on a free port), so service starts are
# blocked with a temporary policy-rc.d during the install, and any daemon that still came
# up is stopped afterwards.
set -eu

if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "install-prometheus: promtool is missing and installing it needs root" >&2
    echo "  run as root: apt-get update && apt-get install -y --no-install-recommends prometheus" >&2
    exit 1
fi

# Parallel test workers (and `make test`'s tools step) may all get here at once: one
# installs, the others wait for it and then find the binaries.
if command -v flock >/dev/null 2>&1; then
    exec 9>/tmp/resetgate-install-prometheus.lock
    flock 9
    if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
        exit 0
    fi
fi

policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
    # 101 = "action forbidden": invoke-rc.d will not start the service.
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    own_policy=1
fi
cleanup() {
    if [ "$own_policy" -eq 1 ]; then rm -f "$policy"; fi
}
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
echo "install-prometheus: installing Debian's prometheus package (promtool, prometheus)" >&2
# Another apt run on the machine holds its lock for a while: wait for it, do not fail.
apt-get -o DPkg::Lock::Timeout=300 update -qq
apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends prometheus >/dev/null

# Belt and braces: if a service manager started the daemon anyway, stop it and keep it
# from starting at boot. Failures here are fine (no systemd in containers).
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
if [ -x /etc/init.d/prometheus ]; then
    /etc/init.d/prometheus stop >/dev/null 2>&1 || true
fi

command -v promtool >/dev/null 2>&1 || { echo "install-prometheus: promtool still missing" >&2; exit 1; }
command -v prometheus >/dev/null 2>&1 || { echo "install-prometheus: prometheus still missing" >&2; exit 1; }
promtool --version | head -n 1
