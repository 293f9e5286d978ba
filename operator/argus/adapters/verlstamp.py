"""What the cached compositions of ``verlcompose.HydraComposer`` are keyed by, besides the
names: the state of the config folders they were read from (a user edits her own
``--config-dir`` files between two validations; a cluster's verl snapshot is updated in
place).

A folder's stamp is the (mtime, size) of every file and folder under it, re-read on every
call: the folders of a search path are re-stated (a file created, renamed or deleted changes
its folder's mtime, and the folder is then walked again) and so are the files. verl's own
config tree is about 150 entries, a few hundred microseconds. A folder with more entries
than ``MAX_ENTRIES`` (a home given as ``--config-dir``) gets a stamp of its own on every call:
nothing read from it is cached.

    HydraComposer._compose -> **FolderStamps.stamp**(search roots) -> the caches' keys
"""

from __future__ import annotations

import os
import threading

MAX_ENTRIES = 4096


class FolderStamps:
    """The stamps of config folders, each folder's listing kept between calls."""

    def __init__(self) -> None:
        # root -> (its folders, its files, the folders' stats when walked)
        self._listings: dict[str, tuple[list[str], list[str], tuple[tuple[int, int], ...]]] = {}
        self._lock = threading.Lock()
        self._uncached = 0

    def stamp(self, roots: tuple[str | None, ...]) -> tuple[object, ...]:
        """One value per root that changes when anything under it changes (None for None)."""
        with self._lock:
            return tuple(None if r is None else self._stamp(r) for r in roots)

    def _stamp(self, root: str) -> object:
        listing = self._listings.get(root)
        if listing is not None:
            folders, files, seen = listing
            if _stats(folders) == seen:  # nothing created, renamed or deleted: the same files
                return (seen, _stats(files))
        walked = _walk(root)
        if walked is None:  # too large to stamp: never the same stamp twice
            self._uncached += 1
            return ("uncached", root, self._uncached)
        folders, files = walked
        seen = _stats(folders)
        self._listings[root] = (folders, files, seen)
        return (seen, _stats(files))


def _walk(root: str) -> tuple[list[str], list[str]] | None:
    """The folders and files under ``root`` (None: more than MAX_ENTRIES). A missing root is
    an empty listing of the root itself (its creation changes its stamp)."""
    folders, files = [root], []
    count = 0
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for e in entries:
            count += 1
            if count > MAX_ENTRIES:
                return None
            try:
                is_dir = e.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                folders.append(e.path)
                stack.append(e.path)
            else:
                files.append(e.path)
    return sorted(folders), sorted(files)


def _stats(paths: list[str]) -> tuple[tuple[int, int], ...]:
    """(mtime_ns, size) of each path; (-1, -1) for one that is gone."""
    out = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            out.append((-1, -1))
            continue
        out.append((st.st_mtime_ns, st.st_size))
    return tuple(out)
