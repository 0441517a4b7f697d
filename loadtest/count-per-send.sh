#!/usr/bin/env bash
# Counts what one persisted blocking SendMessage to `echo` costs PostgreSQL and Redis, without
# timing anything (issue 27): per send, the statements by kind (pg_stat_statements), the
# transactions (pg_stat_database) and the Redis commands (INFO commandstats), over N sends at a
# fixed rate low enough for any machine.
#
# Needs a PostgreSQL with pg_stat_statements preloaded and a Redis, both private to the run
# (their statistics are reset): for example, as the postgres user,
#   initdb -D /tmp/c/pg -U postgres --auth=trust
#   pg_ctl -D /tmp/c/pg -l /tmp/c/pg.log -o "-p 55432 -k /tmp/c \
#     -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all" start
#   redis-server --port 56379 --save '' --appendonly no --daemonize yes
#
# Usage: loadtest/count-per-send.sh [N, default 1000]
#   COUNT_PG_ADMIN_URL (default postgres://postgres@127.0.0.1:55432/postgres)
#   COUNT_REDIS_URL (default redis://127.0.0.1:56379), COUNT_PORT (default 18777)
#   COUNT_BIN: the directory of a2a-gateway and a2a-loadtest (default $CARGO_TARGET_DIR/debug)
# Background work (the outbox relay, depth samples, lease renewal, the usage read) runs about
# once a second whatever the rate; at the default 100 sends/s it adds about 0.01 per send each.
set -euo pipefail
N="${1:-1000}"
ADMIN_URL="${COUNT_PG_ADMIN_URL:-postgres://postgres@127.0.0.1:55432/postgres}"
REDIS_URL="${COUNT_REDIS_URL:-redis://127.0.0.1:56379}"
PORT="${COUNT_PORT:-18777}"
BIN="${COUNT_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/a2a-gateway-target}/debug}"
DB="a2a_count_$$"
URL="${ADMIN_URL%/*}/$DB"
PREFIX="a2a-count-$$:"
TMP="$(mktemp -d)"
GW_PID=
cleanup() {
  [[ -n "$GW_PID" ]] && { kill "$GW_PID" 2>/dev/null || true; wait "$GW_PID" 2>/dev/null || true; }
  psql -qX "$ADMIN_URL" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
  redis-cli -u "$REDIS_URL" --scan --pattern "$PREFIX*" 2>/dev/null | xargs -r redis-cli -u "$REDIS_URL" DEL >/dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap cleanup EXIT

psql -qX -v ON_ERROR_STOP=1 "$ADMIN_URL" -c "CREATE DATABASE $DB" >/dev/null
psql -qX -v ON_ERROR_STOP=1 "$URL" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
A2A_DATABASE_URL="$URL" RUST_LOG=warn "$BIN/a2a-gateway" migrate >/dev/null
env RUST_LOG=warn A2A_LISTEN="127.0.0.1:$PORT" A2A_DATABASE_URL="$URL" A2A_REDIS_URL="$REDIS_URL" \
  A2A_REDIS_PREFIX="$PREFIX" A2A_BUILTIN_AGENTS=echo "$BIN/a2a-gateway" >"$TMP/gw.log" 2>&1 &
GW_PID=$!
for _ in $(seq 300); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.1; done
send() { "$BIN/a2a-loadtest" send --url "http://127.0.0.1:$PORT" --binding jsonrpc --rate 100 --warmup 0s --requests "$1" --quiet; }
send 100 >/dev/null # connections opened, statements prepared
sleep 2
psql -qX "$URL" -c "SELECT pg_stat_statements_reset()" >/dev/null
xacts() { psql -qXtA "$URL" -c "SELECT pg_stat_clear_snapshot(); SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = '$DB'" | tail -1; }
X0=$(xacts)
redis-cli -u "$REDIS_URL" CONFIG RESETSTAT >/dev/null
send "$N" >"$TMP/send.txt"
sleep 1.5 # the last acknowledged outbox rows are deleted
X1=$(xacts)
sleep 0.6 # backend statistics reach pg_stat_database within a second
X1=$(xacts)
echo "sends: $N ($(grep -m1 -io 'errors[^,]*' "$TMP/send.txt" || echo 'see a2a-loadtest output'))"
echo "transactions per send: $(echo "scale=3; ($X1 - $X0) / $N" | bc)"
psql -qX "$URL" -P pager=off -c "
  SELECT calls, round(calls::numeric / $N, 3) AS per_send,
         query ~ 'DELETE FROM event_outbox' AS outbox_delete,
         left(regexp_replace(query, '\s+', ' ', 'g'), 100) AS statement
    FROM pg_stat_statements
   WHERE dbid = (SELECT oid FROM pg_database WHERE datname = '$DB') AND query NOT ILIKE '%pg_stat%'
   ORDER BY calls DESC"
echo "Redis commands per send:"
redis-cli -u "$REDIS_URL" INFO commandstats | tr -d '\r' | grep '^cmdstat_' |
  grep -v -e '^cmdstat_info:' -e '^cmdstat_config' |
  awk -F'[:=,]' -v n="$N" '{ printf "  %-16s %8d  %.3f\n", substr($1, 9), $3, $3 / n }'
