#!/usr/bin/env bash
# SendMessage through the gateway to an upstream agent versus straight to that upstream, in the
# same run (issue 8). Starts two release gateways on loopback, in-memory store:
#   upstream  - a2a-gateway running the built-in echo agent (the A2A server being fronted)
#   front     - a2a-gateway with the upstream as [[agents]] "up" (streams it over JSON-RPC)
# Then with wrk: JSON-RPC SendMessage straight to the upstream, and to the front with tenant
# "up"; once with 1 connection (latency: the added p50/p99 is the gateway's own cost) and once
# with 64 (throughput ratio). Prints req/s, p50, p99, the added latency and the ratio.
# Usage: loadtest/bench-upstream.sh [duration, default 10s]. Needs wrk.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-10s}"
UP_PORT="${BENCH_UP_PORT:-18490}"
FRONT_PORT="${BENCH_FRONT_PORT:-18491}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/a2a-gateway-target}"

command -v wrk >/dev/null || { echo "bench: wrk is not installed (apt-get install wrk)" >&2; exit 2; }
[[ -n "${BENCH_NO_BUILD:-}" ]] || cargo build --release -q -p a2a-gateway
BIN="$CARGO_TARGET_DIR/release/a2a-gateway"
WORK="$(mktemp -d)"
cat >"$WORK/front.toml" <<TOML
[[agents]]
name = "up"
card_url = "http://127.0.0.1:$UP_PORT"
max_concurrency = 256
queue_capacity = 1024
TOML

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
RUST_LOG=warn A2A_LISTEN="127.0.0.1:$UP_PORT" "$BIN" & PIDS+=($!)
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$UP_PORT/healthz" >/dev/null && break; sleep 0.1; done
RUST_LOG=warn A2A_CONFIG="$WORK/front.toml" A2A_LISTEN="127.0.0.1:$FRONT_PORT" "$BIN" & PIDS+=($!)
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$FRONT_PORT/agents/up/.well-known/agent-card.json" >/dev/null && break; sleep 0.1; done

# One checked request through the front before measuring.
curl -sf -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' "http://127.0.0.1:$FRONT_PORT/a2a/jsonrpc" \
  -d '{"jsonrpc":"2.0","id":0,"method":"SendMessage","params":{"tenant":"up","message":{"messageId":"check","role":"ROLE_USER","parts":[{"text":"hi"}]}}}' \
  | grep -q TASK_STATE_COMPLETED || { echo "bench: SendMessage through the gateway does not complete" >&2; exit 1; }

ms() { # wrk latency (us/ms/s) in ms
  awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n += 0; else if (v ~ /s$/) n *= 1000; printf "%.3f", n }'
}
run() { # name, connections, tenant, port
  local out; out=$(BENCH_TENANT="$3" wrk -t"$(( $2 < 2 ? 1 : 2 ))" -c"$2" -d"$DURATION" --latency -s loadtest/send-tenant.lua "http://127.0.0.1:$4/a2a/jsonrpc")
  if grep -q "Non-2xx" <<<"$out"; then echo "bench: $1 had non-2xx responses" >&2; echo "$out" >&2; exit 1; fi
  local rps p50 p99
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(ms "$(awk '$1=="50%" {print $2}' <<<"$out")")
  p99=$(ms "$(awk '$1=="99%" {print $2}' <<<"$out")")
  printf '%-40s %10s req/s   p50 %8s ms   p99 %8s ms\n' "$1" "$rps" "$p50" "$p99" >&2
  echo "$rps $p50 $p99"
}

echo "a2a-gateway upstream benchmark: $DURATION per run, $(nproc) cores, both gateways and wrk on one machine" >&2
read -r D1 D1P50 D1P99 < <(run "direct to upstream, 1 connection" 1 "" "$UP_PORT")
read -r G1 G1P50 G1P99 < <(run "through the gateway, 1 connection" 1 "up" "$FRONT_PORT")
read -r D64 _ D64P99 < <(run "direct to upstream, 64 connections" 64 "" "$UP_PORT")
read -r G64 _ G64P99 < <(run "through the gateway, 64 connections" 64 "up" "$FRONT_PORT")
awk -v a="$G1P50" -v b="$D1P50" -v c="$G1P99" -v d="$D1P99" -v g="$G64" -v r="$D64" 'BEGIN {
  printf "added latency (1 connection): p50 %+.3f ms, p99 %+.3f ms\n", a - b, c - d
  printf "throughput through the gateway / direct (64 connections): %.2f\n", g / r }' >&2
