"""Macro expansion: the paths a user writes as seen in the file browser, as the training
process sees them; the v3.5 design.

    $HOME/common/datasets -> <root>/datasets
    $HOME/common/hf       -> <root>/hf
    $HOME                 -> <root>/users/<user>

``${HOME}`` is the same macro; ``$HOMEDIR`` and other names that merely start with HOME are
left alone. The virtual form ``<root>/users/<user>/common/datasets|hf`` maps like the
macro, so expansion is idempotent.

A macro is expanded only where it ends a path segment: before ``/``, at the end of the
text or a word (or before more macros that are). ``${HOME}2`` or ``$HOME-x`` would glue text
onto the user segment (``/private/users/alice2`` is another user's home), so they stay as
written and the command's checks refuse them (``command.resolve``: "$HOME must be followed by
'/' or end the path").

v3.0's ``$COMMON`` (the shared tree) is gone: v3.5 writes it ``$HOME/common``. It is never
expanded; where it stands it is refused with ``REMOVED_COMMON`` and the path rewritten
(``without_common``), in a basic spec's path fields and in a command (``command.resolve``).
"""

from __future__ import annotations

import re

from .config import PlatformConfig

# $HOME or ${HOME}, not followed by a name character ($HOMEDIR stays as it is).
_HOME = r"(?:\$HOME(?![A-Za-z0-9_])|\$\{HOME\})"
# What may follow a macro that is expanded: a path separator, the end of the text, a
# character that ends the shell word or Hydra value, or a line continuation to a blank; or other
# $HOME macros that are themselves so followed (they expand to paths starting with '/').
_SEGMENT_END = r"(?=(?:" + _HOME + r")*(?:/|$|[\s'\";|&()<>,:=\]}]|\\\n(?![^ \t\r\n])))"
# The shared folders a user sees under $HOME/common, ended at a path boundary.
_SHARED = r"/common/(datasets|hf)(?=/|$|[^A-Za-z0-9_.\-])"

_MACRO_SHARED = re.compile(_HOME + _SHARED)
_MACRO_HOME = re.compile(_HOME + _SEGMENT_END)


# v3.0's $COMMON or ${COMMON}, ending its path segment as a macro does.
_COMMON = re.compile(r"(?:\$COMMON(?![A-Za-z0-9_])|\$\{COMMON\})")
REMOVED_COMMON = "v3.5 removed $COMMON (v3.0's shared tree)"


def uses_common(text: str) -> bool:
    """Whether ``text`` holds v3.0's ``$COMMON`` macro."""
    return "COMMON" in text and _COMMON.search(text) is not None


def without_common(text: str) -> str:
    """``text`` with v3.0's ``$COMMON`` written the v3.5 way, ``$HOME/common``."""
    return _COMMON.sub("$HOME/common", text)


def _escaped(text: str, i: int) -> bool:
    """True when the '$' at ``i`` is escaped (bash reads \\$HOME as the text $HOME). (A
    check here, not a look-behind in the pattern: that would slow every search.)"""
    return i > 0 and text[i - 1] == "\\"


def expand(text: str, user: str, config: PlatformConfig) -> str:
    """Expand the $HOME macros of ``text`` for ``user`` (an already checked user id)."""
    if "$" in text:
        home = config.home(user)
        source = text

        def shared(m: re.Match[str]) -> str:
            return m.group() if _escaped(source, m.start()) else config.shared(m.group(1))

        text = _MACRO_SHARED.sub(shared, text)
        source = text
        text = _MACRO_HOME.sub(lambda m: m.group() if _escaped(source, m.start()) else home, text)
    # The virtual form that the file browser shows, written out by hand or left by a
    # previous expansion.
    virtual = config.home(user) + "/common/"
    if virtual in text:
        text = re.sub(r"(?<![\w.\-])" + re.escape(config.home(user)) + _SHARED, lambda m: config.shared(m.group(1)), text)
    return text
