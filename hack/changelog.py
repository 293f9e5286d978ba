#!/usr/bin/env python3
"""CHANGELOG.md (Keep a Changelog) against a release's version: hack/release.sh writes the
release's copy with it, hack/check-release.py checks that copy.

    hack/changelog.py CHANGELOG.md VERSION [--unreleased]   # the release's copy on stdout

A release of VERSION needs the section ``## [VERSION] - YYYY-MM-DD`` (the ``## [Unreleased]``
section renamed at the bump), and no newer version above it; the release's copy leaves out
the Unreleased section, so its first section is the release's. ``--unreleased`` (a build of a
version not released yet, as CI's) takes the ``## [Unreleased]`` section instead, stamped
``## [VERSION] - unreleased``. A problem is one line on stderr, exit 2.
"""

from __future__ import annotations

import re
import sys

HEADING = re.compile(r"^## \[(?P<name>[^\]]+)\](?: - (?P<date>\S+))?\s*$", re.M)
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class ChangelogError(Exception):
    pass


def sections(text: str) -> tuple[str, list[tuple[str, str | None, str]]]:
    """The text before the first ``## [...]`` heading, and each section: (name, date, text
    including its heading)."""
    found = list(HEADING.finditer(text))
    if not found:
        return text, []
    out = []
    for i, m in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        out.append((m["name"], m["date"], text[m.start():end]))
    return text[:found[0].start()], out


def release_copy(text: str, version: str, unreleased: bool = False) -> str:
    preamble, parts = sections(text)
    names = [name for name, _, _ in parts]
    if unreleased:
        if "Unreleased" not in names:
            raise ChangelogError("CHANGELOG.md has no '## [Unreleased]' section (Keep a Changelog)")
        if version in names:
            raise ChangelogError(f"CHANGELOG.md already has a section for {version}: build it without --unreleased")
        i = names.index("Unreleased")
        body = parts[i][2].split("\n", 1)[1] if "\n" in parts[i][2] else ""
        if not body.strip():
            raise ChangelogError("CHANGELOG.md's '## [Unreleased]' section is empty")
        stamped = f"## [{version}] - unreleased\n{body}"
        return (preamble + "".join(p[2] for p in parts[:i]) + stamped + "".join(p[2] for p in parts[i + 1:])).rstrip("\n")
    if version not in names:
        raise ChangelogError(f"CHANGELOG.md has no section '## [{version}] - YYYY-MM-DD': rename '## [Unreleased]' to it "
                             "and open a new empty '## [Unreleased]' (docs/releasing.md), or build with --unreleased")
    i = names.index(version)
    date = parts[i][1]
    if date is None or not DATE.match(date):
        raise ChangelogError(f"CHANGELOG.md's section for {version} has no date: '## [{version}] - YYYY-MM-DD'")
    newer = [n for n in names[:i] if n != "Unreleased"]
    if newer:
        raise ChangelogError(f"CHANGELOG.md lists {', '.join(newer)} above {version}: the release's section must be the newest")
    return (preamble + "".join(p[2] for p in parts[i:])).rstrip("\n")


def first_version(text: str) -> tuple[str, str | None] | None:
    """The first section's (name, date): in a release's copy, the release's own."""
    _, parts = sections(text)
    return (parts[0][0], parts[0][1]) if parts else None


def main(argv: list[str]) -> int:
    args = [a for a in argv if a != "--unreleased"]
    if len(args) != 2:
        print("usage: hack/changelog.py CHANGELOG.md VERSION [--unreleased]", file=sys.stderr)
        return 2
    try:
        with open(args[0], encoding="utf-8") as f:
            text = f.read()
        print(release_copy(text, args[1], "--unreleased" in argv))
    except OSError as exc:
        print(f"release: cannot read {args[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except ChangelogError as exc:
        print(f"release: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
