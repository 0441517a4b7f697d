#!/usr/bin/env bash
# Instructions per request of the in-memory gateway, by binding (issue 26's comparison against
# an older build): throughput on a shared 2-core machine moves more between runs than the 5% a
# regression rule allows, while an instruction count repeats within about 1% for a given binary.
# Runs the release gateway under callgrind (valgrind, a Debian package) with instrumentation off,
# warms it up, then counts only while a2a-loadtest sends 2,000 requests to echo at 200/s (plus
# its 1 s warm-up: 2,200 answered requests, all checked), and prints Ir / requests.
# Usage: loadtest/bench-instructions.sh [send|stream] [bindings..., default jsonrpc rest grpc]
#   GW=path to measure another gateway binary (e.g. an older build), BENCH_PORT (default 18600),
#   BENCH_NO_BUILD, BENCH_OUT (keeps the callgrind profiles: callgrind_annotate FILE.1)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=loadtest/bench-common.sh
source loadtest/bench-common.sh
SCENARIO="${1:-send}"
shift || true
if [[ $# -gt 0 ]]; then BINDINGS=("$@"); else BINDINGS=(jsonrpc rest grpc); fi
PORT="${BENCH_PORT:-18600}"
command -v valgrind >/dev/null || { echo "bench: valgrind is not installed" >&2; exit 1; }
bench_build
GW="${GW:-$GW_BIN}"
WORK=$(mktemp -d)
OUT=$(bench_reports "$WORK")
PID=
cleanup() {
  [[ -z "$PID" ]] || kill "$PID" 2>/dev/null || true
  [[ -z "$PID" ]] || wait "$PID" 2>/dev/null || true
  [[ -n "${BENCH_OUT:-}" ]] || rm -rf "$WORK"
}
trap cleanup EXIT

for b in "${BINDINGS[@]}"; do
  env RUST_LOG=warn A2A_LISTEN="127.0.0.1:$PORT" A2A_BUILTIN_AGENTS=echo \
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$OUT/callgrind.$b.out" \
    "$GW" >"$OUT/gateway.$b.log" 2>&1 &
  PID=$!
  for _ in $(seq 600); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.2; done
  # Warm-up outside the count: connections, caches and the allocator's pages.
  lt_run "$OUT/warmup.$b.json" "$SCENARIO" --url "http://127.0.0.1:$PORT" --binding "$b" --rate 100 --duration 3s
  callgrind_control -i on "$PID" >/dev/null
  lt_run "$OUT/$SCENARIO.$b.json" "$SCENARIO" --url "http://127.0.0.1:$PORT" --binding "$b" --rate 200 --duration 10s --warmup 1s
  callgrind_control -i off "$PID" >/dev/null
  callgrind_control -d "$PID" >/dev/null
  kill -INT "$PID"
  wait "$PID" || true
  PID=
  n=$(jq '.ok + .warmup_ok' "$OUT/$SCENARIO.$b.json")
  ir=$(grep -a 'Collected' "$OUT/gateway.$b.log" | tail -1 | awk '{gsub(",", "", $NF); print $NF}')
  awk -v b="$b" -v s="$SCENARIO" -v ir="$ir" -v n="$n" \
    'BEGIN { printf "%s %s: %d requests, %.1fk instructions per request\n", s, b, n, ir / n / 1000 }'
done
