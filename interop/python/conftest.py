"""pytest wiring for the SDK interop test (a2a-sdk 1.x).

The gateway is started by `scripts/interop`, which passes its base URL in `A2A_INTEROP_URL`.
Bindings: `--binding` or `A2A_INTEROP_BINDINGS`, default all three; see `interop_common.py`.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from interop_common import hooks, url_of  # noqa: E402

globals().update(hooks("A2A_INTEROP_BINDINGS"))


@pytest.fixture(scope="session")
def auth_url():
    """The gateway that enforces bearer tokens of the interop issuer (scope a2a:write)."""
    return url_of("A2A_INTEROP_AUTH_URL")


@pytest.fixture(scope="session")
def issuer_url():
    return url_of("A2A_INTEROP_ISSUER_URL")
