"""Starting what a deployment file describes as native processes on this machine.

A `Proc` is one container as the chart or docker-compose.yml writes it: the binary, its
arguments, its environment and the files mounted into it. `Stack` starts them from the debug
binaries with only what a container runtime would change: service host names become loopback
addresses, listen ports become free loopback ports, and mount paths become the host files.
Everything started is stopped by PID.
"""

import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", Path.home() / ".cache/a2a-gateway-target"))
BIN_DIR = TARGET / "debug"
LISTEN = re.compile(r"^(0\.0\.0\.0|\[::\]):(\d+)$")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Proc:
    name: str
    argv: list[str]                      # argv[0] is the path inside the image
    env: dict[str, str]
    mounts: dict[str, str] = field(default_factory=dict)  # path in the container -> host path
    ports: dict[int, int] = field(default_factory=dict)   # container port -> loopback port

    def localize(self, hosts: dict[str, str]) -> None:
        """Rewrite addresses and paths for this machine (see the module comment); `hosts` maps
        `service-host:port` in URLs to a loopback `host:port`."""
        env = {}
        for key, value in self.env.items():
            if m := LISTEN.match(value):
                port = self.ports.setdefault(int(m.group(2)), free_port())
                value = f"127.0.0.1:{port}"
            for address, local in hosts.items():
                value = re.sub(rf"(?<=[@/]){re.escape(address)}(?=/|$)", local, value)
            env[key] = self.mount_paths(value)
        self.env = env
        self.argv = [self.mount_paths(a) for a in self.argv]

    def mount_paths(self, value: str) -> str:
        # One pass (a host path is never rewritten again), longest container path first, so
        # /etc/a2a/keys wins over /etc/a2a; a path matches whole segments only.
        if not self.mounts:
            return value
        targets = "|".join(re.escape(t) for t in sorted(self.mounts, key=len, reverse=True))
        return re.sub(rf"(?<![\w/.-])({targets})(?=/|,|$)", lambda m: self.mounts[m.group(1)], value)

    def binary(self) -> str:
        name = Path(self.argv[0]).name
        path = BIN_DIR / name
        assert path.exists(), f"{self.name}: no binary {path} for {self.argv[0]}"
        return str(path)


class Stack:
    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.running: list[tuple[str, subprocess.Popen]] = []

    def log(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
        log = open(self.log(name), "wb")
        base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
        proc = subprocess.Popen(argv, env={**base, **env}, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
        self.running.append((name, proc))
        return proc

    def start_proc(self, p: Proc) -> subprocess.Popen:
        return self.start(p.name, [p.binary(), *p.argv[1:]], p.env)

    def run_to_end(self, p: Proc, timeout: float = 60) -> None:
        proc = self.start_proc(p)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{p.name} did not finish in {timeout}s:\n{self.tail(p.name)}")
        assert code == 0, f"{p.name} exited {code}:\n{self.tail(p.name)}"

    def tail(self, name: str, lines: int = 40) -> str:
        try:
            return "\n".join(self.log(name).read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def wait_http(self, name: str, url: str, timeout: float = 45) -> None:
        """Until `url` answers 200 (the readiness probe), or fail with the process's log."""
        proc = dict(self.running)[name]
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"{name} exited {proc.returncode}:\n{self.tail(name)}")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except urllib.error.HTTPError as e:
                # 503 is "not ready yet"; 404 means the path is wrong and will not become right.
                if e.code == 404:
                    raise AssertionError(f"{name}: {url} does not exist (404):\n{self.tail(name)}")
                last = e
            except (urllib.error.URLError, OSError) as e:
                last = e
            time.sleep(0.2)
        raise AssertionError(f"{name}: {url} not ready in {timeout}s ({last}):\n{self.tail(name)}")

    def terminate(self, name: str, timeout: float = 15) -> int:
        """SIGTERM one process and wait for it (a graceful shutdown); its exit code."""
        proc = dict(self.running)[name]
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(f"{name} did not stop within {timeout}s of SIGTERM")

    def stop_all(self) -> None:
        for _, proc in self.running:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc in self.running:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def builtin_agents_supported() -> bool:
    """Whether this gateway knows the top-level `builtin_agents` key (its config is closed)."""
    return "builtin_agents" in (ROOT / "services/gateway/src/config/file.rs").read_text()


def gateway_toml_for_this_binary(text: str) -> str:
    """The config as written, less `builtin_agents` when the binary predates that key."""
    if builtin_agents_supported():
        return text
    print("note: this a2a-gateway has no `builtin_agents` key yet; the run drops that line")
    return re.sub(r"(?m)^builtin_agents\s*=.*\n", "", text)


def haproxy_for(cfg: str, lb_port: int, replicas: list[tuple[int, int]],
                listen_port: int, admin_port: int) -> str:
    """The committed haproxy config with only its addresses rewritten: the bind address, and
    the DNS server-template becomes one server line per local replica (public, admin port).
    Fails when the config's ports are not the gateway's."""
    m = re.search(r"^\s*server-template\s+(\S+)\s+\d+\s+(\S+):(\d+)(.*)$", cfg, re.M)
    assert m, "no server-template line in the haproxy config"
    assert int(m.group(3)) == listen_port, (
        f"haproxy sends to port {m.group(3)}, the gateway listens on {listen_port} (A2A_LISTEN)")
    d = re.search(r"^\s*default-server\s+(.*)$", cfg, re.M)
    checks = re.findall(r"\bcheck port (\d+)", cfg)
    assert checks == [str(admin_port)], (
        f"haproxy checks port(s) {checks}, the admin listener is on {admin_port} (A2A_ADMIN_LISTEN)")
    servers = "\n".join(f"    server {m.group(1)}{i + 1} 127.0.0.1:{public} check port {admin}{m.group(4)}"
                        for i, (public, admin) in enumerate(replicas))
    cfg = cfg.replace(m.group(0), servers)
    cfg = cfg.replace(d.group(0), "    default-server " + re.sub(
        r"\s*(check port \d+|resolvers \S+|init-addr \S+)", "", d.group(1)))
    cfg = re.sub(r"(?ms)^resolvers .*?(?=^\S)", "", cfg)
    cfg = re.sub(r"(?m)^(\s*bind\s+)\S*:\d+", rf"\g<1>127.0.0.1:{lb_port}", cfg)
    return cfg
