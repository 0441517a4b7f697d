"""pytest wiring for the 0.3 SDK interop test (a2a-sdk 0.3.x, the gateway's 0.3 dialect).

`scripts/interop` runs it after the 1.x suite against the same open gateway, whose base URL is
`A2A_INTEROP_URL`. Bindings: `--binding` or `A2A_INTEROP03_BINDINGS`, default all three (the
0.3 gRPC service `a2a.v1.A2AService` is served beside the 1.0 one); see `interop_common.py`.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from interop_common import hooks  # noqa: E402

globals().update(hooks("A2A_INTEROP03_BINDINGS"))
