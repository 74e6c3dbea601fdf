#!/usr/bin/env bash
# The full test suite, on a fresh Debian machine or a developer's: provisions what the
# tests need (PostgreSQL + pgmq, RabbitMQ, a Kafka-protocol broker, NATS with JetStream,
# Redis), then runs fmt, clippy and every test.
# Safe to run again: every step checks before it acts.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says when it began (seconds since the start), so a CI log shows where the
# 30-minute budget goes.
step() { printf '\n==> [%4ds] %s\n' "$SECONDS" "$*"; }

# The machine, so that a failure report says where it happened: CPU model, cores, and
# the share of CPU time the hypervisor stole over the whole command (/proc/stat's
# aggregate line: user nice system idle iowait irq softirq steal).
cpu_times() { awk '/^cpu / { t = 0; for (i = 2; i <= 9; i++) t += $i; print t, $9 }' /proc/stat; }
read -r cpu_total0 cpu_steal0 < <(cpu_times)
machine() {
  local model cores total steal
  model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
  cores=$(nproc)
  read -r total steal < <(cpu_times)
  awk -v m="${model:-unknown CPU}" -v c="$cores" -v t=$((total - cpu_total0)) -v s=$((steal - cpu_steal0)) \
    -v k="$(uname -r)" 'BEGIN {
      printf "machine: %s, %d cores, kernel %s; steal %.2f %% of CPU time during this command\n",
        m, c, k, (t > 0 ? 100 * s / t : 0) }'
}
trap 'printf "\n==> [%4ds] scripts/test.sh ends\n" "$SECONDS"; machine' EXIT

step "toolchain"
machine
cargo --version
rustc --version

need_pkgs=()
# openssl: the TLS tests make their throwaway CA and certificates with it.
for p in pkg-config openssl; do
  command -v "$p" >/dev/null 2>&1 || need_pkgs+=("$p")
done
# libssl-dev: librdkafka is built with SSL (and SASL PLAIN/SCRAM) against the system's
# OpenSSL, the one C TLS library in the build.
dpkg -s libssl-dev >/dev/null 2>&1 || need_pkgs+=(libssl-dev)
# iproute2 and nftables: the cluster tests put each node on a test host of its own (a
# network namespace) and cut the network between them (scripts/cluster.sh,
# loader/tests/cluster_real.rs).
command -v ip >/dev/null 2>&1 || need_pkgs+=(iproute2)
command -v nft >/dev/null 2>&1 || need_pkgs+=(nftables)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  step "installing ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}"
fi

for p in scripts/provision/*.sh; do
  [ -f "$p" ] || continue
  step "provision: $p"
  bash "$p"
done

# Everything the tests need was provisioned above: from here on a test that cannot
# reach its server fails instead of skipping (tests skip only when run by hand).
# Queen is the exception: no registry ships it, so its tests run only when
# CROSSBENCH_QUEEN_URL points at a server (see compose/queen/README.md).
export CI="${CI:-1}"
# Incremental caches double the target directory and a CI clone never reuses them.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

# The deployment files in their formats' own tools (pinned, from PyPI, cached in
# ~/.cache/crossbench): hadolint, `docker compose config`, Kubernetes schemas.
step "deployment files: compose/lint.sh"
bash compose/lint.sh

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (all targets, all features, -D warnings)"
cargo clippy --workspace --all-targets --all-features -- -D warnings

# A build with fewer features must be as clean: a module only one adapter uses must be
# behind that adapter's feature (the README's first command builds the defaults).
step "cargo clippy (the default features, and none, -D warnings)"
cargo clippy -p crossbench -- -D warnings
cargo clippy -p crossbench-adapters --no-default-features -- -D warnings
# Kafka alone: it shares text-only TLS helpers with the rustls clients, not their stack.
cargo clippy -p crossbench-adapters --no-default-features --features kafka -- -D warnings

step "cargo test: build"
cargo test --workspace --all-features --no-run

step "cargo test: run"
status=0
# Tests that skip (return early: Queen without CROSSBENCH_QUEEN_URL) count as passed in
# cargo's totals; each writes a line here, so the summary can say how many really ran.
export CROSSBENCH_SKIP_LOG="$PWD/target/skipped.txt"
: > "$CROSSBENCH_SKIP_LOG"
cargo test --workspace --all-features --no-fail-fast 2>&1 | tee target/test-output.txt || status=$?
# Summarise for CI logs, whose middle may be cut: the reason of every failed test is
# repeated here, at the end, a few lines each.
passed=$(grep -Eo 'test result: ok\. [0-9]+ passed' target/test-output.txt | awk '{s+=$4} END {print s+0}')
# Where the time went: the slowest test binaries (libtest's "finished in" per binary),
# so a CI log shows what to trim when the command nears its 30-minute budget.
step "the slowest test binaries"
awk '
  /^ *Running / { name = $0; sub(/^ *Running /, "", name) }
  /^ *Doc-tests / { name = "doc-tests " $2 }
  /^test result: / { t = $NF; sub(/s$/, "", t); printf "%8.1f s  %s\n", t, name }
' target/test-output.txt | sort -rn | awk 'NR <= 12'
# (awk, not head: head exits after its lines, sort then dies of SIGPIPE, and under
# pipefail the whole command exited 141 after every test had passed.)
if [ "$status" -ne 0 ]; then
  step "failed tests, first lines of each"
  awk '
    /^---- .* stdout ----$/ { print "## " $2; grab = 0; next }
    /panicked at/ { grab = 1; n = 0 }
    grab && /^(stack backtrace:|note: |failures:|---- )/ { grab = 0 }
    grab && n < 12 { print "   " $0; n++ }
  ' target/test-output.txt
  # A broker-side crash (e.g. an AMQP INTERNAL_ERROR) shows only in the broker's log.
  if grep -q '^---- .*rabbit.* stdout ----$' target/test-output.txt && ls /var/log/rabbitmq/rabbit@*.log >/dev/null 2>&1; then
    step "RabbitMQ log: the last errors (crash reports cut to 12 lines each)"
    grep -h -A12 '\[error\]' /var/log/rabbitmq/rabbit@*.log | grep -v 'ra_server_sup\|shutdown_error' | tail -60 || true
  fi
  echo "tests passed: $passed; cargo test exited $status"
  exit "$status"
fi
skips=$(cut -f1 "$CROSSBENCH_SKIP_LOG" | sort -u | wc -l)
echo "all test binaries passed: $passed tests; $skips of them returned early (skipped), so $((passed - skips)) really ran"
if [ "$skips" -gt 0 ]; then
  echo "skipped (test, reason):"
  sort -u "$CROSSBENCH_SKIP_LOG" | sed 's/^/  /'
fi
