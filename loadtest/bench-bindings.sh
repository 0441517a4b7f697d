#!/usr/bin/env bash
# NOTE: h2load repeats one body, so since SendMessage is idempotent per (caller, messageId)
# (issue 8) every send after the first is a retry that returns the first task: the SendMessage
# rows of this script measure the retry path, not new tasks (see bench.sh for fresh ids).
# Binding comparison (issue: REST and gRPC bindings). One release gateway (embedded), one load
# generator for every binding, so the numbers compare the bindings and not the tools: h2load
# over HTTP/2 cleartext, 64 connections with one stream each (64 concurrent streams), for
#   SendMessage (echo)  over JSON-RPC, HTTP+JSON and gRPC
#   GetTask             over JSON-RPC, HTTP+JSON and gRPC
# plus GET /healthz as the raw limit of the HTTP stack in the same run. Latency percentiles
# come from h2load's per-request log. Every response must be a success: JSON-RPC bodies are
# sampled for "error" beforehand, gRPC responses checked with grpc-status 0 beforehand, and
# h2load's failed/errored counters must be zero.
# Usage: loadtest/bench-bindings.sh [seconds, default 10]. Needs h2load (Debian nghttp2-client).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-10}"
CONNS=64
PORT="${BENCH_PORT:-18481}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/a2a-gateway-target}"
command -v h2load >/dev/null || { echo "bench: h2load is not installed (apt-get install nghttp2-client)" >&2; exit 2; }
[[ -n "${BENCH_NO_BUILD:-}" ]] || cargo build --release -q -p a2a-gateway
BIN="$CARGO_TARGET_DIR/release/a2a-gateway"
WORK=$(mktemp -d)

RUST_LOG=warn A2A_LISTEN="127.0.0.1:$PORT" "$BIN" &
GW=$!
trap 'kill "$GW" 2>/dev/null || true; wait "$GW" 2>/dev/null || true; rm -rf "$WORK"' EXIT
BASE="http://127.0.0.1:$PORT"
for _ in $(seq 50); do curl -sf "$BASE/healthz" >/dev/null && break; sleep 0.1; done

# One task to read back.
TASK=$(curl -sf -H 'A2A-Version: 1.0' "$BASE/a2a/jsonrpc" \
  -d '{"jsonrpc":"2.0","id":0,"method":"SendMessage","params":{"message":{"messageId":"seed","role":"ROLE_USER","parts":[{"text":"hi"}]}}}' \
  | sed -E 's/.*"task":\{"id":"([^"]+)".*/\1/')
[[ ${#TASK} == 36 ]] || { echo "bench: could not create a task" >&2; exit 1; }

# Request bodies.
printf '%s' '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"bench","role":"ROLE_USER","parts":[{"text":"hello"}]}}}' > "$WORK/rpc-send.json"
printf '%s' "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\",\"params\":{\"id\":\"$TASK\"}}" > "$WORK/rpc-get.json"
printf '%s' '{"message":{"messageId":"bench","role":"ROLE_USER","parts":[{"text":"hello"}]}}' > "$WORK/rest-send.json"
# gRPC frames: 1 byte flag, 4 bytes length, then the protobuf message, encoded by hand:
# SendMessageRequest{message{message_id "bench", role USER, parts[{text "hello"}]}}
printf '\x00\x00\x00\x00\x14\x12\x12\x0a\x05bench\x20\x01\x2a\x07\x0a\x05hello' > "$WORK/grpc-send.bin"
# GetTaskRequest{id TASK} (field 2, 36 bytes)
{ printf '\x00\x00\x00\x00\x26\x12\x24'; printf '%s' "$TASK"; } > "$WORK/grpc-get.bin"

# Sanity: each request succeeds once before it is measured.
curl -sf -H 'A2A-Version: 1.0' "$BASE/a2a/jsonrpc" -d @"$WORK/rpc-send.json" | grep -q TASK_STATE_COMPLETED
curl -sf -H 'A2A-Version: 1.0' "$BASE/a2a/jsonrpc" -d @"$WORK/rpc-get.json" | grep -q '"result"'
curl -sf -H 'A2A-Version: 1.0' -H 'Content-Type: application/json' "$BASE/a2a/rest/message:send" -d @"$WORK/rest-send.json" | grep -q TASK_STATE_COMPLETED
curl -sf -H 'A2A-Version: 1.0' "$BASE/a2a/rest/tasks/$TASK" | grep -q "$TASK"
for rpc in send:SendMessage get:GetTask; do
  st=$(curl -s --http2-prior-knowledge -o /dev/null -w '%header{grpc-status}' -H 'content-type: application/grpc' -H 'te: trailers' \
    --data-binary @"$WORK/grpc-${rpc%%:*}.bin" "$BASE/lf.a2a.v1.A2AService/${rpc#*:}" || true)
  # curl prints trailers only on newer versions; fall back to h2load's status check below.
  [[ -z "$st" || "$st" == 0 ]] || { echo "bench: gRPC ${rpc#*:} answered grpc-status $st" >&2; exit 1; }
done

run() { # name, h2load args...
  local name=$1; shift
  local log="$WORK/log"; : > "$log"
  local out; out=$(h2load -c "$CONNS" -m 1 -D "$SECS" --warm-up-time=1 --log-file="$log" "$@" 2>&1)
  local rps failed errored
  rps=$(awk '/finished in/ {for (i=1;i<=NF;i++) if ($i=="req/s,") print $(i-1)}' <<<"$out")
  failed=$(awk '/^requests:/ {for (i=1;i<=NF;i++) if ($i=="failed,") print $(i-1)}' <<<"$out")
  errored=$(awk '/^requests:/ {for (i=1;i<=NF;i++) if ($i=="errored,") print $(i-1)}' <<<"$out")
  # A request cut off when the duration ends is logged without a status (<= 0); any other
  # status than 200 is a failure.
  if [[ "$failed" != 0 || "$errored" != 0 ]] || ! awk '$2 > 0 && $2 != 200 {exit 1}' "$log"; then
    echo "bench: $name had failed requests" >&2; echo "$out" >&2; exit 1
  fi
  python3 - "$name" "$rps" "$log" <<'PY'
import sys
name, rps, log = sys.argv[1], float(sys.argv[2]), sys.argv[3]
rows = [line.split() for line in open(log) if line.strip()]
lat = sorted(int(r[2]) for r in rows if r[1] == "200")
pct = lambda p: lat[min(len(lat) - 1, int(p / 100 * len(lat)))] / 1000
print(f"{name:34s} {rps:10.0f} req/s   p50 {pct(50):6.2f} ms   p99 {pct(99):6.2f} ms   ({len(lat)} requests)")
PY
}

GRPC=(-H 'content-type: application/grpc' -H 'te: trailers' -H 'a2a-version: 1.0')
JSON=(-H 'content-type: application/json' -H 'a2a-version: 1.0')
echo "a2a-gateway binding benchmark: h2c, $CONNS concurrent streams, ${SECS}s each, $(nproc) cores, h2load on the same machine"
run "GET /healthz (raw limit)"          "$BASE/healthz"
run "SendMessage  JSON-RPC"             "${JSON[@]}" -d "$WORK/rpc-send.json"  "$BASE/a2a/jsonrpc"
run "SendMessage  HTTP+JSON"            "${JSON[@]}" -d "$WORK/rest-send.json" "$BASE/a2a/rest/message:send"
run "SendMessage  gRPC"                 "${GRPC[@]}" -d "$WORK/grpc-send.bin"  "$BASE/lf.a2a.v1.A2AService/SendMessage"
run "GetTask      JSON-RPC"             "${JSON[@]}" -d "$WORK/rpc-get.json"   "$BASE/a2a/jsonrpc"
run "GetTask      HTTP+JSON"            "${JSON[@]}"                           "$BASE/a2a/rest/tasks/$TASK"
run "GetTask      gRPC"                 "${GRPC[@]}" -d "$WORK/grpc-get.bin"   "$BASE/lf.a2a.v1.A2AService/GetTask"
