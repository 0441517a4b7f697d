#!/usr/bin/env bash
# Horizontal scale (issue 30): what an idle replica spends on a loaded one's events. Two gateways,
# A and B, on one fresh PostgreSQL database and one Redis (a key prefix of this run's own);
# blocking SendMessage (echo) is driven on A only, B has no client at all. Prints the CPU seconds
# (utime + stime from /proc/<pid>/stat) each used during the run and B's as a share of A's.
# Then (unless BENCH_SCALE_RATE=0) the scaling sweep: the same total load (BENCH_SCALE_RATE sends/s,
# default 1500, split evenly) driven on 1, 2 and 4 replicas (BENCH_SCALE_REPLICAS), one load
# generator per replica; per replica count it prints the gateways' CPU per send (all replicas'
# CPU-seconds over the sends served: flat when adding replicas costs nothing), the busiest and
# idlest replica's CPU, and Redis commands per send (`total_commands_processed` of INFO stats,
# which includes every other client of that Redis: use a Redis of its own).
# Usage: loadtest/bench-scale.sh [seconds, default 15]
#   BENCH_GATEWAY_BIN / BENCH_LOADTEST_BIN: binaries to use (default: release builds in
#                       CARGO_TARGET_DIR, built unless BENCH_NO_BUILD is set)
#   BENCH_PG_ADMIN_URL  (default postgres://postgres@127.0.0.1:5432/postgres): the script creates
#                       database a2a_bench_scale_<pid> there and drops it at the end
#   BENCH_REDIS_URL     (default redis://127.0.0.1:6379): keys under a2a-scale-<pid>:, deleted after
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-15}"
P_A="${BENCH_PORT:-18591}"; P_B=$((P_A + 1))
ADMIN_URL="${BENCH_PG_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
REDIS_URL="${BENCH_REDIS_URL:-redis://127.0.0.1:6379}"
DB="a2a_bench_scale_$$"
DB_URL="${ADMIN_URL%/*}/$DB?sslmode=disable"
PREFIX="a2a-scale-$$:"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/a2a-gateway-target}"
if [[ -z "${BENCH_NO_BUILD:-}${BENCH_GATEWAY_BIN:-}" ]]; then
  # Two builds, so the load generator's features are not unified into the gateway's.
  cargo build --release -q -p a2a-gateway
  cargo build --release -q -p a2a-loadtest
fi
BIN="${BENCH_GATEWAY_BIN:-$CARGO_TARGET_DIR/release/a2a-gateway}"
LOAD="${BENCH_LOADTEST_BIN:-$CARGO_TARGET_DIR/release/a2a-loadtest}"

psql -q -X -v ON_ERROR_STOP=1 "$ADMIN_URL" -c "CREATE DATABASE $DB" >/dev/null
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  redis-cli -u "$REDIS_URL" --scan --pattern "${PREFIX}*" | xargs -r -n 500 redis-cli -u "$REDIS_URL" DEL >/dev/null || true
  psql -q -X "$ADMIN_URL" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
cat >"$WORK/gateway.toml" <<TOML
[limits.quotas]
running_turns_per_owner = 0
open_tasks_per_owner = 0
TOML
A2A_DATABASE_URL="$DB_URL" RUST_LOG=warn "$BIN" migrate
start() { # port [prefix]
  RUST_LOG=warn A2A_LISTEN="127.0.0.1:$1" A2A_CONFIG="$WORK/gateway.toml" A2A_DATABASE_URL="$DB_URL" \
    A2A_REDIS_URL="$REDIS_URL" A2A_REDIS_PREFIX="${2:-$PREFIX}" "$BIN" &
  PIDS+=($!)
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$1/readyz" >/dev/null && return 0; sleep 0.1; done
  echo "bench: the gateway on port $1 did not become ready" >&2; exit 1
}
start "$P_A"; start "$P_B"
A_PID=${PIDS[0]}; B_PID=${PIDS[1]}
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
a0=$(ticks "$A_PID"); b0=$(ticks "$B_PID")
"$LOAD" send --url "http://127.0.0.1:$P_A" --binding jsonrpc --connections 4 --concurrency 64 \
  --duration "${SECS}s" --warmup 0s --quiet --json "$WORK/send.json" >"$WORK/send.txt" 2>&1 ||
  { cat "$WORK/send.txt" >&2; exit 1; }
a1=$(ticks "$A_PID"); b1=$(ticks "$B_PID")
awk -v a=$((a1 - a0)) -v b=$((b1 - b0)) -v hz="$HZ" -v rps="$(jq .throughput_rps "$WORK/send.json")" 'BEGIN {
  printf "sends on A: %.0f/s; CPU over the run: A %.2f s, B (no client) %.2f s; B/A = %.3f\n", rps, a / hz, b / hz, (a ? b / a : 0)
}'

# The scaling sweep: R replicas (fresh processes, a key prefix per step), the same total rate.
RATE="${BENCH_SCALE_RATE:-1500}"
[[ "$RATE" == 0 ]] && exit 0
for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
PIDS=()
redis_commands() { redis-cli -u "$REDIS_URL" INFO stats | awk -F: '/^total_commands_processed:/ {print $2 + 0}'; }
echo "replicas  sends/s  gateway CPU-ms/send  busiest/idlest replica CPU-s  Redis commands/send"
for R in ${BENCH_SCALE_REPLICAS:-1 2 4}; do
  step_prefix="${PREFIX}r$R:"
  first=${#PIDS[@]}
  for i in $(seq 0 $((R - 1))); do start $((P_A + 10 + i)) "$step_prefix"; done
  step_pids=("${PIDS[@]:$first:$R}")
  declare -A t0=()
  for pid in "${step_pids[@]}"; do t0[$pid]=$(ticks "$pid"); done
  c0=$(redis_commands)
  loads=()
  for i in $(seq 0 $((R - 1))); do
    "$LOAD" send --url "http://127.0.0.1:$((P_A + 10 + i))" --binding jsonrpc --connections 2 \
      --max-in-flight 256 --rate $((RATE / R)) --duration "${SECS}s" \
      --warmup 0s --quiet --json "$WORK/send-$R-$i.json" >"$WORK/send-$R-$i.txt" 2>&1 &
    loads+=($!)
  done
  for l in "${loads[@]}"; do wait "$l" || { cat "$WORK"/send-"$R"-*.txt >&2; exit 1; }; done
  c1=$(redis_commands)
  cpu=(); for pid in "${step_pids[@]}"; do cpu+=($(( $(ticks "$pid") - ${t0[$pid]} ))); done
  rps=$(jq -s 'map(.throughput_rps) | add' "$WORK"/send-"$R"-*.json)
  printf '%s\n' "${cpu[@]}" | awk -v r="$R" -v hz="$HZ" -v rps="$rps" -v secs="$SECS" -v cmds=$((c1 - c0)) '
    { total += $1; if (NR == 1 || $1 > max) max = $1; if (NR == 1 || $1 < min) min = $1 }
    END { sends = rps * secs; printf "%8d  %7.0f  %19.3f  %13.2f / %-13.2f  %19.1f\n", r, rps,
          (sends ? total / hz * 1000 / sends : 0), max / hz, min / hz, (sends ? cmds / sends : 0) }'
  for pid in "${step_pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  unset t0
done
