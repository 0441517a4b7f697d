#!/usr/bin/env bash
# Benchmark of the push worker (issue 6): one a2a-worker delivering to a local receiver. In one
# run, on a fresh database and Redis key prefix (see services/worker/src/bin/bench.rs):
#   1. raw limit: the bench POSTs the same bodies straight to the receiver, 200 in flight
#   2. throughput: 200 tasks x 100 events published before the worker starts; deliveries/s
#   3. latency: 1,000 events/s for 10 s; publish -> webhook p50/p99
# Every delivery is a signed (ES256) POST with the worker's SSRF guard, retry bookkeeping and
# PostgreSQL progress, as in production. Loopback only; bounded (about a minute).
# Usage: loadtest/bench-worker.sh
#   BENCH_PG_ADMIN_URL  server to use (default postgres://postgres@127.0.0.1:5432/postgres); the
#                       script creates database a2a_wbench_<pid> on it and drops it at the end
#   BENCH_REDIS_URL     default redis://127.0.0.1:6379 (keys under a unique prefix)
#   BENCH_TASKS, BENCH_PER_TASK, BENCH_RATE, BENCH_SECS override the shape.
set -euo pipefail
cd "$(dirname "$0")/.."
ADMIN_URL="${BENCH_PG_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
DB="a2a_wbench_$$"
export BENCH_DATABASE_URL="${ADMIN_URL%/*}/$DB?sslmode=disable"
export BENCH_REDIS_URL="${BENCH_REDIS_URL:-redis://127.0.0.1:6379}"
export BENCH_PREFIX="a2a-wbench-$$:"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/a2a-gateway-target}"
command -v psql >/dev/null || { echo "bench: psql is not installed" >&2; exit 2; }
[[ -n "${BENCH_NO_BUILD:-}" ]] || cargo build --release -q -p a2a-worker
export BENCH_WORKER_BIN="$CARGO_TARGET_DIR/release/a2a-worker"

psql -q -X -v ON_ERROR_STOP=1 "$ADMIN_URL" -c "CREATE DATABASE $DB" >/dev/null
cleanup() {
  psql -q -X "$ADMIN_URL" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
  redis-cli -u "$BENCH_REDIS_URL" --scan --pattern "${BENCH_PREFIX}*" 2>/dev/null \
    | xargs -r redis-cli -u "$BENCH_REDIS_URL" del >/dev/null 2>&1 || true
}
trap cleanup EXIT
echo "a2a-worker: one worker, $(nproc) cores, receiver/PostgreSQL/Redis/bench on the same machine" >&2
timeout 300 "$CARGO_TARGET_DIR/release/a2a-worker-bench"
