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
}


def test_there_are_values_files():
    names = {p.name for p in CI_VALUES}
    assert {"default-values.yaml", "existing-secrets-values.yaml", "ha-values.yaml",
            "ingress-values.yaml"} <= names, names
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
    if doc["kind"] == "ServiceMonitor":
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
    job = chart.one(docs, "Job", "-migrate")
    hooks = job["metadata"]["annotations"]
    assert hooks["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert "before-hook-creation" in hooks["helm.sh/hook-delete-policy"]
    assert job["spec"]["backoffLimit"] >= 1 and job["spec"]["activeDeadlineSeconds"] > 0
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["migrate"]
    svc = chart.one(docs, "Service", chart.RELEASE + "-a2a-gateway")
    assert {p["name"]: p.get("appProtocol") for p in svc["spec"]["ports"]} == {
        "http": "kubernetes.io/h2c", "admin": "http"}
    if chart.by_kind(docs, "HorizontalPodAutoscaler"):
        assert chart.one(docs, "HorizontalPodAutoscaler")["spec"]["minReplicas"] >= 2
        assert "replicas" not in chart.one(docs, "Deployment", "-a2a-gateway")["spec"]
    assert chart.one(docs, "PodDisruptionBudget")


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
    # carry them in the label the ServiceMonitors name as jobLabel.
    jobs = {s["metadata"]["labels"].get(monitors[0]["spec"]["jobLabel"]) for s in chart.by_kind(docs, "Service")}
    assert jobs == {"a2a-gateway", "a2a-worker"}
    rule = chart.one(docs, "PrometheusRule")
    alerts = yaml.safe_load((chart.ROOT / "deploy/prometheus/alerts.yml").read_text())
    assert rule["spec"] == alerts
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


def test_schema_extra_env_is_the_closed_list():
    path = chart.CHART / "values.schema.json"
    schema = json.loads(path.read_text())
    for binary in ("gateway", "worker"):
        name = schema["properties"][binary]["properties"]["extraEnv"]["items"]["properties"]["name"]
        if chart.regen():
            name["enum"] = sorted(envvars.known(binary))
            path.write_text(json.dumps(schema, indent=2) + "\n")
        assert set(name["enum"]) == envvars.known(binary), (
            f"{binary}.extraEnv in values.schema.json is not the binary's ENV_VARS: rerun with A2A_DEPLOY_REGEN=1")


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
