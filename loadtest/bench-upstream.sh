#!/usr/bin/env bash
# SendMessage through the gateway to an upstream agent versus straight to that upstream, in the
# same run (issue 8). Starts two release gateways on loopback, in-memory store:
#   upstream  - a2a-gateway running the built-in echo agent (the A2A server being fronted)
#   front     - a2a-gateway with the upstream as [[agents]] "up" (streams it over JSON-RPC)
# Then `a2a-loadtest upstream-overhead` (JSON-RPC SendMessage straight to the upstream, then to
# the front with tenant "up", the same load both ways; see loadtest/bench-common.sh) twice: with
# 1 request in flight (latency: the added p50/p99 is the gateway's own cost) and with 64
# (throughput ratio). Prints req/s, p50, p99, the added latency and the ratio. The 64-in-flight
# run is also one of loadtest/publish.sh's published figures; the 1-in-flight run is not.
# Usage: loadtest/bench-upstream.sh [duration, default 10s]
#   BENCH_UP_PORT (default 18490), BENCH_FRONT_PORT (default 18491), BENCH_NO_BUILD, BENCH_OUT,
#   BENCH_WARMUP
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=loadtest/bench-common.sh
source loadtest/bench-common.sh
DURATION="${1:-10s}"
UP_PORT="${BENCH_UP_PORT:-18490}"
FRONT_PORT="${BENCH_FRONT_PORT:-18491}"
bench_build
WORK=$(mktemp -d)
OUT=$(bench_reports "$WORK")
cat >"$WORK/front.toml" <<TOML
[[agents]]
name = "up"
card_url = "http://127.0.0.1:$UP_PORT"
max_concurrency = 256
queue_capacity = 1024
TOML

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
UP="http://127.0.0.1:$UP_PORT" FRONT="http://127.0.0.1:$FRONT_PORT"
RUST_LOG=warn A2A_LISTEN="127.0.0.1:$UP_PORT" "$GW_BIN" & PIDS+=($!)
wait_http "$UP/healthz"
RUST_LOG=warn A2A_CONFIG="$WORK/front.toml" A2A_LISTEN="127.0.0.1:$FRONT_PORT" "$GW_BIN" & PIDS+=($!)
wait_http "$FRONT/agents/up/.well-known/agent-card.json"

# One checked request through the front before measuring.
curl -sf -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' "$FRONT/a2a/jsonrpc" \
  -d '{"jsonrpc":"2.0","id":0,"method":"SendMessage","params":{"tenant":"up","message":{"messageId":"check","role":"ROLE_USER","parts":[{"text":"hi"}]}}}' \
  | grep -c TASK_STATE_COMPLETED >/dev/null || { echo "bench: SendMessage through the gateway does not complete" >&2; exit 1; }

overhead() { # in-flight, connections, JSON: both runs, straight (.[0]) then through (.[1])
  lt_run "$3" upstream-overhead --agent-url "$UP" --url "$FRONT" --tenant up --binding jsonrpc \
    --agent-binding jsonrpc --connections "$2" --concurrency "$1" --duration "$DURATION" --warmup "$WARMUP"
  jq '.[0]' "$3" >"$3.direct"; jq '.[1]' "$3" >"$3.through"
  lt_row "direct to upstream, $1 in flight" "$3.direct"
  lt_row "through the gateway, $1 in flight" "$3.through"
}
echo "a2a-gateway upstream benchmark: a2a-loadtest upstream-overhead, $DURATION per run after $WARMUP of warm-up, $(nproc) cores, both gateways and the generator on one machine" >&2
overhead 1 1 "$OUT/upstream-overhead-1.json"
overhead "$CONNS" 4 "$OUT/upstream-overhead-$CONNS.json"
jq -r --slurpfile many "$OUT/upstream-overhead-$CONNS.json" '
  "added latency (1 in flight): p50 \(.[1].latency_ms.p50 - .[0].latency_ms.p50 | . * 1000 | round / 1000) ms, p99 \(.[1].latency_ms.p99 - .[0].latency_ms.p99 | . * 1000 | round / 1000) ms",
  "throughput through the gateway / direct (\($many[0][0].load)): \($many[0][1].throughput_rps / $many[0][0].throughput_rps | . * 100 | round / 100)"
' "$OUT/upstream-overhead-1.json" >&2
