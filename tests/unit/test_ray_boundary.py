"""The Ray boundary does not depend on what it hides: Ray's records and errors live in the
core (``core.rayjobs``), and the controller (its ``RayJobs`` protocol included) takes them
from there. From the adapter it imports only what builds and describes the client."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import argus.adapters.ray as adapter
import argus.core.rayjobs as rayjobs

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[2] / "operator" / "argus"
# What a composition root may take from the adapter: the client, and what it says about it.
ADAPTER_API = {"RayJobsClient", "client_version", "version_note", "read_token_file", "RayTokenError"}


def _names_from_adapter(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("adapters.ray"):
            names |= {alias.name for alias in node.names}
    return names


def test_the_records_and_errors_are_the_cores() -> None:
    for name in ("RayJob", "RayNode", "PlacementGroup", "RayUnreachable", "RayAuthFailed", "RayJobUnknown", "RayJobExists", "RayRefused"):
        assert getattr(rayjobs, name).__module__ == "argus.core.rayjobs", name
        assert getattr(adapter, name) is getattr(rayjobs, name), f"the adapter raises the core's {name}"


@pytest.mark.parametrize("path", sorted([*(PACKAGE / "controller").glob("*.py"), PACKAGE / "clusterctl.py", PACKAGE / "logsctl.py", PACKAGE / "onboardctl.py", PACKAGE / "cli.py"]),
                         ids=lambda p: p.name)
def test_no_module_takes_ray_records_or_errors_from_the_adapter(path: Path) -> None:
    taken = _names_from_adapter(path)
    assert taken <= ADAPTER_API, f"{path.name} imports {sorted(taken - ADAPTER_API)} from adapters.ray: import them from core.rayjobs"


def test_the_check_sees_a_violation(tmp_path: Path) -> None:
    """Negative control: the parse finds a record imported from the adapter."""
    module = tmp_path / "bad.py"
    module.write_text("from ..adapters.ray import RayJobsClient, RayUnreachable\n")
    assert _names_from_adapter(module) - ADAPTER_API == {"RayUnreachable"}
