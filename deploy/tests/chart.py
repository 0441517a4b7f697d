"""Rendering the Helm chart with Helm's own library (helm-python-sdk: Helm v4 as a library)."""

import os
from pathlib import Path

import helm_python as helm
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm/a2a-gateway"
# The Kubernetes version the manifests are validated against (the chart needs 1.30+ for the
# preStop sleep action).
KUBE_VERSION = "1.33.0"
RELEASE, NAMESPACE = "a2a", "agents"


def values_file(path: Path) -> dict:
    return yaml.safe_load(path.read_text()) or {}


def render(values: dict, *, is_upgrade: bool = False) -> dict[str, str]:
    """Template path -> rendered text, as `helm template` (install) would give it."""
    with helm.Chart.load(str(CHART)) as chart:
        return chart.render(
            values,
            name=RELEASE,
            namespace=NAMESPACE,
            is_install=not is_upgrade,
            is_upgrade=is_upgrade,
        )


def manifests(rendered: dict[str, str]) -> list[dict]:
    """Every Kubernetes object of a render (NOTES.txt is not one)."""
    docs = []
    for path in sorted(rendered):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(rendered[path]):
            if doc:
                docs.append(doc)
    return docs


def by_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict], kind: str, name_suffix: str = "") -> dict:
    found = [d for d in by_kind(docs, kind) if d["metadata"]["name"].endswith(name_suffix)]
    assert len(found) == 1, f"expected one {kind} *{name_suffix}, got {[d['metadata']['name'] for d in found]}"
    return found[0]


def regen() -> bool:
    return os.environ.get("A2A_DEPLOY_REGEN") == "1"
