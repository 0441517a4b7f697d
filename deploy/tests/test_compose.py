"""docker-compose.yml: valid for docker-compose, and consistent with what the binaries read."""

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

import compose
import dockerfile
import envvars

ROOT = compose.ROOT


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    return compose.resolved({}, tmp_path_factory.mktemp("compose"))


def test_config_passes_and_has_the_services(cfg):
    assert set(cfg["services"]) == {"postgres", "redis", "migrate", "gateway", "lb", "worker",
                                    "prometheus", "grafana", "otel-collector", "jaeger"}


@pytest.mark.parametrize("var", sorted(compose.REQUIRED))
def test_required_secrets_are_refused_when_missing(var, tmp_path):
    env = {k: v for k, v in compose.REQUIRED.items() if k != var}
    code, _, err = compose.config(env, tmp_path)
    assert code != 0 and f"set {var} in .env" in err, err


def test_the_grafana_password_is_required_by_its_profile_only(tmp_path):
    # Read without it: the file resolves; Grafana's own start refuses an empty password.
    cfg = compose.resolved({}, tmp_path)
    grafana = cfg["services"]["grafana"]
    assert compose.env_of(grafana)["GF_SECURITY_ADMIN_PASSWORD"] == ""
    script = grafana["entrypoint"][-1]
    assert "GF_SECURITY_ADMIN_PASSWORD" in script and "exit 1" in script and "exec /run.sh" in script
    assert grafana["profiles"] == ["monitoring"]


def test_tracing_needs_no_env_edit(cfg):
    # The default endpoint is the tracing profile's collector, on the port it receives OTLP on.
    otel = yaml.safe_load((ROOT / "deploy/otel/collector.yaml").read_text())
    port = otel["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"].rsplit(":", 1)[1]
    for name in ("gateway", "worker"):
        assert compose.env_of(cfg["services"][name])["OTEL_EXPORTER_OTLP_ENDPOINT"] == f"http://otel-collector:{port}"


def test_env_example_names_every_required_variable():
    example = (ROOT / ".env.example").read_text()
    for var in {**compose.REQUIRED, **compose.PROFILE_REQUIRED}:
        assert re.search(rf"(?m)^{var}=", example), var
    used = set(re.findall(r"\$\{([A-Z0-9_]+)", (ROOT / "docker-compose.yml").read_text()))
    documented = set(re.findall(r"(?m)^#?\s*([A-Z0-9_]+)=", example))
    assert used <= documented | {"A2A_VERSION", "A2A_REVISION", "OTEL_TRACES_SAMPLER",
                                 "A2A_DATABASE_POOL_SIZE"}, used - documented


def test_our_services_get_only_variables_the_binaries_read(cfg):
    image_entry = dockerfile.runtime()["entrypoint"]
    for name in compose.OURS:
        svc = cfg["services"][name]
        binary = Path((svc.get("entrypoint") or image_entry)[0]).name.removeprefix("a2a-")
        assert binary in ("gateway", "worker"), binary
        assert not envvars.unknown(binary, compose.env_of(svc)), (name, envvars.unknown(binary, compose.env_of(svc)))


def test_shape_of_the_stack(cfg):
    s = cfg["services"]
    assert s["migrate"]["command"] == ["migrate"] and s["migrate"]["restart"] == "no"
    assert s["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("gateway", "worker"):
        assert s[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert s["gateway"]["deploy"]["replicas"] == 2
    assert "pg_isready" in " ".join(s["postgres"]["healthcheck"]["test"])
    assert "postgres-data" in " ".join(map(str, s["postgres"]["volumes"]))
    assert s["redis"]["command"][s["redis"]["command"].index("--appendonly") + 1] == "yes"
    assert "redis-cli" in " ".join(s["redis"]["healthcheck"]["test"])
    # Our services are checked by the binaries' own probe client (the image has no shell or curl),
    # and haproxy starts once a gateway is ready.
    assert s["gateway"]["healthcheck"]["test"] == ["CMD", "/usr/local/bin/a2a-gateway", "healthcheck"]
    assert s["worker"]["healthcheck"]["test"] == ["CMD", "/usr/local/bin/a2a-worker", "healthcheck"]
    assert s["lb"]["depends_on"]["gateway"]["condition"] == "service_healthy"
    # Dual-stack listeners, and the explicit opt-in to serve without [auth] (the file has none).
    for name, var in (("gateway", "A2A_LISTEN"), ("gateway", "A2A_ADMIN_LISTEN"), ("worker", "A2A_WORKER_LISTEN")):
        assert compose.env_of(s[name])[var].startswith("[::]:"), (name, var)
    assert compose.env_of(s["gateway"])["A2A_ALLOW_UNAUTHENTICATED"] == "true"
    assert "auth" not in tomllib.loads((ROOT / "deploy/compose/gateway.toml").read_text())
    assert set(s["prometheus"]["profiles"]) == {"monitoring"} == set(s["grafana"]["profiles"])
    assert set(s["otel-collector"]["profiles"]) == {"tracing"} == set(s["jaeger"]["profiles"])
    for name, svc in s.items():
        assert svc["deploy"]["resources"]["limits"]["memory"], name
        assert svc["logging"]["options"]["max-size"], name
        for port in svc.get("ports", []):
            published = port if isinstance(port, str) else f"{port.get('host_ip')}:{port['published']}"
            assert str(published).startswith("127.0.0.1:"), (name, port)
        image = svc.get("image", "")
        assert image and not image.endswith(":latest") and ":" in image, (name, image)


def test_mounted_files_exist_and_are_the_ones_named(cfg):
    for name, svc in cfg["services"].items():
        for target, src in compose.mounts(cfg, svc).items():
            if target.startswith("/run/secrets/"):
                continue
            assert Path(src).exists(), f"{name} mounts {src}, which does not exist"
    gw = cfg["services"]["gateway"]
    assert compose.env_of(gw)["A2A_CONFIG"] in compose.mounts(cfg, gw)
    keys = compose.env_of(gw)["A2A_PUSH_SIGNING_KEYS"].split("=", 1)[1]
    assert keys in compose.mounts(cfg, gw) and keys in compose.mounts(cfg, cfg["services"]["worker"])
    prom = compose.mounts(cfg, cfg["services"]["prometheus"])
    assert prom["/etc/prometheus/alerts.yml"].endswith("deploy/prometheus/alerts.yml")
    graf = compose.mounts(cfg, cfg["services"]["grafana"])
    assert graf["/var/lib/grafana/dashboards/a2a-gateway.json"].endswith("deploy/grafana/a2a-gateway.json")
    provider = yaml.safe_load((ROOT / "deploy/grafana/provisioning/dashboards/a2a-gateway.yml").read_text())
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"


def test_ports_and_paths_of_checks_and_scrapes_exist(cfg):
    gw = compose.env_of(cfg["services"]["gateway"])
    public = int(gw["A2A_LISTEN"].rsplit(":", 1)[1])
    admin = int(gw["A2A_ADMIN_LISTEN"].rsplit(":", 1)[1])
    worker = int(compose.env_of(cfg["services"]["worker"])["A2A_WORKER_LISTEN"].rsplit(":", 1)[1])
    haproxy = (ROOT / "deploy/haproxy/haproxy.cfg").read_text()
    assert re.search(rf"server-template \S+ \d+ gateway:{public}\b", haproxy)
    assert re.findall(r"check port (\d+)", haproxy) == [str(admin)]
    # /readyz is the gateway's readiness endpoint (docs/api.md, Endpoints); the run test waits on it.
    assert re.search(r"http-check send meth GET uri /readyz\b", haproxy)
    prom = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    jobs = {j["job_name"]: j["dns_sd_configs"][0] for j in prom["scrape_configs"]}
    assert jobs["a2a-gateway"] == {"names": ["gateway"], "type": "A", "port": admin}
    assert jobs["a2a-worker"] == {"names": ["worker"], "type": "A", "port": worker}
    lb_ports = cfg["services"]["lb"]["ports"]
    target = lb_ports[0]["target"] if isinstance(lb_ports[0], dict) else int(str(lb_ports[0]).split(":")[-1].split("/")[0])
    assert re.search(rf"(?m)^\s*bind :{target}\b", haproxy)
    otel = yaml.safe_load((ROOT / "deploy/otel/collector.yaml").read_text())
    assert otel["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"].endswith(":4317")


def test_the_test_agent_is_off():
    toml = tomllib.loads((ROOT / "deploy/compose/gateway.toml").read_text())
    assert toml["builtin_agents"] == ["echo"]


def test_stop_grace_exceeds_the_drain_bound(cfg):
    toml = tomllib.loads((ROOT / "deploy/compose/gateway.toml").read_text())
    drain = toml["limits"]["drain_timeout_secs"]
    grace = cfg["services"]["gateway"]["stop_grace_period"]
    assert int(grace.rstrip("s")) > drain, (grace, drain)


def test_haproxy_config_is_valid():
    done = subprocess.run(["haproxy", "-c", "-f", str(ROOT / "deploy/haproxy/haproxy.cfg")],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr


def test_prometheus_config_is_valid(tmp_path):
    assert shutil.which("promtool"), "promtool is not installed: run scripts/prometheus first"
    cfg = (ROOT / "deploy/prometheus/prometheus.yml").read_text().replace(
        "/etc/prometheus/alerts.yml", str(ROOT / "deploy/prometheus/alerts.yml"))
    (tmp_path / "prometheus.yml").write_text(cfg)
    done = subprocess.run(["promtool", "check", "config", str(tmp_path / "prometheus.yml")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
