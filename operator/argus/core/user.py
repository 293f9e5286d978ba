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


def user_from_label(namespace: str, label: str | None) -> tuple[str | None, str, str]:
    """(user, reason, message) from a namespace's ``argus.io/user`` label (None: the
    namespace has none, or there is no such namespace); user None when the namespace
    cannot run tasks, with the reason and message that say why."""
    if not label:
        return None, "NamespaceNotOnboarded", f"namespace {namespace} has no {USER_LABEL} label: ask an admin to run 'argus onboard <user> --namespace {namespace}'"
    try:
        return check_user_id(label), "", ""
    except InvalidUserId as exc:
        return None, "InvalidUser", f"namespace label {USER_LABEL}={label!r} is not a valid user id: {exc}"
