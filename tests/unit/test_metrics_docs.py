"""docs/metrics.md names every metric the operator defines (operator/argus/controller/metrics.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def test_every_metric_is_documented() -> None:
    doc = (REPO / "docs" / "metrics.md").read_text()
    source = (REPO / "operator" / "argus" / "controller" / "metrics.py").read_text()
    defined = set(re.findall(r'^\w+ = (?:Counter|Gauge|Histogram)\("(argus_[a-z_]+)"', source, re.M))
    assert len(defined) >= 6, defined
    documented = set(re.findall(r"`(argus_[a-z_]+)`", doc))
    assert defined <= documented, f"undocumented: {defined - documented}"
