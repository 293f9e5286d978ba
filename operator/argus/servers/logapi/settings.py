"""The log API's flags (``--logs-api*``, each with an ARGUS_LOGS_API_* variable): the
aggregated API ``logs.argus.io`` served by the operator (servers/logapi/server.py, docs/logs.md)."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from ...platform import env_bool

DEFAULT_PORT = 8443


@dataclass(frozen=True)
class LogApiSettings:
    host: str = "0.0.0.0"
    port: int = DEFAULT_PORT
    cert_file: str | None = None
    key_file: str | None = None
    client_ca_file: str | None = None     # else the extension-apiserver-authentication ConfigMap
    allowed_names: tuple[str, ...] | None = None  # None: the ConfigMap's (or any the CA signed, with a CA file)
    max_followers_per_user: int = 5       # 0: no limit
    reader_buffer: int = 256 * 1024       # characters a follower may hold unsent before it skips
    shared_tree: bool = False             # job folders readable here at their job paths


def add_logapi_flags(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    g = parser.add_argument_group("log API, logs.argus.io (docs/logs.md)")
    g.add_argument("--logs-api", action=argparse.BooleanOptionalAction, default=env_bool("ARGUS_LOGS_API"),
                   help="serve the aggregated API logs.argus.io/v1alpha1 (task logs through the Kubernetes API; env ARGUS_LOGS_API=1)")
    g.add_argument("--logs-api-host", default=env("ARGUS_LOGS_API_HOST", "0.0.0.0"), help="address it listens on (default 0.0.0.0)")
    g.add_argument("--logs-api-port", type=int, default=int(env("ARGUS_LOGS_API_PORT", str(DEFAULT_PORT))),
                   help=f"HTTPS port (default {DEFAULT_PORT})")
    g.add_argument("--logs-api-cert-file", default=env("ARGUS_LOGS_API_CERT_FILE"), help="serving certificate (PEM); the APIService's caBundle must have signed it")
    g.add_argument("--logs-api-key-file", default=env("ARGUS_LOGS_API_KEY_FILE"), help="its private key (PEM)")
    g.add_argument("--logs-api-client-ca-file", default=env("ARGUS_LOGS_API_CLIENT_CA_FILE"),
                   help="the front proxy's client CA (the API server's --requestheader-client-ca-file); default: read from "
                        "kube-system/extension-apiserver-authentication")
    g.add_argument("--logs-api-allowed-names", default=env("ARGUS_LOGS_API_ALLOWED_NAMES"),
                   help="comma-separated CNs the front proxy's certificate may have (default: the ConfigMap's "
                        "requestheader-allowed-names)")
    g.add_argument("--logs-api-max-followers", type=int, default=int(env("ARGUS_LOGS_API_MAX_FOLLOWERS", "5")),
                   help="logs one user may follow at once, across all tasks (default 5; 0: no limit)")
    g.add_argument("--logs-api-reader-buffer", type=int, default=int(env("ARGUS_LOGS_API_READER_BUFFER", str(256 * 1024))),
                   help="characters of a followed log held for a slow reader before it skips ahead with a marker (default 262144)")
    g.add_argument("--logs-api-shared-tree", action=argparse.BooleanOptionalAction, default=env_bool("ARGUS_LOGS_API_SHARED_TREE"),
                   help="the shared tree is mounted here at the jobs' paths (read-only): logs Ray forgot are read from the job folder")


def logapi_settings(args: argparse.Namespace) -> LogApiSettings | None:
    if not args.logs_api:
        return None
    if not args.logs_api_cert_file or not args.logs_api_key_file:
        raise ValueError("--logs-api-cert-file and --logs-api-key-file: both are needed with --logs-api (the APIService's caBundle "
                         "must have signed the certificate)")
    if args.logs_api_max_followers < 0:
        raise ValueError(f"--logs-api-max-followers: {args.logs_api_max_followers}: must be 0 (no limit) or more")
    if args.logs_api_reader_buffer < 4096:
        raise ValueError(f"--logs-api-reader-buffer: {args.logs_api_reader_buffer}: must be at least 4096")
    names = tuple(n.strip() for n in args.logs_api_allowed_names.split(",") if n.strip()) if args.logs_api_allowed_names else None
    return LogApiSettings(host=args.logs_api_host, port=args.logs_api_port, cert_file=args.logs_api_cert_file,
                          key_file=args.logs_api_key_file, client_ca_file=args.logs_api_client_ca_file, allowed_names=names,
                          max_followers_per_user=args.logs_api_max_followers, reader_buffer=args.logs_api_reader_buffer,
                          shared_tree=args.logs_api_shared_tree)
