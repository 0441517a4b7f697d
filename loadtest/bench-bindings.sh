#!/usr/bin/env bash
# Binding comparison (issue: REST and gRPC bindings). One release gateway (embedded, in-memory
# store), HTTP/2 cleartext, 64 connections with one stream each (64 concurrent streams), each row
# measured for the given seconds after 1 s of warm-up:
#   SendMessage (echo)  over JSON-RPC, HTTP+JSON and gRPC, with `a2a-loadtest bench-send`
#                       (loadtest/fanout, the a2a-client crate): a new task per request, each
#                       with its own messageId, as a real client sends them.
#   GetTask             over JSON-RPC, HTTP+JSON and gRPC, with h2load: a read, so one repeated
#                       request is what is meant.
#   GET /healthz        with h2load: the raw limit of the HTTP stack in the same run.
# Each operation's three rows come from one load generator, so they compare the bindings and not
# the tools. GetTask stays on h2load so that it and the raw limit keep one generator: h2load
# replays bytes, a2a-loadtest encodes and decodes every request with the typed client (on one
# thread, as h2load runs on one; its row says how many cores it used). It also sends differently:
# hyper's HTTP/2 client (under reqwest and tonic alike) writes a request's HEADERS and DATA
# separately, as the body waits for flow-control capacity assigned once the headers are out, so
# the gateway reads about 4 TCP segments per request where h2load's single write makes 2, and
# spends more per request. All three bindings pay it alike, so compare the SendMessage rows with
# each other, not with the h2load rows.
# Every response must be a success. SendMessage: a completed task, checked by a2a-loadtest on
# every answer (a JSON-RPC error, a non-2xx REST status or a non-zero grpc-status is a failure);
# afterwards the gateway must hold exactly one task per successful send plus the seed task
# (ListTasks totalSize). GetTask: checked once beforehand (JSON-RPC result, gRPC grpc-status 0),
# and h2load's failed/errored counters must be zero with every status 200. Latency percentiles
# of the h2load rows come from its per-request log.
# Usage: loadtest/bench-bindings.sh [seconds, default 10]. Needs h2load (Debian nghttp2-client).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-10}"
CONNS=64
PORT="${BENCH_PORT:-18481}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/a2a-gateway-target}"
command -v h2load >/dev/null || { echo "bench: h2load is not installed (apt-get install nghttp2-client)" >&2; exit 2; }
# Two builds: built together, the load generator's reqwest features (http2) would be unified
# into the gateway's, and the gateway would not be the binary the other benchmarks measure.
if [[ -z "${BENCH_NO_BUILD:-}" ]]; then
  cargo build --release -q -p a2a-gateway
  cargo build --release -q -p a2a-loadtest
fi
BIN="$CARGO_TARGET_DIR/release/a2a-gateway"
LOAD="$CARGO_TARGET_DIR/release/a2a-loadtest"
WORK=$(mktemp -d)

# Every task is kept ([retention] max_tasks = 0, no bound): the seed task is read throughout and
# the count is checked afterwards.
printf '[retention]\nmax_tasks = 0\n' >"$WORK/keep-all.toml"
RUST_LOG=warn A2A_LISTEN="127.0.0.1:$PORT" A2A_CONFIG="$WORK/keep-all.toml" "$BIN" &
GW=$!
trap 'kill "$GW" 2>/dev/null || true; wait "$GW" 2>/dev/null || true; rm -rf "$WORK"' EXIT
BASE="http://127.0.0.1:$PORT"
for _ in $(seq 50); do curl -sf "$BASE/healthz" >/dev/null && break; sleep 0.1; done

# One task to read back.
TASK=$(curl -sf -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' "$BASE/a2a/jsonrpc" \
  -d '{"jsonrpc":"2.0","id":0,"method":"SendMessage","params":{"message":{"messageId":"seed","role":"ROLE_USER","parts":[{"text":"hi"}]}}}' \
  | sed -E 's/.*"task":\{"id":"([^"]+)".*/\1/')
[[ ${#TASK} == 36 ]] || { echo "bench: could not create a task" >&2; exit 1; }

# Request bodies of the GetTask rows.
printf '%s' "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\",\"params\":{\"id\":\"$TASK\"}}" > "$WORK/rpc-get.json"
# gRPC frame: 1 byte flag, 4 bytes length, then the protobuf message, encoded by hand:
# GetTaskRequest{id TASK} (field 2, 36 bytes)
{ printf '\x00\x00\x00\x00\x26\x12\x24'; printf '%s' "$TASK"; } > "$WORK/grpc-get.bin"

# Sanity: each GetTask request succeeds once before it is measured.
curl -sf -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' "$BASE/a2a/jsonrpc" -d @"$WORK/rpc-get.json" | grep -q '"result"'
curl -sf -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' "$BASE/a2a/rest/tasks/$TASK" | grep -q "$TASK"
st=$(curl -s --http2-prior-knowledge -o /dev/null -w '%header{grpc-status}' -H 'content-type: application/grpc' -H 'te: trailers' \
  --data-binary @"$WORK/grpc-get.bin" "$BASE/lf.a2a.v1.A2AService/GetTask" || true)
# curl prints trailers only on newer versions; fall back to h2load's status check below.
[[ -z "$st" || "$st" == 0 ]] || { echo "bench: gRPC GetTask answered grpc-status $st" >&2; exit 1; }

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

field() { sed -nE "s/.* $1=([^ ]+).*/\1/p" <<<"$2"; } # key, a2a-loadtest's key=value line
SENT=0
send() { # name, binding (jsonrpc|rest|grpc)
  local name=$1 line
  line=$("$LOAD" bench-send "$BASE" "$2" "$CONNS" "$SECS") || { echo "bench: $name had failed requests" >&2; exit 1; }
  SENT=$((SENT + $(field tasks "$line")))
  printf '%-34s %10.0f req/s   p50 %6.2f ms   p99 %6.2f ms   (%s requests; generator %s cores)\n' "$name" \
    "$(field rps "$line")" "$(field p50_ms "$line")" "$(field p99_ms "$line")" "$(field ok "$line")" "$(field generator_cores "$line")"
}

GRPC=(-H 'content-type: application/grpc' -H 'te: trailers' -H 'a2a-version: 1.0')
JSON=(-H 'content-type: application/json' -H 'a2a-version: 1.0')
echo "a2a-gateway binding benchmark: h2c, $CONNS concurrent streams, ${SECS}s each, $(nproc) cores, load generators on the same machine"
run "GET /healthz (raw limit)"          "$BASE/healthz"
send "SendMessage  JSON-RPC"            jsonrpc
send "SendMessage  HTTP+JSON"           rest
send "SendMessage  gRPC"                grpc
run "GetTask      JSON-RPC"             "${JSON[@]}" -d "$WORK/rpc-get.json"   "$BASE/a2a/jsonrpc"
run "GetTask      HTTP+JSON"            "${JSON[@]}"                           "$BASE/a2a/rest/tasks/$TASK"
run "GetTask      gRPC"                 "${GRPC[@]}" -d "$WORK/grpc-get.bin"   "$BASE/lf.a2a.v1.A2AService/GetTask"

# a2a-loadtest waits for the answer to every request it sends, so none is cut off at the end:
# the count is exact.
TOTAL=$(curl -sf -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' "$BASE/a2a/jsonrpc" \
  -d '{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":1}}' \
  | sed -E 's/.*"totalSize":([0-9]+).*/\1/')
if [[ "$TOTAL" != $((SENT + 1)) ]]; then
  echo "bench: the gateway holds $TOTAL tasks, a2a-loadtest completed $SENT sends (+ 1 seed task)" >&2; exit 1
fi
echo "tasks stored: $TOTAL (a2a-loadtest completed $SENT sends, warm-up included, + 1 seed task)"
