#!/usr/bin/env bash
# The published load figures, every one from a2a-loadtest's JSON reports of one run on this
# machine: writes loadtest/README.md and the block between the `loadtest:begin` / `loadtest:end`
# markers of docs/benchmarks.md.
#
# Starts (release build, loopback):
#   mem     an in-memory gateway (echo, scenario)
#   pg1/pg2 two replicas on one fresh PostgreSQL database and one Redis (echo, scenario)
#   front   an in-memory gateway fronting `mem` as the upstream agent `up`
#   python  the official Python SDK server (interop/python/upstream_agent.py, echo mode)
# and runs: baseline (HTTP, PostgreSQL INSERT, Redis XADD); send and stream on every binding
# against mem; send at a fixed rate; send on every binding against pg1; subscribe on pg2 to
# tasks created on pg1; upstream-overhead (mem straight, then through front); send to the
# Python SDK server and to mem with the same load.
#
# Usage: loadtest/publish.sh [duration per run, default 10s]
#   PUBLISH_NO_BUILD=1   use the release binaries already built
#   PUBLISH_OUT=DIR      keep the JSON reports there (default: a temporary directory)
#   PUBLISH_DRY=1        print the Markdown instead of writing loadtest/README.md and docs/benchmarks.md
#   PUBLISH_PG_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres), PUBLISH_REDIS_URL
#   (default redis://127.0.0.1:6379), PUBLISH_PORT (first of five ports, default 18500)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DURATION="${1:-10s}"
PORT="${PUBLISH_PORT:-18500}"
ADMIN_URL="${PUBLISH_PG_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
REDIS_URL="${PUBLISH_REDIS_URL:-redis://127.0.0.1:6379}"
DB="a2a_publish_$$"
DB_URL="${ADMIN_URL%/*}/$DB?sslmode=disable"
PREFIX="a2a-publish-$$:"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/a2a-gateway-target}"
VENV="${A2A_VENV:-$HOME/.cache/a2a-gateway-venv}"
log() { printf 'publish: %s\n' "$*" >&2; }

# Two builds: built together, the generator's features (reqwest's http2) would be unified into
# the gateway's, which would then not be the binary the other benchmarks measure.
if [[ -z "${PUBLISH_NO_BUILD:-}" ]]; then
  cargo build --release --locked -q -p a2a-gateway
  cargo build --release --locked -q -p a2a-loadtest
fi
GW="$CARGO_TARGET_DIR/release/a2a-gateway"
LT="$CARGO_TARGET_DIR/release/a2a-loadtest"
"$ROOT/scripts/venv"

OUT="${PUBLISH_OUT:-}"
TMP="$(mktemp -d)"
[[ -n "$OUT" ]] || OUT="$TMP/reports"
mkdir -p "$OUT"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  psql -q -X "$ADMIN_URL" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
  redis-cli -u "$REDIS_URL" --scan --pattern "$PREFIX*" 2>/dev/null | xargs -r redis-cli -u "$REDIS_URL" DEL >/dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

MEM=$PORT PG1=$((PORT + 1)) PG2=$((PORT + 2)) FRONT=$((PORT + 3)) PY=$((PORT + 4))
psql -q -X -v ON_ERROR_STOP=1 "$ADMIN_URL" -c "CREATE DATABASE $DB" >/dev/null
A2A_DATABASE_URL="$DB_URL" RUST_LOG=warn "$GW" migrate
printf '[[agents]]\nname = "up"\ncard_url = "http://127.0.0.1:%s"\nmax_concurrency = 256\nqueue_capacity = 1024\n' "$MEM" >"$TMP/front.toml"

start() { # name port [env...]: a gateway, ready
  local name=$1 port=$2
  shift 2
  env RUST_LOG=warn A2A_LISTEN="127.0.0.1:$port" "$@" "$GW" >"$TMP/$name.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && return 0; sleep 0.1; done
  log "$name did not become ready:"; cat "$TMP/$name.log" >&2; exit 1
}
start mem "$MEM" A2A_BUILTIN_AGENTS=echo,scenario
for n in 1 2; do
  port=$((PORT + n))
  start "pg$n" "$port" A2A_DATABASE_URL="$DB_URL" A2A_REDIS_URL="$REDIS_URL" A2A_REDIS_PREFIX="$PREFIX" \
    A2A_BUILTIN_AGENTS=echo,scenario
done
start front "$FRONT" A2A_CONFIG="$TMP/front.toml" A2A_BUILTIN_AGENTS=echo
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$FRONT/agents/up/.well-known/agent-card.json" >/dev/null && break; sleep 0.1; done
"$VENV/bin/python" "$ROOT/interop/python/upstream_agent.py" "$PY" JSONRPC HTTP+JSON >"$TMP/python.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PY/.well-known/agent-card.json" >/dev/null && break; sleep 0.1; done

run() { # name args...: one measured run, its report in $OUT/name.json
  local name=$1
  shift
  log "$name: a2a-loadtest $*"
  # From the reports' directory with a relative path, so the published commands read plainly.
  (cd "$OUT" && PATH="$(dirname "$LT"):$PATH" a2a-loadtest "$@" --warmup 1s --quiet --json "$name.json" >/dev/null)
}
load=(--concurrency 64 --duration "$DURATION")
run baseline baseline "${load[@]}" --postgres "$DB_URL" --redis "$REDIS_URL"
for b in jsonrpc rest grpc; do
  run "send-$b" send --url "http://127.0.0.1:$MEM" --binding "$b" --connections 4 "${load[@]}"
done
for b in jsonrpc rest grpc; do
  run "stream-$b" stream --url "http://127.0.0.1:$MEM" --binding "$b" --connections 4 "${load[@]}"
done
run send-rate-2000 send --url "http://127.0.0.1:$MEM" --binding jsonrpc --rate 2000 --duration "$DURATION"
for b in jsonrpc rest grpc; do
  run "send-pg-$b" send --url "http://127.0.0.1:$PG1" --binding "$b" --connections 4 "${load[@]}"
done
run subscribe-cross-replica subscribe --url "http://127.0.0.1:$PG1" --subscribe-url "http://127.0.0.1:$PG2" \
  --tenant scenario --data '{"chunks": 10, "delayMs": 100}' --subscribers 2 --rate 50 --duration "$DURATION"
run upstream-overhead upstream-overhead --agent-url "http://127.0.0.1:$MEM" --url "http://127.0.0.1:$FRONT" \
  --tenant up --binding jsonrpc --agent-binding jsonrpc --connections 4 "${load[@]}"
run send-gateway-16 send --url "http://127.0.0.1:$MEM" --binding jsonrpc --text "echo hello" --concurrency 16 --duration "$DURATION"
run send-python-sdk-16 send --url "http://127.0.0.1:$PY" --binding jsonrpc --text "echo hello" --concurrency 16 --duration "$DURATION"

table() { "$LT" table "$@"; }
ratio() { # a b: b's throughput / a's, from the reports
  "$VENV/bin/python" - "$OUT/$1.json" "$OUT/$2.json" <<'PY'
import json, sys
def rps(path):
    return json.load(open(path))["throughput_rps"]
print(f"{rps(sys.argv[2]) / rps(sys.argv[1]):.2f}")
PY
}
DATE=$(date -u +%Y-%m-%d)
CPU=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
{
  cat <<EOF
Measured on $DATE with \`loadtest/publish.sh $DURATION\`: $(nproc) cores ($CPU), loopback, release build, the generator (\`a2a-loadtest\`) on the same cores as the gateways, PostgreSQL and Redis it measures.
Every run checks every answer (a run with an error fails the script); each ran $DURATION after 1 s of warm-up. Read the ratios: they divide by a raw limit measured in the same run, so they hold on a machine whose absolute speed varies.

**Raw limits** (\`a2a-loadtest baseline\`: an HTTP/1.1 GET of a trivial axum route in the generator's process, one-row INSERT transactions, XADD):

EOF
  table "$OUT/baseline.json"
  cat <<EOF

**In memory, \`echo\`** (ratio: to the raw HTTP limit; aim for \`send-jsonrpc\` at least 0.5):

EOF
  table --ref baseline-http --only baseline-http --only send-jsonrpc --only send-rest --only send-grpc \
    --only stream-jsonrpc --only stream-rest --only stream-grpc --only send-rate-2000 \
    "$OUT"/baseline.json "$OUT"/send-{jsonrpc,rest,grpc}.json "$OUT"/stream-{jsonrpc,rest,grpc}.json "$OUT"/send-rate-2000.json
  cat <<EOF

**The bindings side by side** (ratio: to JSON-RPC; aim within 10%): HTTP+JSON $(ratio send-jsonrpc send-rest), gRPC $(ratio send-jsonrpc send-grpc) for \`send\`; HTTP+JSON $(ratio stream-jsonrpc stream-rest), gRPC $(ratio stream-jsonrpc stream-grpc) for \`stream\`.

**Persisted in PostgreSQL, events on Redis** (ratio: to one-row INSERT transactions; aim at least 0.75):

EOF
  table --ref baseline-postgres --only baseline-postgres --only send-pg-jsonrpc --only send-pg-rest --only send-pg-grpc \
    "$OUT"/baseline.json "$OUT"/send-pg-{jsonrpc,rest,grpc}.json
  cat <<EOF

**Across replicas**: 50 tasks/s created on one replica (the \`scenario\` agent, 10 chunks 100 ms apart), each followed by 2 subscribers on the other replica and 1 on its own; latency is the whole operation (about 1 s of agent time), \`subscribed\` the slowest subscriber's first event (counted from the create): p50 $("$VENV/bin/python" -c 'import json,sys; e=json.load(open(sys.argv[1]))["extra_ms"]["subscribed"]; print("%.2f ms, p99 %.2f ms" % (e["p50"], e["p99"]))' "$OUT/subscribe-cross-replica.json"). **Cross-replica stream events**: each event reached a subscriber on the other replica later than the one on the task's own replica by p50 $("$VENV/bin/python" -c 'import json,sys; e=json.load(open(sys.argv[1]))["extra_ms"]["cross_replica_event"]; print("%.2f ms, p99 %.2f ms (%d events)" % (e["p50"], e["p99"], e["count"]))' "$OUT/subscribe-cross-replica.json") (aim: p99 under 10 ms).

EOF
  table "$OUT"/subscribe-cross-replica.json
  cat <<EOF

**Through the gateway to an upstream agent** (\`upstream-overhead\`: \`-1\` straight to the agent, an in-memory gateway running \`echo\`; \`-2\` the same sends through a second gateway that has it as \`[[agents]]\` \`up\`; ratio: to straight):

EOF
  table --ref upstream-overhead-1 "$OUT"/upstream-overhead.json
  cat <<EOF

**Another A2A server with the same load**: the official Python SDK server (a2a-sdk, \`interop/python/upstream_agent.py\` in echo mode: one artifact, then completed), 16 concurrent JSON-RPC sends (ratio: to this gateway's \`echo\` with the same load):

EOF
  table --ref send-gateway-16 "$OUT"/send-gateway-16.json "$OUT"/send-python-sdk-16.json
} >"$TMP/figures.md"

if [[ -n "${PUBLISH_DRY:-}" ]]; then
  cat "$TMP/figures.md"
  exit 0
fi
{
  cat <<'EOF'
# Load figures

Generated by `loadtest/publish.sh` from `a2a-loadtest`'s JSON reports (see [docs/load-testing.md](../docs/load-testing.md)); do not edit by hand.

EOF
  cat "$TMP/figures.md"
} >"$ROOT/loadtest/README.md"
"$VENV/bin/python" - "$ROOT/docs/benchmarks.md" "$TMP/figures.md" <<'PY'
import sys
doc, figures = sys.argv[1], open(sys.argv[2]).read()
text = open(doc).read()
begin, end = "<!-- loadtest:begin -->", "<!-- loadtest:end -->"
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
open(doc, "w").write(f"{head}{begin}\n{figures}{end}{tail}")
PY
log "wrote loadtest/README.md and docs/benchmarks.md's figures"
