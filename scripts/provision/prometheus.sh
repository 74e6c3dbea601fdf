#!/usr/bin/env bash
# Provision a Prometheus binary for the live-metrics test (loader/tests/live_metrics.rs):
# idempotent, run as root. Installs Debian's `prometheus` package when /usr/bin/prometheus
# is absent, without its service: the test starts a Prometheus of its own on loopback,
# with its own configuration and data directory, scrapes only the cell it runs, and stops
# it at the end. Nothing else on the machine is scraped or reconfigured.
set -euo pipefail

log() { printf '[provision/prometheus] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

if [[ -x /usr/bin/prometheus ]]; then
    log "prometheus present: $(/usr/bin/prometheus --version 2>&1 | head -1)"
    exit 0
fi

[[ $(id -u) -eq 0 ]] || die "run as root (it installs a package)"

log "installing prometheus (apt, without starting its service)"
export DEBIAN_FRONTEND=noninteractive
# policy-rc.d 101: the package's maintainer scripts may not start the service.
cleanup() { rm -f /usr/sbin/policy-rc.d; }
trap cleanup EXIT
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
chmod +x /usr/sbin/policy-rc.d
apt-get update -qq
apt-get install -y -qq --no-install-recommends prometheus
[[ -x /usr/bin/prometheus ]] || die "apt installed prometheus but /usr/bin/prometheus is missing"
# A service the package did start anyway (a machine with systemd ignores policy-rc.d
# for some units) is stopped and disabled: it is ours, installed a moment ago, and
# would scrape this machine on 9090.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
    systemctl disable --now prometheus || true
fi
log "installed: $(/usr/bin/prometheus --version 2>&1 | head -1)"
