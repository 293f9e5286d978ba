"""hack/changelog.py: the release's copy of CHANGELOG.md starts with the release's own
section (a dated one, or with --unreleased the Unreleased one stamped with the version), and
the repository's CHANGELOG.md is in the form it reads."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from argus import __version__

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack"))
from changelog import ChangelogError, first_version, release_copy  # noqa: E402

LOG = """# Changelog

Intro.

## [Unreleased]

### Added
- next thing

## [0.2.0] - 2027-01-10

### Fixed
- a fix

## [0.1.0] - 2026-12-20

### Added
- first
"""


def test_a_release_starts_with_its_dated_section() -> None:
    copy = release_copy(LOG, "0.2.0")
    assert copy.startswith("# Changelog\n\nIntro.\n\n## [0.2.0] - 2027-01-10\n") and "next thing" not in copy
    assert first_version(copy) == ("0.2.0", "2027-01-10") and "## [0.1.0] - 2026-12-20" in copy


@pytest.mark.parametrize("text,version,message", [
    (LOG, "0.3.0", "no section '## [0.3.0] - YYYY-MM-DD'"),
    (LOG, "0.1.0", "lists 0.2.0 above 0.1.0"),
    (LOG.replace("## [0.2.0] - 2027-01-10", "## [0.2.0]"), "0.2.0", "has no date"),
])
def test_a_release_without_its_section_is_refused(text: str, version: str, message: str) -> None:
    with pytest.raises(ChangelogError, match=message.replace("[", r"\[").replace("]", r"\]")):
        release_copy(text, version)


def test_an_unreleased_build_stamps_the_unreleased_section() -> None:
    copy = release_copy(LOG, "0.3.0", unreleased=True)
    assert first_version(copy) == ("0.3.0", "unreleased") and "next thing" in copy and "[Unreleased]" not in copy
    with pytest.raises(ChangelogError, match="already has a section for 0.2.0"):
        release_copy(LOG, "0.2.0", unreleased=True)
    with pytest.raises(ChangelogError, match="is empty"):
        release_copy(LOG.replace("### Added\n- next thing\n", ""), "0.3.0", unreleased=True)


def test_the_repositorys_changelog() -> None:
    text = (REPO / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog\n") and "keepachangelog.com" in text
    # What CI builds (hack/release.sh --unreleased) reads.
    assert first_version(release_copy(text, __version__, unreleased=True)) == (__version__, "unreleased")
