#!/usr/bin/env bash
# The cost of rate limiting at a limit that is never hit (issue: rate limits). Starts two
# release gateways, both with an API key ([auth]), one without [limits.rate] and one with every
# scope on (ip, principal, agent) at a limit far above what the machine can send, so every call
# pays all three checks and none is refused. Then, with wrk (64 connections, 2 threads), JSON-RPC
# SendMessage to the echo agent on each, alternating BENCH_LIMITS_ROUNDS times (default 5) so that
# both see the same shared machine, and prints req/s and the gateway's CPU time per request
# (utime + stime from /proc), with the cost of the limits in both. BENCH_LIMITS_BACKEND=redis
# measures the shared limiter instead (needs Redis at BENCH_REDIS_URL, default
# redis://127.0.0.1:6379, and redis-cli; both gateways then use it as their event bus too). BENCH_LIMITS_AA=1 gives the second gateway no limits either (an A/A
# run: how far two identical gateways differ on this machine, the noise floor of the figures).
# BENCH_NO_BUILD=1 uses the release binary already built.
# Usage: loadtest/bench-limits.sh [duration, default 10s]. Needs wrk (Debian package `wrk`).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-10s}"
CONNS=64
PORT="${BENCH_PORT:-18490}"
LPORT=$((PORT + 1))      # the gateway with limits on
ROUNDS="${BENCH_LIMITS_ROUNDS:-5}"
BACKEND="${BENCH_LIMITS_BACKEND:-local}"
KEY="bench-limits-key"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/a2a-gateway-target}"

command -v wrk >/dev/null || { echo "bench: wrk is not installed (apt-get install wrk)" >&2; exit 2; }
[[ -n "${BENCH_NO_BUILD:-}" ]] || cargo build --release -q -p a2a-gateway
BIN="$CARGO_TARGET_DIR/release/a2a-gateway"
DIR=$(mktemp -d)
AUTH="[auth.schemes.key]
scheme = { apiKeySecurityScheme = { location = \"header\", name = \"X-API-Key\" } }
keys = [{ id = \"bench\", key = \"$KEY\" }]"
echo "$AUTH" >"$DIR/off.toml"
cat >"$DIR/on.toml" <<TOML
$AUTH
[limits.rate]
backend = "$BACKEND"
ip = { rate = 1000000000, burst = 1000000000 }
principal = { rate = 1000000000, burst = 1000000000 }
agent = { rate = 1000000000, burst = 1000000000 }
TOML
[[ -z "${BENCH_LIMITS_AA:-}" ]] || cp "$DIR/off.toml" "$DIR/on.toml"
# The Redis backend needs A2A_REDIS_URL, which also makes Redis the event bus: both gateways get
# it (each its own key prefix), so that only the limiter differs between them.
REDIS_URL="${BENCH_REDIS_URL:-redis://127.0.0.1:6379}"
PREFIX="bench-limits-$$"
redis_env() { # gateway name → its environment for the Redis backend
  [[ "$BACKEND" == redis ]] && echo "A2A_REDIS_URL=$REDIS_URL A2A_REDIS_PREFIX=$PREFIX-$1:"
  true
}
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$DIR"
  if [[ "$BACKEND" == redis ]]; then # the task streams and limiter keys this run wrote
    redis-cli -u "$REDIS_URL" --scan --pattern "$PREFIX-*" | xargs -r -n 500 redis-cli -u "$REDIS_URL" del >/dev/null
  fi
}

PIDS=()
trap cleanup EXIT
# shellcheck disable=SC2046 # redis_env's words are separate variables
env RUST_LOG=warn A2A_LISTEN="127.0.0.1:$PORT" A2A_CONFIG="$DIR/off.toml" $(redis_env off) "$BIN" &
PIDS+=($!)
# shellcheck disable=SC2046
env RUST_LOG=warn A2A_LISTEN="127.0.0.1:$LPORT" A2A_CONFIG="$DIR/on.toml" $(redis_env on) "$BIN" &
PIDS+=($!)
SEND='{"jsonrpc":"2.0","id":0,"method":"SendMessage","params":{"message":{"messageId":"check","role":"ROLE_USER","parts":[{"text":"hi"}]}}}'
for port in "$PORT" "$LPORT"; do
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
  # One checked request before measuring: the benchmark must measure successes.
  curl -sf -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' -H "X-API-Key: $KEY" \
    "http://127.0.0.1:$port/a2a/jsonrpc" -d "$SEND" | grep -q TASK_STATE_COMPLETED \
    || { echo "bench: SendMessage does not complete on :$port" >&2; exit 1; }
done
# The limits gateway checks every scope: its answers say what is left of each.
[[ -n "${BENCH_LIMITS_AA:-}" ]] || curl -sf -D - -o /dev/null -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' -H "X-API-Key: $KEY" \
  "http://127.0.0.1:$LPORT/a2a/jsonrpc" -d "$SEND" | grep -qi '^ratelimit: "ip";r=[0-9]*;t=[0-9]*, "principal"' \
  || { echo "bench: the limits gateway's answer has no RateLimit header for ip and principal" >&2; exit 1; }

run() { # name, wrk args...
  local name=$1; shift
  local out; out=$(wrk -t2 -c"$CONNS" -d"$DURATION" --latency -H "X-API-Key: $KEY" "$@")
  local rps p50 p99 reqs
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  # A refused call (429) or any other error would be measured as cheap: none is allowed.
  if grep -q "Non-2xx" <<<"$out"; then echo "bench: $name had non-2xx responses" >&2; echo "$out" >&2; exit 1; fi
  printf '%-28s %10s req/s   p50 %8s   p99 %8s   (%s requests)\n' "$name" "$rps" "$p50" "$p99" "$reqs" >&2
  echo "$rps $reqs"
}

TICK=$(getconf CLK_TCK)
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; } # pid → CPU ticks used so far

echo "a2a-gateway rate-limit cost ($BACKEND): $CONNS connections, $DURATION each, $ROUNDS rounds, $(nproc) cores, wrk on the same machine" >&2
OFF=0; ON=0; SENT_OFF=0; SENT_ON=0; CPU_OFF=0; CPU_ON=0
for round in $(seq "$ROUNDS"); do
  c0=$(cpu "${PIDS[0]}")
  read -r rps sent < <(run "SendMessage, limits off" -s loadtest/send-echo.lua "http://127.0.0.1:$PORT/a2a/jsonrpc")
  CPU_OFF=$((CPU_OFF + $(cpu "${PIDS[0]}") - c0))
  OFF=$(awk -v a="$OFF" -v b="$rps" 'BEGIN { print a + b }'); SENT_OFF=$((SENT_OFF + sent))
  c0=$(cpu "${PIDS[1]}")
  read -r rps sent < <(run "SendMessage, limits on" -s loadtest/send-echo.lua "http://127.0.0.1:$LPORT/a2a/jsonrpc")
  CPU_ON=$((CPU_ON + $(cpu "${PIDS[1]}") - c0))
  ON=$(awk -v a="$ON" -v b="$rps" 'BEGIN { print a + b }'); SENT_ON=$((SENT_ON + sent))
done
awk -v off="$OFF" -v on="$ON" -v n="$ROUNDS" -v coff="$CPU_OFF" -v con="$CPU_ON" \
    -v soff="$SENT_OFF" -v son="$SENT_ON" -v tick="$TICK" 'BEGIN {
  uoff = coff / tick / soff * 1e6; uon = con / tick / son * 1e6
  printf "limits off, mean of %d runs: %.0f req/s; limits on: %.0f req/s: cost %.1f%% of throughput\n", n, off / n, on / n, (1 - on / off) * 100
  printf "gateway CPU per request: %.1f us off, %.1f us on: cost %.1f%%\n", uoff, uon, (uon / uoff - 1) * 100
}' >&2
