#!/usr/bin/env bash
# Provision RabbitMQ for crossbench on this host: idempotent, run as root.
#
#   - installs rabbitmq-server from apt when it is absent (without letting the
#     package start a node bound to 0.0.0.0);
#   - writes /etc/rabbitmq/rabbitmq.conf and rabbitmq-env.conf binding the node to
#     127.0.0.1 only when those files do not exist yet (an existing config is kept);
#   - enables rabbitmq_consistent_hash_exchange (offline before start, online after);
#   - starts the node when nothing answers on 127.0.0.1:5672, and waits for it;
#   - makes sure guest/guest can log in on 127.0.0.1 and has full rights on vhost /.
#
# On a host where RabbitMQ already answers on 127.0.0.1:5672 it only enables what
# is missing. Env: RABBIT_START_TIMEOUT (seconds, default 120).
set -euo pipefail

TIMEOUT="${RABBIT_START_TIMEOUT:-120}"
PLUGINS=(rabbitmq_consistent_hash_exchange)

log() { printf '[provision/rabbitmq] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ $(id -u) -eq 0 ]] || die "run as root (it installs packages and starts a system service)"

port_open() { timeout 2 bash -c '</dev/tcp/127.0.0.1/5672' 2>/dev/null; }

# 1. Package.
if ! command -v rabbitmqctl >/dev/null 2>&1 || [[ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ]]; then
    log "installing rabbitmq-server (apt)"
    # Keep the package's postinst from starting a default node on 0.0.0.0:5672.
    created_policy=0
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        created_policy=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends rabbitmq-server
    if [[ $created_policy -eq 1 ]]; then rm -f /usr/sbin/policy-rc.d; fi
else
    log "rabbitmq-server already installed: $(dpkg-query -W -f='${Version}' rabbitmq-server 2>/dev/null || echo unknown)"
fi

# 2. Loopback-only configuration (only when absent: never overwrite an operator's file).
mkdir -p /etc/rabbitmq
if [[ ! -s /etc/rabbitmq/rabbitmq-env.conf ]]; then
    log "writing /etc/rabbitmq/rabbitmq-env.conf (node, epmd and dist on 127.0.0.1)"
    cat > /etc/rabbitmq/rabbitmq-env.conf <<'ENV'
NODENAME=rabbit@localhost
ERL_EPMD_ADDRESS=127.0.0.1
export ERL_FLAGS="-kernel inet_dist_use_interface {127,0,0,1}"
ENV
fi
if [[ ! -s /etc/rabbitmq/rabbitmq.conf ]]; then
    log "writing /etc/rabbitmq/rabbitmq.conf (AMQP listener on 127.0.0.1:5672)"
    cat > /etc/rabbitmq/rabbitmq.conf <<'CONF'
listeners.tcp.local = 127.0.0.1:5672
loopback_users.guest = true
CONF
fi
# Whatever the config file says, refuse to leave a node listening beyond loopback.
if grep -Eq '^\s*listeners\.tcp\.[a-z0-9_]+\s*=\s*(0\.0\.0\.0:)?5672\s*$' /etc/rabbitmq/rabbitmq.conf; then
    log "WARNING: /etc/rabbitmq/rabbitmq.conf has a listener not bound to 127.0.0.1; fix it by hand"
fi

plugin_enabled() {
    # -m: names only; -e: explicitly or implicitly enabled. Works online and offline.
    rabbitmq-plugins list -e -m 2>/dev/null | grep -qx "$1"
}

# 3. Start when nothing answers.
if port_open; then
    log "a node already answers on 127.0.0.1:5672"
    for p in "${PLUGINS[@]}"; do
        if plugin_enabled "$p"; then
            log "plugin $p already enabled"
        else
            log "enabling plugin $p on the running node"
            rabbitmq-plugins enable "$p"
        fi
    done
else
    for p in "${PLUGINS[@]}"; do
        if ! plugin_enabled "$p"; then
            log "enabling plugin $p (offline)"
            rabbitmq-plugins enable --offline "$p"
        fi
    done
    log "starting rabbitmq-server -detached"
    # The /usr/sbin wrapper switches to the rabbitmq user and reads /etc/rabbitmq/*.
    rabbitmq-server -detached
    # `rabbitmqctl wait` needs the pid file; await_startup alone waits for the boot.
    deadline=$(( $(date +%s) + TIMEOUT ))
    until rabbitmqctl -q --timeout 10 await_startup >/dev/null 2>&1; do
        (( $(date +%s) < deadline )) || die "node did not boot within ${TIMEOUT}s (see /var/log/rabbitmq/)"
        sleep 1
    done
    until port_open; do
        (( $(date +%s) < deadline )) || die "node booted but 127.0.0.1:5672 does not answer"
        sleep 1
    done
    log "node is up"
fi

# 4. guest/guest on vhost /.
if ! rabbitmqctl -q authenticate_user guest guest >/dev/null 2>&1; then
    if rabbitmqctl -q list_users | awk '{print $1}' | grep -qx guest; then
        log "resetting the guest password to guest"
        rabbitmqctl -q change_password guest guest
    else
        log "creating user guest"
        rabbitmqctl -q add_user guest guest
        rabbitmqctl -q set_user_tags guest administrator
    fi
fi
rabbitmqctl -q set_permissions -p / guest '.*' '.*' '.*' >/dev/null

# 5. Report.
log "listeners: $(rabbitmq-diagnostics -q listeners 2>/dev/null | tr '\n' ' ')"
log "plugins: $(rabbitmq-plugins list -e -m 2>/dev/null | tr '\n' ' ')"
log "ready: amqp://guest:***@127.0.0.1:5672/%2f"
