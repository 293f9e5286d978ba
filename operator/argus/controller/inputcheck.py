"""Existence checks before the wait (issue 36, item 5): before the queue decides, the files
and folders each queued task reads (``core.inputs``: data files, the reward function, model
folders) are looked for in the shared tree of each cluster it may use, where the operator
mounts it (``ports.SharedTree``). A task whose inputs are missing everywhere it may go is
held (``InputMissing``, one line per missing path) and looked at again every pass, so a file
uploaded after ``kubectl apply`` lets it go; one whose inputs are there on some of its
clusters may go only to those.

Cheap on purpose: a task's inputs are read once (intake hands them over from its validation;
after a restart they are computed once from the spec, which is immutable), each path is
looked for once per pass however many tasks name it, and a task found complete is not looked
at again for that attempt. A cluster whose tree is not mounted here is not checked (verl's
own start says what it misses), and the operator says so once, not per task."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from ..core import inputs as core_inputs
from ..core.config import PlatformConfig
from ..core.inputs import InputPath
from ..core.plan import validate_spec
from ..core.verlchoice import Composers
from ..core.vocabulary import Key, Reason
from .ports import SharedTree
from .view import TaskView, composed_with

log = logging.getLogger(__name__)


class InputChecks:
    def __init__(self, platform: PlatformConfig, composers: Composers | None, tree: SharedTree | None,
                 root_of: Callable[[str], str]):
        """``root_of``: the root of a cluster's shared tree, as its jobs see it (an
        ArgusCluster's root, or --root for the implicit cluster ``""``)."""
        self.platform = platform
        self.composers = composers
        self.tree = tree
        self.root_of = root_of
        self._inputs: dict[str, tuple[InputPath, ...]] = {}  # by task uid
        self._complete: set[tuple[str, int]] = set()           # (uid, attempt) found complete
        self._unmounted: set[str] = set()                       # roots said to be not mounted

    def remember(self, uid: str, found: Sequence[InputPath]) -> None:
        """A new task's inputs, from its validation at intake."""
        self._inputs[uid] = tuple(found)

    def inputs_of(self, view: TaskView) -> tuple[InputPath, ...]:
        """The task's inputs (computed once per task: the spec does not change)."""
        found = self._inputs.get(view.uid)
        if found is None:
            verdict = validate_spec(view.spec, view.state.status.user or "", self.platform, namespace=view.namespace,
                                    name=view.name, uid=view.uid, attempt=view.state.attempt,
                                    composer=composed_with(self.composers, view))
            found = self._inputs[view.uid] = verdict.inputs
        return found

    async def check(self, queued: Sequence[TaskView], clusters_of: Callable[[TaskView], tuple[str, ...] | None]
                    ) -> tuple[dict[Key, tuple[Reason, str]], dict[Key, tuple[str, ...]]]:
        """The tasks to hold (reason and message) and, for a task whose inputs are only on
        some of the clusters it may use, those clusters."""
        uids = {v.uid for v in queued}
        self._inputs = {u: i for u, i in self._inputs.items() if u in uids}
        self._complete = {c for c in self._complete if c[0] in uids}
        if self.tree is None or self.composers is None:
            return {}, {}
        todo: list[tuple[TaskView, tuple[str, ...], dict[str, tuple[InputPath, ...]]]] = []
        wanted: dict[str, set[str]] = {}  # root -> the paths to look for there
        mounted: dict[str, str | None] = {}  # cluster -> its root if mounted, asked once a pass
        for view in queued:
            if (view.uid, view.state.attempt) in self._complete:
                continue
            clusters = clusters_of(view)
            candidates = clusters if clusters is not None else ("",)
            if not candidates:
                continue  # no cluster may take it now (NoCluster): nothing to look for yet
            for cluster in candidates:
                if cluster not in mounted:
                    mounted[cluster] = self._mounted_root(cluster)
            roots = {c: mounted[c] for c in candidates}
            found = self.inputs_of(view) if any(r is not None for r in roots.values()) else ()
            on: dict[str, tuple[InputPath, ...]] = {}
            for cluster, root in roots.items():
                if root is not None and found:
                    on[cluster] = core_inputs.on_root(found, self.platform.root, root)
                    wanted.setdefault(root, set()).update(i.path for i in on[cluster])
            todo.append((view, candidates, on))
        answers: dict[str, dict[str, bool | None]] = {}
        for root, paths in wanted.items():
            answers[root] = await self.tree.exists(root, sorted(paths))
        held: dict[Key, tuple[Reason, str]] = {}
        narrowed: dict[Key, tuple[str, ...]] = {}
        for view, candidates, on in todo:
            absent = {c: core_inputs.missing(i, answers[self.root_of(c)].get) for c, i in on.items()}
            complete = [c for c in candidates if not absent.get(c)]
            if not complete:  # missing on every cluster it may use: said as the most preferred one's tree sees it
                held[view.key] = (Reason.InputMissing, core_inputs.message(absent[candidates[0]]))
            elif len(complete) < len(candidates):
                narrowed[view.key] = tuple(complete)
            else:
                self._complete.add((view.uid, view.state.attempt))
        return held, narrowed

    async def absent(self, found: Sequence[InputPath]) -> list[InputPath]:
        """The inputs not in the operator's own shared tree (--root), for the admission
        webhook's warnings; none when that tree is not mounted here."""
        root = self._mounted_root("") if self.tree is not None and found else None
        if root is None or self.tree is None:
            return []
        answers = await self.tree.exists(root, sorted({i.path for i in found}))
        return core_inputs.missing(found, answers.get)

    def _mounted_root(self, cluster: str) -> str | None:
        """The root of the cluster's tree if it is mounted here; else None, said once."""
        # Alike in shape with logfollow's _mounted (duplicates pairs them): each says once what *it*
        # loses while a tree is not mounted, keyed by what it reads; one helper would only hold the set.
        root = self.root_of(cluster)
        assert self.tree is not None
        if self.tree.mounted(root):
            self._unmounted.discard(root)
            return root
        if root not in self._unmounted:
            self._unmounted.add(root)
            log.warning("the shared tree of cluster %s (%s) is not mounted here: the files tasks read there (data, reward "
                        "function, models) are not checked before they start; mount it read-only at %s to check them",
                        cluster or "--ray-address", root, root)
        return None
