"""Where the verl config tree Argus composes with comes from (``find_tree``): the verl
snapshot the cluster runs (``PlatformConfig.verl_code()``, read through the shared tree where
the operator mounts it), else a pinned release from the cache (``~/.cache/argus/verl/<version>``,
filled by hack/fetch-verl.sh; baked into the image), or what ``--verl-config VERSION|DIR``
names. The pinned releases are listed once, in the package's ``verl-releases.txt``;
``argus validate`` may fetch one (``fetch_release``); the operator composes with each one
present here (``present_releases``) besides its default tree, unless ``--verl-config`` names one.

    find_tree -> ConfigTree -> verlcompose.HydraComposer(tree).compose(request) -> Composed
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from importlib import resources

from ..core.config import PlatformConfig
from ..core.verlconfig import ConfigTree

RELEASES_RESOURCE = "verl-releases.txt"
_VERSION = re.compile(r"^[0-9]+(\.[0-9]+){1,3}([a-z0-9.+-]*)?$")


class ConfigTreeError(Exception):
    """No verl config tree could be found or fetched: one line that says where to get one."""


@dataclass(frozen=True)
class Release:
    version: str
    sha256: str


def pinned_releases() -> list[Release]:
    """The verl releases Argus composes against, newest (the default) first."""
    text = resources.files("argus").joinpath(RELEASES_RESOURCE).read_text(encoding="utf-8")
    out = []
    for line in text.splitlines():
        words = line.split()
        if words and not words[0].startswith("#"):
            out.append(Release(words[0], words[1]))
    return out


def cache_dir() -> str:
    base = os.environ.get("ARGUS_CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "argus")
    return os.path.join(base, "verl")


def release_dirs() -> list[str]:
    """Where a pinned release's tree may be: the cache, then the image's copy."""
    return [cache_dir(), "/opt/argus/verl"]


def _tree_version(root: str) -> str | None:
    try:
        with open(os.path.join(root, "verl", "version", "version"), encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


def _has_config(root: str) -> bool:
    return os.path.isdir(os.path.join(root, "verl", "trainer", "config"))


def find_tree(choice: str | None, platform: PlatformConfig, *, fetch: bool = False) -> ConfigTree:
    """The config tree to compose with. ``choice``: None (the cluster's verl snapshot if it
    is readable here, else the default pinned release), a version, or a folder."""
    if choice is None:
        snapshot = platform.verl_code()
        if _has_config(snapshot):
            return ConfigTree(_tree_version(snapshot) or "unknown", snapshot, "cluster")
        choice = pinned_releases()[0].version
    if _VERSION.match(choice):
        for base in release_dirs():
            root = os.path.join(base, choice)
            if _has_config(root):
                return ConfigTree(_tree_version(root) or choice, root, "release")
        if fetch:
            return ConfigTree(choice, fetch_release(choice), "release")
        raise ConfigTreeError(f"verl {choice}'s config tree is not in {cache_dir()}: run hack/fetch-verl.sh {choice} "
                              "(or argus validate, which fetches a pinned release from the package index)")
    root = os.path.abspath(choice)
    for candidate in (root, os.path.dirname(root), os.path.dirname(os.path.dirname(os.path.dirname(root)))):
        if _has_config(candidate):
            return ConfigTree(_tree_version(candidate) or "unknown", candidate, "folder")
    raise ConfigTreeError(f"--verl-config {choice}: neither a pinned verl version nor a folder holding verl/trainer/config")


def present_releases() -> list[str]:
    """The pinned releases whose config tree is here (the cache, or the image's copy), newest
    first: the operator composes a task for the one its cluster runs (core.verlchoice)."""
    return [r.version for r in pinned_releases() if any(_has_config(os.path.join(base, r.version)) for base in release_dirs())]


def fetch_release(version: str) -> str:
    """Fetch a pinned release's wheel from the package index into the cache (sha256-checked,
    as hack/fetch-verl.sh does); return its folder."""
    pinned = {r.version: r for r in pinned_releases()}
    if version not in pinned:
        raise ConfigTreeError(f"verl {version} is not a pinned release ({', '.join(pinned)}); give a folder with --verl-config DIR")
    dest = os.path.join(cache_dir(), version)
    os.makedirs(cache_dir(), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir(), prefix=f".fetch-{version}.") as tmp:
        print(f"fetching verl {version}'s config tree from the package index into {dest}", file=sys.stderr)
        done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
                               "--only-binary=:all:", "-d", tmp, f"verl=={version}"], capture_output=True, text=True)
        wheels = [f for f in os.listdir(tmp) if f.endswith(".whl")]
        if done.returncode != 0 or not wheels:
            last = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise ConfigTreeError(f"cannot fetch verl {version} from the package index ({last}); offline, run "
                                  f"hack/fetch-verl.sh {version} where the index is reachable, or give --verl-config DIR")
        import hashlib  # noqa: PLC0415

        wheel = os.path.join(tmp, wheels[0])
        with open(wheel, "rb") as f:
            got = hashlib.sha256(f.read()).hexdigest()
        if got != pinned[version].sha256:
            raise ConfigTreeError(f"verl {version}: the wheel's sha256 is {got}, not the pinned {pinned[version].sha256}")
        tree = os.path.join(tmp, "tree")
        with zipfile.ZipFile(wheel) as z:
            z.extractall(tree)
        if not os.path.isdir(dest):
            shutil.move(tree, dest)
    return dest
