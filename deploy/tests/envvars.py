"""The closed lists of environment variables the binaries read, taken from their source.

`services/gateway/src/config/env.rs` and `services/worker/src/config.rs` each hold `ENV_VARS`, and
`crates/a2a-process/src/telemetry.rs` holds the logging and tracing ones both read; each is a
Rust slice of `("NAME", "meaning")` pairs. The deployment files may give our processes only these.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SOURCES = {
    "gateway": ROOT / "services/gateway/src/config/env.rs",
    "worker": ROOT / "services/worker/src/config.rs",
    "telemetry": ROOT / "crates/a2a-process/src/telemetry.rs",
}

def _env_vars(path: Path) -> list[str]:
    text = path.read_text()
    m = re.search(r"pub const ENV_VARS: &\[\(&str, &str\)\] = &\[(.*?)\n\];", text, re.S)
    if not m:
        raise AssertionError(f"no ENV_VARS slice in {path}")
    names = re.findall(r'\(\s*"([A-Z0-9_]+)"\s*,', m.group(1))
    if len(names) < 5:
        raise AssertionError(f"ENV_VARS of {path} parsed to too few names: {names}")
    return names


# Variables a deployment file sets for a binary whose reading of it lands from another branch:
# A2A_ALLOW_UNAUTHENTICATED is the gateway's opt-in to serve without [auth] beyond loopback.
PENDING = {"gateway": {"A2A_ALLOW_UNAUTHENTICATED"}, "worker": set()}

# Standard variables of the libraries and the C runtime, not the binaries' own: the chart's
# extraEnv and compose may set them (egress proxy, CA bundle).
STANDARD = {"HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy",
            "SSL_CERT_FILE", "SSL_CERT_DIR", "TZ"}


def known(binary: str) -> set[str]:
    """Every variable `binary` ("gateway" or "worker") reads."""
    return (set(_env_vars(SOURCES[binary])) | set(_env_vars(SOURCES["telemetry"]))
            | PENDING[binary])


def unknown(binary: str, names) -> list[str]:
    """The names in `names` that `binary` does not read."""
    ok = known(binary) | STANDARD
    return sorted(n for n in names if n not in ok)
