"""Shared pytest setup: markers and the time report, nothing that needs the testbed, so that
``pytest -m unit`` needs nothing but the project and its test extras (the testbed's fixtures
are in tests/integration/conftest.py).

Markers: tests under tests/unit are marked `unit`, tests under tests/integration `integration`
(unless they carry one of those markers already), so `-m unit` / `-m "not integration"` work.
Tests marked `slower` (the slower suite: real verl PPO with a critic and a KL) run only when
the `-m` expression names that marker (`hack/test.sh -m slower`); any other run deselects
them and says so.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

TESTS_DIR = Path(__file__).resolve().parent


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """``-m unit``: tests/integration is not even imported (its conftest and its modules
    import the testbed, which may not be installed, and importing them cost each xdist
    worker of the unit tier 9 s of CPU, to deselect every test they hold: nothing there is
    marked ``unit``, which tests/unit/test_tiers.py checks). Any other run collects it, and
    fails loudly there when the testbed is missing."""
    if collection_path == TESTS_DIR / "integration" and config.getoption("markexpr") == "unit":
        return True
    return None


# --------------------------------------------------------------------------- markers

_SLOWER_LEFT = pytest.StashKey[int]()


def pytest_report_header(config: pytest.Config) -> str | None:
    if SLOWER in (config.getoption("markexpr") or ""):
        return None
    return f"the slower suite (marker '{SLOWER}': real verl PPO with a critic and a KL) is not run: hack/test.sh -m {SLOWER} runs it"


SLOWER = "slower"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The slower suite runs when asked for by name, never as part of another selection: it
    # trains for minutes more than CI's run can hold (docs/testing.md).
    if SLOWER not in (config.getoption("markexpr") or ""):
        left = [item for item in items if item.get_closest_marker(SLOWER)]
        if left:
            config.hook.pytest_deselected(items=left)
            items[:] = [item for item in items if not item.get_closest_marker(SLOWER)]
            config.stash[_SLOWER_LEFT] = len(left)
    for item in items:
        if item.get_closest_marker("unit") or item.get_closest_marker("integration"):
            continue
        try:
            rel = Path(item.path).resolve().relative_to(TESTS_DIR)
        except ValueError:
            continue
        if rel.parts and rel.parts[0] == "unit":
            item.add_marker(pytest.mark.unit)
        elif rel.parts and rel.parts[0] == "integration":
            item.add_marker(pytest.mark.integration)
    # The longest first: hack/test.sh hands whole modules to xdist workers in this order
    # (--no-loadscope-reorder), so the modules that train or build for minutes start at once
    # and the unit modules, many and short, fill the gaps at the end. Stable: a module's own
    # order is kept.
    slow_modules = {item.path for item in items if item.get_closest_marker("slow")}

    def rank(item: pytest.Item) -> int:
        if item.path in slow_modules:
            return 0
        return 2 if item.get_closest_marker("unit") else 1

    items.sort(key=rank)


# --------------------------------------------------------------------------- where the time went

def _tier(item_keywords: Any, nodeid: str) -> str:
    if "real_verl" in item_keywords:
        return "real verl"
    return "unit" if nodeid.startswith("tests/unit/") else "integration"


class TimeReport:
    """After every run (on the xdist controller, which sees every worker's reports): the wall
    time, each tier's summed test time, the slowest tests and, when hack/test.sh ran the setup,
    each setup step's time; printed and written to build/test-report.txt."""

    SLOWEST = 30

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.load_at_start = os.getloadavg()
        self.per_test: dict[str, float] = {}
        self.tier: dict[str, str] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.per_test[report.nodeid] = self.per_test.get(report.nodeid, 0.0) + report.duration
        if report.when == "call" or report.nodeid not in self.tier:
            self.tier[report.nodeid] = _tier(report.keywords, report.nodeid)

    def lines(self, workers: int) -> list[str]:
        wall = time.monotonic() - self.started
        sums: dict[str, float] = {"unit": 0.0, "integration": 0.0, "real verl": 0.0}
        for nodeid, seconds in self.per_test.items():
            sums[self.tier.get(nodeid, "integration")] += seconds
        load = ", ".join(f"{a:.2f}" for a in self.load_at_start) + " -> " + ", ".join(f"{a:.2f}" for a in os.getloadavg())
        out = [f"tests: wall {wall / 60:.1f} min on {workers} worker(s), {os.cpu_count()} cores; load average {load}",
               "summed test time by tier: " + ", ".join(f"{k} {v / 60:.1f} min" for k, v in sums.items())]
        setup_times = os.environ.get("ARGUS_SETUP_TIMES")
        if setup_times and Path(setup_times).is_file():
            steps = [line.split("\t") for line in Path(setup_times).read_text().splitlines() if "\t" in line]
            out.append("setup (hack/setup.sh, this run): " + ", ".join(f"{name} {secs} s" for name, secs in steps))
        out.append(f"slowest {self.SLOWEST} (setup + call + teardown, seconds):")
        for nodeid, seconds in sorted(self.per_test.items(), key=lambda kv: -kv[1])[: self.SLOWEST]:
            out.append(f"  {seconds:7.1f}  {nodeid}")
        return out

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        if not self.per_test:
            return
        workers = getattr(config.option, "numprocesses", None)
        lines = self.lines(workers if isinstance(workers, int) and workers > 0 else 1)
        terminalreporter.section("where the time went (build/test-report.txt)")
        for line in lines:
            terminalreporter.write_line(line)
        report = Path(config.rootpath) / "build" / "test-report.txt"
        report.parent.mkdir(exist_ok=True)
        report.write_text("\n".join(lines) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # an xdist worker reports to the controller instead
        config.pluginmanager.register(TimeReport(), "argus-time-report")
