"""hack/kind-e2e.sh skips cleanly (exit 0, one clear line) where Docker or kind is missing.
The script's real run needs Docker and kind; these tests never reach it (the tools it would
call are absent or fail on purpose)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "hack" / "kind-e2e.sh"


def run(path_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": str(path_dir), "HOME": os.environ.get("HOME", "/tmp")}
    return subprocess.run([shutil.which("bash") or "/bin/bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)


def tools(tmp_path: Path, **fakes: str) -> Path:
    """A PATH folder with dirname (the script needs it) and the given fake commands."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "dirname").symlink_to(shutil.which("dirname") or "/usr/bin/dirname")
    for name, body in fakes.items():
        (folder / name).write_text(f"#!/bin/sh\n{body}\n")
        (folder / name).chmod(0o755)
    return folder


def test_skips_without_docker(tmp_path: Path) -> None:
    out = run(tools(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "kind-e2e: skipped: docker/kind not available (no docker command)"


def test_skips_when_the_docker_daemon_is_down(tmp_path: Path) -> None:
    out = run(tools(tmp_path, docker='echo "Cannot connect to the Docker daemon" >&2; exit 1', kind="exit 99"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "kind-e2e: skipped: docker/kind not available (the Docker daemon is not running or not reachable)"


def test_skips_without_kind(tmp_path: Path) -> None:
    out = run(tools(tmp_path, docker="exit 0"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "kind-e2e: skipped: docker/kind not available (no kind command)"


def test_the_ray_image_is_the_kind_variant_of_the_worker_image() -> None:
    """The stock rayproject/ray image lacks hydra-core (the stand-in imports hydra) and verl's
    stack: the script builds deploy/ray-image/Dockerfile's kind variant, whose pins are the
    testbed's (tests/unit/test_ray_image.py), loads it into kind and deploys the Ray nodes with it."""
    text = SCRIPT.read_text()
    assert "docker build -f deploy/ray-image/Dockerfile --build-arg \"BASE_IMAGE=rayproject/ray:${RAY_VERSION}-py311\"" in text
    assert "--build-arg VARIANT=kind -t \"$RAY_IMAGE\" ." in text
    assert 'kind load docker-image "$RAY_IMAGE" --name "$CLUSTER"' in text
    assert 'sed "s|__RAY_IMAGE__|$RAY_IMAGE|g" deploy/kind/ray-cluster.yaml' in text
    assert "hydra-core" in (REPO / "deploy" / "ray-image" / "kind-requirements.in").read_text()
    assert "kind" in (REPO / "deploy" / "ray-image" / "Dockerfile").read_text()
