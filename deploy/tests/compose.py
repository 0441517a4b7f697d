"""docker-compose.yml as docker-compose resolves it (`docker-compose config`)."""

import os
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
# The variables docker-compose.yml requires (`${VAR:?message}`), with values for the tests.
REQUIRED = {"POSTGRES_PASSWORD": "pg-secret", "REDIS_PASSWORD": "redis-secret"}
# Required by one profile only, when its service starts (not when the file is read).
PROFILE_REQUIRED = {"GRAFANA_ADMIN_PASSWORD": "grafana-secret"}
OURS = ("migrate", "gateway", "worker")


def config(env: dict[str, str], tmp: Path) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `docker-compose config` with only `env` (no .env file)."""
    empty = tmp / "empty.env"
    empty.write_text("")
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    done = subprocess.run(["docker-compose", "-f", str(COMPOSE), "--env-file", str(empty), "config"],
                          env={**base, **env}, capture_output=True, text=True, timeout=60, cwd=ROOT)
    return done.returncode, done.stdout, done.stderr


def resolved(env: dict[str, str], tmp: Path) -> dict:
    code, out, err = config({**REQUIRED, **env}, tmp)
    assert code == 0, f"docker-compose config failed:\n{err}"
    return yaml.safe_load(out)


def mounts(cfg: dict, service: dict) -> dict[str, str]:
    """Container path -> host path of a service's bind mounts and secrets."""
    out = {}
    for v in service.get("volumes", []):
        if isinstance(v, str):
            parts = v.split(":")
            src, target = parts[0], parts[1]
        else:
            src, target = v.get("source"), v["target"]
        if src and src.startswith("/"):
            out[target] = src
    for s in service.get("secrets", []):
        name = s if isinstance(s, str) else s["source"]
        target = s.get("target", f"/run/secrets/{name}") if isinstance(s, dict) else f"/run/secrets/{name}"
        out[target if target.startswith("/") else f"/run/secrets/{target}"] = cfg["secrets"][name]["file"]
    return out


def env_of(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.split("=", 1) for e in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}
