"""The operator with a fault injected from outside, for the tests and the chaos benchmark:

    python -m argus_testbed.faults --crash-after-submit P -- <argus-operator flags>

runs ``argus-operator`` with the Ray client's ``submit`` wrapped so that, with chance P,
the process dies (exit 137, as a SIGKILL would) right after Ray accepted a job and before
the operator wrote the task's status: the window the lifecycle must survive (the finalizer
is on, the job is in Ray, the status still says Queued). The product has no such hook.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
from typing import Any


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        print("usage: python -m argus_testbed.faults --crash-after-submit P -- <argus-operator flags>", file=sys.stderr)
        return 2
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="argus_testbed.faults")
    parser.add_argument("--crash-after-submit", type=float, default=1.0, help="chance of dying after each submission (0-1)")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv[:split])
    chance = random.Random(args.seed)

    from argus.adapters.ray import RayJobsClient
    submit = RayJobsClient.submit

    async def submit_then_maybe_die(self: RayJobsClient, plan: Any) -> bool:
        fresh = await submit(self, plan)
        if chance.random() < args.crash_after_submit:
            logging.getLogger("argus_testbed.faults").warning(
                "fault injected: exiting right after Ray accepted %s, before its status is written", plan.submission_id)
            os._exit(137)
        return fresh

    RayJobsClient.submit = submit_then_maybe_die  # type: ignore[method-assign]
    from argus.host.main import main as operator_main
    return operator_main(argv[split + 1:])


if __name__ == "__main__":
    sys.exit(main())
