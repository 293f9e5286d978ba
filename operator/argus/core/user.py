"""Who the task runs as. The user id never comes from the spec (anyone could spoof it):
the operator reads it from the namespace label ``argus.io/user``, the CLI from ``--user``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .vocabulary import Reason

USER_LABEL = "argus.io/user"
GPU_QUOTA_ANNOTATION = "argus.io/gpu-quota"  # on a user's namespace: GPUs their running tasks may hold in all
USER_ID_PATTERN = r"^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$"
_USER_ID = re.compile(USER_ID_PATTERN)


class InvalidUserId(ValueError):
    """The user id is not one a home directory can be named after."""


def check_user_id(user: object) -> str:
    """Return ``user`` if it is a valid user id, else raise ``InvalidUserId`` with the rule."""
    if not isinstance(user, str) or not _USER_ID.fullmatch(user):
        raise InvalidUserId(f"user id {user!r} must match {USER_ID_PATTERN}")
    return user


def user_from_label(namespace: str, label: str | None) -> tuple[str | None, Reason | str, str]:
    """(user, reason, message) from a namespace's ``argus.io/user`` label (None: the
    namespace has none, or there is no such namespace); user None when the namespace
    cannot run tasks, with the reason and message that say why."""
    if not label:
        return None, Reason.NamespaceNotOnboarded, f"namespace {namespace} has no {USER_LABEL} label: ask an admin to run 'argus onboard <user> --namespace {namespace}'"
    try:
        return check_user_id(label), "", ""
    except InvalidUserId as exc:
        return None, Reason.InvalidUser, f"namespace label {USER_LABEL}={label!r} is not a valid user id: {exc}"


def quota_from_annotation(value: object) -> int | None:
    """A namespace's GPU quota annotation as a number of GPUs (None: absent or unreadable)."""
    if not isinstance(value, str) or not value.strip().isdigit():
        return None
    return int(value.strip())


def quotas_by_user(namespaces: Mapping[str, tuple[str, int | None, Mapping[str, str]]]) -> dict[str, int | None]:
    """A user's quota: the smallest among their namespaces' (a user with several namespaces
    gets no more by spreading tasks over them); users whose namespaces set none are absent."""
    out: dict[str, int] = {}
    for user, quota, _labels in namespaces.values():
        if quota is not None:
            out[user] = min(quota, out.get(user, quota))
    return dict(out)
