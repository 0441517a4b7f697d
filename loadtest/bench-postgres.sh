#!/usr/bin/env bash
# Benchmark of the gateway on PostgreSQL (issue 4). In one run, on one fresh database:
#   1. pgbench, 64 clients: a one-row INSERT per transaction - the raw PostgreSQL limit here
#      (synchronous_commit as the server has it, loopback TCP like the gateway)
#   2. a2a-loadtest, 64 requests in flight (closed loop; see loadtest/bench-common.sh): JSON-RPC
#      SendMessage to echo, every task persisted (created, artifact and completed stored
#      together: one durable write per task), without an Idempotency-Key
#   3. the same with a fresh Idempotency-Key on every request (`--idempotency-key`: plus its claim
#      per task)
# and prints tasks/s, p50, p99 and the ratios of (2) and (3) to (1). After each, it checks that the
# database holds exactly as many new completed tasks as the tool counted successful sends, and
# after (3) one idempotency key per keyed send.
# Usage: loadtest/bench-postgres.sh [duration, default 15s]
#   BENCH_PG_ADMIN_URL  server to use (default postgres://postgres@127.0.0.1:5432/postgres); the
#                       script creates database a2a_bench_<pid> on it and drops it at the end
#   BENCH_PORT (default 18481), BENCH_NO_BUILD, BENCH_OUT, BENCH_WARMUP
#   A2A_DATABASE_POOL_SIZE etc. pass through to the gateway.
# Needs pgbench and psql (Debian package postgresql-client).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=loadtest/bench-common.sh
source loadtest/bench-common.sh
DURATION="${1:-15s}"
SECS="${DURATION%s}"
PORT="${BENCH_PORT:-18481}"
ADMIN_URL="${BENCH_PG_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
DB="a2a_bench_$$"
# No TLS on loopback, for pgbench and the gateway alike: encryption would measure the TLS stack.
DB_URL="${ADMIN_URL%/*}/$DB?sslmode=disable"

for tool in pgbench psql; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is not installed" >&2; exit 2; }
done
[[ "$SECS" =~ ^[0-9]+$ ]] || { echo "bench: duration must be whole seconds, like 15s" >&2; exit 2; }
bench_build

psql -q -X -v ON_ERROR_STOP=1 "$ADMIN_URL" -c "CREATE DATABASE $DB" >/dev/null
GW=""
WORK=$(mktemp -d)
OUT=$(bench_reports "$WORK")
cleanup() {
  if [[ -n "$GW" ]]; then kill "$GW" 2>/dev/null || true; wait "$GW" 2>/dev/null || true; fi
  rm -rf "$WORK"
  psql -q -X "$ADMIN_URL" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
}
trap cleanup EXIT

echo "a2a-gateway on PostgreSQL: $CONNS clients / requests in flight, $DURATION each, $(nproc) cores, a2a-loadtest, pgbench and PostgreSQL on the same machine" >&2
echo "PostgreSQL: $(psql -X -Atq "$DB_URL" -c 'SHOW server_version'), synchronous_commit=$(psql -X -Atq "$DB_URL" -c 'SHOW synchronous_commit')" >&2

# 1. The raw limit: one single-row INSERT per transaction.
psql -q -X -v ON_ERROR_STOP=1 "$DB_URL" \
  -c "CREATE TABLE bench_insert (id bigserial PRIMARY KEY, payload text NOT NULL)" >/dev/null
echo "INSERT INTO bench_insert (payload) VALUES ('hello');" >"$WORK/insert.sql"
PGB=$(pgbench -n -c "$CONNS" -j 2 -T "$SECS" -f "$WORK/insert.sql" "$DB_URL" 2>&1)
RAW=$(awk '/^tps = / {print $3; exit}' <<<"$PGB")
RAW_LAT=$(awk '/^latency average/ {print $4 " " $5; exit}' <<<"$PGB")
[[ -n "$RAW" ]] || { echo "bench: pgbench failed" >&2; echo "$PGB" >&2; exit 1; }
printf '%-34s %10.0f tx/s    avg latency %s\n' "pgbench one-row INSERT (raw limit)" "$RAW" "$RAW_LAT" >&2

# 2. The gateway, migrated by its own subcommand.
A2A_DATABASE_URL="$DB_URL" RUST_LOG=warn "$GW_BIN" migrate
RUST_LOG=warn A2A_LISTEN="127.0.0.1:$PORT" A2A_DATABASE_URL="$DB_URL" "$GW_BIN" &
GW=$!
URL="http://127.0.0.1:$PORT"
wait_http "$URL/readyz"
check_send "$URL"

# Every counted request is a stored, completed task.
completed() { psql -X -Atq "$DB_URL" -c "SELECT count(*) FROM tasks WHERE state = 3"; }
BEFORE=$(completed)
measure() { # label, JSON, a2a-loadtest args...
  local label=$1 json=$2 sent stored
  shift 2
  lt_send "$json" "$URL" "$@"
  lt_row "$label" "$json"
  sent=$(lt_answered "$json")
  stored=$(( $(completed) - BEFORE ))
  if (( stored != sent )); then
    echo "bench: the database holds $stored new completed tasks, a2a-loadtest completed $sent sends" >&2; exit 1
  fi
  BEFORE=$(( BEFORE + stored ))
  awk -v s="$(jget "$json" .throughput_rps)" -v r="$RAW" -v l="$label" \
    'BEGIN { printf "%s: persisted tasks/s / raw INSERT tx/s: %.2f (aim: >= 0.75)\n", l, s / r }' >&2
}
measure "SendMessage echo, persisted" "$OUT/send-pg.json"
measure "  ... with an Idempotency-Key" "$OUT/send-pg-idempotent.json" --idempotency-key
# Each of those sends claimed its own key (and none before them did).
KEYS=$(psql -X -Atq "$DB_URL" -c "SELECT count(*) FROM idempotency_keys")
if (( KEYS != $(lt_answered "$OUT/send-pg-idempotent.json") )); then
  echo "bench: the database holds $KEYS idempotency keys for $(lt_answered "$OUT/send-pg-idempotent.json") keyed sends" >&2; exit 1
fi
echo "completed tasks stored: $BEFORE (one per completed send, plus the check request)" >&2
