"""Issue 34, item 1: the role of every key of every supported verl release, generated
(hack/gen-verl-roles.py) and reviewed in the repository (argus/verlroles/<version>.tsv,
classified in keys.py); a key with no reviewed role, or one verl does not declare, is
refused when a task sets it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from argus.adapters.verlcompose import pinned_releases
from argus.core.verlconfig.roles import BLOCK, UNKNOWN, classify, table

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
VERSIONS = [r.version for r in pinned_releases()]


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_verl_roles", REPO / "hack" / "gen-verl-roles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("version", VERSIONS)
def test_every_key_of_the_release_has_a_reviewed_role_and_the_table_is_current(version: str) -> None:
    """Re-generating gives the file in the repository (so a release whose tree has a key the
    table lacks fails here), and no key is left unknown."""
    text = _generator().generate(version)
    path = REPO / "operator" / "argus" / "verlroles" / f"{version}.tsv"
    assert path.read_text(encoding="utf-8") == text, f"not current: run .venv/bin/python hack/gen-verl-roles.py {version}"
    unknown = [line.split("\t")[0] for line in text.splitlines() if line.split("\t")[1:2] == [UNKNOWN]]
    assert not unknown, f"verl {version}: classify these keys in argus/core/verlconfig/keys.py: {unknown}"


@pytest.mark.parametrize("version", VERSIONS)
def test_the_table_is_package_data_read_as_a_dict(version: str) -> None:
    roles = table(version)
    assert roles is not None and roles["data.train_files"] == "data" and roles["ray_kwargs.ray_init"] == BLOCK
    assert roles["trainer.total_epochs"] == "plain"
    assert table("0.0.0") is None


@pytest.mark.parametrize(("key", "raw", "value", "annotation", "role"), [
    ("trainer.total_epochs", 15, 15, None, "plain"),
    ("trainer.logger", ["console"], ["console"], None, "plain"),
    ("a.b.some_new_path", "x", "x", None, UNKNOWN),
    ("a.b.new_knob", None, None, "Optional[int]", "plain"),
    ("a.b.new_thing", None, None, "Optional[str]", UNKNOWN),
    ("a.b.new_text", "a/b c", "a/b c", None, UNKNOWN),
    ("a.b.new_kwargs", {}, {}, None, UNKNOWN),
    ("x.profiler.finish_hook_cmd", None, None, None, "command"),
    ("actor_rollout_ref.model.external_lib", None, None, None, "class"),
])
def test_the_generator_classifies_by_the_reviewed_tables_then_by_type(key: str, raw: Any, value: Any, annotation: Any,
                                                                      role: str) -> None:
    assert classify(key, raw, value, annotation)[0] == role
