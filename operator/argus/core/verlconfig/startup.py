"""PLACEHOLDER until branch issue-21-oracle merges: that branch owns this module (verl's
start-up checks restated, issue 21 item 6) and replaces this file. The contract the
pipeline calls is the one below; this placeholder finds no problems."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StartupProblem:
    key: str
    value: object
    message: str


def startup_problems(config: Mapping[str, Any], *, version: str, entry: str) -> list[StartupProblem]:
    return []
