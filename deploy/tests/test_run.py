"""Run what the deployment files describe: the migrate, gateway and worker commands, arguments,
environment and mounted configuration as written in docker-compose.yml and in the rendered
chart, started natively (run.py says what is rewritten: loopback addresses, free ports, host
paths), two gateway replicas behind the committed haproxy config, against real PostgreSQL and
Redis; then the smoke sequence (smoke.py) through the balancer. A wrong variable, port, path or
command in a deployment file makes this fail."""

import base64
import json
import os
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest

import chart
import compose
import dockerfile
import run
import smoke

DB_URL = os.environ.get("A2A_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("A2A_TEST_REDIS_URL", "redis://127.0.0.1:6379")


@pytest.fixture
def database():
    """A fresh database on the test server, dropped afterwards."""
    name = f"a2a_deploy_{uuid.uuid4().hex[:12]}"
    psql = lambda sql: subprocess.run(["psql", DB_URL, "-v", "ON_ERROR_STOP=1", "-qc", sql],
                                      check=True, capture_output=True, timeout=30)
    psql(f"CREATE DATABASE {name}")
    yield name
    psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def stack(tmp_path):
    s = run.Stack(tmp_path)
    yield s
    s.stop_all()


def signing_key(tmp: Path) -> Path:
    pem = subprocess.run([str(run.BIN_DIR / "a2a-worker"), "keygen"], check=True, capture_output=True,
                         text=True, timeout=30).stdout
    path = tmp / "push-signing-key.pem"
    path.write_text(pem)
    return path


def port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def start_balancer(stack: run.Stack, gateways: list[run.Proc], public: int, admin: int) -> int:
    """haproxy with the committed config (addresses rewritten), once it routes to both replicas."""
    lb_port = run.free_port()
    cfg = run.haproxy_for((run.ROOT / "deploy/haproxy/haproxy.cfg").read_text(), lb_port,
                          [(g.ports[public], g.ports[admin]) for g in gateways], public, admin)
    path = stack.workdir / "haproxy.cfg"
    path.write_text(cfg)
    check = subprocess.run(["haproxy", "-c", "-f", str(path)], capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr
    stack.start("haproxy", ["haproxy", "-db", "-f", str(path)], {})
    seen, deadline = set(), time.monotonic() + 30
    while len(seen) < len(gateways) and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{lb_port}/healthz", timeout=2) as r:
                seen.add(r.headers[smoke.REPLICA])
        except OSError:
            time.sleep(0.2)
    assert len(seen) == len(gateways), f"haproxy routes to {seen} only:\n{stack.tail('haproxy')}"
    return lb_port


def check_metrics(gateways: list[run.Proc], admin: int, worker: run.Proc, worker_port: int):
    for g in gateways:
        text = urllib.request.urlopen(f"http://127.0.0.1:{g.ports[admin]}/metrics", timeout=5).read().decode()
        assert "a2a_requests_total" in text, g.name
    text = urllib.request.urlopen(f"http://127.0.0.1:{worker.ports[worker_port]}/metrics", timeout=5).read().decode()
    assert 'a2a_worker_deliveries_total{outcome="delivered"}' in text


def stop_gracefully(stack: run.Stack, lb: int, gateways: list[run.Proc], worker: run.Proc):
    """SIGTERM one replica: it exits 0, and the balancer keeps serving from the other one at
    once (haproxy redispatches what the stopped one refuses). Then the rest, each exiting 0."""
    first, *rest = gateways
    assert stack.terminate(first.name, timeout=40) == 0, f"{first.name}:\n{stack.tail(first.name)}"
    for _ in range(6):
        result, replica = smoke.jsonrpc(lb, "SendMessage", {"message": smoke.message("after a replica stopped")})
        assert result["task"]["status"]["state"] == "TASK_STATE_COMPLETED" and replica != "gw1", replica
    for p in rest + [worker]:
        assert stack.terminate(p.name, timeout=40) == 0, f"{p.name} did not exit 0 after SIGTERM:\n{stack.tail(p.name)}"


def healthcheck(service: dict, p: run.Proc) -> int:
    """Runs a compose service's `healthcheck: test: ["CMD", ...]` with the process's environment."""
    test = service["healthcheck"]["test"]
    assert test[0] == "CMD", test
    argv = [str(run.BIN_DIR / Path(test[1]).name), *test[2:]]
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    return subprocess.run(argv, env={**base, **p.env}, capture_output=True, timeout=30).returncode


def test_compose_stack_runs(tmp_path, database, stack):
    redis_password = uuid.uuid4().hex
    key = signing_key(tmp_path)
    cfg = compose.resolved({
        # The test server trusts local connections: the password is not checked there.
        "POSTGRES_USER": "postgres", "POSTGRES_DB": database,
        "REDIS_PASSWORD": redis_password, "A2A_PUSH_SIGNING_KEY_FILE": str(key),
        # The smoke's webhook is on loopback, an internal address: allowed as .env.example says.
        "A2A_PUSH_ALLOWED_HOSTS": "127.0.0.1",
    }, tmp_path)
    services = cfg["services"]

    # Redis as the file runs it (AOF, password), on a free loopback port and a private data dir.
    redis_port = run.free_port()
    (tmp_path / "redis").mkdir()
    redis_argv = [a.replace("/data", str(tmp_path / "redis")) for a in services["redis"]["command"]]
    stack.start("redis", redis_argv + ["--port", str(redis_port), "--bind", "127.0.0.1"], {})
    for _ in range(100):
        pong = subprocess.run(["redis-cli", "-p", str(redis_port), "-a", redis_password, "--no-auth-warning", "ping"],
                              capture_output=True, text=True)
        if pong.stdout.strip() == "PONG":
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"redis did not start:\n{stack.tail('redis')}")

    pg = urllib.parse.urlparse(DB_URL)
    hosts = {"postgres:5432": f"{pg.hostname}:{pg.port or 5432}", "redis:6379": f"127.0.0.1:{redis_port}"}
    image = dockerfile.runtime()

    def proc(name: str, service: str) -> run.Proc:
        svc = services[service]
        mounts = compose.mounts(cfg, svc)
        config = mounts.get("/etc/a2a/gateway.toml")
        if config:  # the binary may predate builtin_agents (run.gateway_toml_for_this_binary)
            local = tmp_path / f"{name}.toml"
            local.write_text(run.gateway_toml_for_this_binary(Path(config).read_text()))
            mounts["/etc/a2a/gateway.toml"] = str(local)
        p = run.Proc(name, (svc.get("entrypoint") or image["entrypoint"]) + (svc.get("command") or image["cmd"]),
                     {**image["env"], **compose.env_of(svc)}, mounts)
        p.localize(hosts)
        return p

    stack.run_to_end(proc("migrate", "migrate"))
    gw_env = compose.env_of(services["gateway"])
    public, admin = port_of(gw_env["A2A_LISTEN"]), port_of(gw_env["A2A_ADMIN_LISTEN"])
    gateways = [proc(f"gateway-{i + 1}", "gateway") for i in range(services["gateway"]["deploy"]["replicas"])]
    assert len(gateways) == 2
    for g in gateways:
        stack.start_proc(g)
    # Readiness as the balancer checks it: haproxy's check path on its check port.
    haproxy_cfg = (run.ROOT / "deploy/haproxy/haproxy.cfg").read_text()
    path = __import__("re").search(r"uri (\S+)", haproxy_cfg).group(1)
    for g in gateways:
        assert admin in g.ports, f"haproxy checks port {admin}, which {g.name} does not listen on"
        stack.wait_http(g.name, f"http://127.0.0.1:{g.ports[admin]}{path}")
    worker = proc("worker", "worker")
    stack.start_proc(worker)
    worker_port = port_of(compose.env_of(services["worker"])["A2A_WORKER_LISTEN"])
    stack.wait_http("worker", f"http://127.0.0.1:{worker.ports[worker_port]}/readyz")
    # The compose healthchecks, run as docker would: the test command in the container's env.
    for p, service in [(g, "gateway") for g in gateways] + [(worker, "worker")]:
        assert healthcheck(services[service], p) == 0, f"{p.name}: the compose healthcheck fails"

    lb = start_balancer(stack, gateways, public, admin)
    seen = smoke.sequence(lb, kid="push")
    print("compose smoke:", seen)
    check_metrics(gateways, admin, worker, worker_port)
    stop_gracefully(stack, lb, gateways, worker)


def secret_data(docs: list[dict]) -> dict[str, dict[str, str]]:
    out = {}
    for s in chart.by_kind(docs, "Secret"):
        data = dict(s.get("stringData") or {})
        data.update({k: base64.b64decode(v).decode() for k, v in (s.get("data") or {}).items()})
        out[s["metadata"]["name"]] = data
    return out


def chart_values(name: str, database: str, prefix: str) -> dict:
    """A ci values file pointed at the test servers (by the in-cluster names `localize` maps)."""
    values = chart.values_file(chart.CHART / f"ci/{name}-values.yaml")
    values["database"]["url"] = f"postgres://postgres@postgres.databases.svc:5432/{database}"
    values["redis"]["url"] = "redis://redis.databases.svc:6379"
    values["redis"]["prefix"] = prefix
    values["push"]["allowedHosts"] = ["127.0.0.1"]
    return values


def chart_procs(docs: list[dict], tmp_path: Path):
    """`procs(workload, name) -> (Proc, container)` for the workloads of a rendered chart."""
    secrets = secret_data(docs)
    configmaps = {c["metadata"]["name"]: c["data"] for c in chart.by_kind(docs, "ConfigMap")}
    pg = urllib.parse.urlparse(DB_URL)
    rd = urllib.parse.urlparse(REDIS_URL)
    hosts = {"postgres.databases.svc:5432": f"{pg.hostname}:{pg.port or 5432}",
             "redis.databases.svc:6379": f"{rd.hostname}:{rd.port or 6379}"}
    image = dockerfile.runtime()
    binaries = set(dockerfile.binary_paths().values())

    def procs(workload: dict, name: str) -> tuple[run.Proc, dict]:
        pod = workload["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        assert c["command"][0] in binaries, f"{c['command'][0]} is not a binary the image holds"
        env = dict(image["env"])
        for e in c["env"]:
            if "value" in e:
                env[e["name"]] = e["value"]
            else:
                ref = e["valueFrom"]["secretKeyRef"]
                assert ref["name"] in secrets, f"{name}: Secret {ref['name']} is not rendered"
                env[e["name"]] = secrets[ref["name"]][ref["key"]]
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        mounts = {}
        for m in c.get("volumeMounts", []):
            v = volumes[m["name"]]
            d = tmp_path / name / m["name"]
            d.mkdir(parents=True)
            if "configMap" in v:
                files = configmaps[v["configMap"]["name"]]
            elif "secret" in v:
                files = secrets[v["secret"]["secretName"]]
            else:
                files = {}
            for fname, text in files.items():
                if fname.endswith(".toml"):
                    text = run.gateway_toml_for_this_binary(text)
                (d / fname).write_text(text)
            mounts[m["mountPath"]] = str(d)
        p = run.Proc(name, c["command"] + c.get("args", []), env, mounts)
        p.localize(hosts)
        return p, c

    return procs


def clean_redis(prefix: str) -> None:
    keys = subprocess.run(["redis-cli", "-u", REDIS_URL, "--scan", "--pattern", f"{prefix}*"],
                          capture_output=True, text=True, timeout=30).stdout.split()
    if keys:
        subprocess.run(["redis-cli", "-u", REDIS_URL, "DEL", *keys], capture_output=True, timeout=30)


def probe_url(p: run.Proc, container: dict, probe: str) -> str:
    get = container[probe]["httpGet"]
    ports = {x["name"]: x["containerPort"] for x in container["ports"]}
    port = ports[get["port"]] if isinstance(get["port"], str) else get["port"]
    assert port in p.ports, f"{p.name}: the {probe}'s port {port} is not one it listens on {p.ports}"
    return f"http://127.0.0.1:{p.ports[port]}{get['path']}"


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_chart_runs(tmp_path, database, stack):
    prefix = f"a2a-deploy-{uuid.uuid4().hex[:8]}:"
    values = chart_values("default", database, prefix)
    docs = chart.manifests(chart.render(values))
    procs = chart_procs(docs, tmp_path)

    job = chart.one(docs, "Job", "-migrate")
    stack.run_to_end(procs(job, "migrate")[0])

    deployment = chart.one(docs, "Deployment", "-a2a-gateway")
    gateways = []
    for i in range(deployment["spec"]["replicas"]):
        g, container = procs(deployment, f"gateway-{i + 1}")
        stack.start_proc(g)
        gateways.append(g)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    public, admin = ports["http"], ports["admin"]
    probe = container["readinessProbe"]["httpGet"]
    for g in gateways:
        port = ports[probe["port"]] if isinstance(probe["port"], str) else probe["port"]
        assert port in g.ports, f"the readiness probe's port {port} is not one the gateway listens on {g.ports}"
        stack.wait_http(g.name, f"http://127.0.0.1:{g.ports[port]}{probe['path']}")
    worker, wc = procs(chart.one(docs, "Deployment", "-worker"), "worker")
    stack.start_proc(worker)
    wprobe = wc["readinessProbe"]["httpGet"]
    wport = {p["name"]: p["containerPort"] for p in wc["ports"]}[wprobe["port"]]
    assert wport in worker.ports, f"the worker's probe port {wport} is not one it listens on {worker.ports}"
    stack.wait_http("worker", f"http://127.0.0.1:{worker.ports[wport]}{wprobe['path']}")

    lb = start_balancer(stack, gateways, public, admin)
    try:
        seen = smoke.sequence(lb, kid=values["push"]["signingKeys"]["kids"][0])
        print("chart smoke:", seen)
        check_metrics(gateways, admin, worker, wport)
        stop_gracefully(stack, lb, gateways, worker)
    finally:
        clean_redis(prefix)


def test_chart_nested_configuration_starts(tmp_path, database, stack):
    """ci/nested-config-values.yaml holds every documented nested value (limits tables,
    config.settings with [auth]): the gateway and the worker start on the rendered files and
    get ready, and the gateway serves what the file says (a config error fails the start)."""
    prefix = f"a2a-deploy-{uuid.uuid4().hex[:8]}:"
    values = chart_values("nested-config", database, prefix)
    docs = chart.manifests(chart.render(values))
    procs = chart_procs(docs, tmp_path)
    try:
        stack.run_to_end(procs(chart.one(docs, "Job", "-migrate"), "migrate")[0])
        gw, c = procs(chart.one(docs, "Deployment", "-a2a-gateway"), "gateway")
        # [auth] is configured: the opt-in is not set.
        assert "A2A_ALLOW_UNAUTHENTICATED" not in gw.env
        stack.start_proc(gw)
        stack.wait_http("gateway", probe_url(gw, c, "readinessProbe"))
        public = {x["name"]: x["containerPort"] for x in c["ports"]}["http"]
        status, body = get(f"http://127.0.0.1:{gw.ports[public]}/.well-known/agent-card.json")
        card = json.loads(body)
        assert status == 200 and card["name"] == values["config"]["settings"]["card"]["name"], card
        assert "key" in card.get("securitySchemes", {}), card
        worker, wc = procs(chart.one(docs, "Deployment", "-worker"), "worker")
        stack.start_proc(worker)
        stack.wait_http("worker", probe_url(worker, wc, "readinessProbe"))
        for name in ("gateway", "worker"):
            assert stack.terminate(name, timeout=40) == 0, stack.tail(name)
    finally:
        clean_redis(prefix)


def test_schema_gate_and_healthcheck(tmp_path, database, stack):
    """Pods started before the migration (helm template | kubectl apply, migrations.enabled=false)
    stay unready, saying why, until the schema is the binary's; the image's probe client
    (`healthcheck`) follows the same readiness."""
    prefix = f"a2a-deploy-{uuid.uuid4().hex[:8]}:"
    docs = chart.manifests(chart.render(chart_values("default", database, prefix)))
    procs = chart_procs(docs, tmp_path)

    def healthcheck(p: run.Proc, binary: str, *args: str) -> int:
        base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
        return subprocess.run([str(run.BIN_DIR / binary), "healthcheck", *args], env={**base, **p.env},
                              capture_output=True, timeout=30).returncode

    try:
        gw, c = procs(chart.one(docs, "Deployment", "-a2a-gateway"), "gateway")
        stack.start_proc(gw)
        live, ready = probe_url(gw, c, "livenessProbe"), probe_url(gw, c, "readinessProbe")
        stack.wait_http("gateway", live)
        worker, wc = procs(chart.one(docs, "Deployment", "-worker"), "worker")
        stack.start_proc(worker)
        wlive, wready = probe_url(worker, wc, "livenessProbe"), probe_url(worker, wc, "readinessProbe")
        stack.wait_http("worker", wlive)
        assert get(ready) == (503, "database schema mismatch")
        assert get(wready)[0] == 503
        assert healthcheck(gw, "a2a-gateway") == 1 and healthcheck(gw, "a2a-gateway", "--live") == 0
        assert healthcheck(worker, "a2a-worker") == 1 and healthcheck(worker, "a2a-worker", "--live") == 0
        deadline = time.monotonic() + 10
        while "does not match this binary's migrations" not in stack.log("gateway").read_text():
            assert time.monotonic() < deadline, stack.tail("gateway")
            time.sleep(0.2)
        assert "run `a2a-gateway migrate`" in stack.log("gateway").read_text()

        stack.run_to_end(procs(chart.one(docs, "Job", "-migrate"), "migrate")[0])
        stack.wait_http("gateway", ready, timeout=15)
        stack.wait_http("worker", wready, timeout=20)
        assert healthcheck(gw, "a2a-gateway") == 0 and healthcheck(worker, "a2a-worker") == 0
        for name in ("gateway", "worker"):
            assert stack.terminate(name, timeout=40) == 0, stack.tail(name)
    finally:
        clean_redis(prefix)
