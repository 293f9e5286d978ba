"""Who the task runs as. The user id never comes from the spec (anyone could spoof it):
the operator reads it from the namespace label ``argus.io/user``, the CLI from ``--user``.
"""

from __future__ import annotations

import re

USER_LABEL = "argus.io/user"
USER_ID_PATTERN = r"^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$"
_USER_ID = re.compile(USER_ID_PATTERN)


class InvalidUserId(ValueError):
    """The user id is not one a home directory can be named after."""


def check_user_id(user: object) -> str:
    """Return ``user`` if it is a valid user id, else raise ``InvalidUserId`` with the rule."""
    if not isinstance(user, str) or not _USER_ID.fullmatch(user):
        raise InvalidUserId(f"user id {user!r} must match {USER_ID_PATTERN}")
    return user
