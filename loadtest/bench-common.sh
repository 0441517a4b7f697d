# shellcheck shell=bash
# What the benchmark scripts share; sourced by loadtest/bench*.sh, not run on its own.
# Their load is always a2a-loadtest's (see docs/load-testing.md): every
# answer is checked (a JSON-RPC error, a refused call, a task in another state fails the run),
# and the closed loop waits for the answer to every request it sends, so the counts in its JSON
# report are exact: what the scripts check the gateway's stored tasks against.
#
# BENCH_NO_BUILD=1 uses the release binaries already built; BENCH_OUT=DIR keeps the JSON reports
# there (for `a2a-loadtest table` or `--compare`), else they go with the script's work directory.

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/a2a-gateway-target}"
# shellcheck disable=SC2034 # used by the scripts that source this file
GW_BIN="$CARGO_TARGET_DIR/release/a2a-gateway"
LT_BIN="$CARGO_TARGET_DIR/release/a2a-loadtest"
# Requests in flight in every run (the wrk runs these scripts made before had 64 connections).
CONNS=64
# Left out of every figure, but sent, checked and stored.
WARMUP="${BENCH_WARMUP:-1s}"

# Two builds: built together, the generator's features (reqwest's http2) would be unified into
# the gateway's, which would then not be the binary the other benchmarks measure.
bench_build() {
  [[ -z "${BENCH_NO_BUILD:-}" ]] || return 0
  cargo build --release -q -p a2a-gateway
  cargo build --release -q -p a2a-loadtest
}

# bench_reports WORKDIR: where the JSON reports go (BENCH_OUT, or WORKDIR).
bench_reports() {
  local dir="${BENCH_OUT:-$1}"
  mkdir -p "$dir"
  echo "$dir"
}

# lt_run JSON ARGS...: one a2a-loadtest run, its report written to JSON (a list for `baseline`
# and `upstream-overhead`). Any failed request fails the script, with the tool's summary; so
# does one failed during the warm-up (the tool leaves those out of its verdict, but it may have
# left a task behind). Call it directly, not in $(...), so that its `exit` ends the script.
lt_run() {
  local json=$1
  shift
  "$LT_BIN" "$@" --quiet --json "$json" >"$json.txt" 2>&1 || lt_failed "$json"
  lt_check "$json"
}

# lt_failed JSON: the run of JSON failed; ends the script with the tool's summary.
lt_failed() {
  echo "bench: a2a-loadtest failed:" >&2
  cat "$1.txt" >&2
  exit 1
}

# lt_check JSON: fails the script when a request of the run failed during the warm-up.
lt_check() {
  if [[ $(jq '[if type == "array" then .[] else . end | .warmup_errors] | add' "$1") != 0 ]]; then
    echo "bench: requests failed during the warm-up:" >&2
    cat "$1.txt" >&2
    exit 1
  fi
}

# lt_send JSON URL [ARGS...]: JSON-RPC SendMessage to the echo agent at URL (a new task per
# request), closed loop with CONNS in flight over 4 connection pools, DURATION after WARMUP.
lt_send() {
  local json=$1 url=$2
  shift 2
  lt_run "$json" send --url "$url" --binding jsonrpc --connections 4 --concurrency "$CONNS" \
    --duration "$DURATION" --warmup "$WARMUP" "$@"
}

# lt_baseline JSON [ARGS...]: the raw limit of the HTTP stack in this run (`a2a-loadtest
# baseline`: an HTTP/1.1 GET of a trivial axum route served in the generator's process), with
# the same load as lt_send.
lt_baseline() {
  local json=$1
  shift
  lt_run "$json" baseline --concurrency "$CONNS" --duration "$DURATION" --warmup "$WARMUP" "$@"
}

# jget JSON FILTER: one value of a report (jq, raw output).
jget() { jq -r "$2" "$1"; }

# lt_answered JSON: the requests the target answered with success, warm-up included: what it
# did and stored.
lt_answered() { jq '.ok + .warmup_ok' "$1"; }

# lt_row NAME JSON: a report's throughput, p50 and p99, on stderr.
lt_row() {
  jq -r '[.throughput_rps, .latency_ms.p50, .latency_ms.p99, .ok, .warmup_ok] | @tsv' "$2" \
    | awk -F'\t' -v name="$1" '{ printf "%-34s %10.0f req/s   p50 %7.2f ms   p99 %7.2f ms   (%d requests, %d more in the warm-up)\n", name, $1, $2, $3, $4, $5 }' >&2
}

# cpu_ticks PID: the CPU time (utime + stime) process PID has used so far, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# shellcheck disable=SC2034 # used by the scripts that source this file
CLK_TCK=$(getconf CLK_TCK)

# wait_http URL: until URL answers with success (at most 10 s), else fail.
wait_http() {
  for _ in $(seq 100); do curl -sf -o /dev/null "$1" && return 0; sleep 0.1; done
  echo "bench: $1 did not answer" >&2
  exit 1
}

# check_send URL [CURL ARGS...]: one JSON-RPC SendMessage to the gateway at URL, which must
# complete: the benchmark must measure successes.
check_send() {
  local url=$1
  shift
  curl -sf -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' "$@" "$url/a2a/jsonrpc" \
    -d '{"jsonrpc":"2.0","id":0,"method":"SendMessage","params":{"message":{"messageId":"check","role":"ROLE_USER","parts":[{"text":"hi"}]}}}' \
    | grep -c TASK_STATE_COMPLETED >/dev/null || { echo "bench: SendMessage does not complete at $url" >&2; exit 1; }
}

# tasks_held URL [CURL ARGS...]: the tasks the gateway at URL holds (ListTasks totalSize).
tasks_held() {
  local url=$1
  shift
  curl -sf -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' "$@" "$url/a2a/jsonrpc" \
    -d '{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":1}}' | jq -r '.result.totalSize // 0'
}

for tool in jq curl; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is not installed" >&2; exit 2; }
done
