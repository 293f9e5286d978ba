"""Every chart value the docs name (README, docs/, the chart's README and NOTES.txt; found by
tests/unit/docs_lines.py) rendered with ``helm template``: a documented setting (``--set
webhook.enabled=true``) as written, a value named without one at its default from
values.yaml, each on its own. A value the schema refuses, or a documented setting the chart
cannot render, fails here. helm only (built by hack/build-testbed-bins.sh); no cluster."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from argus_testbed import find_binaries

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from docs_lines import CHART, chart_values, placeholder  # noqa: E402

pytestmark = pytest.mark.integration

KUBE_VERSION = "1.34.4"  # the testbed's; helm template assumes 1.20 unless told, which the chart refuses
_MISSING = object()
# What a documented setting needs beside it, as the chart's own message (and the doc's line) says.
COMPANIONS = {"operator.progress.source=file": ["--set-json", 'sharedTree.volume={"persistentVolumeClaim": {"claimName": "argus-private"}}']}


@functools.cache
def _values() -> Any:
    """values.yaml, parsed once (read only: every documented name was parsing it again, at
    each collection of the module, 6 s of CPU in each process that collects it)."""
    return yaml.safe_load((CHART / "values.yaml").read_text())


def _default(path: str) -> Any:
    node: Any = _values()
    for segment in path.split("."):
        if not isinstance(node, dict) or segment not in node:
            return _MISSING
        node = node[segment]
    return node


def _cases() -> list[Any]:
    cases: dict[tuple[str, str], str] = {}
    for where, name, setting in chart_values():
        if setting is not None and not placeholder(setting):
            cases.setdefault(("--set", f"{name}={setting}"), where.where)
        elif (default := _default(name)) is not _MISSING:
            cases.setdefault(("--set-json", f"{name}={json.dumps(default)}"), where.where)
    return [pytest.param(flag, value, id=f"{value} ({where})") for (flag, value), where in sorted(cases.items())]


@pytest.fixture(scope="module")
def helm_template(tmp_path_factory: pytest.TempPathFactory) -> Any:
    binary = find_binaries() / "helm"
    home = tmp_path_factory.mktemp("helm-home")
    env = {**os.environ, "HELM_CACHE_HOME": str(home / "cache"), "HELM_CONFIG_HOME": str(home / "config"),
           "HELM_DATA_HOME": str(home / "data")}
    env.pop("KUBECONFIG", None)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(binary), "template", "argus", str(CHART), "-n", "argus-system", "--kube-version", KUBE_VERSION,
                               *args], capture_output=True, text=True, env=env, timeout=120)
    return run


@pytest.mark.parametrize("flag,value", _cases())
def test_documented_chart_value_renders(flag: str, value: str, helm_template: Any) -> None:
    done = helm_template(flag, value, *COMPANIONS.get(value, []))
    assert done.returncode == 0, f"helm template {flag} {value}: {done.stderr.strip()}"


def test_a_value_the_schema_refuses_fails(helm_template: Any) -> None:
    done = helm_template("--set", "operator.crdCheckInterval=600")
    assert done.returncode != 0 and "crdCheckInterval" in done.stderr
