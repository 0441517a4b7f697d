#!/usr/bin/env bash
# The cost of authentication on SendMessage (issue: authentication). In one run, two release
# gateways on the same machine, the same wrk load (64 connections, JSON-RPC SendMessage to echo):
#   1. no [auth] section (anonymous)
#   2. [auth] with an OpenID Connect scheme: every request carries an RS256 bearer JWT that the
#      gateway verifies (signature, iss, aud, exp) against the issuer's JWKS, cached after the
#      first fetch.
# The issuer is a static discovery document and JWKS served by python's http.server; the key and
# token are generated for this run (python `cryptography`, from the interop venv).
# Prints req/s, p50, p99 for both and the throughput loss. Usage: loadtest/bench-auth.sh [15s]
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-15s}"
CONNS=64
P_ANON="${BENCH_PORT:-18482}"; P_AUTH=$((P_ANON + 1)); P_ISS=$((P_ANON + 2))
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/a2a-gateway-target}"
VENV="${A2A_VENV:-$HOME/.cache/a2a-gateway-venv}"
command -v wrk >/dev/null || { echo "bench: wrk is not installed (apt-get install wrk)" >&2; exit 2; }
[[ -x "$VENV/bin/python" ]] || { echo "bench: run scripts/interop once to create $VENV" >&2; exit 2; }
[[ -n "${BENCH_NO_BUILD:-}" ]] || cargo build --release -q -p a2a-gateway
BIN="$CARGO_TARGET_DIR/release/a2a-gateway"
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
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
RUST_LOG=warn A2A_LISTEN="127.0.0.1:$P_ANON" "$BIN" & PIDS+=($!)
RUST_LOG=warn A2A_LISTEN="127.0.0.1:$P_AUTH" A2A_CONFIG="$WORK/auth.toml" "$BIN" & PIDS+=($!)
for p in "$P_ANON" "$P_AUTH" "$P_ISS"; do
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$p/" && break; sleep 0.1; done
done
export BENCH_TOKEN; BENCH_TOKEN=$(cat "$WORK/token")
BODY='{"jsonrpc":"2.0","id":0,"method":"SendMessage","params":{"message":{"messageId":"check","role":"ROLE_USER","parts":[{"text":"hi"}]}}}'
# The authenticated gateway refuses a request without the token and completes one with it.
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' "http://127.0.0.1:$P_AUTH/a2a/jsonrpc" -d "$BODY")
[[ "$code" == 401 ]] || { echo "bench: the auth gateway answered $code without a token" >&2; exit 1; }
curl -sf -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' -H "Authorization: Bearer $BENCH_TOKEN" "http://127.0.0.1:$P_AUTH/a2a/jsonrpc" -d "$BODY" \
  | grep -q TASK_STATE_COMPLETED || { echo "bench: the token is not accepted" >&2; exit 1; }

run() { # name, port
  local out; out=$(wrk -t2 -c"$CONNS" -d"$DURATION" --latency -s loadtest/send-echo.lua "http://127.0.0.1:$2/a2a/jsonrpc")
  if grep -q "Non-2xx" <<<"$out"; then echo "bench: $1 had non-2xx responses" >&2; echo "$out" >&2; exit 1; fi
  local rps p50 p99
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out"); p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  printf '%-32s %10s req/s   p50 %8s   p99 %8s\n' "$1" "$rps" "$p50" "$p99" >&2
  echo "$rps"
}
echo "auth cost: $CONNS connections, $DURATION each, $(nproc) cores, wrk on the same machine" >&2
ANON=$(BENCH_TOKEN= run "SendMessage, no auth" "$P_ANON")
AUTH=$(run "SendMessage, RS256 bearer JWT" "$P_AUTH")
awk -v a="$ANON" -v b="$AUTH" 'BEGIN { printf "throughput with JWT validation: %.2f of without (loss %.1f%%)\n", b / a, (1 - b / a) * 100 }' >&2
