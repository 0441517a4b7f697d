#!/usr/bin/env bash
# Where a persisted send's machine time goes: CPU seconds of the gateway, of every PostgreSQL
# process and of Redis during a closed-loop send run (64 concurrent, 4 connections, like
# publish.sh's send-pg runs) against one gateway on PostgreSQL and Redis, divided by the sends.
# Read from /proc/<pid>/stat, so it counts every process of the local PostgreSQL and Redis
# servers (run it on a quiet machine).
#
# Usage: loadtest/cpu-per-send.sh [binding, default jsonrpc] [seconds, default 10]
#   CPU_PG_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres), CPU_REDIS_URL
#   (default redis://127.0.0.1:6379), CPU_PORT (default 18711); BENCH_NO_BUILD=1 uses the release
#   binaries already built (bench-common.sh); GW=another gateway binary
set -euo pipefail
cd "$(dirname "$0")/.."
B="${1:-jsonrpc}"
D="${2:-10}"
ADMIN_URL="${CPU_PG_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
REDIS_URL="${CPU_REDIS_URL:-redis://127.0.0.1:6379}"
PORT="${CPU_PORT:-18711}"
# shellcheck source=loadtest/bench-common.sh
source loadtest/bench-common.sh
bench_build
GW="${GW:-$GW_BIN}"
LT="$LT_BIN"
DB="a2a_cpu_$$"
URL="${ADMIN_URL%/*}/$DB?sslmode=disable"
PREFIX="a2a-cpu-$$:"
TMP="$(mktemp -d)"
GP=
cleanup() {
  [[ -n "$GP" ]] && { kill "$GP" 2>/dev/null || true; wait "$GP" 2>/dev/null || true; }
  psql -qX "$ADMIN_URL" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
  redis-cli -u "$REDIS_URL" --scan --pattern "$PREFIX*" 2>/dev/null | xargs -r redis-cli -u "$REDIS_URL" DEL >/dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap cleanup EXIT
psql -qX -v ON_ERROR_STOP=1 "$ADMIN_URL" -c "CREATE DATABASE $DB" >/dev/null
A2A_DATABASE_URL="$URL" RUST_LOG=warn "$GW" migrate >/dev/null
env RUST_LOG=warn A2A_LISTEN="127.0.0.1:$PORT" A2A_DATABASE_URL="$URL" A2A_REDIS_URL="$REDIS_URL" \
  A2A_REDIS_PREFIX="$PREFIX" A2A_BUILTIN_AGENTS=echo "$GW" >"$TMP/gw.log" 2>&1 &
GP=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.1; done
ticks() { # utime + stime of the pids, in clock ticks
  local s=0 p
  for p in "$@"; do [[ -r /proc/$p/stat ]] && s=$((s + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
  echo "$s"
}
load() { "$LT" send --url "http://127.0.0.1:$PORT" --binding "$B" --connections 4 --concurrency 64 "$@"; }
load --duration 2s --quiet >/dev/null # warm-up: connections, prepared statements
g0=$(ticks "$GP"); p0=$(ticks $(pgrep -d ' ' -x postgres || true)); r0=$(ticks $(pgrep -d ' ' redis-server || true))
load --duration "${D}s" --warmup 0s --quiet --json "$TMP/send.json" >/dev/null
g1=$(ticks "$GP"); p1=$(ticks $(pgrep -d ' ' -x postgres || true)); r1=$(ticks $(pgrep -d ' ' redis-server || true))
python3 - "$TMP/send.json" "$((g1 - g0))" "$((p1 - p0))" "$((r1 - r0))" "$(getconf CLK_TCK)" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
n, hz = r["ok"], float(sys.argv[5])
print(f"{r['binding']}: {n} sends, {r['throughput_rps']:.0f}/s; generator {r['generator_cores']:.2f} cores")
for name, t in zip(("gateway", "postgresql", "redis"), map(int, sys.argv[2:5])):
    print(f"  {name:10s} {t / hz:6.2f} s CPU  {t / hz / n * 1e6:6.1f} us per send")
PY
