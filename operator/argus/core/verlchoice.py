"""Which verl release a task is composed for: the composers Argus has (``Composers``, one per
release it has a config tree for) and the choice among them by the verl the task's clusters
run (``choose_verl``).

The operator's composition root (host/main.py) builds ``Composers`` around the adapters'
config trees (argus.adapters.verltree); argus doctor reads the version of each cluster's
verl snapshot (``core.clusters.ClusterDoctor.verl_versions``). Intake composes a new task for
the release the clusters it may use run (``controller.intake``); the queue places it only on
a cluster that runs that release, or whose release is not known yet (``core.queue``, ``Room.verl_drift``);
a task that waits VerlDrift because its cluster turned out to run another release Argus has
is composed again for that one (``controller.intake.Intake.recompose``). A cluster whose
snapshot runs a release Argus has no tree for takes no task, and fails the doctor.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .verlconfig import Composer


class Composers:
    """The composers Argus has: the default one (the tree a task is composed with while the
    version its clusters run is not known), and one per other release it has a tree for,
    each built on first use (``build``: Hydra's composer costs a second to warm)."""

    def __init__(self, default: Composer, others: Sequence[str] = (), build: Callable[[str], Composer] | None = None):
        self.default = default
        self._build = build
        self._built: dict[str, Composer] = {default.tree.version: default}
        self.broken: dict[str, str] = {}  # a release whose composer could not be built, and why
        self.supported: tuple[str, ...] = tuple(dict.fromkeys([default.tree.version, *(others if build is not None else ())]))

    def get(self, version: str | None) -> Composer | None:
        """The composer for ``version`` (None: the default); None when Argus has no tree for it,
        or its tree could not be read after all (then it is no longer supported: ``broken``)."""
        if version is None:
            return self.default
        if version not in self.supported:
            return None
        found = self._built.get(version)
        if found is None:
            assert self._build is not None  # a supported version other than the default has a builder
            try:
                found = self._built[version] = self._build(version)
            except Exception as exc:  # noqa: BLE001 - a tree removed or unreadable since the start: the default serves
                self.broken[version] = str(exc)
                self.supported = tuple(v for v in self.supported if v != version)
                return None
        return found

    def of(self, version: str | None) -> Composer:
        """The composer for a task composed for ``version`` (its status.verl), the default
        when Argus has no tree for that version (an earlier operator's)."""
        return self.get(version) or self.default


@dataclass(frozen=True)
class VerlChoice:
    """The release to compose a task for, and why when the clusters decided it (for its status)."""

    version: str | None
    why: str = ""


def cluster_name(name: str) -> str:
    return f"cluster {name}" if name else "the Ray cluster of --ray-address"


def choose_verl(clusters: Sequence[str], runs: Mapping[str, Sequence[str]], supported: Sequence[str], default: str | None) -> VerlChoice:
    """The release to compose a task for, given the clusters it may use (most preferred
    first), the verl versions argus doctor read in each one's snapshot (none: not known) and
    the releases Argus has a tree for. Before any of them is known: ``default``. Otherwise the
    release most of the known ones run, the more preferred cluster's on a tie: the task then
    goes only where that release runs (or where the version is not known yet). A cluster at a
    release Argus has no tree for, or at several, takes no task whatever is chosen."""
    known = [(c, runs[c][0]) for c in clusters if len(runs.get(c) or ()) == 1 and runs[c][0] in supported]
    if not known:
        return VerlChoice(default)
    count: dict[str, int] = {}
    for _, version in known:
        count[version] = count.get(version, 0) + 1
    best = max(count, key=lambda v: (count[v], -next(i for i, (_, w) in enumerate(known) if w == v)))
    there = [c for c, v in known if v == best]
    others = [(c, v) for c, v in known if v != best]
    why = f"composed for verl {best}, the release {', '.join(cluster_name(c) for c in there)} run{'s' if len(there) == 1 else ''}"
    if others:
        rule = "most of the clusters it may use run it" if count[best] > max(count[v] for _, v in others) else \
            "the most preferred of its clusters runs it"
        why += f" ({rule}); it does not go to {', '.join(f'{cluster_name(c)} (verl {v})' for c, v in others)}"
    return VerlChoice(best, why)
