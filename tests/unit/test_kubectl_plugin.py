"""The CLI as a kubectl plugin: its name in usage and errors, --version, the offline
commands with nothing but the core's dependencies importable, and the krew manifest that
hack/krew-manifest.py writes from a release's archives."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from argus import __version__
from argus.cli import main, program_name

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "ppo-advanced.yaml"


def test_the_plugin_names_itself_kubectl_argus(capsys: pytest.CaptureFixture[str]) -> None:
    assert program_name("/home/a/.krew/bin/kubectl-argus") == "kubectl argus"
    assert program_name("/usr/local/bin/argus") == "argus"
    with pytest.raises(SystemExit) as exit_:
        main(["--version"], prog="kubectl argus")
    assert exit_.value.code == 0 and capsys.readouterr().out == f"kubectl argus {__version__}\n"
    with pytest.raises(SystemExit):
        main(["validate", "--help"], prog="kubectl argus")
    assert capsys.readouterr().out.startswith("usage: kubectl argus validate ")
    assert main(["validate", "-f", "/nonexistent.yaml", "--user", "alice"], prog="kubectl argus") == 2
    assert capsys.readouterr().err.startswith("kubectl argus validate: cannot read /nonexistent.yaml")


BLOCKER = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("ray", "kopf", "kubernetes", "aiohttp", "prometheus_client", "cryptography"):
            raise ImportError(f"{name} is not installed (blocked by the test)")
sys.meta_path.insert(0, Block())
from argus.cli import main
sys.exit(main(sys.argv[1:], prog="argus"))
"""


@pytest.mark.parametrize("argv", [
    ["--version"],
    ["validate", "-f", str(EXAMPLE), "--user", "alice"],
    ["render", "-f", str(EXAMPLE), "--user", "alice"],
    ["crd"],
    ["completion", "bash"],
    ["convert", "-f", str(REPO / "examples" / "v3-taskspec.yaml"), "--namespace", "alice", "--name", "old"],
])
def test_offline_commands_need_only_the_core(argv: list[str]) -> None:
    """What docs/deploy.md promises to a CLI installed without Ray, kopf or the kubernetes client."""
    out = subprocess.run([sys.executable, "-c", BLOCKER, *argv], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "blocked by the test" not in out.stderr


def _archive(path: Path, *, with_bin: bool = True, executable: bool = True) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, mode in ([("kubectl-argus", 0o755 if executable else 0o644)] if with_bin else []) + [("lib/argus/__init__.py", 0o644)]:
            data = b"#!/bin/sh\n" if name == "kubectl-argus" else b""
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return path


def krew(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPO / "hack" / "krew-manifest.py"), *args], capture_output=True, text=True, timeout=60)


def test_krew_manifest_from_a_releases_archives(tmp_path: Path) -> None:
    archives = [_archive(tmp_path / f"kubectl-argus_v{__version__}_{os_}_{arch}.tar.gz")
                for os_, arch in (("linux", "amd64"), ("darwin", "arm64"))]
    out = tmp_path / "argus.yaml"
    done = krew("--url-base", "https://dl.example/v1/", "--homepage", "https://example.org/argus", "-o", str(out), *map(str, archives))
    assert done.returncode == 0, done.stderr
    doc = yaml.safe_load(out.read_text())
    assert (doc["apiVersion"], doc["kind"], doc["metadata"]["name"]) == ("krew.googlecontainertools.github.com/v1alpha2", "Plugin", "argus")
    spec = doc["spec"]
    assert spec["version"] == f"v{__version__}" and spec["homepage"] == "https://example.org/argus"
    assert spec["shortDescription"] and len(spec["shortDescription"]) <= 80
    by_os = {p["selector"]["matchLabels"]["os"]: p for p in spec["platforms"]}
    assert set(by_os) == {"linux", "darwin"}
    linux = by_os["linux"]
    assert linux["selector"] == {"matchLabels": {"os": "linux", "arch": "amd64"}}
    assert linux["uri"] == f"https://dl.example/v1/kubectl-argus_v{__version__}_linux_amd64.tar.gz"
    assert linux["sha256"] == hashlib.sha256(archives[0].read_bytes()).hexdigest()
    assert linux["bin"] == "kubectl-argus"


@pytest.mark.parametrize("name,kwargs,message", [
    ("kubectl-argus_v9.9.9_linux_amd64.tar.gz", {}, "pyproject.toml says"),
    (f"kubectl-argus_v{__version__}_linux_amd64.tar.gz", {"with_bin": False}, "holds no executable kubectl-argus"),
    (f"kubectl-argus_v{__version__}_linux_amd64.tar.gz", {"executable": False}, "holds no executable kubectl-argus"),
    (f"argus-{__version__}.tar.gz", {}, "not kubectl-argus_v<version>_<os>_<arch>.tar.gz"),
])
def test_krew_manifest_refuses_what_does_not_match_the_release(tmp_path: Path, name: str, kwargs: dict, message: str) -> None:
    archive = _archive(tmp_path / name, **kwargs)
    done = krew("--url-base", "https://dl.example", "--homepage", "https://example.org", "-o", str(tmp_path / "m.yaml"), str(archive))
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not (tmp_path / "m.yaml").exists()
