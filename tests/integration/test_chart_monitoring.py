"""The chart's operations pack (issue 36, item 7), rendered with ``helm template`` (no cluster):
the Grafana dashboard ConfigMap (grafana.dashboard) and the PrometheusRule (prometheusRule),
both off by default, their contents the files tests/unit/test_monitoring_pack.py checks
against the metrics module; and /metrics over TLS (metrics.tls) with the chart's own
certificate, the flags the operator's own parser reads, the scrape configs told to use it."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from typing import Any

import pytest
import yaml

from argus_testbed import find_binaries
from argus_testbed.harness import REPO

pytestmark = pytest.mark.integration

CHART = REPO / "charts" / "argus"
NS = "argus-system"
KUBE_VERSION = "1.34.4"


def render(*values: str) -> list[dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    proc = subprocess.run([str(find_binaries() / "helm"), "template", "argus", str(CHART), "--namespace", NS, "--kube-version", KUBE_VERSION,
                           *values], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def kinds(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def test_off_by_default() -> None:
    objs = render()
    assert not kinds(objs, "PrometheusRule")
    assert not [o for o in kinds(objs, "ConfigMap") if "grafana_dashboard" in (o["metadata"].get("labels") or {})]


def test_the_dashboard_configmap_carries_the_sidecar_label_and_the_dashboard() -> None:
    (cm,) = kinds(render("--set", "grafana.dashboard.enabled=true"), "ConfigMap")
    assert cm["metadata"]["name"] == "argus-dashboard" and cm["metadata"]["namespace"] == NS
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(cm["data"]["argus.json"]) == json.loads((CHART / "files" / "grafana-dashboard.json").read_text())
    (other,) = kinds(render("--set", "grafana.dashboard.enabled=true", "--set", "grafana.dashboard.namespace=monitoring",
                            "--set", "grafana.dashboard.label=dashboards", "--set", "grafana.dashboard.labelValue=argus",
                            "--set", "grafana.dashboard.annotations.grafana_folder=Argus"), "ConfigMap")
    assert other["metadata"]["namespace"] == "monitoring" and other["metadata"]["labels"]["dashboards"] == "argus"
    assert other["metadata"]["annotations"] == {"grafana_folder": "Argus"}


def test_the_prometheus_rule_holds_the_alerts_with_the_labels_asked_for() -> None:
    source = yaml.safe_load((CHART / "files" / "prometheus-rules.yaml").read_text())
    (rule,) = kinds(render("--set", "prometheusRule.enabled=true", "--set", "prometheusRule.labels.release=kube-prometheus",
                           "--set", "prometheusRule.alertLabels.team=ml-platform"), "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["metadata"]["labels"]["release"] == "kube-prometheus"
    groups = rule["spec"]["groups"]
    assert [g["name"] for g in groups] == [g["name"] for g in source]
    for got, want in zip(groups, source, strict=True):
        assert [r["alert"] for r in got["rules"]] == [r["alert"] for r in want["rules"]]
        for r, w in zip(got["rules"], want["rules"], strict=True):
            assert (r["expr"], r.get("for"), r["annotations"]) == (w["expr"], w.get("for"), w["annotations"])  # Prometheus's {{ }} kept as is
            assert r["labels"] == {**w["labels"], "team": "ml-platform"}
    (fewer,) = kinds(render("--set", "prometheusRule.enabled=true", "--set", "prometheusRule.disabledAlerts={ArgusQueueNotMoving}"),
                     "PrometheusRule")
    alerts = [r["alert"] for g in fewer["spec"]["groups"] for r in g["rules"]]
    assert "ArgusQueueNotMoving" not in alerts and "ArgusNoLeader" in alerts


def _operator_args(objs: list[dict[str, Any]]) -> Any:
    from argus.host.main import build_parser
    (dep,) = kinds(objs, "Deployment")
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    args, unknown = build_parser().parse_known_args(container["args"])
    assert not unknown, unknown
    return args, dep["spec"]["template"]["spec"], container


def test_metrics_over_https_with_the_charts_certificate(tmp_path: Any) -> None:
    """metrics.tls: the chart's own certificate for the metrics Service, mounted and named by
    the operator's flags, a checksum that rolls the pods when it changes, the monitors told to
    scrape https trusting ca.crt; and the operator serves /metrics with that Secret's files to a
    client that verifies the Service's name against ca.crt."""
    objs = render("--set", "metrics.tls.enabled=true", "--set", "metrics.serviceMonitor.enabled=true")
    args, pod, container = _operator_args(objs)
    assert (args.metrics_cert_file, args.metrics_key_file) == ("/etc/argus/metrics-tls/tls.crt", "/etc/argus/metrics-tls/tls.key")
    assert {"name": "metrics-tls", "mountPath": "/etc/argus/metrics-tls", "readOnly": True} in container["volumeMounts"]
    assert {"name": "metrics-tls", "secret": {"secretName": "argus-metrics-tls"}} in pod["volumes"]
    (secret,) = [o for o in kinds(objs, "Secret") if o["metadata"]["name"] == "argus-metrics-tls"]
    assert secret["type"] == "kubernetes.io/tls"
    (dep,) = kinds(objs, "Deployment")
    import hashlib
    assert dep["spec"]["template"]["metadata"]["annotations"]["checksum/metrics-certificate"] == hashlib.sha256(
        secret["data"]["tls.crt"].encode()).hexdigest()
    tls = {"scheme": "https", "tlsConfig": {"ca": {"secret": {"name": "argus-metrics-tls", "key": "ca.crt"}},
                                            "serverName": "argus-metrics.argus-system.svc"}}
    (sm,) = kinds(objs, "ServiceMonitor")
    (pm,) = kinds(render("--set", "metrics.tls.enabled=true", "--set", "metrics.podMonitor.enabled=true"), "PodMonitor")
    assert sm["spec"]["endpoints"] == [{"port": "http-metrics", "path": "/metrics", **tls}]
    assert pm["spec"]["podMetricsEndpoints"] == [{"port": "http-metrics", "path": "/metrics", **tls}]
    svc = [o for o in kinds(objs, "Service") if o["metadata"]["name"] == "argus-metrics"][0]
    assert svc["metadata"]["annotations"]["prometheus.io/scheme"] == "https"

    # The operator serves the chart-made pair; a scraper trusting ca.crt verifies the Service's name.
    import socket
    import ssl
    import urllib.request

    from argus.adapters.clock import SystemClock
    from argus.controller.metrics import Metrics
    from argus.host.main import _metrics_tls, build_parser
    from argus_testbed.ports import free_port
    for key in ("tls.crt", "tls.key", "ca.crt"):
        (tmp_path / key).write_bytes(base64.b64decode(secret["data"][key]))
    port = free_port()
    served = build_parser().parse_args([f"--metrics-cert-file={tmp_path / 'tls.crt'}", f"--metrics-key-file={tmp_path / 'tls.key'}"])
    Metrics(SystemClock()).serve(port, "127.0.0.1", _metrics_tls(served))
    ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="argus-metrics.argus-system.svc") as conn:
        conn.sendall(b"GET /metrics HTTP/1.0\r\nHost: argus-metrics.argus-system.svc\r\n\r\n")
        body = b"".join(iter(lambda: conn.recv(65536), b"")).decode()
    assert body.startswith("HTTP/1.0 200") and "argus_build_info{" in body
    with pytest.raises(Exception):  # noqa: B017, PT011 - plain HTTP: no metrics, whatever the error
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()


def test_metrics_tls_with_your_own_secret_makes_none() -> None:
    objs = render("--set", "metrics.tls.enabled=true", "--set", "metrics.tls.secretName=my-metrics-tls", "--set", "metrics.serviceMonitor.enabled=true")
    assert not [o for o in kinds(objs, "Secret") if "metrics" in o["metadata"]["name"]]
    args, pod, _ = _operator_args(objs)
    assert args.metrics_cert_file == "/etc/argus/metrics-tls/tls.crt"
    assert {"name": "metrics-tls", "secret": {"secretName": "my-metrics-tls"}} in pod["volumes"]
    (sm,) = kinds(objs, "ServiceMonitor")
    assert sm["spec"]["endpoints"][0]["tlsConfig"]["ca"]["secret"]["name"] == "my-metrics-tls"
    (dep,) = kinds(objs, "Deployment")
    assert "checksum/metrics-certificate" not in (dep["spec"]["template"]["metadata"].get("annotations") or {})
    # Off (the default): plain HTTP, nothing mounted.
    args, pod, _ = _operator_args(render())
    assert args.metrics_cert_file is None and not [v for v in pod["volumes"] if v["name"] == "metrics-tls"]
