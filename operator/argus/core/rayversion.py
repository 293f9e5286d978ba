"""The Ray versions Argus supports, declared once: the adapter's start-up note
(``adapters.ray.version_note``) and ``argus doctor`` (``core.doctor``) both read them."""

from __future__ import annotations

import re

# The cluster versions CI runs the operator's lifecycle against (README: supported Ray).
TESTED_RAY = ("2.41.0", "2.60.0")
TOKEN_AUTH_SINCE = "2.52.0"  # the first Ray whose clusters can require a token


def release(version: str) -> tuple[int, ...]:
    """(2, 41, 0) of '2.41.0' (pre-release and build suffixes ignored)."""
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+", maxsplit=1)[0].split("rc", maxsplit=1)[0])[:3])


def older_than_supported(version: str) -> bool:
    return release(version) < release(TESTED_RAY[0])


def newer_than_tested(version: str) -> bool:
    return release(version)[:2] > release(TESTED_RAY[1])[:2]


def has_token_auth(version: str) -> bool:
    return release(version) >= release(TOKEN_AUTH_SINCE)
