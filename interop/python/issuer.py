"""A minimal OpenID Connect issuer for the bearer-token interop test, started by scripts/interop.

Serves the discovery document, a JWKS with one RS256 key generated at start (no key material in
the repository), and an OAuth2 client-credentials token endpoint:

    python issuer.py PORT_FILE      # binds 127.0.0.1:0, writes the port to PORT_FILE, serves

The token endpoint accepts the client `interop` / `interop-secret` (HTTP Basic or form fields)
and issues a one-hour RS256 access token for the audience `a2a-gateway` with the requested scope.
A form field `subject` (a test convenience, not OAuth2) picks the token's `sub`, so one client can
act as several principals.
"""

import base64
import http.server
import json
import sys
import time
import urllib.parse
import uuid

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

CLIENT_ID = "interop"
CLIENT_SECRET = "interop-secret"
AUDIENCE = "a2a-gateway"
KID = "interop-rs256"

KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_uint(n: int) -> str:
    return b64url(n.to_bytes((n.bit_length() + 7) // 8, "big"))


def sign(claims: dict) -> str:
    header = b64url(json.dumps({"alg": "RS256", "kid": KID, "typ": "JWT"}).encode())
    body = b64url(json.dumps(claims).encode())
    signature = KEY.sign(f"{header}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{header}.{body}.{b64url(signature)}"


class Issuer(http.server.BaseHTTPRequestHandler):
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def reply(self, status: int, doc: dict) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 - http.server's naming
        if self.path == "/.well-known/openid-configuration":
            iss = self.issuer()
            self.reply(
                200,
                {
                    "issuer": iss,
                    "jwks_uri": f"{iss}/jwks.json",
                    "token_endpoint": f"{iss}/token",
                    "grant_types_supported": ["client_credentials"],
                },
            )
        elif self.path == "/jwks.json":
            nums = KEY.public_key().public_numbers()
            jwk = {"kty": "RSA", "kid": KID, "alg": "RS256", "use": "sig", "n": b64url_uint(nums.n), "e": b64url_uint(nums.e)}
            self.reply(200, {"keys": [jwk]})
        else:
            self.reply(404, {"error": "not_found"})

    def do_POST(self):  # noqa: N802
        if self.path != "/token":
            return self.reply(404, {"error": "not_found"})
        length = int(self.headers.get("Content-Length") or 0)
        form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
        client = (form.get("client_id"), form.get("client_secret"))
        basic = self.headers.get("Authorization", "")
        if basic.startswith("Basic "):
            user, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
            client = (user, secret)
        if form.get("grant_type") != "client_credentials":
            return self.reply(400, {"error": "unsupported_grant_type"})
        if client != (CLIENT_ID, CLIENT_SECRET):
            return self.reply(401, {"error": "invalid_client"})
        now = int(time.time())
        scope = form.get("scope", "")
        claims = {
            "iss": self.issuer(),
            "sub": form.get("subject") or CLIENT_ID,
            "aud": AUDIENCE,
            "iat": now,
            "exp": now + 3600,
            "jti": str(uuid.uuid4()),
            "scope": scope,
        }
        self.reply(200, {"access_token": sign(claims), "token_type": "Bearer", "expires_in": 3600, "scope": scope})

    def log_message(self, *args):  # quiet: the interop log is pytest's
        pass


def main() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Issuer)
    with open(sys.argv[1], "w") as f:
        f.write(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    main()
