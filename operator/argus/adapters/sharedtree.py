"""Whether the files a task reads exist in the shared tree, where the operator mounts it:
``controller.ports.SharedTree`` for ``core.inputs``.

Each cluster's tree is read at the path its jobs see it (an ArgusCluster's ``spec.root``;
``--root`` for the implicit cluster): the root is the operator's own configuration for the
cluster, never taken from the task; the paths are the task's, already held by validation
to the user's home and the shared roots.

One ``stat`` per path, in a worker thread (a network file system may be slow). A path is
only answered for inside its tree: a link that leads out of it (a job runs as the Ray
worker's uid and may put one in a home) is not followed to tell the user whether something
exists in the operator's own filesystem; the answer is then "cannot tell" (None).
"""

from __future__ import annotations

import asyncio
import os
import posixpath
from collections.abc import Sequence


class LocalSharedTree:
    def mounted(self, root: str) -> bool:
        """The tree is mounted when its root holds the users' folder (``<root>/users``), as
        ``--progress-source file`` asks: an empty folder at the root is not the tree."""
        return os.path.isdir(posixpath.join(root, "users"))

    async def exists(self, root: str, paths: Sequence[str]) -> dict[str, bool | None]:
        return await asyncio.to_thread(self.look, root, paths)

    @staticmethod
    def look(root: str, paths: Sequence[str]) -> dict[str, bool | None]:
        """``exists``, in the caller's thread (argus validate)."""
        root = posixpath.normpath(root)
        real_root = os.path.realpath(root)
        out: dict[str, bool | None] = {}
        for path in paths:
            if not posixpath.isabs(path) or not posixpath.normpath(path).startswith(root + "/"):
                out[path] = None  # not in this tree: not ours to answer
                continue
            real = os.path.realpath(path)  # links resolved, whether or not the end exists
            if real != real_root and not real.startswith(real_root + "/"):
                out[path] = None  # leads out of the tree: neither followed nor answered
                continue
            try:
                os.stat(real)
            except (FileNotFoundError, NotADirectoryError):
                out[path] = False  # (NotADirectoryError: a file where a folder of the path should be)
            except OSError:
                out[path] = None  # unreadable here (permissions, a stale mount): cannot tell
            else:
                out[path] = True
        return out
