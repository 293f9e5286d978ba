"""The verl config trees tests compose with: the pinned releases hack/fetch-verl.sh caches
(hack/setup.sh fetches them). A missing one fails the test with the command that fetches it."""

from __future__ import annotations

import os

from argus.adapters.verlcompose import cache_dir


def verl_tree(version: str) -> str:
    root = os.path.join(cache_dir(), version)
    if not os.path.isdir(os.path.join(root, "verl", "trainer", "config")):
        raise RuntimeError(f"verl {version}'s config tree is not in {cache_dir()}: run bash hack/fetch-verl.sh")
    return root
