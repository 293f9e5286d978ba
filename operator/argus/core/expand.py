"""Macro expansion: the paths a user writes as seen in the file browser become the paths
the training process sees (v3.5 design).

    $HOME/common/datasets -> <root>/datasets
    $HOME/common/hf       -> <root>/hf
    $HOME                 -> <root>/users/<user>

``${HOME}`` is the same macro; ``$HOMEDIR`` and other names that merely start with HOME are
left alone. The virtual form ``<root>/users/<user>/common/datasets|hf`` maps like the
macro, so expansion is idempotent.
"""

from __future__ import annotations

import re

from .config import PlatformConfig

# $HOME or ${HOME}, not followed by a name character ($HOMEDIR stays as it is).
_HOME = r"(?:\$HOME(?![A-Za-z0-9_])|\$\{HOME\})"
# The shared folders a user sees under $HOME/common, ended at a path boundary.
_SHARED = r"/common/(datasets|hf)(?=/|$|[^A-Za-z0-9_.\-])"


def expand(text: str, user: str, config: PlatformConfig) -> str:
    """Expand the $HOME macros of ``text`` for ``user`` (an already checked user id)."""
    home = config.home(user)
    text = re.sub(_HOME + _SHARED, lambda m: config.shared(m.group(1)), text)
    text = re.sub(_HOME, lambda m: home, text)
    # The virtual form that the file browser shows, written out by hand or left by a
    # previous expansion.
    text = re.sub(r"(?<![\w.\-])" + re.escape(home) + _SHARED, lambda m: config.shared(m.group(1)), text)
    return text
