"""pytest wiring for the 0.3 SDK interop test (a2a-sdk 0.3.x, the gateway's 0.3 dialect).

`scripts/interop` runs it after the 1.x suite against the same gateways: the open one
(`A2A_INTEROP_URL`) and, for the extended card, the one that requires bearer tokens of the interop
issuer (`A2A_INTEROP_AUTH_URL`, `A2A_INTEROP_ISSUER_URL`). Bindings: `--binding` or `A2A_INTEROP03_BINDINGS`, default all three (the
0.3 gRPC service `a2a.v1.A2AService` is served beside the 1.0 one); see `interop_common.py`.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pytest  # noqa: E402

from interop_common import hooks, url_of  # noqa: E402

globals().update(hooks("A2A_INTEROP03_BINDINGS"))


@pytest.fixture(scope="session")
def auth_url():
    """The gateway that enforces bearer tokens of the interop issuer and has an extended card."""
    return url_of("A2A_INTEROP_AUTH_URL")


@pytest.fixture(scope="session")
def issuer_url():
    return url_of("A2A_INTEROP_ISSUER_URL")
