#!/usr/bin/env bash
# The cost of authentication on SendMessage (issue: authentication). In one run, two release
# gateways on the same machine, the same a2a-loadtest load (JSON-RPC SendMessage to echo, 64
# requests in flight, closed loop; see loadtest/bench-common.sh):
#   1. no [auth] section (anonymous)
#   2. [auth] with an OpenID Connect scheme: every request carries an RS256 bearer JWT
#      (`a2a-loadtest --bearer`) that the gateway verifies (signature, iss, aud, exp) against the
#      issuer's JWKS, cached after the first fetch.
# The issuer is a static discovery document and JWKS served by python's http.server; the key and
# token are generated for this run (python `cryptography`, from the interop venv).
# Prints req/s, p50, p99 for both, the throughput loss, and each gateway's CPU time per request
# (utime + stime from /proc over the run, divided by the requests answered, warm-up included).
# Usage: loadtest/bench-auth.sh [duration, default 15s]
#   BENCH_PORT (first of three ports, default 18482), BENCH_NO_BUILD, BENCH_OUT, BENCH_WARMUP
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=loadtest/bench-common.sh
source loadtest/bench-common.sh
DURATION="${1:-15s}"
P_ANON="${BENCH_PORT:-18482}"; P_AUTH=$((P_ANON + 1)); P_ISS=$((P_ANON + 2))
VENV="${A2A_VENV:-$HOME/.cache/a2a-gateway-venv}"
[[ -x "$VENV/bin/python" ]] || { echo "bench: run scripts/interop once to create $VENV" >&2; exit 2; }
bench_build
WORK=$(mktemp -d)
OUT=$(bench_reports "$WORK")
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

ISSUER="http://127.0.0.1:$P_ISS"
"$VENV/bin/python" - "$WORK" "$ISSUER" <<'PY'
import base64, json, os, sys, time
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
work, issuer = sys.argv[1], sys.argv[2]
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
nums = key.public_key().public_numbers()
num = lambda n: b64(n.to_bytes((n.bit_length() + 7) // 8, "big"))
os.makedirs(f"{work}/.well-known")
json.dump({"issuer": issuer, "jwks_uri": f"{issuer}/jwks.json"}, open(f"{work}/.well-known/openid-configuration", "w"))
json.dump({"keys": [{"kty": "RSA", "kid": "bench", "alg": "RS256", "use": "sig", "n": num(nums.n), "e": num(nums.e)}]}, open(f"{work}/jwks.json", "w"))
header = b64(json.dumps({"alg": "RS256", "kid": "bench", "typ": "JWT"}).encode())
now = int(time.time())
claims = b64(json.dumps({"iss": issuer, "sub": "bench", "aud": "a2a-gateway", "iat": now, "exp": now + 3600}).encode())
sig = key.sign(f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256())
open(f"{work}/token", "w").write(f"{header}.{claims}.{b64(sig)}")
PY

(cd "$WORK" && exec python3 -m http.server "$P_ISS" --bind 127.0.0.1 >/dev/null 2>&1) &
PIDS+=($!)
cat > "$WORK/auth.toml" <<TOML
[auth.schemes.oidc]
scheme = { openIdConnectSecurityScheme = { openIdConnectUrl = "$ISSUER/.well-known/openid-configuration" } }
issuer = "$ISSUER"
audiences = ["a2a-gateway"]
TOML
RUST_LOG=warn A2A_LISTEN="127.0.0.1:$P_ANON" "$GW_BIN" & PIDS+=($!)
RUST_LOG=warn A2A_LISTEN="127.0.0.1:$P_AUTH" A2A_CONFIG="$WORK/auth.toml" "$GW_BIN" & PIDS+=($!)
ANON_PID=${PIDS[1]} AUTH_PID=${PIDS[2]}
wait_http "$ISSUER/.well-known/openid-configuration"
wait_http "http://127.0.0.1:$P_ANON/healthz"
wait_http "http://127.0.0.1:$P_AUTH/healthz"
TOKEN=$(cat "$WORK/token")
BODY='{"jsonrpc":"2.0","id":0,"method":"SendMessage","params":{"message":{"messageId":"check","role":"ROLE_USER","parts":[{"text":"hi"}]}}}'
# The authenticated gateway refuses a request without the token and completes one with it.
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' "http://127.0.0.1:$P_AUTH/a2a/jsonrpc" -d "$BODY")
[[ "$code" == 401 ]] || { echo "bench: the auth gateway answered $code without a token" >&2; exit 1; }
check_send "http://127.0.0.1:$P_AUTH" -H "Authorization: Bearer $TOKEN"
check_send "http://127.0.0.1:$P_ANON"

# run PID JSON URL [ARGS...]: one run; prints the gateway's CPU ticks over it.
run() {
  local pid=$1 json=$2 c0
  shift 2
  c0=$(cpu_ticks "$pid")
  lt_send "$json" "$@"
  echo $(( $(cpu_ticks "$pid") - c0 )) >"$json.cpu"
}
echo "auth cost: a2a-loadtest, $CONNS in flight, $DURATION each after $WARMUP of warm-up, $(nproc) cores, the generator on the same machine" >&2
run "$ANON_PID" "$OUT/send-anonymous.json" "http://127.0.0.1:$P_ANON"
lt_row "SendMessage, no auth" "$OUT/send-anonymous.json"
# The card the tool reads first is public; every A2A call carries the token.
run "$AUTH_PID" "$OUT/send-jwt.json" "http://127.0.0.1:$P_AUTH" --bearer "$TOKEN"
lt_row "SendMessage, RS256 bearer JWT" "$OUT/send-jwt.json"
awk -v a="$(jget "$OUT/send-anonymous.json" .throughput_rps)" -v b="$(jget "$OUT/send-jwt.json" .throughput_rps)" \
    -v ca="$(cat "$OUT/send-anonymous.json.cpu")" -v cb="$(cat "$OUT/send-jwt.json.cpu")" \
    -v na="$(lt_answered "$OUT/send-anonymous.json")" -v nb="$(lt_answered "$OUT/send-jwt.json")" -v tick="$CLK_TCK" 'BEGIN {
  ua = ca / tick / na * 1e6; ub = cb / tick / nb * 1e6
  printf "throughput with JWT validation: %.2f of without (loss %.1f%%)\n", b / a, (1 - b / a) * 100
  printf "gateway CPU per request: %.1f us without auth, %.1f us with the JWT: cost %.1f%%\n", ua, ub, (ub / ua - 1) * 100
}' >&2
