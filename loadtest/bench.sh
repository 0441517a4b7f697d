#!/usr/bin/env bash
# Benchmarks of the embedded gateway (issue: Foundation), the load from a2a-loadtest (64 requests
# in flight, closed loop; see loadtest/bench-common.sh). Starts three release gateways on
# loopback (echo agent, in-memory store) and measures:
#   1. the raw limit of the HTTP stack in this run: `a2a-loadtest baseline` (a trivial axum route)
#   2. JSON-RPC SendMessage (`a2a-loadtest send`): a task created, run and completed per request
#   3. the same with metrics on: a second gateway with an admin listener (A2A_ADMIN_LISTEN),
#      its /metrics scraped once a second by curl during the run
#   4. the same with full tracing: a third gateway exporting every span (OTEL_TRACES_SAMPLER
#      always_on; BENCH_TRACES_SAMPLER and BENCH_TRACES_SAMPLER_ARG choose another) over OTLP to
#      `a2a-loadtest otlp-sink`, a receiver that only counts them;
#      rows 2 to 4 alternate BENCH_METRICS_ROUNDS times (default 2) so that all see the same
#      shared machine
# and prints req/s, p50, p99, the ratio of (2) to (1) and the costs of metrics (3 vs 2) and of
# tracing (4 vs 2), both in throughput and in the gateway's own CPU time per request (utime +
# stime from /proc over the tool's run, divided by the requests it answered, warm-up included:
# steadier than throughput when other work shares the machine). Afterwards it checks that each
# gateway holds exactly as many tasks as the tool counted successful sends.
# Usage: loadtest/bench.sh [duration per run, default 15s]
#   BENCH_PORT (first of five ports, default 18480), BENCH_NO_BUILD, BENCH_OUT, BENCH_WARMUP,
#   BENCH_BSP_BATCH (the traced gateway's OTEL_BSP_MAX_EXPORT_BATCH_SIZE, default 8192; the run fails
#   if spans were dropped)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=loadtest/bench-common.sh
source loadtest/bench-common.sh
DURATION="${1:-15s}"
PORT="${BENCH_PORT:-18480}"
MPORT=$((PORT + 1))      # the gateway with metrics on
ADMIN=$((PORT + 2))      # its admin listener
TPORT=$((PORT + 3))      # the gateway with tracing on
SINK=$((PORT + 4))       # its OTLP receiver
ROUNDS="${BENCH_METRICS_ROUNDS:-2}"
SAMPLER="${BENCH_TRACES_SAMPLER:-always_on}"
SAMPLER_ARG="${BENCH_TRACES_SAMPLER_ARG:-}"

bench_build
WORK=$(mktemp -d)
OUT=$(bench_reports "$WORK")
PIDS=()
SCRAPER=""
cleanup() {
  for p in "${PIDS[@]}" $SCRAPER; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# Every task is kept ([retention] max_tasks = 0, no bound), so that the count can be checked
# afterwards; loadtest/bench-memory.sh measures the default bound.
printf '[retention]\nmax_tasks = 0\n' >"$WORK/keep-all.toml"
export A2A_CONFIG="$WORK/keep-all.toml"
RUST_LOG=warn A2A_LISTEN="127.0.0.1:$PORT" "$GW_BIN" &
PIDS+=($!)
RUST_LOG=warn A2A_LISTEN="127.0.0.1:$MPORT" A2A_ADMIN_LISTEN="127.0.0.1:$ADMIN" "$GW_BIN" &
PIDS+=($!)
"$LT_BIN" otlp-sink "127.0.0.1:$SINK" "$WORK/spans" >/dev/null &
PIDS+=($!)
# The batch processor's standard knobs, sized for this rate (the defaults, a 2,048-span queue
# exported every 5 s, would drop most spans at thousands of requests a second).
RUST_LOG=warn A2A_LISTEN="127.0.0.1:$TPORT" OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$SINK" \
  OTEL_TRACES_SAMPLER="$SAMPLER" OTEL_TRACES_SAMPLER_ARG="$SAMPLER_ARG" \
  OTEL_BSP_MAX_QUEUE_SIZE=262144 OTEL_BSP_SCHEDULE_DELAY=250 OTEL_BSP_MAX_EXPORT_BATCH_SIZE="${BENCH_BSP_BATCH:-8192}" \
  "$GW_BIN" &
PIDS+=($!)
OFF_PID=${PIDS[0]} ON_PID=${PIDS[1]} TR_PID=${PIDS[3]}
for port in "$PORT" "$MPORT" "$TPORT"; do
  wait_http "http://127.0.0.1:$port/healthz"
  check_send "http://127.0.0.1:$port"
done
curl -sf "http://127.0.0.1:$ADMIN/metrics" | grep -c '^a2a_requests_total' >/dev/null \
  || { echo "bench: the metrics gateway's /metrics has no a2a_requests_total" >&2; exit 1; }

echo "a2a-gateway benchmark: a2a-loadtest, $CONNS in flight, $DURATION each after $WARMUP of warm-up, $(nproc) cores, the generator on the same machine" >&2
lt_baseline "$OUT/baseline.json"
lt_row "raw limit (a2a-loadtest baseline)" "$OUT/baseline.json"
RAW=$(jget "$OUT/baseline.json" .throughput_rps)

# measure NAME PID PORT JSON: one SendMessage run against the gateway PID listening on PORT; adds
# its throughput, its answered sends and the gateway's CPU ticks to RPS, SENT and CPU [NAME].
declare -A RPS=([off]=0 [on]=0 [tr]=0) SENT=([off]=0 [on]=0 [tr]=0) CPU=([off]=0 [on]=0 [tr]=0)
measure() {
  local name=$1 pid=$2 port=$3 json=$4 c0
  c0=$(cpu_ticks "$pid")
  lt_send "$json" "http://127.0.0.1:$port"
  CPU[$name]=$(( CPU[$name] + $(cpu_ticks "$pid") - c0 ))
  RPS[$name]=$(jq --argjson a "${RPS[$name]}" '$a + .throughput_rps' "$json")
  SENT[$name]=$(( SENT[$name] + $(lt_answered "$json") ))
}
SCRAPES=0
for round in $(seq "$ROUNDS"); do
  measure off "$OFF_PID" "$PORT" "$OUT/send-off-$round.json"
  lt_row "SendMessage, metrics off" "$OUT/send-off-$round.json"
  # Prometheus's part: one scrape a second while the tool runs.
  ( while :; do curl -sf -o /dev/null "http://127.0.0.1:$ADMIN/metrics" && echo x; sleep 1; done ) >"$WORK/scrapes" &
  SCRAPER=$!
  measure on "$ON_PID" "$MPORT" "$OUT/send-on-$round.json"
  kill "$SCRAPER"; wait "$SCRAPER" 2>/dev/null || true
  SCRAPER=""
  SCRAPES=$((SCRAPES + $(wc -l <"$WORK/scrapes")))
  lt_row "SendMessage, metrics on" "$OUT/send-on-$round.json"
  measure tr "$TR_PID" "$TPORT" "$OUT/send-traced-$round.json"
  lt_row "SendMessage, traces on" "$OUT/send-traced-$round.json"
done
(( SCRAPES > 0 )) || { echo "bench: /metrics was never scraped" >&2; exit 1; }

# Each gateway holds one task per successful send, warm-up included, plus the check request.
for row in "off $PORT" "on $MPORT" "tr $TPORT"; do
  read -r name port <<<"$row"
  held=$(tasks_held "http://127.0.0.1:$port")
  if (( held != SENT[$name] + 1 )); then
    echo "bench: the gateway on :$port holds $held tasks, a2a-loadtest completed ${SENT[$name]} sends (+ 1 check)" >&2; exit 1
  fi
  echo "tasks stored on :$port: $held (a2a-loadtest completed ${SENT[$name]} sends + 1 check request)" >&2
done
sleep 2 # the batch exporter's last export
EXPORTED=$(cat "$WORK/spans" 2>/dev/null || echo 0)
(( EXPORTED > 0 )) || { echo "bench: the tracing gateway exported $EXPORTED spans for ${SENT[tr]} sends" >&2; exit 1; }
echo "spans received by the OTLP sink: $EXPORTED (${SENT[tr]} traced sends)" >&2
# Every send exports two spans (SERVER and turn) when every request is sampled: fewer means the
# batch processor dropped some, and the traced figures would flatter tracing.
if [[ "$SAMPLER" == always_on ]] && (( EXPORTED < 2 * ${SENT[tr]} )); then
  echo "bench: spans were dropped ($EXPORTED for ${SENT[tr]} sends, 2 expected each): raise OTEL_BSP_* (BENCH_BSP_BATCH)" >&2
  exit 1
fi
awk -v off="${RPS[off]}" -v on="${RPS[on]}" -v tr="${RPS[tr]}" -v r="$RAW" -v n="$ROUNDS" -v s="$SCRAPES" \
    -v coff="${CPU[off]}" -v con="${CPU[on]}" -v ctr="${CPU[tr]}" \
    -v soff="${SENT[off]}" -v son="${SENT[on]}" -v str="${SENT[tr]}" -v tick="$CLK_TCK" \
    -v sampler="$SAMPLER $SAMPLER_ARG" 'BEGIN {
  uoff = coff / tick / soff * 1e6; uon = con / tick / son * 1e6; utr = ctr / tick / str * 1e6
  printf "SendMessage / raw limit: %.2f (metrics off, mean of %d runs: %.0f req/s)\n", off / n / r, n, off / n
  printf "metrics on, mean of %d runs: %.0f req/s, %d scrapes: cost %.1f%% of throughput\n", n, on / n, s, (1 - on / off) * 100
  printf "gateway CPU per request: %.1f us off, %.1f us on: cost %.1f%%\n", uoff, uon, (uon / uoff - 1) * 100
  printf "traces on (sampler %s), mean of %d runs: %.0f req/s: cost %.1f%% of throughput\n", sampler, n, tr / n, (1 - tr / off) * 100
  printf "gateway CPU per request with traces: %.1f us: cost %.1f%%\n", utr, (utr / uoff - 1) * 100
}' >&2
