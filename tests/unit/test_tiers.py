"""The unit tier's selection: ``-m unit`` does not import tests/integration (tests/conftest.py
ignores the folder, issue 35), which is exact only while nothing there is marked ``unit``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

TESTS = Path(__file__).resolve().parents[1]
UNIT_MARK = re.compile(r"\bmark\s*\.\s*unit\b|add_marker\(\s*[\"']unit[\"']")


def test_nothing_under_tests_integration_is_marked_unit() -> None:
    marked = [str(path.relative_to(TESTS)) for path in sorted((TESTS / "integration").rglob("*.py"))
              if UNIT_MARK.search(path.read_text(encoding="utf-8"))]
    assert marked == [], f"{marked}: tests/conftest.py skips tests/integration under -m unit; move these to tests/unit"


def test_the_check_above_sees_a_unit_marker() -> None:
    """Negative control: the pattern finds the ways a module marks a test ``unit``."""
    assert UNIT_MARK.search("pytestmark = pytest.mark.unit") and UNIT_MARK.search("item.add_marker('unit')")
    assert not UNIT_MARK.search("pytestmark = pytest.mark.integration") and not UNIT_MARK.search('TESTS / "unit")')
