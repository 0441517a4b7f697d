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
#      rows 2 to 4 alternate BENCH_METRICS_ROUNDS times (default 6), in a rotated order each
#      round, so that all see the same shared machine
# and prints req/s, p50, p99, the ratio of (2) to (1) and the costs of metrics (3 vs 2) and of
# tracing (4 vs 2), both in throughput and in the gateway's own CPU time per request (utime +
# stime from /proc over the tool's run, divided by the requests it answered, warm-up included:
# steadier than throughput when other work shares the machine). Each gateway keeps the default
# bound of 100,000 tasks ([retention] max_tasks) and is filled to it before the measured runs, so
# that every run sees a store in its steady state (retention deleting as fast as sends create);
# with no bound, each gateway's memory grew by 4.5 KB per send, and zeroing those fresh pages
# (huge pages, in the kernel) was 15-21% of its CPU and differed between the gateways by more
# than the cost measured. Afterwards it checks that each gateway holds exactly the bound.
# Usage: loadtest/bench.sh [duration per run, default 5s]
#   BENCH_PORT (first of five ports, default 18480), BENCH_NO_BUILD, BENCH_OUT, BENCH_WARMUP,
#   BENCH_MAX_TASKS (the gateways' bound, default 100000),
#   BENCH_BSP_BATCH (the traced gateway's OTEL_BSP_MAX_EXPORT_BATCH_SIZE, default 8192; the run fails
#   if spans were dropped)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=loadtest/bench-common.sh
source loadtest/bench-common.sh
DURATION="${1:-5s}"
PORT="${BENCH_PORT:-18480}"
MPORT=$((PORT + 1))      # the gateway with metrics on
ADMIN=$((PORT + 2))      # its admin listener
TPORT=$((PORT + 3))      # the gateway with tracing on
SINK=$((PORT + 4))       # its OTLP receiver
ROUNDS="${BENCH_METRICS_ROUNDS:-6}"
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

# The bound is the default's, written out so that the check below knows it.
BOUND="${BENCH_MAX_TASKS:-100000}"
printf '[retention]\nmax_tasks = %d\n' "$BOUND" >"$WORK/bound.toml"
export A2A_CONFIG="$WORK/bound.toml"
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

# Each store filled to its bound (and a little past, so retention runs), not measured.
for port in "$PORT" "$MPORT" "$TPORT"; do
  lt_run "$OUT/fill-$port.json" send --url "http://127.0.0.1:$port" --binding jsonrpc --connections 4 \
    --concurrency "$CONNS" --requests $((BOUND + BOUND / 10)) --warmup 0s
done

echo "a2a-gateway benchmark: a2a-loadtest, $CONNS in flight, $DURATION each after $WARMUP of warm-up, $(nproc) cores, the generator on the same machine" >&2
lt_baseline "$OUT/baseline.json"
lt_row "raw limit (a2a-loadtest baseline)" "$OUT/baseline.json"
RAW=$(jget "$OUT/baseline.json" .throughput_rps)

# measure NAME PID PORT JSON: one SendMessage run against the gateway PID listening on PORT; adds
# its throughput, its answered sends and the gateway's CPU ticks to RPS, SENT and CPU [NAME].
declare -A RPS=([off]=0 [on]=0 [tr]=0) SENT=([off]=0 [on]=0 [tr]=0) CPU=([off]=0 [on]=0 [tr]=0)
# Each run also goes to $WORK/per-round ("round name ticks sends rps") for the per-round ratios.
measure() {
  local name=$1 pid=$2 port=$3 json=$4 c0 ticks sent rps
  c0=$(cpu_ticks "$pid")
  lt_send "$json" "http://127.0.0.1:$port"
  ticks=$(( $(cpu_ticks "$pid") - c0 ))
  sent=$(lt_answered "$json")
  rps=$(jq '.throughput_rps' "$json")
  CPU[$name]=$(( CPU[$name] + ticks ))
  RPS[$name]=$(jq -n --argjson a "${RPS[$name]}" --argjson b "$rps" '$a + $b')
  SENT[$name]=$(( SENT[$name] + sent ))
  echo "$round $name $ticks $sent $rps" >>"$WORK/per-round"
}
SCRAPES=0
# run_one NAME: the run of one gateway in this round.
run_one() {
  case $1 in
    off)
      measure off "$OFF_PID" "$PORT" "$OUT/send-off-$round.json"
      lt_row "SendMessage, metrics off" "$OUT/send-off-$round.json" ;;
    on)
      # Prometheus's part: one scrape a second while the tool runs.
      ( while :; do curl -sf -o /dev/null "http://127.0.0.1:$ADMIN/metrics" && echo x; sleep 1; done ) >"$WORK/scrapes" &
      SCRAPER=$!
      measure on "$ON_PID" "$MPORT" "$OUT/send-on-$round.json"
      kill "$SCRAPER"; wait "$SCRAPER" 2>/dev/null || true
      SCRAPER=""
      SCRAPES=$((SCRAPES + $(wc -l <"$WORK/scrapes")))
      lt_row "SendMessage, metrics on" "$OUT/send-on-$round.json" ;;
    tr)
      measure tr "$TR_PID" "$TPORT" "$OUT/send-traced-$round.json"
      lt_row "SendMessage, traces on" "$OUT/send-traced-$round.json" ;;
  esac
}
# Each round runs the three in another order (off on tr, on tr off, tr off on, ...): a machine
# that speeds up or slows down within a round favours no row over the rounds.
ORDER=(off on tr)
for round in $(seq "$ROUNDS"); do
  shift_by=$(( (round - 1) % 3 ))
  for i in 0 1 2; do run_one "${ORDER[$(( (i + shift_by) % 3 ))]}"; done
done
(( SCRAPES > 0 )) || { echo "bench: /metrics was never scraped" >&2; exit 1; }

# Each gateway holds exactly its bound: every send was stored (the tool checked each answer is
# the completed task) and retention deleted only what exceeded the bound.
for row in "off $PORT" "on $MPORT" "tr $TPORT"; do
  read -r name port <<<"$row"
  held=$(tasks_held "http://127.0.0.1:$port")
  if (( held != BOUND )); then
    echo "bench: the gateway on :$port holds $held tasks, not its bound of $BOUND" >&2; exit 1
  fi
  echo "tasks stored on :$port: $held (its bound; a2a-loadtest completed ${SENT[$name]} measured sends)" >&2
done
sleep 2 # the batch exporter's last export
EXPORTED=$(cat "$WORK/spans" 2>/dev/null || echo 0)
(( EXPORTED > 0 )) || { echo "bench: the tracing gateway exported $EXPORTED spans for ${SENT[tr]} sends" >&2; exit 1; }
echo "spans received by the OTLP sink: $EXPORTED (${SENT[tr]} measured traced sends, and the fill's)" >&2
# Every send exports two spans (SERVER and turn) when every request is sampled: fewer means the
# batch processor dropped some, and the traced figures would flatter tracing.
TRACED=$(( SENT[tr] + $(lt_answered "$OUT/fill-$TPORT.json") ))
if [[ "$SAMPLER" == always_on ]] && (( EXPORTED < 2 * TRACED )); then
  echo "bench: spans were dropped ($EXPORTED for $TRACED sends, fill included, 2 expected each): raise OTEL_BSP_* (BENCH_BSP_BATCH)" >&2
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
# The same costs as the median of each round's ratios: a round's three runs follow each other
# within seconds, so a machine whose speed drifts during the script (other tenants of the host)
# moves all three; the pooled figures above mix the drift into the costs.
awk -v tick="$CLK_TCK" '
  { u[$1, $2] = $3 / tick / $4 * 1e6; r[$1, $2] = $5; if ($1 > n) n = $1 }
  function median(a, k,   i, j, t) {
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }
  END {
    for (i = 1; i <= n; i++) { mc[i] = u[i, "on"] / u[i, "off"]; tc[i] = u[i, "tr"] / u[i, "off"]
                               mt[i] = r[i, "on"] / r[i, "off"]; tt[i] = r[i, "tr"] / r[i, "off"] }
    printf "median of the %d rounds: metrics cost %.1f%% of throughput, %.1f%% of CPU; full tracing %.1f%% of throughput, %.1f%% of CPU\n",
      n, (1 - median(mt, n)) * 100, (median(mc, n) - 1) * 100, (1 - median(tt, n)) * 100, (median(tc, n) - 1) * 100
  }' "$WORK/per-round" >&2
