"""The log API (logs.argus.io, docs/logs.md) registered on a testbed control plane without the
chart: what the chart's logs-api.yaml and a cluster's controllers would make, for the demo.

The chart path (certificate from the chart, the operator as the chart's ServiceAccount) is
tested in tests/integration/test_logs_api.py; this is the short way for an operator run with
the admin kubeconfig: a self-signed serving certificate for the Service's DNS name (the
APIService's caBundle), the Service, an EndpointSlice (the availability check wants a ready
address; the API server dials the ClusterIP, which the service network maps to the
operator's loopback port), and the APIService.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path

from argus.servers.webhook.tls import self_signed_certificate

from .apiget import get_object
from .controlplane import KubeCluster
from .harness import wait_for
from .servicenet import Backend, ServiceNetwork

API_SERVICE = "v1alpha1.logs.argus.io"


@dataclass
class LogsApi:
    cp: KubeCluster
    net: ServiceNetwork
    namespace: str
    service: str
    port: int          # the operator's log API port on 127.0.0.1
    cert_file: Path
    key_file: Path

    def operator_flags(self) -> list[str]:
        return ["--logs-api", "--logs-api-host", "127.0.0.1", "--logs-api-port", str(self.port),
                "--logs-api-cert-file", str(self.cert_file), "--logs-api-key-file", str(self.key_file)]

    def route(self, ready_url: str | None) -> None:
        """Send the Service's traffic to the operator (once it runs; ``ready_url``: its /readyz)."""
        svc = json.loads(self.cp.kubectl("get", "service", self.service, "-n", self.namespace, "-o", "json").stdout)
        self.net.route(svc["spec"]["clusterIP"], 443, [Backend(self.port, ready_url)])

    def wait_available(self, timeout: float = 90) -> None:
        wait_for(lambda: api_service_available(self.cp), timeout, f"APIService {API_SERVICE} to be Available",
                 on_timeout=lambda: self.cp.kubectl("get", "apiservice", API_SERVICE, "-o", "yaml").stdout)


def api_service_available(cp: KubeCluster) -> bool:
    # Polled every 0.2 s while an outage starts and ends: read directly (apiget.py says why).
    doc = get_object(cp, f"/apis/apiregistration.k8s.io/v1/apiservices/{API_SERVICE}", "apiservice", API_SERVICE)
    return any(c["type"] == "Available" and c["status"] == "True" for c in doc.get("status", {}).get("conditions", []))


def ready_endpoint_slice(cp: KubeCluster, namespace: str, service: str, port_name: str = "https-logs-api", port: int = 8443) -> None:
    """The endpoint slice controller's part for a Service: one ready address (the aggregator's
    availability check wants one; it is never dialled, the service network maps the ClusterIP)."""
    cp.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": f"{service}-1", "namespace": namespace, "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4", "endpoints": [{"addresses": ["192.0.2.10"], "conditions": {"ready": True}}],
        "ports": [{"name": port_name, "port": port, "protocol": "TCP"}]}))


def register_logs_api(cp: KubeCluster, net: ServiceNetwork, workdir: Path, port: int, *,
                      namespace: str = "argus-system", service: str = "argus-logs-api") -> LogsApi:
    workdir.mkdir(parents=True, exist_ok=True)
    cert, key = self_signed_certificate([f"{service}.{namespace}.svc"], now=dt.datetime.now(dt.UTC))
    cert_file, key_file = workdir / "logs-api.crt", workdir / "logs-api.key"
    cert_file.write_bytes(cert)
    key_file.write_bytes(key)
    key_file.chmod(0o600)
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": service, "namespace": namespace},
         "spec": {"ports": [{"name": "https-logs-api", "port": 443, "targetPort": 8443, "protocol": "TCP"}]}},
        {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": API_SERVICE},
         "spec": {"group": "logs.argus.io", "version": "v1alpha1", "service": {"name": service, "namespace": namespace, "port": 443},
                  "caBundle": base64.b64encode(cert).decode(), "groupPriorityMinimum": 1000, "versionPriority": 15}},
    ]
    for obj in objects:
        cp.kubectl("apply", "-f", "-", input=json.dumps(obj))
    ready_endpoint_slice(cp, namespace, service)
    return LogsApi(cp, net, namespace, service, port, cert_file, key_file)
