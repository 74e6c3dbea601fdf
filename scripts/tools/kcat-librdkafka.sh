#!/usr/bin/env bash
# A kcat that can talk to tansu: Debian's kcat 1.7.1 linked at run time against the
# librdkafka 2.16.0 shipped in the PyPI wheel confluent-kafka 2.16.1 (Debian's own
# librdkafka 2.0.2 cannot parse tansu's ApiVersions v3 answer; fixed in 2.2.0).
# Used only for the native-client throughput comparison (docs/perf-kafka.md).
#
#   scripts/tools/kcat-librdkafka.sh            # prints the LD_LIBRARY_PATH to use
#   LD_LIBRARY_PATH=$(scripts/tools/kcat-librdkafka.sh) kcat -V
#
# Pinned: the wheel is checked against its sha256 before anything is extracted.
# Env: CROSSBENCH_CACHE (default ~/.cache/crossbench).
set -euo pipefail

WHEEL=confluent_kafka-2.16.1-cp311-cp311-manylinux_2_28_x86_64.whl
SHA256=24f613cc81a856b6fbb2d7d11044a9aa770044eecc1f83ff84618688b056be06
CACHE="${CROSSBENCH_CACHE:-${HOME:-/root}/.cache/crossbench}"
DIR="$CACHE/librdkafka-2.16.0"

log() { printf '[kcat-librdkafka] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

if ! command -v kcat >/dev/null 2>&1; then
    [[ $(id -u) -eq 0 ]] || die "kcat is not installed (apt-get install kcat)"
    log "installing kcat (apt)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kcat >&2
fi

if [[ ! -e "$DIR/librdkafka.so.1" ]]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    log "downloading confluent-kafka==2.16.1 (cp311, manylinux_2_28 x86_64) from PyPI"
    python3 -m pip download -q --no-deps --only-binary=:all: \
        --python-version 3.11 --platform manylinux_2_28_x86_64 \
        confluent-kafka==2.16.1 -d "$tmp" >&2
    [[ -f "$tmp/$WHEEL" ]] || die "expected $WHEEL, got: $(ls "$tmp")"
    echo "$SHA256  $tmp/$WHEEL" | sha256sum -c --quiet - || die "sha256 mismatch for $WHEEL"
    mkdir -p "$DIR"
    unzip -o -q -j "$tmp/$WHEEL" 'confluent_kafka.libs/librdkafka-*.so.1' -d "$DIR"
    lib=$(ls "$DIR"/librdkafka-*.so.1 | head -1)
    ln -sf "$(basename "$lib")" "$DIR/librdkafka.so.1"
fi
LD_LIBRARY_PATH="$DIR" kcat -V 2>/dev/null | grep -q 'librdkafka 2\.16' \
    || die "kcat does not pick up $DIR/librdkafka.so.1"
echo "$DIR"
