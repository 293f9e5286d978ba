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
    parser.add_argument("--liveness", dest="liveness_endpoint", help="liveness endpoint, e.g. http://0.0.0.0:8080/healthz")
    parser.add_argument("--metrics-port", type=int, default=None, help="serve Prometheus metrics on this port")
    peering = parser.add_mutually_exclusive_group()
    peering.add_argument("--peering", dest="peering_name", help="kopf peering object name (kopf's own replica coordination)")
    peering.add_argument("--standalone", action="store_true", help="no kopf peering (one replica, or leader election)")
    parser.add_argument("--priority", type=int, default=0, help="peering priority of this replica")
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
        start_http_server(args.metrics_port)
    memo = kopf.Memo(operator=Operator.build(config, webhook, args.kubeconfig))
    kopf.run(
        registry=registry(webhook),
        memo=memo,
        clusterwide=not config.namespaces,
        namespaces=list(config.namespaces),
        liveness_endpoint=args.liveness_endpoint,
        standalone=True if args.standalone or not args.peering_name else None,
        peering_name=args.peering_name,
        priority=args.priority,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
