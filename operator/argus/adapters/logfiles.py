"""The jobs' log files read where the shared tree is mounted in the operator
(``controller.ports.LogFiles``, for ``--progress-source file``): the cheaper source of
progress, which costs the Ray head nothing (Ray's log stream is served by its dashboard, one
stream per running job).

Only files under the users' folders are read, and never through a symbolic link: a job runs
as the Ray worker's uid and may put a link where its log should be; the operator must not
follow it out of the tree (or to another file in it).
"""

from __future__ import annotations

import asyncio
import os
import posixpath


class LocalLogFiles:
    def __init__(self, users_root: str):
        self.users_root = posixpath.normpath(users_root)

    async def read(self, path: str, offset: int, limit: int) -> bytes:
        return await asyncio.to_thread(self._read, path, offset, limit)

    def _read(self, path: str, offset: int, limit: int) -> bytes:
        if not posixpath.isabs(path) or posixpath.normpath(path) != path or not path.startswith(self.users_root + "/"):
            raise PermissionError(f"{path}: not a normalized path under {self.users_root}/")
        # The root itself may be reached through links (a mount under a linked folder);
        # nothing below it may.
        real, expected = os.path.realpath(path), os.path.realpath(self.users_root) + path[len(self.users_root):]
        if real != expected:
            raise PermissionError(f"{path}: reached through a symbolic link ({real})")
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            return os.pread(fd, limit, offset)
        finally:
            os.close(fd)
