#!/usr/bin/env python3
"""Regenerates the blocks of docs/lifecycle.md and README.md that come from the lifecycle's
declared transition table (operator/argus/core/transitions.py): the state diagram, the
phase/reason and transition tables, and the README's phase list. Each block sits between
its marker comments. tests/unit/test_transitions.py fails when they are stale.

Run it from anywhere: .venv/bin/python hack/update-lifecycle-docs.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from argus.core.transitions import BLOCKS, render

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    for path in BLOCKS:
        file = ROOT / path
        old = file.read_text()
        new = render(path, old)
        if new != old:
            file.write_text(new)
            print(f"wrote {path}")
        else:
            print(f"{path} is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
