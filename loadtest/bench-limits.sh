#!/usr/bin/env bash
# The cost of rate limiting at a limit that is never hit (issue: rate limits). Starts two
# release gateways, both with an API key ([auth]), one without [limits.rate] and one with every
# scope on (ip, principal, agent) at a limit far above what the machine can send, so every call
# pays all three checks and none is refused. Then, with a2a-loadtest (64 requests in flight,
# closed loop, the key in an X-API-Key header; see loadtest/bench-common.sh), JSON-RPC
# SendMessage to the echo agent on each, alternating BENCH_LIMITS_ROUNDS times (default 5) so that
# both see the same shared machine, and prints req/s and the gateway's CPU time per request
# (utime + stime from /proc over the run, divided by the requests answered, warm-up included;
# a refused call would fail the run), with the cost of the limits in both. BENCH_LIMITS_BACKEND=redis
# measures the shared limiter instead (needs Redis at BENCH_REDIS_URL, default
# redis://127.0.0.1:6379, and redis-cli; both gateways then use it as their event bus too). BENCH_LIMITS_AA=1 gives the second gateway no limits either (an A/A
# run: how far two identical gateways differ on this machine, the noise floor of the figures).
# Usage: loadtest/bench-limits.sh [duration, default 10s]
#   BENCH_PORT (first of two ports, default 18490), BENCH_NO_BUILD, BENCH_OUT, BENCH_WARMUP
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=loadtest/bench-common.sh
source loadtest/bench-common.sh
DURATION="${1:-10s}"
PORT="${BENCH_PORT:-18490}"
LPORT=$((PORT + 1))      # the gateway with limits on
ROUNDS="${BENCH_LIMITS_ROUNDS:-5}"
BACKEND="${BENCH_LIMITS_BACKEND:-local}"
KEY="bench-limits-key"
bench_build
DIR=$(mktemp -d)
OUT=$(bench_reports "$DIR")
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
env RUST_LOG=warn A2A_LISTEN="127.0.0.1:$PORT" A2A_CONFIG="$DIR/off.toml" $(redis_env off) "$GW_BIN" &
PIDS+=($!)
# shellcheck disable=SC2046
env RUST_LOG=warn A2A_LISTEN="127.0.0.1:$LPORT" A2A_CONFIG="$DIR/on.toml" $(redis_env on) "$GW_BIN" &
PIDS+=($!)
for port in "$PORT" "$LPORT"; do
  wait_http "http://127.0.0.1:$port/healthz"
  check_send "http://127.0.0.1:$port" -H "X-API-Key: $KEY"
done
SEND='{"jsonrpc":"2.0","id":0,"method":"SendMessage","params":{"message":{"messageId":"check","role":"ROLE_USER","parts":[{"text":"hi"}]}}}'
# The limits gateway checks every scope: its answers say what is left of each.
[[ -n "${BENCH_LIMITS_AA:-}" ]] || curl -sf -D - -o /dev/null -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' -H "X-API-Key: $KEY" \
  "http://127.0.0.1:$LPORT/a2a/jsonrpc" -d "$SEND" | grep -ci '^ratelimit: "ip";r=[0-9]*;t=[0-9]*, "principal"' >/dev/null \
  || { echo "bench: the limits gateway's answer has no RateLimit header for ip and principal" >&2; exit 1; }

# measure NAME PID PORT JSON: one run against the gateway PID on PORT; adds its throughput, its
# answered sends and the gateway's CPU ticks to RPS, SENT and CPU [NAME].
declare -A RPS=([off]=0 [on]=0) SENT=([off]=0 [on]=0) CPU=([off]=0 [on]=0)
measure() {
  local name=$1 pid=$2 port=$3 json=$4 c0
  c0=$(cpu_ticks "$pid")
  lt_send "$json" "http://127.0.0.1:$port" --api-key-header "X-API-Key=$KEY"
  CPU[$name]=$(( CPU[$name] + $(cpu_ticks "$pid") - c0 ))
  RPS[$name]=$(jq --argjson a "${RPS[$name]}" '$a + .throughput_rps' "$json")
  SENT[$name]=$(( SENT[$name] + $(lt_answered "$json") ))
}

echo "a2a-gateway rate-limit cost ($BACKEND): a2a-loadtest, $CONNS in flight, $DURATION each after $WARMUP of warm-up, $ROUNDS rounds, $(nproc) cores, the generator on the same machine" >&2
for round in $(seq "$ROUNDS"); do
  measure off "${PIDS[0]}" "$PORT" "$OUT/send-limits-off-$round.json"
  lt_row "SendMessage, limits off" "$OUT/send-limits-off-$round.json"
  measure on "${PIDS[1]}" "$LPORT" "$OUT/send-limits-on-$round.json"
  lt_row "SendMessage, limits on" "$OUT/send-limits-on-$round.json"
done
awk -v off="${RPS[off]}" -v on="${RPS[on]}" -v n="$ROUNDS" -v coff="${CPU[off]}" -v con="${CPU[on]}" \
    -v soff="${SENT[off]}" -v son="${SENT[on]}" -v tick="$CLK_TCK" 'BEGIN {
  uoff = coff / tick / soff * 1e6; uon = con / tick / son * 1e6
  printf "limits off, mean of %d runs: %.0f req/s; limits on: %.0f req/s: cost %.1f%% of throughput\n", n, off / n, on / n, (1 - on / off) * 100
  printf "gateway CPU per request: %.1f us off, %.1f us on: cost %.1f%%\n", uoff, uon, (uon / uoff - 1) * 100
}' >&2
