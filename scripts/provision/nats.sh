#!/usr/bin/env bash
# Provision NATS with JetStream for crossbench on this host: idempotent, run as root.
#
#   - installs nats-server from apt (Debian bookworm ships 2.9) when it is absent;
#   - when nothing answers on 127.0.0.1:4222, starts it on loopback with JetStream
#     enabled (store under /var/lib/nats-server, log /var/log/nats-server.log), detached,
#     and waits until it answers;
#   - leaves a server that already answers on 127.0.0.1:4222 alone (it must have
#     JetStream enabled: the adapter's setup says so otherwise).
#
# JetStream's file store is fsynced every sync_interval (2 minutes by default in 2.9);
# the scenarios state it (nats.sync_interval). Env: NATS_START_TIMEOUT (seconds, 30).
set -euo pipefail

TIMEOUT="${NATS_START_TIMEOUT:-30}"
STORE=/var/lib/nats-server
LOG=/var/log/nats-server.log

log() { printf '[provision/nats] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ $(id -u) -eq 0 ]] || die "run as root (it installs packages and starts a server)"

port_open() { timeout 2 bash -c '</dev/tcp/127.0.0.1/4222' 2>/dev/null; }

if port_open; then
    log "a server already answers on 127.0.0.1:4222: left alone"
    exit 0
fi

if ! command -v nats-server >/dev/null 2>&1; then
    log "installing nats-server (apt)"
    # Keep the package's postinst from starting a default service.
    created_policy=0
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        created_policy=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends nats-server
    if [[ $created_policy -eq 1 ]]; then rm -f /usr/sbin/policy-rc.d; fi
fi
log "nats-server $(nats-server --version 2>/dev/null || echo '?')"

mkdir -p "$STORE"
log "starting nats-server on 127.0.0.1:4222 with JetStream (store $STORE, log $LOG)"
nohup nats-server -a 127.0.0.1 -p 4222 -js -sd "$STORE" -l "$LOG" >/dev/null 2>&1 &
deadline=$(( $(date +%s) + TIMEOUT ))
until port_open; do
    (( $(date +%s) < deadline )) || die "nats-server did not answer within ${TIMEOUT}s (see $LOG)"
    sleep 0.5
done
log "ready: nats://127.0.0.1:4222 (JetStream)"
