#!/usr/bin/env bash
# Cross-replica fan-out (issue: horizontal scaling). Two release gateways, A and B, on one fresh
# PostgreSQL database and one Redis (a key prefix of this run's own), measured in one run:
#   1. raw limit: Redis alone, XADD on one connection -> XREAD BLOCK on another, 1,000/s
#   2. fan-out: streaming scenario tasks on A at about 1,000 events/s, each followed by an SSE
#      subscriber on B; latency from A's own stream delivering event n (it does so once the event
#      is committed) to B's subscriber delivering event n
#   3. idle: N hanging tasks, each with one SSE subscriber on B (one HTTP/1.1 connection each);
#      B's RSS, the database transactions per second while they idle 10 s (pg_stat_database),
#      and CancelTask on A -> CANCELED on B among all those open streams
# The load generator is loadtest/fanout (binary a2a-loadtest).
# Usage: loadtest/bench-fanout.sh [seconds, default 10] [idle subscribers, default 10000]
#   BENCH_PG_ADMIN_URL  (default postgres://postgres@127.0.0.1:5432/postgres): the script creates
#                       database a2a_bench_fanout_<pid> there and drops it at the end
#   BENCH_REDIS_URL     (default redis://127.0.0.1:6379): keys under a2a-bench-<pid>:, deleted after
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-10}"
IDLE="${2:-10000}"
P_A="${BENCH_PORT:-18491}"; P_B=$((P_A + 1))
ADMIN_URL="${BENCH_PG_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
REDIS_URL="${BENCH_REDIS_URL:-redis://127.0.0.1:6379}"
DB="a2a_bench_fanout_$$"
DB_URL="${ADMIN_URL%/*}/$DB?sslmode=disable"
PREFIX="a2a-bench-$$:"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/a2a-gateway-target}"
for tool in psql redis-cli curl; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is not installed" >&2; exit 2; }
done
# Two builds: built together, the load generator's reqwest features (http2) would be unified
# into the gateway's, and the gateway would not be the binary the other benchmarks measure.
if [[ -z "${BENCH_NO_BUILD:-}" ]]; then
  cargo build --release -q -p a2a-gateway
  cargo build --release -q -p a2a-loadtest
fi
BIN="$CARGO_TARGET_DIR/release/a2a-gateway"
LOAD="$CARGO_TARGET_DIR/release/a2a-loadtest"
# Each idle subscriber is a connection: one descriptor in the load generator, one in B.
ulimit -n "$(( IDLE * 2 + 1024 ))" 2>/dev/null || ulimit -n "$(ulimit -Hn)"

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
# The scenario test agent is off by default with PostgreSQL; one load generator is one owner
# (anonymous) holding every stream and hanging turn, so its quotas are lifted.
cat >"$WORK/gateway.toml" <<TOML
builtin_agents = ["echo", "scenario"]
[limits]
max_streams = $(( IDLE + 2000 ))
[limits.quotas]
streams_per_owner = 0
running_turns_per_owner = 0
open_tasks_per_owner = 0
# Every subscriber is a connection from this one address.
[limits.connections]
max = $(( IDLE + 4000 ))
per_ip = $(( IDLE + 4000 ))
TOML

A2A_DATABASE_URL="$DB_URL" RUST_LOG=warn "$BIN" migrate
start() { # port
  RUST_LOG=warn A2A_LISTEN="127.0.0.1:$1" A2A_CONFIG="$WORK/gateway.toml" A2A_DATABASE_URL="$DB_URL" \
    A2A_REDIS_URL="$REDIS_URL" A2A_REDIS_PREFIX="$PREFIX" "$BIN" &
  PIDS+=($!)
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$1/readyz" >/dev/null && return 0; sleep 0.1; done
  echo "bench: the gateway on port $1 did not become ready" >&2; exit 1
}
start "$P_A"; start "$P_B"
B_PID=${PIDS[1]}
echo "cross-replica fan-out: $(nproc) cores; PostgreSQL, Redis, both gateways and the load generator on this machine" >&2
"$LOAD" raw "$REDIS_URL" 1000 "$SECS"
"$LOAD" fanout "http://127.0.0.1:$P_A" "http://127.0.0.1:$P_B" 1000 "$SECS"
"$LOAD" idle "http://127.0.0.1:$P_A" "http://127.0.0.1:$P_B" "$IDLE" "$B_PID" "$DB_URL"
