#!/usr/bin/env bash
# Benchmarks of the embedded gateway (issue: Foundation). Starts a release build of
# a2a-gateway on a loopback port, then with wrk (64 connections, 2 threads):
#   1. GET /healthz          - the raw limit of the HTTP stack in this run (trivial axum route)
#   2. JSON-RPC SendMessage  - echo agent, in-memory store: a task created, run and completed
# and prints req/s, p50, p99 and the ratio of (2) to (1). Afterwards it checks that the gateway
# holds exactly as many tasks as wrk counted successful requests (no error was benchmarked).
# Usage: loadtest/bench.sh [duration, default 15s]. Needs wrk (Debian package `wrk`).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-15s}"
CONNS=64
PORT="${BENCH_PORT:-18480}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/a2a-gateway-target}"

command -v wrk >/dev/null || { echo "bench: wrk is not installed (apt-get install wrk)" >&2; exit 2; }
[[ -n "${BENCH_NO_BUILD:-}" ]] || cargo build --release -q -p a2a-gateway
BIN="$CARGO_TARGET_DIR/release/a2a-gateway"

RUST_LOG=warn A2A_LISTEN="127.0.0.1:$PORT" "$BIN" &
GW=$!
trap 'kill "$GW" 2>/dev/null || true; wait "$GW" 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done

# One checked request before measuring: the benchmark must measure successes.
curl -sf -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' "http://127.0.0.1:$PORT/a2a/jsonrpc" \
  -d '{"jsonrpc":"2.0","id":0,"method":"SendMessage","params":{"message":{"messageId":"check","role":"ROLE_USER","parts":[{"text":"hi"}]}}}' \
  | grep -q TASK_STATE_COMPLETED || { echo "bench: SendMessage does not complete" >&2; exit 1; }

run() { # name, wrk args...
  local name=$1; shift
  local out; out=$(wrk -t2 -c"$CONNS" -d"$DURATION" --latency "$@")
  local rps p50 p99 reqs
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  if grep -q "Non-2xx" <<<"$out"; then echo "bench: $name had non-2xx responses" >&2; echo "$out" >&2; exit 1; fi
  printf '%-28s %10s req/s   p50 %8s   p99 %8s   (%s requests)\n' "$name" "$rps" "$p50" "$p99" "$reqs" >&2
  echo "$rps $reqs"
}

echo "a2a-gateway benchmark: $CONNS connections, $DURATION each, $(nproc) cores, wrk on the same machine" >&2
read -r RAW _ < <(run "GET /healthz (raw limit)" "http://127.0.0.1:$PORT/healthz")
read -r SEND SENT < <(run "SendMessage echo (JSON-RPC)" -s loadtest/send-echo.lua "http://127.0.0.1:$PORT/a2a/jsonrpc")

TOTAL=$(curl -sf -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' "http://127.0.0.1:$PORT/a2a/jsonrpc" \
  -d '{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":1}}' \
  | sed -E 's/.*"totalSize":([0-9]+).*/\1/')
# wrk does not count requests still in flight when it stops, so allow up to one per connection.
EXPECTED=$((SENT + 1))
if (( TOTAL < EXPECTED || TOTAL > EXPECTED + CONNS )); then
  echo "bench: the gateway holds $TOTAL tasks, wrk completed $SENT sends" >&2; exit 1
fi
awk -v s="$SEND" -v r="$RAW" 'BEGIN { printf "SendMessage / raw limit: %.2f\n", s / r }' >&2
echo "tasks stored: $TOTAL (wrk completed $SENT + 1 check request)" >&2
