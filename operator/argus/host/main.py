"""``argus-operator`` (also ``python -m argus``): flags -> settings -> the ``Operator``
(the composition root, ``operator.py``) -> kopf.run."""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import ssl
import sys
from collections.abc import Sequence

from .. import __version__
from ..adapters.clock import SystemClock
from ..adapters.kube import KubeConfigError
from ..controller.metrics import Metrics
from ..controller.settings import add_operator_flags, operator_config
from ..platform import UsageError, add_platform_flags, platform_config, verl_composers
from ..servers.logapi.settings import add_logapi_flags, logapi_settings
from ..servers.webhook.settings import add_webhook_flags, webhook_settings
from .logs import FORMATS, LEVELS, configure_logging


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="argus-operator", description="Runs ArgusTasks on the shared Ray cluster.")
    add_platform_flags(parser)
    add_operator_flags(parser)
    parser.add_argument("--kubeconfig", help="kubeconfig to use (default: $KUBECONFIG or ~/.kube/config, else in-cluster)")
    parser.add_argument("--metrics-port", type=int, default=None, help="serve Prometheus metrics on this port (plain HTTP unless "
                        "--metrics-cert-file; no authentication: docs/metrics.md)")
    parser.add_argument("--metrics-host", default=os.environ.get("ARGUS_METRICS_HOST", "0.0.0.0"),
                        help="address of the metrics server (default 0.0.0.0; 127.0.0.1 behind an authenticating proxy such as kube-rbac-proxy)")
    parser.add_argument("--metrics-cert-file", default=os.environ.get("ARGUS_METRICS_CERT_FILE"),
                        help="serve /metrics over HTTPS with this certificate (PEM; with --metrics-key-file), re-read when the "
                             "file changes, e.g. tls.crt of a mounted Secret (chart: metrics.tls; env ARGUS_METRICS_CERT_FILE)")
    parser.add_argument("--metrics-key-file", default=os.environ.get("ARGUS_METRICS_KEY_FILE"),
                        help="the private key of --metrics-cert-file (PEM; env ARGUS_METRICS_KEY_FILE)")
    parser.add_argument("--log-format", choices=FORMATS, default=os.environ.get("ARGUS_LOG_FORMAT", "text"),
                        help="text lines, or one JSON object per line with time, level, logger, message and the task "
                             "(namespace/name) where the line is about one (default text; env ARGUS_LOG_FORMAT)")
    parser.add_argument("--log-level", choices=LEVELS, default=os.environ.get("ARGUS_LOG_LEVEL", "info"),
                        help="the least severe level logged (default info; env ARGUS_LOG_LEVEL)")
    parser.add_argument("--verbose", "-v", action="store_true", help="the same as --log-level debug")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    cleanup = parser.add_argument_group("uninstalling (docs/deploy.md)")
    cleanup.add_argument("--release-finalizers", action="store_true",
                         help="do not run the operator: stop every task's Ray job, remove the argus.io/stop-ray-job finalizers "
                              "(so that deleting tasks or namespaces does not wait for an operator that is gone), and exit; "
                              "1 if a job could not be confirmed stopped (its task keeps the finalizer)")
    cleanup.add_argument("--keep-ray-jobs", action="store_true", help="with --release-finalizers: leave the Ray jobs running")
    cleanup.add_argument("--release-timeout", type=float, default=120.0,
                         help="with --release-finalizers: seconds to wait for Ray to confirm each stop (default 120)")
    add_webhook_flags(parser)
    add_logapi_flags(parser)
    return parser


def _metrics_tls(args: argparse.Namespace) -> ssl.SSLContext | None:
    """--metrics-cert-file: the metrics server's TLS context, reloading renewed files."""
    if not args.metrics_cert_file:
        return None
    from ..servers.logapi.tls import ReloadingServerContext  # noqa: PLC0415
    return ReloadingServerContext(args.metrics_cert_file, args.metrics_key_file, None, what="metrics").context


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for flag, value, allowed in (("--log-format", args.log_format, FORMATS), ("--log-level", args.log_level, LEVELS)):
        if value not in allowed:  # an ARGUS_* default escapes argparse's choices
            parser.error(f"{flag}: {value!r}: must be one of {', '.join(allowed)} (env ARGUS_{flag[2:].upper().replace('-', '_')})")
    configure_logging("debug" if args.verbose else args.log_level, args.log_format)
    # A fatal signal in native code (grpc, the ray client's C parts) leaves the Python stacks
    # in the log instead of a process that is simply gone.
    if sys.__stderr__ is not None:
        faulthandler.enable(file=sys.__stderr__)
    if bool(args.metrics_cert_file) != bool(args.metrics_key_file):
        parser.error("--metrics-cert-file and --metrics-key-file go together")
    try:
        config = operator_config(args, platform_config(args))
        webhook = webhook_settings(args)
        logs_api = logapi_settings(args)
    except (UsageError, ValueError) as exc:
        print(f"argus-operator: {exc}", file=sys.stderr)
        return 2
    if args.kubeconfig:
        # Before the kubernetes client is imported: it reads KUBECONFIG at import time, and
        # kopf's login goes through it.
        os.environ["KUBECONFIG"] = os.path.abspath(args.kubeconfig)
    clock = SystemClock()  # the only clock the operator's parts read
    if args.release_finalizers:
        import asyncio  # noqa: PLC0415

        from ..adapters.kube import load_kube_config  # noqa: PLC0415
        from .uninstall import release_finalizers  # noqa: PLC0415
        try:
            load_kube_config(args.kubeconfig)
        except KubeConfigError as exc:
            print(f"argus-operator: {exc}", file=sys.stderr)
            return 2
        return asyncio.run(release_finalizers(config, clock=clock, stop_jobs=not args.keep_ray_jobs, timeout=args.release_timeout))
    import kopf  # noqa: PLC0415 - imports the kubernetes client, which reads KUBECONFIG once

    from .handlers import operator_memo, registry  # noqa: PLC0415
    from .operator import Operator  # noqa: PLC0415

    metrics = Metrics(clock)
    if args.metrics_port is not None:
        try:
            metrics.serve(args.metrics_port, args.metrics_host, _metrics_tls(args))
        except (OSError, ssl.SSLError) as exc:
            print(f"argus-operator: cannot serve metrics on {args.metrics_host}:{args.metrics_port}: {exc}", file=sys.stderr)
            return 2
    try:
        # The verl config trees tasks are composed with (issue 21): refuse to start without the
        # default one; the other pinned releases present here, for clusters that run them.
        composers = verl_composers(args, config.platform)
    except UsageError as exc:
        print(f"argus-operator: {exc}", file=sys.stderr)
        return 2
    logging.getLogger("argus").info("composing tasks' configurations with %s%s", composers.default.tree.describe(),
                                    f", and for a cluster that runs it, verl {' or '.join(composers.supported[1:])}" if composers.supported[1:] else "")
    try:
        operator = Operator.build(config, webhook, args.kubeconfig, logs_api=logs_api, composers=composers, clock=clock, metrics=metrics)
    except KubeConfigError as exc:  # no cluster to talk to: one line, not a traceback
        print(f"argus-operator: {exc}", file=sys.stderr)
        return 2
    kopf.run(
        registry=registry(webhook),
        memo=operator_memo(operator),
        # kopf only hosts the process and the webhook (no per-object handlers), so it is
        # cluster-wide whatever --namespace says: it then lists no namespaces, and the
        # operator needs only `get` on them. The task cache keeps to --namespace.
        clusterwide=True,
        # No kopf peering: there are no per-object kopf handlers for it to pause; replicas
        # are kept apart by leader election on a Lease (--leader-elect).
        standalone=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
