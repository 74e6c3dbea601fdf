#!/usr/bin/env bash
# The harness's instructions per delivery (issue 49; docs/performance.md, "Instructions
# per delivery"): the `instructions` bench (loader/benches/instructions.rs: a cell in
# virtual time) run under valgrind's callgrind at two rated durations, SHORT and LONG
# seconds. What does not grow with the window (start-up, setup, the drain's tail,
# writing the record) is in both runs and cancels:
#
#   Ir per delivery = (Ir(LONG) - Ir(SHORT)) / (delivered(LONG) - delivered(SHORT))
#
# The checker's verification does grow with the deliveries; its inclusive count
# (functions of the `checker` crate called from the cell's verify) is printed apart
# and taken out of the figure, which is then the traffic's: pacer, publishers, the
# control broker, stages, stamps, histograms, logs.
#
#   scripts/tools/instructions.sh [BENCH_BINARY] [SHORT] [LONG] [-- --set k=v ...]
# With no binary it builds the bench (`cargo bench --no-run`, release with line
# tables) and uses it. OUT (default /tmp/crossbench-instructions) keeps the
# callgrind files, so `callgrind_annotate` can say where a count goes.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-}
SHORT=${2:-2}
LONG=${3:-6}
shift $(( $# < 3 ? $# : 3 ))
[ "${1:-}" = "--" ] && shift
OUT=${OUT:-/tmp/crossbench-instructions}
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
if [ -z "$BIN" ]; then
  BIN=$(cargo bench -p crossbench --features virtual-time --bench instructions --no-run \
    --message-format=json 2>/dev/null | python3 -c '
import json, sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "instructions":
        print(m["executable"])')
fi
[ -x "$BIN" ] || { echo "instructions.sh: no bench binary at '$BIN'" >&2; exit 2; }
mkdir -p "$OUT"

# One run: total Ir, the checker's inclusive Ir, and what the bench printed.
measure() {
  local secs=$1 f="$OUT/callgrind.$1s.out"
  shift
  valgrind --tool=callgrind --callgrind-out-file="$f" --dump-instr=no --compress-strings=no \
    "$BIN" --secs "$secs" "$@" 2>"$OUT/valgrind.$secs.log" >"$OUT/bench.$secs.txt"
  local total checker
  total=$(awk '/^summary:/ { print $2 }' "$f")
  # Inclusive cost of the checker's entry into a cell's logs, from callgrind_annotate's
  # inclusive listing (the largest checker:: function is its entry point).
  checker=$(callgrind_annotate --inclusive=yes --threshold=100 "$f" 2>/dev/null \
    | awk '/checker::/ { gsub(",", "", $1); if ($1 + 0 > m) m = $1 + 0 } END { print m + 0 }')
  local delivered
  delivered=$(sed -n 's/.*delivered=\([0-9]*\).*/\1/p' "$OUT/bench.$secs.txt")
  echo "$secs $total $checker $delivered $(grep '^secs=' "$OUT/bench.$secs.txt")"
}

printf 'binary: %s\n' "$BIN"
read -r s1 t1 c1 d1 rest1 < <(measure "$SHORT" "$@")
echo "short: ${s1}s  Ir ${t1}  checker ${c1}  delivered ${d1}  (${rest1})"
read -r s2 t2 c2 d2 rest2 < <(measure "$LONG" "$@")
echo "long:  ${s2}s  Ir ${t2}  checker ${c2}  delivered ${d2}  (${rest2})"
awk -v t1="$t1" -v t2="$t2" -v c1="$c1" -v c2="$c2" -v d1="$d1" -v d2="$d2" 'BEGIN {
  if (d2 <= d1) { print "instructions.sh: the long run delivered no more than the short one" > "/dev/stderr"; exit 3 }
  printf "per delivery: %.0f Ir in all, %.0f Ir in the checker, %.0f Ir without it (%d more deliveries)\n",
    (t2 - t1) / (d2 - d1), (c2 - c1) / (d2 - d1), ((t2 - c2) - (t1 - c1)) / (d2 - d1), d2 - d1
}'
