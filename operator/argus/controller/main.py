"""``argus-operator`` (also ``python -m argus``): flags -> settings -> the ``Operator``
(the composition root, ``operator.py``) -> kopf.run."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Sequence

from ..platform import UsageError, add_platform_flags, platform_config
from .settings import add_operator_flags, operator_config
from .webhook_settings import add_webhook_flags, webhook_settings


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="argus-operator", description="Runs ArgusTasks on the shared Ray cluster.")
    add_platform_flags(parser)
    add_operator_flags(parser)
    parser.add_argument("--kubeconfig", help="kubeconfig to use (default: $KUBECONFIG or ~/.kube/config, else in-cluster)")
    parser.add_argument("--metrics-port", type=int, default=None, help="serve Prometheus metrics on this port (plain HTTP, no authentication)")
    parser.add_argument("--metrics-host", default=os.environ.get("ARGUS_METRICS_HOST", "0.0.0.0"),
                        help="address of the metrics server (default 0.0.0.0; 127.0.0.1 behind an authenticating proxy such as kube-rbac-proxy)")
    parser.add_argument("--verbose", "-v", action="store_true")
    add_webhook_flags(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = operator_config(args, platform_config(args))
        webhook = webhook_settings(args)
    except (UsageError, ValueError) as exc:
        print(f"argus-operator: {exc}", file=sys.stderr)
        return 2
    if args.kubeconfig:
        # Before the kubernetes client is imported: it reads KUBECONFIG at import time, and
        # kopf's login goes through it.
        os.environ["KUBECONFIG"] = os.path.abspath(args.kubeconfig)
    import kopf  # noqa: PLC0415 - imports the kubernetes client, which reads KUBECONFIG once

    from .handlers import registry  # noqa: PLC0415
    from .operator import Operator  # noqa: PLC0415

    if args.metrics_port is not None:
        from prometheus_client import start_http_server  # noqa: PLC0415
        start_http_server(args.metrics_port, addr=args.metrics_host)
    memo = kopf.Memo(operator=Operator.build(config, webhook, args.kubeconfig))
    kopf.run(
        registry=registry(webhook),
        memo=memo,
        clusterwide=not config.namespaces,
        namespaces=list(config.namespaces),
        # No kopf peering: there are no per-object kopf handlers for it to pause; replicas
        # are kept apart by leader election on a Lease (--leader-elect).
        standalone=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
