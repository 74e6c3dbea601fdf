#!/usr/bin/env bash
# Provision a Kafka-protocol broker for crossbench's Kafka tests: tansu 0.6.0 from
# crates.io, with SQLite storage, on 127.0.0.1:9092. Idempotent, run as root.
#
#   - installs the build and client prerequisites (cmake, libcurl4-openssl-dev for
#     rdkafka's bundled librdkafka, pkg-config) when absent;
#   - builds tansu once per machine (9-13 min on 2 cores) into a cache OUTSIDE the
#     clone: $CROSSBENCH_CACHE/tansu-0.6.0 (default ~/.cache/crossbench), so a second
#     run, or CI on the same machine, finds it ready;
#   - starts it when nothing answers on 127.0.0.1:9092, from an empty working
#     directory of its own (tansu reads ./.env and puts sqlite:// files there), with
#     the listener and advertised listener pinned to loopback; waits until it answers.
#
# Env: CROSSBENCH_CACHE (build cache root), TANSU_DIR (state dir, default
# /var/lib/crossbench/tansu), TANSU_PORT (default 9092), TANSU_MAX_DB_MB (default 1024:
# a larger state is discarded and tansu restarted on an empty database).
set -euo pipefail

VERSION=0.6.0
CACHE="${CROSSBENCH_CACHE:-${HOME:-/root}/.cache/crossbench}"
ROOT="$CACHE/tansu-$VERSION"
BIN="$ROOT/bin/tansu"
STATE="${TANSU_DIR:-/var/lib/crossbench/tansu}"
PORT="${TANSU_PORT:-9092}"

log() { printf '[provision/tansu] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ $(id -u) -eq 0 ]] || die "run as root (it installs packages and starts a broker)"

port_open() { timeout 2 bash -c "</dev/tcp/127.0.0.1/$PORT" 2>/dev/null; }

# 1. Packages: cmake + curl headers for rdkafka's cmake build of librdkafka.
need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
[[ -f /usr/include/x86_64-linux-gnu/curl/curl.h || -f /usr/include/curl/curl.h ]] || need+=(libcurl4-openssl-dev)
if [[ ${#need[@]} -gt 0 ]]; then
    log "installing ${need[*]} (apt)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

# 2. The broker binary, built once per machine outside the clone.
if [[ ! -x "$BIN" ]]; then
    log "building tansu $VERSION from crates.io into $ROOT (one time, ~10 min on 2 cores)"
    mkdir -p "$ROOT"
    # Its own target dir, removed afterwards: 1.5 GB that nobody needs again.
    tmp_target="$CACHE/tansu-build-target"
    CARGO_TARGET_DIR="$tmp_target" cargo install tansu --version "$VERSION" --locked \
        --features dynostore,libsql --root "$ROOT" --quiet
    rm -rf "$tmp_target"
fi
"$BIN" --version >/dev/null 2>&1 || die "$BIN does not run"

# The pid of a tansu this script started that is still running, or nothing.
our_tansu() {
    [[ -f "$STATE/tansu.pid" ]] || return 1
    local pid
    pid=$(cat "$STATE/tansu.pid")
    kill -0 "$pid" 2>/dev/null && [[ "$(cat /proc/$pid/comm 2>/dev/null)" == tansu* ]] && echo "$pid"
}

stop_tansu() {
    kill "$1"
    for _ in $(seq 1 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$1" 2>/dev/null || true
}

# 3. A tansu this script started whose storage task panicked still accepts
#    connections but answers every request with an error (seen with 0.6.0's SQLite
#    engine: "more or less than one row" in lite.rs when a request reaches a deleted
#    partition; the Kafka adapter's reset now waits for such requests before it
#    deletes, compose/kafka/README.md). Restart it; its data file is kept.
if grep -q "panicked at" "$STATE/tansu.log" 2>/dev/null && pid=$(our_tansu); then
    log "tansu (pid $pid) panicked earlier (see $STATE/tansu.log); restarting it"
    stop_tansu "$pid"
    mv "$STATE/tansu.log" "$STATE/tansu.log.panicked"
fi

# 4. The state only grows across runs (SQLite reuses freed pages but never shrinks its
#    file). Past TANSU_MAX_DB_MB (default 1024) a tansu this script started is stopped
#    and started again on an empty database, so tests do not run against a broker
#    still holding earlier runs' records. Only the harness's own state is touched.
MAX_MB="${TANSU_MAX_DB_MB:-1024}"
db_mb=$(( $(du -sk "$STATE" 2>/dev/null | cut -f1 || echo 0) / 1024 ))
if [[ $db_mb -gt $MAX_MB ]] && pid=$(our_tansu); then
    log "tansu state is ${db_mb} MB (> ${MAX_MB} MB); restarting it on an empty database"
    stop_tansu "$pid"
    rm -f "$STATE"/tansu.db "$STATE"/tansu.db-wal "$STATE"/tansu.db-shm
fi

# 5. Start it when the port is free.
if port_open; then
    log "something already answers on 127.0.0.1:$PORT; leaving it alone"
    exit 0
fi
mkdir -p "$STATE"
log "starting tansu on 127.0.0.1:$PORT (state in $STATE)"
(
    cd "$STATE"
    unset STORAGE_ENGINE LISTENER_URL ADVERTISED_LISTENER_URL CLUSTER_ID
    nohup setsid "$BIN" broker \
        --listener-url "tcp://127.0.0.1:$PORT" \
        --advertised-listener-url "tcp://127.0.0.1:$PORT" \
        --storage-engine "sqlite://tansu.db" \
        >"$STATE/tansu.log" 2>&1 < /dev/null &
    echo $! > "$STATE/tansu.pid"
)
for _ in $(seq 1 100); do
    port_open && { log "tansu is up (pid $(cat "$STATE/tansu.pid"))"; exit 0; }
    sleep 0.1
done
tail -20 "$STATE/tansu.log" >&2 || true
die "tansu did not answer on 127.0.0.1:$PORT within 10 s (log: $STATE/tansu.log)"
