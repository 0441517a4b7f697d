"""The Helm chart, rendered by Helm's library and checked against the Kubernetes schemas.

Golden files (deploy/tests/golden/) hold each values file's rendered output so that template
changes are reviewed; `A2A_DEPLOY_REGEN=1 scripts/deploy-test` rewrites them and the chart
README's values table.
"""

import json
import re
from pathlib import Path

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

import chart
import envvars
import limits
import values_doc

TESTS = Path(__file__).resolve().parent
CI_VALUES = sorted((chart.CHART / "ci").glob("*-values.yaml"))
BAD_VALUES = sorted((TESTS / "bad-values").glob("*.yaml"))

# Kinds of CRDs (Prometheus Operator, Gateway API): kubernetes-validate has no schema for them,
# so their shape is checked here: the fields the operator/controller needs.
CRD_API = {
    "ServiceMonitor": "monitoring.coreos.com/v1",
    "PrometheusRule": "monitoring.coreos.com/v1",
    "HTTPRoute": "gateway.networking.k8s.io/v1",
    "GRPCRoute": "gateway.networking.k8s.io/v1",
    "Certificate": "cert-manager.io/v1",
}


def test_there_are_values_files():
    names = {p.name for p in CI_VALUES}
    assert {"default-values.yaml", "existing-secrets-values.yaml", "ha-values.yaml",
            "ingress-values.yaml", "nested-config-values.yaml"} <= names, names
    assert len(BAD_VALUES) >= 5


@pytest.mark.parametrize("values_path", CI_VALUES, ids=lambda p: p.stem)
def test_lint(values_path):
    report = helm.lint(str(chart.CHART), chart.values_file(values_path), strict=True,
                       namespace=chart.NAMESPACE, kube_version=f"v{chart.KUBE_VERSION}")
    # Severity 1 is information (e.g. "icon is recommended"); warnings and errors fail.
    problems = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
    assert not problems, problems


@pytest.mark.parametrize("values_path", CI_VALUES, ids=lambda p: p.stem)
def test_render_validates_against_kubernetes_schemas(values_path):
    docs = chart.manifests(chart.render(chart.values_file(values_path)))
    assert docs
    for doc in docs:
        kind = doc["kind"]
        if kind in CRD_API:
            assert doc["apiVersion"] == CRD_API[kind], doc["apiVersion"]
            assert doc["metadata"]["name"] and doc["spec"]
            check_crd(doc)
            continue
        kubernetes_validate.validate(doc, chart.KUBE_VERSION, strict=True)


def check_crd(doc):
    spec = doc["spec"]
    if doc["kind"] == "Certificate":
        assert spec["secretName"] and spec["issuerRef"]["name"] and spec["dnsNames"]
    elif doc["kind"] == "ServiceMonitor":
        assert spec["selector"]["matchLabels"] and spec["endpoints"][0]["port"]
        assert spec["jobLabel"]
    elif doc["kind"] == "PrometheusRule":
        assert spec["groups"] and all(r.get("alert") and r.get("expr") for g in spec["groups"] for r in g["rules"])
    else:
        assert spec["parentRefs"] and spec["rules"]
        for rule in spec["rules"]:
            assert rule["backendRefs"][0]["port"]


@pytest.mark.parametrize("values_path", CI_VALUES, ids=lambda p: p.stem)
def test_golden(values_path):
    rendered = chart.render(chart.values_file(values_path))
    text = "".join(f"# Source: {path}\n{rendered[path].strip()}\n---\n" for path in sorted(rendered)
                   if rendered[path].strip())
    golden = TESTS / "golden" / f"{values_path.stem}.yaml"
    if chart.regen():
        golden.write_text(text)
    assert golden.exists(), f"no golden file {golden}: run with A2A_DEPLOY_REGEN=1"
    assert text == golden.read_text(), (
        f"the chart renders {values_path.name} differently from {golden.name}; review the diff "
        "and rerun with A2A_DEPLOY_REGEN=1 if it is intended")


@pytest.mark.parametrize("values_path", CI_VALUES, ids=lambda p: p.stem)
def test_workloads_follow_the_contracts(values_path):
    values = chart.values_file(values_path)
    docs = chart.manifests(chart.render(values))
    merged = helm.Chart.load(str(chart.CHART)).merge_values(values)
    drain = merged["config"]["limits"].get("drain_timeout_secs", 25)
    for workload in chart.by_kind(docs, "Deployment") + chart.by_kind(docs, "Job"):
        pod = workload["spec"]["template"]["spec"]
        binary = "worker" if workload["metadata"]["name"].endswith("-worker") else "gateway"
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        for c in pod["containers"]:
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"]
            assert sc["capabilities"]["drop"] == ["ALL"]
            assert c["command"] == [f"/usr/local/bin/a2a-{binary}"], c["command"]
            names = [e["name"] for e in c["env"]]
            assert len(names) == len(set(names)), f"duplicate env in {c['name']}: {names}"
            assert not envvars.unknown(binary, names), envvars.unknown(binary, names)
            assert c["resources"]["limits"]["memory"]
            ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                if workload["kind"] == "Job":
                    continue
                get = c[probe]["httpGet"]
                assert get["port"] in ports, f"{probe} names port {get['port']}, not declared"
                listen_var = "A2A_WORKER_LISTEN" if binary == "worker" else "A2A_ADMIN_LISTEN"
                listen = next(e["value"] for e in c["env"] if e["name"] == listen_var)
                assert listen.endswith(f":{ports[get['port']]}"), (probe, listen, ports)
        if workload["kind"] == "Deployment" and binary == "gateway":
            pre = pod["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"]
            assert pod["terminationGracePeriodSeconds"] > pre + drain
            assert pod["topologySpreadConstraints"]
            assert pod["containers"][0]["readinessProbe"]["httpGet"]["path"] == "/readyz"
            assert pod["containers"][0]["livenessProbe"]["httpGet"]["path"] == "/healthz"
        if workload["kind"] == "Deployment":
            # Readiness is /readyz on both (the schema gate; the worker also its consumer group).
            assert pod["containers"][0]["readinessProbe"]["httpGet"]["path"] == "/readyz"
            # Dual-stack: every listener on [::] (IPv4 too unless the node sets bindv6only).
            for e in pod["containers"][0]["env"]:
                if e["name"].endswith("LISTEN"):
                    assert e["value"].startswith("[::]:"), e
    job = chart.one(docs, "Job", "-migrate")
    hooks = job["metadata"]["annotations"]
    assert hooks["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert "before-hook-creation" in hooks["helm.sh/hook-delete-policy"]
    assert job["spec"]["backoffLimit"] >= 1 and job["spec"]["activeDeadlineSeconds"] > 0
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["migrate"]
    # The public Service has the public port only; the admin port is on a ClusterIP Service of
    # its own, the one the ServiceMonitor selects.
    svc = chart.one(docs, "Service", chart.RELEASE + "-a2a-gateway")
    assert {p["name"]: p.get("appProtocol") for p in svc["spec"]["ports"]} == {"http": "kubernetes.io/h2c"}
    admin = chart.one(docs, "Service", "-a2a-gateway-admin")
    assert admin["spec"]["type"] == "ClusterIP"
    assert {p["name"]: p.get("appProtocol") for p in admin["spec"]["ports"]} == {"admin": "http"}
    for pdb in chart.by_kind(docs, "PodDisruptionBudget"):
        assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    if chart.by_kind(docs, "HorizontalPodAutoscaler"):
        assert chart.one(docs, "HorizontalPodAutoscaler")["spec"]["minReplicas"] >= 2
        assert "replicas" not in chart.one(docs, "Deployment", "-a2a-gateway")["spec"]
    assert chart.one(docs, "PodDisruptionBudget", "-a2a-gateway")


def test_the_test_agent_is_off_by_default():
    values = chart.values_file(chart.CHART / "values.yaml")
    assert values["config"]["builtinAgents"] == ["echo"]
    docs = chart.manifests(chart.render(chart.values_file(chart.CHART / "ci/default-values.yaml")))
    toml = chart.one(docs, "ConfigMap")["data"]["gateway.toml"]
    assert 'builtin_agents = ["echo"]' in toml.splitlines()


def test_config_change_rolls_the_pods():
    values = chart.values_file(chart.CHART / "ci/default-values.yaml")
    def checksum(v):
        dep = chart.one(chart.manifests(chart.render(v)), "Deployment", "-a2a-gateway")
        return dep["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
    changed = {**values, "config": {"limits": {"drain_timeout_secs": 30}}}
    assert checksum(values) != checksum(changed)


def test_upgrade_renders_the_migration_hook_too():
    values = chart.values_file(chart.CHART / "ci/default-values.yaml")
    docs = chart.manifests(chart.render(values, is_upgrade=True))
    assert chart.one(docs, "Job", "-migrate")


def test_ha_values_have_monitoring_and_policies():
    docs = chart.manifests(chart.render(chart.values_file(chart.CHART / "ci/ha-values.yaml")))
    monitors = chart.by_kind(docs, "ServiceMonitor")
    assert len(monitors) == 2
    # The alert rules and the dashboard expect jobs a2a-gateway and a2a-worker: the Services
    # the ServiceMonitors select (the admin one, not the public one) carry them in the label the
    # ServiceMonitors name as jobLabel.
    services = chart.by_kind(docs, "Service")
    for m in monitors:
        selected = [s for s in services
                    if m["spec"]["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()]
        assert len(selected) == 1, [s["metadata"]["name"] for s in selected]
        port = m["spec"]["endpoints"][0]["port"]
        assert port in {p["name"] for p in selected[0]["spec"]["ports"]}
    jobs = {s["metadata"]["labels"].get(monitors[0]["spec"]["jobLabel"]) for s in services} - {None}
    assert jobs == {"a2a-gateway", "a2a-worker"}
    # The rules are the repository's, scoped to the release: every selector names the release's
    # namespace and job; the overrides and rule labels of the values are applied.
    rule = chart.one(docs, "PrometheusRule")
    alerts = yaml.safe_load((chart.ROOT / "deploy/prometheus/alerts.yml").read_text())
    rendered = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert set(rendered) == {r["alert"] for g in alerts["groups"] for r in g["rules"]}
    for g in alerts["groups"]:
        for r in g["rules"]:
            expr = rendered[r["alert"]]["expr"]
            assert expr.count(f'namespace="{chart.NAMESPACE}"') == r["expr"].count("job=") > 0, expr
            assert rendered[r["alert"]]["labels"]["team"] == "agents"
            assert rendered[r["alert"]]["labels"]["severity"] in ("critical", "warning")
    assert rendered["A2ALatencyP99High"]["for"] == "15m"
    dashboard = chart.one(docs, "ConfigMap", "-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["a2a-gateway.json"]) == json.loads(
        (chart.ROOT / "deploy/grafana/a2a-gateway.json").read_text())
    assert len(chart.by_kind(docs, "PodDisruptionBudget")) == 2
    assert len(chart.by_kind(docs, "NetworkPolicy")) == 2
    assert chart.one(docs, "HorizontalPodAutoscaler")


def test_ingress_values_have_routes():
    docs = chart.manifests(chart.render(chart.values_file(chart.CHART / "ci/ingress-values.yaml")))
    assert chart.one(docs, "Ingress")
    grpc = chart.one(docs, "GRPCRoute")
    services = {m["method"]["service"] for r in grpc["spec"]["rules"] for m in r["matches"]}
    assert "lf.a2a.v1.A2AService" in services
    assert chart.one(docs, "HTTPRoute")


def test_chart_alert_rules_are_the_repository_ones():
    assert (chart.CHART / "files/alerts.yml").read_text() == (
        chart.ROOT / "deploy/prometheus/alerts.yml").read_text(), (
        "helm/a2a-gateway/files/alerts.yml must be a copy of deploy/prometheus/alerts.yml")
    assert (chart.CHART / "files/a2a-gateway.json").read_text() == (
        chart.ROOT / "deploy/grafana/a2a-gateway.json").read_text(), (
        "helm/a2a-gateway/files/a2a-gateway.json must be a copy of deploy/grafana/a2a-gateway.json")


def test_alerts_keep_releases_apart_and_have_absent_companions():
    alerts = yaml.safe_load((chart.ROOT / "deploy/prometheus/alerts.yml").read_text())
    rules = [r for g in alerts["groups"] for r in g["rules"]]
    names = {r["alert"] for r in rules}
    for r in rules:
        assert r["labels"]["severity"] in ("critical", "warning"), r["alert"]
        for by in re.findall(r"by \(([^)]*)\)", r["expr"]):
            assert {"namespace", "job"} <= {x.strip() for x in by.split(",")}, (r["alert"], by)
        # Every metric selector names its job (the chart pins it to the release).
        for m in re.finditer(r"\b(a2a_[a-z_]+|up)(\{[^}]*\})?", r["expr"]):
            assert m.group(2) and "job=" in m.group(2), (r["alert"], m.group(0))
        for cited in re.findall(r"\b(A2A[A-Za-z]+)\b", r["annotations"].get("runbook", "")):
            assert cited in names, f"{r['alert']}'s runbook cites {cited}, which is no rule"
    absent = [r["expr"] for r in rules if r["expr"].startswith("absent(")]
    assert any('job="a2a-gateway"' in e for e in absent) and any('job="a2a-worker"' in e for e in absent)


def test_schema_extra_env_is_the_closed_list():
    path = chart.CHART / "values.schema.json"
    schema = json.loads(path.read_text())
    for binary in ("gateway", "worker"):
        name = schema["properties"][binary]["properties"]["extraEnv"]["items"]["properties"]["name"]
        own = name["anyOf"][0]
        if chart.regen():
            own["enum"] = sorted(envvars.known(binary))
            path.write_text(json.dumps(schema, indent=2) + "\n")
        assert set(own["enum"]) == envvars.known(binary), (
            f"{binary}.extraEnv in values.schema.json is not the binary's ENV_VARS: rerun with A2A_DEPLOY_REGEN=1")
        # Any other name is allowed (proxies, CA bundles), but not an unknown A2A_/OTEL_ one.
        assert name["anyOf"][1] == {"not": {"pattern": "^(A2A_|OTEL_)"}}


def test_schema_limits_are_the_gateway_ones():
    path = chart.CHART / "values.schema.json"
    schema = json.loads(path.read_text())
    cfg = schema["properties"]["config"]["properties"]
    if chart.regen():
        cfg["limits"] = limits.schema()
        path.write_text(json.dumps(schema, indent=2) + "\n")
    assert cfg["limits"] == limits.schema(), (
        "config.limits in values.schema.json is not services/gateway/src/config/file.rs's Limits: "
        "rerun with A2A_DEPLOY_REGEN=1")


def test_nested_limits_render_as_toml():
    import tomllib
    docs = chart.manifests(chart.render(chart.values_file(chart.CHART / "ci/nested-config-values.yaml")))
    toml = tomllib.loads(chart.one(docs, "ConfigMap")["data"]["gateway.toml"])
    values = chart.values_file(chart.CHART / "ci/nested-config-values.yaml")["config"]
    assert toml["limits"] == values["limits"]
    for table, content in values["settings"].items():
        assert toml[table] == content, table


def test_extra_env_takes_standard_variables_and_escape_hatches():
    docs = chart.manifests(chart.render(chart.values_file(chart.CHART / "ci/ha-values.yaml")))
    gw = chart.one(docs, "Deployment", "-a2a-gateway")
    pod = gw["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    env = {e["name"]: e for e in c["env"]}
    assert {"HTTPS_PROXY", "NO_PROXY", "SSL_CERT_FILE"} <= set(env)
    assert c["envFrom"] == [{"secretRef": {"name": "a2a-upstream-credentials"}}]
    assert pod["priorityClassName"] == "high-priority"
    assert c["image"].startswith("registry.example.com/platform/a2a-gateway@sha256:")
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    # TLS from the cert-manager Certificate's Secret, client certificates from their CA bundle.
    cert = chart.one(docs, "Certificate")
    assert volumes["tls"]["secret"]["secretName"] == cert["spec"]["secretName"]
    assert env["A2A_TLS_CERT"]["value"] == mounts["tls"] + "/tls.crt"
    assert env["A2A_TLS_KEY"]["value"] == mounts["tls"] + "/tls.key"
    assert env["A2A_TLS_CLIENT_CA"]["value"] == mounts["client-ca"] + "/ca.crt"
    assert volumes["client-ca"]["secret"]["secretName"] == "a2a-client-ca"
    assert mounts["corporate-ca"] == "/etc/a2a/corporate-ca"
    job = chart.one(docs, "Job", "-migrate")["spec"]["template"]["spec"]
    assert job["serviceAccountName"] == "a2a-migrations" and job["tolerations"] and job["nodeSelector"]


def test_load_balancer_exposes_the_public_port_only():
    values = chart.values_file(chart.CHART / "ci/default-values.yaml")
    values["gateway"] = {"service": {"type": "LoadBalancer", "loadBalancerSourceRanges": ["203.0.113.0/24"]}}
    docs = chart.manifests(chart.render(values))
    exposed = [(s["metadata"]["name"], p["port"]) for s in chart.by_kind(docs, "Service")
               if s["spec"]["type"] != "ClusterIP" for p in s["spec"]["ports"]]
    assert exposed == [(chart.RELEASE + "-a2a-gateway", 8080)], exposed


def test_the_auth_opt_in_is_rendered_and_an_undecided_install_refused():
    values = chart.values_file(chart.CHART / "ci/default-values.yaml")
    docs = chart.manifests(chart.render(values))
    env = {e["name"]: e.get("value") for e in chart.one(docs, "Deployment", "-a2a-gateway")[
        "spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["A2A_ALLOW_UNAUTHENTICATED"] == "true"
    values["auth"] = {"allowUnauthenticated": False}
    with pytest.raises(helm.HelmError) as refused:
        chart.render(values)
    assert "configure [auth]" in str(refused.value) and "auth.allowUnauthenticated=true" in str(refused.value)
    # With [auth] the opt-in is not needed, and not set.
    docs = chart.manifests(chart.render(chart.values_file(chart.CHART / "ci/ha-values.yaml")))
    env = {e["name"] for e in chart.one(docs, "Deployment", "-a2a-gateway")["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert "A2A_ALLOW_UNAUTHENTICATED" not in env


def test_the_umbrella_condition_is_accepted():
    values = chart.values_file(chart.CHART / "ci/default-values.yaml")
    assert chart.manifests(chart.render({**values, "enabled": True}))


def test_http_route_has_no_timeout_by_default():
    docs = chart.manifests(chart.render(chart.values_file(chart.CHART / "ci/ingress-values.yaml")))
    route = chart.one(docs, "HTTPRoute")
    assert route["spec"]["rules"][0]["timeouts"] == {"request": "0s"}


@pytest.mark.parametrize("bad", BAD_VALUES, ids=lambda p: p.stem)
def test_bad_values_are_refused(bad):
    # Each file's first line: `# expect: <regular expression the error must match>`.
    first = bad.read_text().splitlines()[0]
    assert first.startswith("# expect: "), bad
    expected = first.removeprefix("# expect: ")
    base = chart.values_file(chart.CHART / "ci/default-values.yaml")
    values = deep_merge(base, chart.values_file(bad))
    with pytest.raises(helm.HelmError) as refused:
        chart.render(values)
    assert re.search(expected, str(refused.value)), str(refused.value)


def deep_merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def test_values_reference_in_readme():
    values_yaml = chart.CHART / "values.yaml"
    assert not values_doc.undocumented(values_yaml), (
        "keys without a `# --` comment in values.yaml: " + ", ".join(values_doc.undocumented(values_yaml)))
    readme = chart.CHART / "README.md"
    expected = values_doc.with_table(readme.read_text(), values_yaml)
    if chart.regen():
        readme.write_text(expected)
    assert readme.read_text() == expected, (
        "the values table in helm/a2a-gateway/README.md is not the one values.yaml's comments "
        "give: rerun with A2A_DEPLOY_REGEN=1")


def test_rendered_prometheus_rule_passes_promtool(tmp_path):
    import shutil
    import subprocess
    assert shutil.which("promtool"), "promtool is not installed: run scripts/prometheus first"
    docs = chart.manifests(chart.render(chart.values_file(chart.CHART / "ci/ha-values.yaml")))
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump(chart.one(docs, "PrometheusRule")["spec"]))
    done = subprocess.run(["promtool", "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 12 rules found" in done.stdout, done.stdout
