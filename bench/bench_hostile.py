#!/usr/bin/env python3
"""Benchmark of hostile command sizes: how long ``validate_task`` takes on each pathological
64 KiB command of the unit tests' table (tests/unit/test_command_language.py, PATHOLOGICAL:
open braces, nested substitutions, thousands of overrides, ...). Quadratic steps took 10 to
60 s a command before they were fixed; each took well under 0.2 s since.

    python bench/bench_hostile.py [--runs N] [--limit-ms 500]

Prints each case's median and best of N runs (time.perf_counter) and exits 1 when a median
exceeds the limit. A benchmark, not a test: run it on a quiet machine (the unit test holds
only the verdict's shape, and a generous hang guard).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from argus.core.plan import validate_task

TABLE = Path(__file__).resolve().parent.parent / "tests" / "unit" / "test_command_language.py"


def load_table() -> tuple[dict[str, str], Any, Any]:
    spec = importlib.util.spec_from_file_location("hostile_table", TABLE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PATHOLOGICAL, module.CONFIG, module.hostile_task


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--limit-ms", type=float, default=500.0)
    args = parser.parse_args()
    table, config, hostile_task = load_table()
    worst = 0.0
    print(f"{'case':<22} {'median ms':>10} {'best ms':>10}")
    for name, text in table.items():
        doc = hostile_task(text)
        runs = []
        for _ in range(args.runs):
            start = time.perf_counter()
            validate_task(doc, "alice", config)
            runs.append((time.perf_counter() - start) * 1000)
        median = statistics.median(runs)
        worst = max(worst, median)
        print(f"{name:<22} {median:10.1f} {min(runs):10.1f}")
    print(f"worst median {worst:.1f} ms (limit {args.limit_ms:.0f} ms)")
    return 1 if worst > args.limit_ms else 0


if __name__ == "__main__":
    sys.exit(main())
