"""bench/chaos.py's report (docs/reliability.md): a run of some scenarios only (``--only``)
rewrites only their rows and sections and keeps every other scenario's figures as their own
run wrote them, each section saying which run it comes from."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def chaos() -> Any:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import chaos as module
    finally:
        sys.path.remove(str(REPO / "bench"))
    return module


def test_a_run_of_one_scenario_replaces_only_its_row_and_section() -> None:
    c = chaos()
    text = (REPO / "docs" / "reliability.md").read_text()
    report = c.Check("preempt-restart", "SIGKILL at each stage")
    report.times = 12
    report.checks.append(("every task Succeeded", True, "9/9"))
    once = c.merge_doc(text, {"preempt-restart": (c.summary_row(report), c.section(report, "Run on its own: the first."))})
    assert "| preempt-restart | SIGKILL at each stage | 12 | 1/1 | **PASS** |" in once
    assert "## preempt-restart\n\nRun on its own: the first." in once
    for name in ("kill", "head-restart", "hostile"):  # the others' sections, word for word
        section = text.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        assert f"\n## {name}\n{section}" in once
    report.checks[0] = ("every task Succeeded", False, "8/9")
    twice = c.merge_doc(once, {"preempt-restart": (c.summary_row(report), c.section(report, "Run on its own: the second."))})
    assert twice.count("## preempt-restart") == 1 and "the first." not in twice and "| 12 | 0/1 | **FAIL** |" in twice
    assert twice.split("\n## preempt-restart\n")[0].replace("0/1 | **FAIL**", "1/1 | **PASS**") == once.split("\n## preempt-restart\n")[0]
    assert "everything below but the scenarios that say they ran on their own comes from one run of" in twice
