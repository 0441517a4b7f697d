#!/usr/bin/env bash
# Memory of the embedded gateway under sustained load (issue 15, Retention): starts a release
# build of a2a-gateway with the default configuration (in-memory store, `[retention] max_tasks`
# at its default), drives it with wrk as loadtest/bench.sh does (JSON-RPC SendMessage to echo,
# 64 connections, 2 threads: a task created, run and completed per request) for DURATION, and
# records the gateway's resident set size (VmRSS in /proc/<pid>/status) every BENCH_SAMPLE_SECS
# (default 5). Prints every sample, then start, end and max RSS, the sends completed and the
# tasks the gateway holds afterwards (ListTasks totalSize, which must not exceed the bound plus
# the sends still in flight).
# BENCH_MAX_TASKS=N sets `[retention] max_tasks` (0 = no bound: the growth without retention).
# BENCH_NO_BUILD=1 uses the release binary already built.
# Usage: loadtest/bench-memory.sh [duration, default 60s]. Needs wrk (Debian package `wrk`).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-60s}"
CONNS=64
PORT="${BENCH_PORT:-18490}"
EVERY="${BENCH_SAMPLE_SECS:-5}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/a2a-gateway-target}"

command -v wrk >/dev/null || { echo "bench: wrk is not installed (apt-get install wrk)" >&2; exit 2; }
[[ -n "${BENCH_NO_BUILD:-}" ]] || cargo build --release -q -p a2a-gateway
BIN="$CARGO_TARGET_DIR/release/a2a-gateway"
WORK=$(mktemp -d)
# No config file unless a bound is asked for: the defaults are what is measured.
if [[ -n "${BENCH_MAX_TASKS:-}" ]]; then
  printf '[retention]\nmax_tasks = %d\n' "$BENCH_MAX_TASKS" >"$WORK/gateway.toml"
  export A2A_CONFIG="$WORK/gateway.toml"
fi

PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$WORK"' EXIT
RUST_LOG=warn A2A_LISTEN="127.0.0.1:$PORT" "$BIN" &
GW=$!
PIDS+=("$GW")
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
rpc() {
  curl -sf -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' "http://127.0.0.1:$PORT/a2a/jsonrpc" -d "$1"
}
# One checked request before measuring: the benchmark must measure successes.
rpc '{"jsonrpc":"2.0","id":0,"method":"SendMessage","params":{"message":{"messageId":"check","role":"ROLE_USER","parts":[{"text":"hi"}]}}}' \
  | grep -q TASK_STATE_COMPLETED || { echo "bench: SendMessage does not complete" >&2; exit 1; }

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$GW/status"; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

echo "a2a-gateway memory: wrk, $CONNS connections, $DURATION, RSS every ${EVERY}s, max_tasks ${BENCH_MAX_TASKS:-default}, $(nproc) cores" >&2
wrk -t2 -c"$CONNS" -d"$DURATION" --latency -s loadtest/send-echo.lua "http://127.0.0.1:$PORT/a2a/jsonrpc" >"$WORK/wrk.out" &
WRK=$!
PIDS+=("$WRK")
START=$(rss_kib); MAX=$START; T0=$SECONDS
printf '%6s %10s\n' "t (s)" "RSS (MiB)" >&2
printf '%6d %10s\n' 0 "$(mib "$START")" >&2
while kill -0 "$WRK" 2>/dev/null; do
  sleep "$EVERY"
  kill -0 "$WRK" 2>/dev/null || break
  now=$(rss_kib); (( now > MAX )) && MAX=$now
  printf '%6d %10s\n' $((SECONDS - T0)) "$(mib "$now")" >&2
done
wait "$WRK" || { echo "bench: wrk failed" >&2; cat "$WORK/wrk.out" >&2; exit 1; }
END=$(rss_kib); (( END > MAX )) && MAX=$END
if grep -q "Non-2xx" "$WORK/wrk.out"; then echo "bench: non-2xx responses" >&2; cat "$WORK/wrk.out" >&2; exit 1; fi
SENT=$(awk '/requests in/ {print $1}' "$WORK/wrk.out")
RPS=$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.out")
HELD=$(rpc '{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":1}}' | sed -E 's/.*"totalSize":([0-9]+).*/\1/')
echo "sends completed: $SENT ($RPS req/s); tasks held afterwards: $HELD" >&2
echo "RSS start $(mib "$START") MiB, end $(mib "$END") MiB, max $(mib "$MAX") MiB"
BOUND="${BENCH_MAX_TASKS:-100000}"
# The bound holds up to the sends still running when it was applied (one per connection).
if (( BOUND > 0 && HELD > BOUND + CONNS )); then
  echo "bench: the gateway holds $HELD tasks, above max_tasks $BOUND" >&2; exit 1
fi
