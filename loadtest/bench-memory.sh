#!/usr/bin/env bash
# Memory of the embedded gateway under sustained load (issue 15, Retention): starts a release
# build of a2a-gateway with the default configuration (in-memory store, `[retention] max_tasks`
# at its default), drives it with a2a-loadtest as loadtest/bench.sh does (JSON-RPC SendMessage to
# echo, 64 requests in flight, closed loop: a task created, run and completed per request) for
# DURATION after the warm-up, and records the gateway's resident set size (VmRSS in
# /proc/<pid>/status) every BENCH_SAMPLE_SECS (default 5). Prints every sample, then start, end
# and max RSS, the sends completed and the tasks the gateway holds afterwards (ListTasks
# totalSize, which must not exceed the bound plus the sends in flight when it was applied).
# BENCH_MAX_TASKS=N sets `[retention] max_tasks` (0 = no bound: the growth without retention).
# Usage: loadtest/bench-memory.sh [duration, default 60s]
#   BENCH_PORT (default 18490), BENCH_NO_BUILD, BENCH_OUT, BENCH_WARMUP
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=loadtest/bench-common.sh
source loadtest/bench-common.sh
DURATION="${1:-60s}"
PORT="${BENCH_PORT:-18490}"
EVERY="${BENCH_SAMPLE_SECS:-5}"
bench_build
WORK=$(mktemp -d)
OUT=$(bench_reports "$WORK")
# No config file unless a bound is asked for: the defaults are what is measured.
if [[ -n "${BENCH_MAX_TASKS:-}" ]]; then
  printf '[retention]\nmax_tasks = %d\n' "$BENCH_MAX_TASKS" >"$WORK/gateway.toml"
  export A2A_CONFIG="$WORK/gateway.toml"
fi

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
RUST_LOG=warn A2A_LISTEN="127.0.0.1:$PORT" "$GW_BIN" &
GW=$!
PIDS+=("$GW")
URL="http://127.0.0.1:$PORT"
wait_http "$URL/healthz"
check_send "$URL"

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$GW/status"; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

echo "a2a-gateway memory: a2a-loadtest, $CONNS in flight, $DURATION after $WARMUP of warm-up, RSS every ${EVERY}s, max_tasks ${BENCH_MAX_TASKS:-default}, $(nproc) cores" >&2
JSON="$OUT/send-memory.json"
# lt_send's run, in the background so that RSS can be sampled meanwhile; checked once it ends.
"$LT_BIN" send --url "$URL" --binding jsonrpc --connections 4 --concurrency "$CONNS" \
  --duration "$DURATION" --warmup "$WARMUP" --quiet --json "$JSON" >"$JSON.txt" 2>&1 &
LOAD=$!
PIDS+=("$LOAD")
START=$(rss_kib); MAX=$START; T0=$SECONDS
printf '%6s %10s\n' "t (s)" "RSS (MiB)" >&2
printf '%6d %10s\n' 0 "$(mib "$START")" >&2
while kill -0 "$LOAD" 2>/dev/null; do
  sleep "$EVERY"
  kill -0 "$LOAD" 2>/dev/null || break
  now=$(rss_kib); (( now > MAX )) && MAX=$now
  printf '%6d %10s\n' $((SECONDS - T0)) "$(mib "$now")" >&2
done
wait "$LOAD" || lt_failed "$JSON"
PIDS=("$GW")
lt_check "$JSON"
END=$(rss_kib); (( END > MAX )) && MAX=$END
SENT=$(lt_answered "$JSON")
HELD=$(tasks_held "$URL")
echo "sends completed: $SENT, warm-up included ($(jget "$JSON" '.throughput_rps | floor') req/s measured); tasks held afterwards: $HELD" >&2
echo "RSS start $(mib "$START") MiB, end $(mib "$END") MiB, max $(mib "$MAX") MiB"
BOUND="${BENCH_MAX_TASKS:-100000}"
# The bound holds up to the sends still running when it was applied (one per request in flight).
if (( BOUND > 0 && HELD > BOUND + CONNS )); then
  echo "bench: the gateway holds $HELD tasks, above max_tasks $BOUND" >&2; exit 1
fi
# Without a bound, every send is there (and the check request).
if (( BOUND == 0 && HELD != SENT + 1 )); then
  echo "bench: the gateway holds $HELD tasks, a2a-loadtest completed $SENT sends (+ 1 check)" >&2; exit 1
fi
