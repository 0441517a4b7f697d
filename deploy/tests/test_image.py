"""The Dockerfile: it builds the binaries it copies, with hadolint-style basics. No container
engine here? Then the image itself is not built, and the test says so."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import dockerfile

ROOT = dockerfile.ROOT


def test_the_cargo_command_builds_the_binaries_the_image_copies():
    argv = dockerfile.cargo_build()
    assert argv[:2] == ["cargo", "build"] and "--locked" in argv and "--release" in argv, argv
    packages = [argv[i + 1] for i, a in enumerate(argv) if a in ("-p", "--package")]
    copied = set(dockerfile.binary_paths())
    assert copied == {"a2a-gateway", "a2a-worker"}, copied
    # The builder copies target/release/<bin> out of the cache mount: the same names.
    run = next(args for word, args in dockerfile.instructions() if word == "RUN" and "cargo build" in args)
    assert set(re.findall(r"target/release/(a2a-[a-z-]+)", run)) == copied
    # Each copied binary is a bin target of a package the command builds.
    meta = json.loads(subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps", "--locked"],
                                     cwd=ROOT, capture_output=True, text=True, check=True, timeout=120).stdout)
    bins = {t["name"]: p["name"] for p in meta["packages"] for t in p["targets"] if "bin" in t["kind"]}
    for binary in copied:
        assert bins.get(binary) in packages, f"{binary} is built by package {bins.get(binary)}, not by {packages}"
    # The same command, in the dev profile (the release build is the image's, and too slow for
    # every test run): it must succeed and leave both binaries.
    dev = [a for a in argv if a != "--release"]
    done = subprocess.run(dev, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    for binary in copied:
        assert (target / "debug" / binary).is_file(), binary


def test_hadolint_basics():
    ins = dockerfile.instructions()
    froms = [args.split()[0] for word, args in ins if word == "FROM"]
    assert len(froms) >= 2, "a multi-stage build"
    for image in froms:
        name, _, tag = image.partition(":")
        assert tag and tag != "latest", f"{image}: pin a version"
        # A version, not a moving name: digits in the tag (e.g. 1.95.0-slim-bookworm, 12.12-slim).
        assert re.match(r"\d+\.\d+", tag) or "@sha256:" in image, f"{image}: pin a version or digest"
    # Fully qualified (podman and buildah refuse short names without search registries).
    assert froms[0].startswith("docker.io/library/rust:1.95"), froms[0]
    assert all(f.count("/") >= 2 for f in froms), froms
    assert "HEALTHCHECK" in {w for w, _ in dockerfile.last_stage()}
    rt = dockerfile.runtime()
    user = rt["user"]
    assert user and re.fullmatch(r"[1-9]\d*(:\d+)?", user), f"USER {user}: numeric and not root"
    assert {8080, 9464, 9090} <= set(rt["expose"])
    assert rt["entrypoint"][0] in dockerfile.binary_paths().values()
    # No shell at run time: exec form only, no RUN in the final stage.
    assert not any(word == "RUN" for word, _ in dockerfile.last_stage())
    labels = " ".join(args for word, args in dockerfile.last_stage() if word == "LABEL")
    for label in ("source", "version", "revision"):
        assert f"org.opencontainers.image.{label}=" in labels, label
    text = dockerfile.DOCKERFILE.read_text()
    assert "--mount=type=cache" in text
    assert ".git" in (ROOT / ".dockerignore").read_text().split()
    assert "target" in (ROOT / ".dockerignore").read_text().split()


def test_compose_and_chart_use_the_image_entrypoints():
    paths = set(dockerfile.binary_paths().values())
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for name, svc in compose["services"].items():
        # Our image's services (the grafana one has a shell entrypoint of its own image's).
        if svc.get("entrypoint") and "${A2A_IMAGE" in str(svc.get("image", "")):
            assert svc["entrypoint"][0] in paths, (name, svc["entrypoint"])
            assert svc["healthcheck"]["test"][1] in paths, (name, svc["healthcheck"])


def test_build_the_image_if_an_engine_exists():
    engine = next((e for e in ("docker", "podman") if shutil.which(e)), None)
    usable = engine and subprocess.run([engine, "info"], capture_output=True, timeout=30).returncode == 0
    if not usable:
        pytest.skip(f"no container engine here ({engine or 'no docker/podman'}"
                    f"{' without a daemon' if engine else ''}): the image is not built")
    done = subprocess.run([engine, "build", "-t", "a2a-gateway:deploy-test", "."], cwd=ROOT,
                          capture_output=True, text=True, timeout=3600,
                          env={**os.environ, "DOCKER_BUILDKIT": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
