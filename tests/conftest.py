"""Shared pytest setup: markers only, so that ``pytest -m unit`` needs nothing but the
project and its test extras (the testbed's fixtures are in tests/integration/conftest.py).

Markers: tests under tests/unit are marked `unit`, tests under tests/integration `integration`
(unless they carry one of those markers already), so `-m unit` / `-m "not integration"` work.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """``-m unit`` without the testbed installed: tests/integration (its conftest and its
    modules import the testbed) is not even imported. Any other run collects it, and fails
    loudly there when the testbed is missing."""
    if (collection_path == TESTS_DIR / "integration" and config.getoption("markexpr") == "unit"
            and importlib.util.find_spec("argus_testbed") is None):
        return True
    return None


# --------------------------------------------------------------------------- markers

def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
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
