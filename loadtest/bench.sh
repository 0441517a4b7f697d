#!/usr/bin/env bash
# Benchmarks of the embedded gateway (issue: Foundation). Starts a release build of
# a2a-gateway on a loopback port, then with wrk (64 connections, 2 threads):
#   1. GET /healthz          - the raw limit of the HTTP stack in this run (trivial axum route)
#   2. JSON-RPC SendMessage  - echo agent, in-memory store: a task created, run and completed
#   3. the same with metrics on: a second gateway with an admin listener (A2A_ADMIN_LISTEN),
#      its /metrics scraped once a second by curl during the run
#   4. the same with full tracing: a third gateway exporting every span (OTEL_TRACES_SAMPLER
#      always_on; BENCH_TRACES_SAMPLER and BENCH_TRACES_SAMPLER_ARG choose another) over OTLP to `a2a-loadtest otlp-sink`, a receiver that only counts them;
#      rows 2 to 4 alternate BENCH_METRICS_ROUNDS times (default 2) so that all see the same
#      shared machine
# and prints req/s, p50, p99, the ratio of (2) to (1) and the costs of metrics (3 vs 2) and of
# tracing (4 vs 2), both in
# throughput and in the gateway's own CPU time per request (utime + stime from /proc: steadier
# than throughput when other work shares the machine). Afterwards
# it checks that each gateway holds exactly as many tasks as wrk counted successful requests (no
# error was benchmarked). BENCH_NO_BUILD=1 uses the release binary already built.
# Usage: loadtest/bench.sh [duration, default 15s]. Needs wrk (Debian package `wrk`).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-15s}"
CONNS=64
PORT="${BENCH_PORT:-18480}"
MPORT=$((PORT + 1))      # the gateway with metrics on
ADMIN=$((PORT + 2))      # its admin listener
TPORT=$((PORT + 3))      # the gateway with tracing on
SINK=$((PORT + 4))       # its OTLP receiver
ROUNDS="${BENCH_METRICS_ROUNDS:-2}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/a2a-gateway-target}"

command -v wrk >/dev/null || { echo "bench: wrk is not installed (apt-get install wrk)" >&2; exit 2; }
[[ -n "${BENCH_NO_BUILD:-}" ]] || cargo build --release -q -p a2a-gateway -p a2a-loadtest
BIN="$CARGO_TARGET_DIR/release/a2a-gateway"
SPANS="${TMPDIR:-/tmp}/bench-spans.$$"

# Every task is kept ([retention] max_tasks = 0, no bound), so that the count can be checked
# afterwards; loadtest/bench-memory.sh measures the default bound.
KEEP_ALL="${TMPDIR:-/tmp}/bench-keep-all.$$.toml"
printf '[retention]\nmax_tasks = 0\n' >"$KEEP_ALL"
export A2A_CONFIG="$KEEP_ALL"
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -f "$KEEP_ALL"' EXIT
RUST_LOG=warn A2A_LISTEN="127.0.0.1:$PORT" "$BIN" &
PIDS+=($!)
RUST_LOG=warn A2A_LISTEN="127.0.0.1:$MPORT" A2A_ADMIN_LISTEN="127.0.0.1:$ADMIN" "$BIN" &
PIDS+=($!)
"$CARGO_TARGET_DIR/release/a2a-loadtest" otlp-sink "127.0.0.1:$SINK" "$SPANS" >/dev/null &
PIDS+=($!)
# The batch processor's standard knobs, sized for this rate (the defaults, a 2,048-span queue
# exported every 5 s, would drop most spans at thousands of requests a second).
RUST_LOG=warn A2A_LISTEN="127.0.0.1:$TPORT" OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$SINK" \
  OTEL_TRACES_SAMPLER="${BENCH_TRACES_SAMPLER:-always_on}" \
  OTEL_TRACES_SAMPLER_ARG="${BENCH_TRACES_SAMPLER_ARG:-}" OTEL_BSP_MAX_QUEUE_SIZE=262144 OTEL_BSP_SCHEDULE_DELAY=250 \
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE=8192 "$BIN" &
PIDS+=($!)
TRACED=${PIDS[3]}
for port in "$PORT" "$MPORT" "$TPORT"; do
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
  # One checked request before measuring: the benchmark must measure successes.
  curl -sf -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' "http://127.0.0.1:$port/a2a/jsonrpc" \
    -d '{"jsonrpc":"2.0","id":0,"method":"SendMessage","params":{"message":{"messageId":"check","role":"ROLE_USER","parts":[{"text":"hi"}]}}}' \
    | grep -q TASK_STATE_COMPLETED || { echo "bench: SendMessage does not complete on :$port" >&2; exit 1; }
done
curl -sf "http://127.0.0.1:$ADMIN/metrics" | grep -q '^a2a_requests_total' \
  || { echo "bench: the metrics gateway's /metrics has no a2a_requests_total" >&2; exit 1; }

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

TICK=$(getconf CLK_TCK)
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; } # pid → CPU ticks used so far

tasks() { # port → tasks the gateway holds
  curl -sf -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' "http://127.0.0.1:$1/a2a/jsonrpc" \
    -d '{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":1}}' \
    | sed -E 's/.*"totalSize":([0-9]+).*/\1/'
}
check_tasks() { # port, sends wrk completed
  local total expected; total=$(tasks "$1"); expected=$(($2 + 1))
  # wrk does not count requests still in flight when it stops, so allow up to one per connection
  # per run.
  if (( total < expected || total > expected + CONNS * ROUNDS )); then
    echo "bench: the gateway on :$1 holds $total tasks, wrk completed $2 sends" >&2; exit 1
  fi
  echo "tasks stored on :$1: $total (wrk completed $2 + 1 check request)" >&2
}

echo "a2a-gateway benchmark: $CONNS connections, $DURATION each, $(nproc) cores, wrk on the same machine" >&2
read -r RAW _ < <(run "GET /healthz (raw limit)" "http://127.0.0.1:$PORT/healthz")
OFF=0; ON=0; SENT_OFF=0; SENT_ON=0; SCRAPES=0; CPU_OFF=0; CPU_ON=0; TR=0; SENT_TR=0; CPU_TR=0
for round in $(seq "$ROUNDS"); do
  c0=$(cpu "${PIDS[0]}")
  read -r rps sent < <(run "SendMessage, metrics off" -s loadtest/send-echo.lua "http://127.0.0.1:$PORT/a2a/jsonrpc")
  CPU_OFF=$((CPU_OFF + $(cpu "${PIDS[0]}") - c0))
  OFF=$(awk -v a="$OFF" -v b="$rps" 'BEGIN { print a + b }'); SENT_OFF=$((SENT_OFF + sent))
  # Prometheus's part: one scrape a second while wrk runs.
  ( while :; do curl -sf -o /dev/null "http://127.0.0.1:$ADMIN/metrics" && echo x; sleep 1; done ) >"${TMPDIR:-/tmp}/bench-scrapes.$$" &
  SCRAPER=$!
  c0=$(cpu "${PIDS[1]}")
  read -r rps sent < <(run "SendMessage, metrics on" -s loadtest/send-echo.lua "http://127.0.0.1:$MPORT/a2a/jsonrpc")
  kill "$SCRAPER"; wait "$SCRAPER" 2>/dev/null || true
  CPU_ON=$((CPU_ON + $(cpu "${PIDS[1]}") - c0))
  SCRAPES=$((SCRAPES + $(wc -l <"${TMPDIR:-/tmp}/bench-scrapes.$$")))
  ON=$(awk -v a="$ON" -v b="$rps" 'BEGIN { print a + b }'); SENT_ON=$((SENT_ON + sent))
  c0=$(cpu "$TRACED")
  read -r rps sent < <(run "SendMessage, traces on" -s loadtest/send-echo.lua "http://127.0.0.1:$TPORT/a2a/jsonrpc")
  CPU_TR=$((CPU_TR + $(cpu "$TRACED") - c0))
  TR=$(awk -v a="$TR" -v b="$rps" 'BEGIN { print a + b }'); SENT_TR=$((SENT_TR + sent))
done
rm -f "${TMPDIR:-/tmp}/bench-scrapes.$$"
(( SCRAPES > 0 )) || { echo "bench: /metrics was never scraped" >&2; exit 1; }
check_tasks "$PORT" "$SENT_OFF"
check_tasks "$MPORT" "$SENT_ON"
check_tasks "$TPORT" "$SENT_TR"
sleep 2 # the batch exporter's last export
EXPORTED=$(cat "$SPANS" 2>/dev/null || echo 0)
(( EXPORTED > 0 )) || { echo "bench: the tracing gateway exported $EXPORTED spans for $SENT_TR sends" >&2; exit 1; }
echo "spans received by the OTLP sink: $EXPORTED ($SENT_TR traced sends)" >&2
awk -v off="$OFF" -v on="$ON" -v r="$RAW" -v n="$ROUNDS" -v s="$SCRAPES" \
    -v coff="$CPU_OFF" -v con="$CPU_ON" -v soff="$SENT_OFF" -v son="$SENT_ON" -v tick="$TICK" \
    -v tr="$TR" -v ctr="$CPU_TR" -v str="$SENT_TR" \
    -v sampler="${BENCH_TRACES_SAMPLER:-always_on} ${BENCH_TRACES_SAMPLER_ARG:-}" 'BEGIN {
  uoff = coff / tick / soff * 1e6; uon = con / tick / son * 1e6; utr = ctr / tick / str * 1e6
  printf "SendMessage / raw limit: %.2f (metrics off, mean of %d runs: %.0f req/s)\n", off / n / r, n, off / n
  printf "metrics on, mean of %d runs: %.0f req/s, %d scrapes: cost %.1f%% of throughput\n", n, on / n, s, (1 - on / off) * 100
  printf "gateway CPU per request: %.1f us off, %.1f us on: cost %.1f%%\n", uoff, uon, (uon / uoff - 1) * 100
  printf "traces on (sampler %s), mean of %d runs: %.0f req/s: cost %.1f%% of throughput\n", sampler, n, tr / n, (1 - tr / off) * 100
  printf "gateway CPU per request with traces: %.1f us: cost %.1f%%\n", utr, (utr / uoff - 1) * 100
}' >&2
rm -f "$SPANS"
