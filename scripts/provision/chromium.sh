#!/usr/bin/env bash
# Provision headless Chromium for the HTML report test (loader/tests/report_html.rs):
# idempotent, run as root. Installs Debian's `chromium` and the DejaVu fonts package
# when /usr/bin/chromium is absent; does nothing otherwise. The test launches it as
#   chromium --headless --no-sandbox --disable-gpu --disable-background-networking
# and talks to nothing but the local file it renders.
set -euo pipefail

log() { printf '[provision/chromium] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

if [[ -x /usr/bin/chromium ]]; then
    log "chromium present: $(/usr/bin/chromium --version 2>/dev/null || echo unknown version)"
    exit 0
fi

[[ $(id -u) -eq 0 ]] || die "run as root (it installs a package)"

log "installing chromium (apt)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core
[[ -x /usr/bin/chromium ]] || die "apt installed chromium but /usr/bin/chromium is missing"
log "installed: $(/usr/bin/chromium --version 2>/dev/null || echo unknown version)"
