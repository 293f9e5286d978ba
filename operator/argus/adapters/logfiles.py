"""The jobs' log files and exit markers, read where the operator mounts the shared tree:
``controller.ports.LogFiles`` (the exit markers, whatever the progress source, and the logs
for ``--progress-source file``, the cheaper source of progress, which costs the Ray head
nothing: Ray's log stream is served by its dashboard, one stream per running job) and
``read_text`` (the log API's reader of logs Ray no longer has).

Each cluster's tree is read where it is mounted at the path its jobs see it (an ArgusCluster's
``spec.root``; ``--root`` for the implicit cluster): the users folder a read may use is the
operator's own configuration for the task's cluster, never taken from the task.

Only files under the users' folders are read, and never through a symbolic link: a job runs
as the Ray worker's uid and may put a link where its log should be; the operator must not
follow it out of the tree (or to another file in it).
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import stat
from collections.abc import Iterable

TEXT_CHUNK = 1 << 20


class LocalLogFiles:
    def __init__(self, users_root: str):
        self.users_root = posixpath.normpath(users_root)  # the operator's --root's users folder

    def _root(self, users_root: str | None) -> str:
        """The users folder asked for, normalized (None: --root's)."""
        return posixpath.normpath(users_root) if users_root else self.users_root

    def mounted(self, users_root: str | None) -> bool:
        return os.path.isdir(self._root(users_root))

    async def read(self, path: str, offset: int, limit: int, users_root: str | None = None) -> bytes:
        return await asyncio.to_thread(self._read, path, offset, limit, self._root(users_root))

    async def present(self, files: list[tuple[str, str | None]]) -> set[str]:
        return await asyncio.to_thread(self._present, files)

    def _present(self, files: list[tuple[str, str | None]]) -> set[str]:
        found = set()
        for path, users_root in files:
            try:
                # Most markers are not there yet: one lstat says so; only a file that is gets
                # the path check (a realpath, a dozen lstats), which then decides.
                if stat.S_ISREG(os.lstat(path).st_mode):
                    self._check(path, self._root(users_root))
                    found.add(path)
            except OSError:
                continue
        return found

    @staticmethod
    def _check(path: str, users_root: str) -> None:
        if not posixpath.isabs(path) or posixpath.normpath(path) != path or not path.startswith(users_root + "/"):
            raise PermissionError(f"{path}: not a normalized path under {users_root}/")
        # The root itself may be reached through links (a mount under a linked folder);
        # nothing below it may.
        real, expected = os.path.realpath(path), os.path.realpath(users_root) + path[len(users_root):]
        if real != expected:
            raise PermissionError(f"{path}: reached through a symbolic link ({real})")

    def _read(self, path: str, offset: int, limit: int, users_root: str) -> bytes:
        self._check(path, users_root)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            return os.pread(fd, limit, offset)
        finally:
            os.close(fd)

    def read_text(self, path: str, users_roots: Iterable[str]) -> str:
        """A whole log file for the log API, under the one of ``users_roots`` (the users
        folders of the operator's clusters, from its own configuration) that holds it, with
        the same refusals as ``read``: a job that put a link where its log should be gets
        nothing read through it (the operator's own files, its service account token, are
        in the same filesystem). Raises OSError (PermissionError: not under any of them)."""
        roots = [posixpath.normpath(r) for r in users_roots]
        root = next((r for r in roots if path.startswith(r + "/")), None)
        if root is None:
            raise PermissionError(f"{path}: not under a users folder the operator reads ({', '.join(roots)})")
        chunks: list[bytes] = []
        offset = 0
        while chunk := self._read(path, offset, TEXT_CHUNK, root):
            chunks.append(chunk)
            offset += len(chunk)
        return b"".join(chunks).decode("utf-8", errors="replace")
