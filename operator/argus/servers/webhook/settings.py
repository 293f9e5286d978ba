"""The admission webhook's flags and ARGUS_WEBHOOK_* environment defaults.

Kept apart from ``webhook`` (which imports kopf and the kubernetes client) because the
flags are parsed before ``main`` points the kubernetes client at the right kubeconfig.
"""

from __future__ import annotations

import argparse
import os
import urllib.parse
from dataclasses import dataclass

from ...platform import env_bool

FAILURE_POLICIES = ("Ignore", "Fail")
DEFAULT_CONFIG_NAME = "argus.io"
DEFAULT_PORT = 9443


@dataclass(frozen=True)
class WebhookSettings:
    listen_host: str = "0.0.0.0"
    port: int = DEFAULT_PORT
    url: str | None = None                 # the API server calls this URL (loopback, tests) ...
    service: str | None = None             # ... or this Service (in a cluster)
    service_namespace: str | None = None
    service_port: int = 443
    failure_policy: str = "Ignore"
    timeout_seconds: int = 10
    cert_file: str | None = None           # e.g. a cert-manager Secret mounted as files
    key_file: str | None = None
    ca_file: str | None = None             # CA bundle for the API server (default: the certificate)
    cert_reload_seconds: float = 60.0
    config_name: str = DEFAULT_CONFIG_NAME  # the ValidatingWebhookConfiguration's name
    manage_config: bool = True             # create/patch that configuration ourselves

    @property
    def path(self) -> str:
        """Root path served (the handler id is appended): the URL's path, if a URL is given."""
        return urllib.parse.urlsplit(self.url).path.rstrip("/") if self.url else ""

    def hostnames(self) -> list[str]:
        """Names the API server will use to reach us: the SANs of a self-made certificate."""
        if self.url:
            host = urllib.parse.urlsplit(self.url).hostname
            return [host] if host else []
        if self.service:
            base = f"{self.service}.{self.service_namespace}"
            return [f"{base}.svc", f"{base}.svc.cluster.local", base, self.service]
        host = self.listen_host
        return ["localhost", "127.0.0.1"] if host in ("", "0.0.0.0", "::") else [host]


def add_webhook_flags(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    group = parser.add_argument_group("admission webhook (docs/webhook.md)")
    group.add_argument("--webhook", action=argparse.BooleanOptionalAction, default=env_bool("ARGUS_WEBHOOK", False),
                       help="serve the validating admission webhook for ArgusTasks (env ARGUS_WEBHOOK=1; default off)")
    group.add_argument("--webhook-listen-host", default=env("ARGUS_WEBHOOK_LISTEN_HOST", "0.0.0.0"),
                       help="address the webhook server listens on (default 0.0.0.0; env ARGUS_WEBHOOK_LISTEN_HOST)")
    group.add_argument("--webhook-port", type=int, default=int(env("ARGUS_WEBHOOK_PORT", str(DEFAULT_PORT))),
                       help=f"HTTPS port of the webhook server (default {DEFAULT_PORT}; env ARGUS_WEBHOOK_PORT)")
    target = group.add_mutually_exclusive_group()
    target.add_argument("--webhook-url", default=env("ARGUS_WEBHOOK_URL"),
                        help="https URL the API server calls (loopback, tests), e.g. https://127.0.0.1:9443 (env ARGUS_WEBHOOK_URL)")
    target.add_argument("--webhook-service", default=env("ARGUS_WEBHOOK_SERVICE"),
                        help="Service through which the API server reaches the webhook in a cluster (env ARGUS_WEBHOOK_SERVICE)")
    group.add_argument("--webhook-service-namespace", default=env("ARGUS_WEBHOOK_SERVICE_NAMESPACE") or env("POD_NAMESPACE"),
                       help="namespace of --webhook-service (env ARGUS_WEBHOOK_SERVICE_NAMESPACE, else POD_NAMESPACE)")
    group.add_argument("--webhook-service-port", type=int, default=int(env("ARGUS_WEBHOOK_SERVICE_PORT", "443")),
                       help="port of --webhook-service (default 443; env ARGUS_WEBHOOK_SERVICE_PORT)")
    group.add_argument("--webhook-failure-policy", choices=FAILURE_POLICIES, default=env("ARGUS_WEBHOOK_FAILURE_POLICY", "Ignore"),
                       help="what the API server does when the webhook cannot be reached: Ignore (default: admit, the operator "
                            "rejects bad tasks itself) or Fail (refuse every ArgusTask create/update while the operator is down) "
                            "(env ARGUS_WEBHOOK_FAILURE_POLICY)")
    group.add_argument("--webhook-timeout", type=int, dest="webhook_timeout_seconds", default=int(env("ARGUS_WEBHOOK_TIMEOUT_SECONDS", "10")),
                       help="seconds the API server waits for the webhook, 1-30 (default 10; env ARGUS_WEBHOOK_TIMEOUT_SECONDS)")
    group.add_argument("--webhook-cert-file", default=env("ARGUS_WEBHOOK_CERT_FILE"),
                       help="serving certificate (PEM), e.g. tls.crt of a cert-manager Secret; reloaded when it changes "
                            "(default: a self-made certificate; env ARGUS_WEBHOOK_CERT_FILE)")
    group.add_argument("--webhook-key-file", default=env("ARGUS_WEBHOOK_KEY_FILE"), help="its private key (PEM), e.g. tls.key (env ARGUS_WEBHOOK_KEY_FILE)")
    group.add_argument("--webhook-ca-file", default=env("ARGUS_WEBHOOK_CA_FILE"),
                       help="CA bundle the API server trusts for the webhook, e.g. ca.crt (default: the certificate itself; env ARGUS_WEBHOOK_CA_FILE)")
    group.add_argument("--webhook-cert-reload", type=float, dest="webhook_cert_reload_seconds",
                       default=float(env("ARGUS_WEBHOOK_CERT_RELOAD_SECONDS", "60")),
                       help="seconds between checks of the certificate files for a renewal (default 60; env ARGUS_WEBHOOK_CERT_RELOAD_SECONDS)")
    group.add_argument("--webhook-config-name", default=env("ARGUS_WEBHOOK_CONFIG_NAME", DEFAULT_CONFIG_NAME),
                       help=f"name of the ValidatingWebhookConfiguration (default {DEFAULT_CONFIG_NAME}; env ARGUS_WEBHOOK_CONFIG_NAME)")
    group.add_argument("--webhook-manage-config", action=argparse.BooleanOptionalAction, default=env_bool("ARGUS_WEBHOOK_MANAGE_CONFIG", True),
                       help="create and update the ValidatingWebhookConfiguration (default on; turn off when a Helm chart "
                            "or an admin owns it; env ARGUS_WEBHOOK_MANAGE_CONFIG)")


def webhook_settings(args: argparse.Namespace) -> WebhookSettings | None:
    """The webhook's settings, or None when ``--webhook`` is off. ValueError on bad flags."""
    if not args.webhook:
        return None
    if args.webhook_url and args.webhook_service:
        raise ValueError("--webhook-url and --webhook-service exclude each other (check ARGUS_WEBHOOK_URL / ARGUS_WEBHOOK_SERVICE)")
    if args.webhook_url:
        parts = urllib.parse.urlsplit(args.webhook_url)
        if parts.scheme != "https" or not parts.hostname:
            raise ValueError(f"--webhook-url: {args.webhook_url}: must be an https:// URL (the API server calls webhooks over TLS only)")
        if parts.query or parts.fragment:
            raise ValueError(f"--webhook-url: {args.webhook_url}: must not have a query or fragment")
    if args.webhook_service and not args.webhook_service_namespace:
        raise ValueError("--webhook-service needs --webhook-service-namespace (or POD_NAMESPACE)")
    if bool(args.webhook_cert_file) != bool(args.webhook_key_file):
        raise ValueError("--webhook-cert-file and --webhook-key-file go together")
    if args.webhook_ca_file and not args.webhook_cert_file:
        raise ValueError("--webhook-ca-file is for a given certificate (--webhook-cert-file); a self-made one brings its own")
    if not 1 <= args.webhook_timeout_seconds <= 30:
        raise ValueError(f"--webhook-timeout: {args.webhook_timeout_seconds}: must be 1-30 seconds (the API server's limits)")
    if not 0 < args.webhook_port < 65536:
        raise ValueError(f"--webhook-port: {args.webhook_port}: not a port")
    if args.webhook_cert_reload_seconds <= 0:
        raise ValueError(f"--webhook-cert-reload: {args.webhook_cert_reload_seconds}: must be positive")
    for flag in ("webhook_cert_file", "webhook_key_file", "webhook_ca_file"):
        path = getattr(args, flag)
        if path and not os.path.isfile(path):
            raise ValueError(f"--{flag.replace('_', '-')}: {path}: no such file")
    return WebhookSettings(
        listen_host=args.webhook_listen_host, port=args.webhook_port, url=args.webhook_url.rstrip("/") if args.webhook_url else None,
        service=args.webhook_service, service_namespace=args.webhook_service_namespace, service_port=args.webhook_service_port,
        failure_policy=args.webhook_failure_policy, timeout_seconds=args.webhook_timeout_seconds,
        cert_file=args.webhook_cert_file, key_file=args.webhook_key_file, ca_file=args.webhook_ca_file,
        cert_reload_seconds=args.webhook_cert_reload_seconds, config_name=args.webhook_config_name,
        manage_config=args.webhook_manage_config,
    )
