#!/usr/bin/env bash
# Benchmark of the gateway on PostgreSQL (issue 4). In one run, on one fresh database:
#   1. pgbench, 64 clients: a one-row INSERT per transaction - the raw PostgreSQL limit here
#      (synchronous_commit as the server has it, loopback TCP like the gateway)
#   2. wrk, 64 connections: JSON-RPC SendMessage to echo, every task persisted (created, artifact
#      and completed stored together: one durable write per task), without an Idempotency-Key
#   3. the same with a fresh Idempotency-Key on every request (plus its claim per task)
# and prints tasks/s, p50, p99 and the ratios of (2) and (3) to (1). After each, it checks that the
# database holds as many new tasks as wrk counted successful requests.
# Usage: loadtest/bench-postgres.sh [duration, default 15s]
#   BENCH_PG_ADMIN_URL  server to use (default postgres://postgres@127.0.0.1:5432/postgres); the
#                       script creates database a2a_bench_<pid> on it and drops it at the end
#   A2A_DATABASE_POOL_SIZE etc. pass through to the gateway.
# Needs wrk, pgbench and psql (Debian packages wrk, postgresql-client).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-15s}"
SECS="${DURATION%s}"
CONNS=64
PORT="${BENCH_PORT:-18481}"
ADMIN_URL="${BENCH_PG_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
DB="a2a_bench_$$"
# No TLS on loopback, for pgbench and the gateway alike: encryption would measure the TLS stack.
DB_URL="${ADMIN_URL%/*}/$DB?sslmode=disable"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/a2a-gateway-target}"

for tool in wrk pgbench psql; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is not installed" >&2; exit 2; }
done
[[ "$SECS" =~ ^[0-9]+$ ]] || { echo "bench: duration must be whole seconds, like 15s" >&2; exit 2; }
[[ -n "${BENCH_NO_BUILD:-}" ]] || cargo build --release -q -p a2a-gateway
BIN="$CARGO_TARGET_DIR/release/a2a-gateway"

psql -q -X -v ON_ERROR_STOP=1 "$ADMIN_URL" -c "CREATE DATABASE $DB" >/dev/null
GW=""
SCRIPT=$(mktemp)
cleanup() {
  if [[ -n "$GW" ]]; then kill "$GW" 2>/dev/null || true; wait "$GW" 2>/dev/null || true; fi
  rm -f "$SCRIPT"
  psql -q -X "$ADMIN_URL" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
}
trap cleanup EXIT

echo "a2a-gateway on PostgreSQL: $CONNS connections, $DURATION each, $(nproc) cores, wrk, pgbench and PostgreSQL on the same machine" >&2
echo "PostgreSQL: $(psql -X -Atq "$DB_URL" -c 'SHOW server_version'), synchronous_commit=$(psql -X -Atq "$DB_URL" -c 'SHOW synchronous_commit')" >&2

# 1. The raw limit: one single-row INSERT per transaction.
psql -q -X -v ON_ERROR_STOP=1 "$DB_URL" \
  -c "CREATE TABLE bench_insert (id bigserial PRIMARY KEY, payload text NOT NULL)" >/dev/null
echo "INSERT INTO bench_insert (payload) VALUES ('hello');" >"$SCRIPT"
PGB=$(pgbench -n -c "$CONNS" -j 2 -T "$SECS" -f "$SCRIPT" "$DB_URL" 2>&1)
RAW=$(awk '/^tps = / {print $3; exit}' <<<"$PGB")
RAW_LAT=$(awk '/^latency average/ {print $4 " " $5; exit}' <<<"$PGB")
[[ -n "$RAW" ]] || { echo "bench: pgbench failed" >&2; echo "$PGB" >&2; exit 1; }
printf '%-34s %10.0f tx/s    avg latency %s\n' "pgbench one-row INSERT (raw limit)" "$RAW" "$RAW_LAT" >&2

# 2. The gateway, migrated by its own subcommand.
A2A_DATABASE_URL="$DB_URL" RUST_LOG=warn "$BIN" migrate
RUST_LOG=warn A2A_LISTEN="127.0.0.1:$PORT" A2A_DATABASE_URL="$DB_URL" "$BIN" &
GW=$!
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.1; done
curl -sf -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' "http://127.0.0.1:$PORT/a2a/jsonrpc" \
  -d '{"jsonrpc":"2.0","id":0,"method":"SendMessage","params":{"message":{"messageId":"check","role":"ROLE_USER","parts":[{"text":"hi"}]}}}' \
  | grep -q TASK_STATE_COMPLETED || { echo "bench: SendMessage does not complete" >&2; exit 1; }

# Every counted request is a stored, completed task (a JSON-RPC error would still be HTTP 200).
completed() { psql -X -Atq "$DB_URL" -c "SELECT count(*) FROM tasks WHERE state = 3"; }
BEFORE=$(completed)
measure() { # label, then BENCH_IDEMPOTENCY for the wrk script
  local out send p50 p99 sent stored
  out=$(BENCH_IDEMPOTENCY="$2" wrk -t2 -c"$CONNS" -d"$DURATION" --latency -s loadtest/send-echo.lua \
    "http://127.0.0.1:$PORT/a2a/jsonrpc")
  if grep -q "Non-2xx" <<<"$out"; then echo "bench: non-2xx responses" >&2; echo "$out" >&2; exit 1; fi
  send=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  sent=$(awk '/requests in/ {print $1}' <<<"$out")
  printf '%-34s %10.0f tasks/s p50 %8s   p99 %8s   (%s requests)\n' "$1" "$send" "$p50" "$p99" "$sent" >&2
  stored=$(( $(completed) - BEFORE ))
  if (( stored < sent || stored > sent + CONNS )); then
    echo "bench: the database holds $stored new completed tasks, wrk completed $sent sends" >&2; exit 1
  fi
  BEFORE=$(( BEFORE + stored ))
  awk -v s="$send" -v r="$RAW" -v l="$1" 'BEGIN { printf "%s: persisted tasks/s / raw INSERT tx/s: %.2f (aim: >= 0.40)\n", l, s / r }' >&2
}
measure "SendMessage echo, persisted" 0
measure "  ... with an Idempotency-Key" 1
echo "completed tasks stored: $BEFORE (one per completed send, plus the check request)" >&2
