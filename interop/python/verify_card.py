"""Verifies an A2A agent card's signatures with an independent JOSE implementation.

Usage: verify_card.py TRUSTED_PREFIX [JWKS_URL] < card.json

The card (JSON, on stdin) is verified as A2A 1.0 §8.4 describes: its `signatures` form a JWS
(JSON serialization) whose payload is detached, namely the RFC 8785 canonical JSON of the card
without `signatures` (computed by the `rfc8785` package, not by the gateway). The keys come
from the JWKS at each signature's `jku`, which must start with TRUSTED_PREFIX (the gateway the
caller trusts), or from JWKS_URL when given; the key is picked by the header's `kid` (jwcrypto).

Prints `verified <kid>` and exits 0 when a signature verifies; otherwise prints why and exits 3
(any other status is a failure of the script itself).
"""

import base64
import json
import sys
import urllib.request

import rfc8785
from jwcrypto import jwk, jws

NOT_VERIFIED = 3


def b64url_json(part):
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def fetch(url):
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.read().decode("utf-8")


def main():
    trusted = sys.argv[1]
    jwks_url = sys.argv[2] if len(sys.argv) > 2 else None
    card = json.loads(sys.stdin.read())
    signatures = card.pop("signatures", None)
    if not signatures:
        print("the card carries no signatures")
        return NOT_VERIFIED
    payload = rfc8785.dumps(card)
    failures = []
    for sig in signatures:
        header = b64url_json(sig["protected"])
        url = jwks_url or header.get("jku", "")
        if not url.startswith(trusted):
            failures.append(f"jku {url!r} is not under the trusted {trusted!r}")
            continue
        keys = jwk.JWKSet.from_json(fetch(url))
        token = jws.JWS()
        token.deserialize(json.dumps({"signatures": [sig]}))
        try:
            token.verify(keys, detached_payload=payload)
        except Exception as e:  # jwcrypto raises several kinds
            failures.append(f"kid {header.get('kid')!r}: {e!r}")
            continue
        print(f"verified {header['kid']}")
        return 0
    print("; ".join(failures))
    return NOT_VERIFIED


if __name__ == "__main__":
    sys.exit(main())
