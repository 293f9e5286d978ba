"""The webhook's pure parts: flags, the ValidatingWebhookConfiguration it writes (URL and
Service client configs) and the self-made certificate. (The UPDATE rule it answers with is
``core.rules.change_problems``: tests/unit/test_core_rules.py.)"""

from __future__ import annotations

import argparse
import ipaddress

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from argus.servers.webhook import tls
from argus.servers.webhook.server import WEBHOOK_ID, WEBHOOK_NAME, _covers, build_configuration, client_config
from argus.servers.webhook.settings import WebhookSettings, add_webhook_flags, webhook_settings
from fakes import FakeClock

pytestmark = pytest.mark.unit


def parse(*argv: str) -> WebhookSettings | None:
    parser = argparse.ArgumentParser()
    add_webhook_flags(parser)
    return webhook_settings(parser.parse_args(list(argv)))


def test_off_by_default_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ARGUS_WEBHOOK", "ARGUS_WEBHOOK_FAILURE_POLICY", "ARGUS_WEBHOOK_URL", "ARGUS_WEBHOOK_SERVICE"):
        monkeypatch.delenv(var, raising=False)
    assert parse() is None
    s = parse("--webhook")
    assert s is not None and s.failure_policy == "Ignore" and s.port == 9443 and s.config_name == "argus.io" and s.manage_config


def test_environment_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARGUS_WEBHOOK", "true")
    monkeypatch.setenv("ARGUS_WEBHOOK_FAILURE_POLICY", "Fail")
    monkeypatch.setenv("ARGUS_WEBHOOK_SERVICE", "argus-webhook")
    monkeypatch.setenv("POD_NAMESPACE", "argus-system")
    s = parse()
    assert s is not None and s.failure_policy == "Fail" and (s.service, s.service_namespace) == ("argus-webhook", "argus-system")


@pytest.mark.parametrize("argv,message", [
    (["--webhook-url", "http://127.0.0.1:9443"], "must be an https:// URL"),
    (["--webhook-service", "svc"], "needs --webhook-service-namespace"),
    (["--webhook-cert-file", "/etc/hosts"], "go together"),
    (["--webhook-timeout", "31"], "1-30 seconds"),
    (["--webhook-cert-file", "/nonexistent.crt", "--webhook-key-file", "/nonexistent.key"], "no such file"),
])
def test_bad_flags(monkeypatch: pytest.MonkeyPatch, argv: list[str], message: str) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    monkeypatch.delenv("ARGUS_WEBHOOK_SERVICE_NAMESPACE", raising=False)
    with pytest.raises(ValueError, match=message):
        parse("--webhook", *argv)


def test_url_configuration_for_watched_namespaces() -> None:
    s = WebhookSettings(url="https://127.0.0.1:8443/argus", failure_policy="Fail", timeout_seconds=5, config_name="t")
    assert s.path == "/argus" and s.hostnames() == ["127.0.0.1"]
    body = build_configuration(s, client_config(s, "Q0E="), ["b", "a"])
    (hook,) = body["webhooks"]
    assert body["metadata"]["name"] == "t" and hook["name"] == WEBHOOK_NAME
    assert hook["clientConfig"] == {"url": f"https://127.0.0.1:8443/argus/{WEBHOOK_ID}", "caBundle": "Q0E="}
    assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "None" and hook["timeoutSeconds"] == 5
    assert hook["namespaceSelector"] == {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["a", "b"]}]}
    assert hook["rules"] == [{"apiGroups": ["argus.io"], "apiVersions": ["v1alpha1"], "resources": ["argustasks"],
                              "operations": ["CREATE", "UPDATE"], "scope": "Namespaced"}]


def test_service_configuration_for_all_namespaces() -> None:
    s = WebhookSettings(service="argus-webhook", service_namespace="argus-system")
    assert "argus-webhook.argus-system.svc" in s.hostnames()
    hook = build_configuration(s, client_config(s, None), [])["webhooks"][0]
    assert hook["clientConfig"] == {"service": {"name": "argus-webhook", "namespace": "argus-system", "port": 443, "path": f"/{WEBHOOK_ID}"}}
    assert hook["namespaceSelector"] == {} and hook["failurePolicy"] == "Ignore"


def test_covers_ignores_server_defaults() -> None:
    desired = build_configuration(WebhookSettings(url="https://127.0.0.1:1"), {"url": "https://127.0.0.1:1"}, [])
    served = [dict(desired["webhooks"][0], objectSelector={}, namespaceSelector=None)]
    assert _covers(served, desired["webhooks"])
    assert not _covers([dict(served[0], failurePolicy="Fail")], desired["webhooks"])


def test_self_made_certificate() -> None:
    now = FakeClock().now()
    cert_pem, key_pem = tls.self_signed_certificate(["127.0.0.1", "0.0.0.0", "argus-webhook.argus-system.svc", "127.0.0.1"], now=now)
    cert = x509.load_pem_x509_certificate(cert_pem)
    assert cert.not_valid_before_utc < now < cert.not_valid_after_utc
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["argus-webhook.argus-system.svc"]
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert cert.subject == cert.issuer
    key = serialization.load_pem_private_key(key_pem, password=None)
    assert key.public_key().public_numbers() == cert.public_key().public_numbers()
    _, encrypted = tls.self_signed_certificate(["localhost"], password="pw", now=now)
    assert b"ENCRYPTED" in encrypted
    with pytest.raises(ValueError):
        tls.self_signed_certificate(["0.0.0.0"], now=now)
