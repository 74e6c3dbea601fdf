#!/usr/bin/env bash
# What TLS costs the loader (issue 45; docs/performance.md "What TLS costs the loader").
# A RabbitMQ node of its own with two listeners, plain (PLAIN_PORT) and TLS (TLS_PORT),
# a throwaway CA made with openssl, and rabbit-smoke run against each, interleaved
# (plain, tls, plain, tls, ...), REPEATS a side. Prints each run's loader CPU per
# delivery; the records stay under OUT. Never touches the machine's shared node.
#
#   scripts/tools/tls-cost.sh /path/to/crossbench [OUT] [REPEATS]
# RATE=<ev/s> runs the cells at another rate than rabbit-smoke's 200.
set -euo pipefail
CB=${1:?the crossbench binary (a release build)}
OUT=${2:-/tmp/crossbench-tls-cost}
REPEATS=${3:-3}
PLAIN_PORT=${PLAIN_PORT:-5697}
TLS_PORT=${TLS_PORT:-5698}
NODE="cbtlscost@localhost"
DIR=/tmp/crossbench-rabbit-tlscost

stop() {
  timeout 60 rabbitmqctl -q -n "$NODE" stop >/dev/null 2>&1 || true
  [ -f "$DIR/pid" ] && kill -9 "$(cat "$DIR/pid")" 2>/dev/null || true
}
trap stop EXIT
stop
rm -rf "$DIR" && mkdir -p "$DIR/log"
cd "$DIR"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj '/CN=crossbench tls-cost CA' \
  -keyout ca.key -out ca.pem 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > san.ext
openssl req -newkey rsa:2048 -nodes -subj '/CN=127.0.0.1' -keyout server.key -out server.csr 2>/dev/null
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
  -extfile san.ext -out server.pem 2>/dev/null
echo '[].' > enabled_plugins
cat > rabbitmq.conf <<CONF
listeners.tcp.default = 127.0.0.1:$PLAIN_PORT
listeners.ssl.default = 127.0.0.1:$TLS_PORT
ssl_options.cacertfile = $DIR/ca.pem
ssl_options.certfile = $DIR/server.pem
ssl_options.keyfile = $DIR/server.key
ssl_options.verify = verify_none
ssl_options.fail_if_no_peer_cert = false
loopback_users = none
CONF
chown -R rabbitmq:rabbitmq "$DIR"
ENV="RABBITMQ_NODENAME=$NODE RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT=$PLAIN_PORT RABBITMQ_DIST_PORT=$((PLAIN_PORT + 20000)) RABBITMQ_MNESIA_BASE=$DIR/mnesia RABBITMQ_LOG_BASE=$DIR/log RABBITMQ_PID_FILE=$DIR/pid RABBITMQ_ENABLED_PLUGINS_FILE=$DIR/enabled_plugins RABBITMQ_CONFIG_FILE=$DIR/rabbitmq"
su rabbitmq -s /bin/sh -c "cd /var/lib/rabbitmq && env HOME=/var/lib/rabbitmq $ENV setsid /usr/lib/rabbitmq/bin/rabbitmq-server >> $DIR/log/stdout.log 2>&1 < /dev/null &"
for i in $(seq 1 90); do
  rabbitmqctl -q -n "$NODE" await_startup --timeout 5 >/dev/null 2>&1 && break
  sleep 1
done
rabbitmqctl -q -n "$NODE" status >/dev/null

common=(--set duration=30s --set warmup=5s --set rabbitmq.cost_snapshot=false
        ${RATE:+--set rate=$RATE}
        --set "sample.targets=[\"rabbitmq=pidfile:$DIR/pid\"]" -q)
mkdir -p "$OUT"
for i in $(seq 1 "$REPEATS"); do
  "$CB" run "$OLDPWD/scenarios/rabbit-smoke.yaml" --out "$OUT/$i-plain" "${common[@]}" \
    --set "rabbitmq.url=amqp://guest:guest@127.0.0.1:$PLAIN_PORT/%2f" || true
  "$CB" run "$OLDPWD/scenarios/rabbit-smoke.yaml" --out "$OUT/$i-tls" "${common[@]}" \
    --set "rabbitmq.url=amqps://guest:guest@127.0.0.1:$TLS_PORT/%2f" \
    --set "rabbitmq.tls.ca_file=$DIR/ca.pem" || true
done
for d in "$OUT"/*; do
  python3 - "$d" <<'PY'
import json, sys
d = sys.argv[1]
r = json.load(open(f"{d}/result.json"))
print(d.rsplit('/', 1)[1], r["outcome"], r["load"]["verdict"],
      "cpu_us_per_delivery", r["loader"]["cpu_us_per_delivery"],
      "lag_p99_ms", r.get("latency_ms", {}).get("schedule_lag", {}).get("p99_ms"))
PY
done
