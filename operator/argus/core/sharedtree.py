"""The layout of a user's home on the shared tree: docs/ray-image.md, "The shared tree", as
``argus onboard --shared-tree`` makes it and hack/lay-out-shared-tree.sh does; pure, the I/O
is the caller's.

Every job runs as the Ray worker's uid (docs/security.md), so a home belongs to that uid, not
to the user: the job makes its folder under ``jobs/`` and verl writes checkpoints there."""

from __future__ import annotations

import posixpath
import shlex

# What a home holds: the user's data, models and code (the reward function), the jobs' folders
# and logs, and checkpoints ($HOME/checkpoints/... in the basic templates).
HOME_FOLDERS = ("datasets", "models", "code", "jobs", "checkpoints")
# The Ray images' user: ray, uid 1000, group users (gid 100).
DEFAULT_WORKER_UID = 1000
DEFAULT_WORKER_GID = 100
# The worker's uid reads and writes; its group reads; nobody else.
HOME_MODE = 0o750


def home_folders(tree: str, user: str) -> list[str]:
    """The home and its folders, the home first, under the tree's root ``tree``."""
    home = posixpath.join(tree, "users", user)
    return [home] + [posixpath.join(home, sub) for sub in HOME_FOLDERS]


def home_command(tree: str, user: str, uid: int = DEFAULT_WORKER_UID, gid: int = DEFAULT_WORKER_GID) -> str:
    """The one command an admin runs on a machine with the shared tree at ``tree``."""
    paths = " ".join(shlex.quote(p) for p in home_folders(tree, user))
    return f"install -d -o {uid} -g {gid} -m {HOME_MODE:04o} {paths}"
