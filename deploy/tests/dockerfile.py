"""The root Dockerfile, read as data: its stages, the cargo command, what the image holds."""

import json
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def instructions(text: str | None = None) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    text = DOCKERFILE.read_text() if text is None else text
    out, current = [], ""
    for line in text.splitlines():
        if line.lstrip().startswith("#") and not current:
            continue
        current += line.rstrip("\\").rstrip() + " " if line.rstrip().endswith("\\") else line
        if not line.rstrip().endswith("\\"):
            if current.strip():
                word, _, rest = current.strip().partition(" ")
                out.append((word.upper(), rest.strip()))
            current = ""
    return out


def last_stage() -> list[tuple[str, str]]:
    ins = instructions()
    start = max(i for i, (w, _) in enumerate(ins) if w == "FROM")
    return ins[start:]


def exec_form(args: str) -> list[str]:
    return json.loads(args) if args.startswith("[") else shlex.split(args)


def runtime() -> dict:
    """What a container of the final image starts with: entrypoint, cmd, env, user, ports."""
    info = {"entrypoint": [], "cmd": [], "env": {}, "user": None, "expose": [], "copies": []}
    for word, args in last_stage():
        if word == "ENTRYPOINT":
            info["entrypoint"] = exec_form(args)
        elif word == "CMD":
            info["cmd"] = exec_form(args)
        elif word == "ENV":
            for k, v in re.findall(r'([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|\S+)', args):
                info["env"][k] = v.strip('"')
        elif word == "USER":
            info["user"] = args
        elif word == "EXPOSE":
            info["expose"] += [int(p.split("/")[0]) for p in args.split()]
        elif word == "COPY":
            parts = [p for p in args.split() if not p.startswith("--")]
            info["copies"].append((parts[:-1], parts[-1]))
    return info


def cargo_build() -> list[str]:
    """The `cargo build ...` command of the builder stage, as argv."""
    for word, args in instructions():
        if word == "RUN" and "cargo build" in args:
            command = args[args.index("cargo build"):].split("&&")[0]
            return shlex.split(command)
    raise AssertionError("no `cargo build` in the Dockerfile")


def binary_paths() -> dict[str, str]:
    """Binary name -> its absolute path in the image (from the final stage's COPY lines)."""
    out = {}
    for sources, dest in runtime()["copies"]:
        for src in sources:
            name = Path(src).name
            if name.startswith("a2a-"):
                out[name] = str(Path(dest) / name) if dest.endswith("/") else dest
    return out
