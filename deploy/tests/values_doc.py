"""The chart README's values reference, generated from the `# --` comments in values.yaml."""

import json
import re
from pathlib import Path

import yaml

KEY = re.compile(r"^(\s*)([A-Za-z0-9_]+):(.*)$")
DOC = re.compile(r"^\s*# -- (.*)$")
BEGIN, END = "<!-- values:begin -->", "<!-- values:end -->"


def documented(values_yaml: Path) -> dict[str, str]:
    """Dotted key -> description, for every key with a `# --` comment just above it."""
    docs: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    pending: str | None = None
    for line in values_yaml.read_text().splitlines():
        if m := DOC.match(line):
            pending = m.group(1)
            continue
        if line.strip().startswith("#") or not line.strip():
            if not line.strip():
                pending = None
            continue
        m = KEY.match(line)
        if not m or line.lstrip().startswith("-"):
            pending = None
            continue
        indent = len(m.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, m.group(2)))
        if pending is not None:
            docs[".".join(k for _, k in stack)] = pending
        pending = None
    return docs


def leaves(values, prefix="") -> list[str]:
    """Every leaf key (maps are walked, lists and scalars are leaves; an empty map is a leaf)."""
    if isinstance(values, dict) and values:
        out = []
        for k, v in values.items():
            out += leaves(v, f"{prefix}.{k}" if prefix else k)
        return out
    return [prefix]


def undocumented(values_yaml: Path) -> list[str]:
    docs = documented(values_yaml)
    values = yaml.safe_load(values_yaml.read_text())
    missing = []
    for leaf in leaves(values):
        parts = leaf.split(".")
        if not any(".".join(parts[:i]) in docs for i in range(1, len(parts) + 1)):
            missing.append(leaf)
    return missing


def table(values_yaml: Path) -> str:
    docs = documented(values_yaml)
    values = yaml.safe_load(values_yaml.read_text())
    rows = ["| Key | Default | Description |", "|---|---|---|"]
    for key, text in docs.items():
        node = values
        for part in key.split("."):
            node = node[part]
        default = json.dumps(node, separators=(",", ":"))
        rows.append(f"| `{key}` | `{default}` | {text} |")
    return "\n".join(rows)


def with_table(readme: str, values_yaml: Path) -> str:
    """`readme` with the text between the markers replaced by the generated table."""
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table(values_yaml)}\n{END}{tail}"
