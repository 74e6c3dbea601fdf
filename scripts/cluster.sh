#!/usr/bin/env bash
# Three-node clusters on test hosts of their own, for the cluster faults
# (docs/reliability.md, "Clusters"): each node in a network namespace with one address,
# joined to the others and to this machine by a bridge. Nothing of the machine's own
# network or services is touched: the bridge is cbbr<K> (10.77.<K>.254/24), node i
# (1..3) is namespace cb<K>n<i> at 10.77.<K>.<i>, and its files are under
# /tmp/crossbench-cluster-<K>.
#
#   scripts/cluster.sh up nats K        three nats-servers with JetStream, routed
#   scripts/cluster.sh up rabbitmq K    three RabbitMQ nodes cb@10.77.K.i, clustered at
#                                        boot (classic config), pause_minority, management
#   scripts/cluster.sh start SYSTEM K I start node I again (a kill-leader's restart)
#   scripts/cluster.sh yaml SYSTEM K    the scenario's `cluster:` section (flow YAML)
#   scripts/cluster.sh down K           stop everything in the namespaces, remove them
#
# Needs root, iproute2 and nftables; `up` waits until the cluster is formed (every
# node answers and sees three) and fails with the logs' tails otherwise.
set -euo pipefail

cmd=${1:?usage: cluster.sh up|start|yaml|down ...}
here=$(cd "$(dirname "$0")" && pwd)

net() { echo "10.77.$1"; }
dir() { echo "/tmp/crossbench-cluster-$1"; }

down() {
  local k=$1
  for i in 1 2 3; do
    ns=cb${k}n$i
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    ip link del "${ns}h" 2>/dev/null || true
  done
  ip link del "cbbr$k" 2>/dev/null || true
  rm -rf "$(dir "$k")"
}

hosts() {
  local k=$1 a
  a=$(net "$k")
  ip link add "cbbr$k" type bridge
  ip addr add "$a.254/24" dev "cbbr$k"
  ip link set "cbbr$k" up
  for i in 1 2 3; do
    ns=cb${k}n$i
    ip netns add "$ns"
    ip link add "${ns}h" type veth peer name eth0 netns "$ns"
    ip link set "${ns}h" master "cbbr$k" up
    ip -n "$ns" addr add "$a.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
  done
}

# An HTTP GET's body, from this machine's namespace (curl if there is one).
get() {
  if command -v curl >/dev/null; then
    curl -fsS --max-time 3 ${2:+-u "$2"} "$1" 2>/dev/null
  else
    python3 - "$1" "${2:-}" <<'PY'
import base64, sys, urllib.request
r = urllib.request.Request(sys.argv[1])
if sys.argv[2]:
    r.add_header("Authorization", "Basic " + base64.b64encode(sys.argv[2].encode()).decode())
print(urllib.request.urlopen(r, timeout=3).read().decode())
PY
  fi
}

start_node() {
  local sys=$1 k=$2 i=$3 d a ns
  d=$(dir "$k")/n$i
  a=$(net "$k").$i
  ns=cb${k}n$i
  case $sys in
    nats)
      ip netns exec "$ns" setsid nats-server -c "$d/nats.conf" -P "$d/pid" -l "$d/log" \
        </dev/null >/dev/null 2>&1 &
      ;;
    rabbitmq)
      ip netns exec "$ns" su rabbitmq -s /bin/sh -c "cd /var/lib/rabbitmq && env HOME=/var/lib/rabbitmq RABBITMQ_CONF_ENV_FILE=$d/rabbitmq-env.conf RABBITMQ_MNESIA_BASE=$d/mnesia RABBITMQ_LOG_BASE=$d/logs RABBITMQ_PID_FILE=$d/pid RABBITMQ_ENABLED_PLUGINS_FILE=$d/enabled_plugins RABBITMQ_CONFIG_FILE=$d/rabbitmq setsid /usr/lib/rabbitmq/bin/rabbitmq-server >> $d/log 2>&1 < /dev/null &"
      ;;
    *) echo "unknown system $sys (nats, rabbitmq)" >&2; exit 2 ;;
  esac
}

ready() {
  local sys=$1 k=$2 a i
  a=$(net "$k")
  for i in 1 2 3; do
    case $sys in
      nats)
        get "http://$a.$i:8222/jsz" | python3 -c 'import json,sys; v=json.load(sys.stdin)["meta_cluster"]; sys.exit(0 if v.get("leader") and v.get("cluster_size")==3 else 1)' || return 1 ;;
      rabbitmq)
        get "http://$a.$i:15672/api/nodes" guest:guest | python3 -c 'import json,sys; v=json.load(sys.stdin); sys.exit(0 if len(v)==3 and all(n["running"] for n in v) else 1)' || return 1 ;;
    esac
  done 2>/dev/null
}

up() {
  local sys=$1 k=$2 a d i
  for t in ip nft python3; do command -v "$t" >/dev/null || { echo "missing $t" >&2; exit 3; }; done
  case $sys in
    nats) command -v nats-server >/dev/null || { echo "missing nats-server" >&2; exit 3; } ;;
    rabbitmq) command -v rabbitmq-server >/dev/null || { echo "missing rabbitmq-server" >&2; exit 3; } ;;
    *) echo "unknown system $sys (nats, rabbitmq)" >&2; exit 2 ;;
  esac
  down "$k"
  hosts "$k"
  a=$(net "$k")
  for i in 1 2 3; do
    d=$(dir "$k")/n$i
    mkdir -p "$d"
    case $sys in
      nats)
        cat >"$d/nats.conf" <<CONF
server_name: n$i
listen: $a.$i:4222
http: $a.$i:8222
jetstream { store_dir: $d/data }
cluster { name: cb$k, listen: $a.$i:6222, routes: [nats-route://$a.1:6222, nats-route://$a.2:6222, nats-route://$a.3:6222] }
CONF
        ;;
      rabbitmq)
        echo '[rabbitmq_management].' >"$d/enabled_plugins"
        cat >"$d/rabbitmq.conf" <<CONF
listeners.tcp.default = $a.$i:5672
management.tcp.ip = $a.$i
management.tcp.port = 15672
loopback_users = none
cluster_partition_handling = pause_minority
cluster_formation.peer_discovery_backend = classic_config
cluster_formation.classic_config.nodes.1 = cb@$a.1
cluster_formation.classic_config.nodes.2 = cb@$a.2
cluster_formation.classic_config.nodes.3 = cb@$a.3
CONF
        # Debian's environment file pins epmd and distribution to loopback.
        printf 'NODENAME=cb@%s\nUSE_LONGNAME=true\nERL_EPMD_ADDRESS=%s\n' "$a.$i" "$a.$i" >"$d/rabbitmq-env.conf"
        chown -R rabbitmq:rabbitmq "$(dir "$k")"
        ;;
    esac
  done
  for i in 1 2 3; do start_node "$sys" "$k" "$i"; done
  for _ in $(seq 1 240); do
    if ready "$sys" "$k"; then return 0; fi
    sleep 0.5
  done
  echo "the $sys cluster on $a.1-3 did not form within 120 s; its logs end with:" >&2
  tail -n 15 "$(dir "$k")"/n*/log >&2 || true
  exit 1
}

yaml() {
  local sys=$1 k=$2 a i id port nodes=()
  a=$(net "$k")
  for i in 1 2 3; do
    case $sys in
      nats) id=n$i; port=4222 ;;
      rabbitmq) id=cb@$a.$i; port=5672 ;;
      *) echo "unknown system $sys (nats, rabbitmq)" >&2; exit 2 ;;
    esac
    nodes+=("{name: n$i, id: '$id', netns: cb${k}n$i, address: $a.$i, port: $port, pidfile: '$(dir "$k")/n$i/pid', restart: 'bash $here/cluster.sh start $sys $k $i'}")
  done
  local IFS=,
  echo "{nodes: [${nodes[*]}]}"
}

case $cmd in
  up) up "${2:?system}" "${3:?K}" ;;
  start) start_node "${2:?system}" "${3:?K}" "${4:?node 1..3}" ;;
  yaml) yaml "${2:?system}" "${3:?K}" ;;
  down) down "${2:?K}" ;;
  *) echo "usage: cluster.sh up|start|yaml|down ..." >&2; exit 2 ;;
esac
