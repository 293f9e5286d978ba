"""hack/release.sh refuses what would make a wrong release before it builds anything: a
version that is not the project's, a short image name (a runtime would pick its registry),
an image name carrying its own tag, a missing location."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from argus import __version__

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
GOOD = ["--image-repository", "registry.example.com/argus/argus-operator", "--download-url", "https://dl.example/v1",
        "--homepage", "https://example.org/argus"]


def release(*args: str) -> subprocess.CompletedProcess[str]:
    # The Python (and uv) running these tests: a checkout without .venv (pip install -e
    # '.[test]' elsewhere, the mutation check's scratch copy) has no other.
    env = {**os.environ, "PYTHON": sys.executable, "UV": str(Path(sys.executable).with_name("uv"))}
    return subprocess.run(["bash", str(REPO / "hack" / "release.sh"), *args], capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.parametrize("args,message", [
    (["9.9.9", *GOOD], "VERSION 9.9.9 is not pyproject.toml's version"),
    ([__version__, *GOOD[:1], "argus-operator", *GOOD[2:]], "--image-repository argus-operator is a short name"),
    ([__version__, *GOOD[:1], "argus/argus-operator", *GOOD[2:]], "is a short name"),
    ([__version__, *GOOD[:1], "registry:5000/argus-operator:1.0", *GOOD[2:]], "no tag or digest"),
    ([__version__, *GOOD[:2]], "--download-url is required"),
    ([__version__, *GOOD, "--image", "x", "--no-image"], "exclude each other"),
    ([*GOOD], "usage: hack/release.sh VERSION"),
    # CHANGELOG.md holds an Unreleased section, not this version's (a real release renames it).
    ([__version__, *GOOD], f"CHANGELOG.md has no section '## [{__version__}] - YYYY-MM-DD'"),
])
def test_release_refuses_before_building(args: list[str], message: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = release(*args, "--out", str(out))
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1 and not out.exists()
