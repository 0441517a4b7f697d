"""The gateway's `[limits]` keys and their TOML types, from `services/gateway/src/config/file.rs`
(`pub struct Limits`): the chart's values schema for `config.limits` is generated from them
(A2A_DEPLOY_REGEN=1), so a key the gateway does not know is refused at render time."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG_RS = ROOT / "services/gateway/src/config/file.rs"

INTEGER = {"type": "integer", "minimum": 0}


def fields() -> dict[str, str]:
    """Field name -> Rust type of `pub struct Limits`."""
    text = CONFIG_RS.read_text()
    m = re.search(r"pub struct Limits \{(.*?)\n\}", text, re.S)
    assert m, f"no `pub struct Limits` in {CONFIG_RS}"
    out = dict(re.findall(r"^\s*pub (\w+): (.+),\s*$", m.group(1), re.M))
    assert "drain_timeout_secs" in out, out
    return out


def schema() -> dict:
    props = {}
    for name, rust in fields().items():
        rust = rust.strip()
        if rust in ("u64", "u32", "usize", "u16"):
            props[name] = dict(INTEGER)
        elif rust == "bool":
            props[name] = {"type": "boolean"}
        elif rust == "String":
            props[name] = {"type": "string"}
        elif "BTreeMap<String, u64>" in rust or "HashMap<String, u64>" in rust:
            props[name] = {"type": "object", "additionalProperties": dict(INTEGER)}
        else:
            # A table of its own (quotas, rate, ...): the gateway checks its keys at start; the
            # deploy test starts it on every documented shape.
            props[name] = {"type": "object"}
    return {
        "type": "object",
        "description": "[limits] of the gateway's TOML: generated from services/gateway/src/config/file.rs (A2A_DEPLOY_REGEN=1)",
        "additionalProperties": False,
        "properties": props,
    }
