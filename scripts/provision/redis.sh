#!/usr/bin/env bash
# Provision Redis for crossbench on this host: idempotent, run as root.
#
#   - installs redis-server and redis-tools (redis-benchmark, for the raw ratio) from
#     apt when they are absent;
#   - when nothing answers on 127.0.0.1:6379, starts redis-server on loopback,
#     daemonized, with the persistence given by REDIS_PERSISTENCE: `none` (the default,
#     as this project's development and CI machines run it: no AOF, no snapshots, so
#     the adapter records tier none), `everysec` or `always` (AOF under
#     /var/lib/redis-crossbench), and waits until it answers;
#   - leaves a server that already answers on 127.0.0.1:6379 alone (the adapter reads
#     its tier with CONFIG GET at setup and records it).
#
# Env: REDIS_PERSISTENCE (none | everysec | always), REDIS_START_TIMEOUT (seconds, 30).
set -euo pipefail

TIMEOUT="${REDIS_START_TIMEOUT:-30}"
PERSIST="${REDIS_PERSISTENCE:-none}"
DIR=/var/lib/redis-crossbench

log() { printf '[provision/redis] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ $(id -u) -eq 0 ]] || die "run as root (it installs packages and starts a server)"

port_open() { timeout 2 bash -c '</dev/tcp/127.0.0.1/6379' 2>/dev/null; }

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-benchmark >/dev/null 2>&1 || need+=(redis-tools)
if [[ ${#need[@]} -gt 0 ]]; then
    log "installing ${need[*]} (apt)"
    created_policy=0
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        created_policy=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}"
    if [[ $created_policy -eq 1 ]]; then rm -f /usr/sbin/policy-rc.d; fi
fi

if port_open; then
    log "a server already answers on 127.0.0.1:6379: left alone ($(redis-cli -h 127.0.0.1 config get appendonly 2>/dev/null | tr '\n' ' '))"
    exit 0
fi

case "$PERSIST" in
    none) args=(--appendonly no --save "") ;;
    everysec|always) args=(--appendonly yes --appendfsync "$PERSIST" --save "") ;;
    *) die "REDIS_PERSISTENCE must be none, everysec or always (got $PERSIST)" ;;
esac
mkdir -p "$DIR"
log "starting redis-server on 127.0.0.1:6379 (persistence: $PERSIST, dir $DIR)"
redis-server --bind 127.0.0.1 --port 6379 --protected-mode yes --dir "$DIR" \
    --daemonize yes --logfile "$DIR/redis.log" "${args[@]}"
deadline=$(( $(date +%s) + TIMEOUT ))
until redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; do
    (( $(date +%s) < deadline )) || die "redis-server did not answer within ${TIMEOUT}s (see $DIR/redis.log)"
    sleep 0.5
done
log "ready: redis://127.0.0.1:6379/ (persistence: $PERSIST)"
