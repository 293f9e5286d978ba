"""The files and folders a task reads, and whether they exist in the shared tree: issue 36,
item 5 (existence checks before the wait). Pure: the controller asks the tree.

**What a task reads.** The checker of the composed configuration (``verlconfig.check``)
classifies each key verl reads by its role (``verlconfig.keys``): data files (``data``), the
reward function and other code files (``code``, ``code-config``), models, tokenizers and
adapters (``model``) and other files verl reads (``read``). Every such value the task sets,
that passed its role's rule and is an absolute path, is an ``InputPath``, with the key that
names it (``data.train_files[1]`` for a list's second file). A model that is not a path (a
Hugging Face repo id such as ``Qwen/Qwen2.5-0.5B``) is not one: nothing to look for here.
The paths are as the job sees them (``$HOME/common/datasets/...`` is
``<root>/datasets/...``: ``core.expand``).

**Where.** Each Ray cluster's shared tree is read where the operator mounts it, at the root
its jobs see (``--root``; an ArgusCluster's ``spec.root``). A task is validated with the
operator's own root; on a cluster with another root the same path sits under that root
(``on_root``).

**The decision.** ``missing`` keeps the inputs the tree says do not exist. A path the tree
cannot answer for (``None``: not readable, or reached through a link out of the tree) is
not held against the task: verl's own start says what it finds. A task with a missing
input is not admitted: it waits, ``InputMissing``, with one line per missing path
(``message``), and goes once they exist.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from .verlconfig.keys import CODE, CODE_CONFIG, DATA, MODEL, READ

# The roles whose values verl reads before or while it trains: what must exist.
INPUT_ROLES = frozenset((DATA, CODE, CODE_CONFIG, MODEL, READ))
# One line per missing input in a waiting task's message, at most (the rest counted).
MAX_LINES = 5


@dataclass(frozen=True)
class InputPath:
    """A file or folder a task reads: the key that names it, the path as the job sees it and
    the key's role (``verlconfig.keys``)."""

    field: str
    path: str
    role: str

    def line(self) -> str:
        what = "folder" if self.role == MODEL else "file"
        path = self.path if self.path.isprintable() else repr(self.path)[1:-1]  # one line, whatever the path holds
        return f"{self.field}: {path} does not exist in the shared tree (the {what} verl reads at start)"


def is_input(role: str | None, value: str) -> bool:
    """Whether a value of a key with ``role`` is a path the task reads: an absolute path
    (a hub id, a URL or a relative value is not looked for)."""
    return role in INPUT_ROLES and value.startswith("/") and not value.startswith("//")


def dedupe(inputs: Iterable[InputPath]) -> tuple[InputPath, ...]:
    """Each path once, under the first key that names it (the legacy reward block and the
    one verl 0.9 reads name the same file)."""
    seen: dict[str, InputPath] = {}
    for i in inputs:
        seen.setdefault(posixpath.normpath(i.path), i)
    return tuple(seen.values())


def on_root(inputs: Sequence[InputPath], validated_root: str, root: str) -> tuple[InputPath, ...]:
    """The inputs as a cluster whose shared tree is at ``root`` sees them (the task was
    validated with ``validated_root``); a path outside the validated root is left as is."""
    if validated_root == root:
        return tuple(inputs)
    out = []
    for i in inputs:
        if i.path == validated_root or i.path.startswith(validated_root.rstrip("/") + "/"):
            i = InputPath(i.field, posixpath.join(root, i.path[len(validated_root):].lstrip("/")), i.role)
        out.append(i)
    return tuple(out)


def missing(inputs: Iterable[InputPath], exists: Callable[[str], bool | None]) -> list[InputPath]:
    """The inputs the tree says do not exist (``exists``: True, False, or None when it cannot
    tell: not held against the task)."""
    return [i for i in inputs if exists(i.path) is False]


def message(absent: Sequence[InputPath]) -> str:
    """The waiting task's message: one line per missing input (at most ``MAX_LINES``), and
    what lets it go."""
    lines = [i.line() for i in absent[:MAX_LINES]]
    if len(absent) > MAX_LINES:
        lines.append(f"... and {len(absent) - MAX_LINES} more missing inputs")
    lines.append("waiting: the task goes when they exist (upload them, or fix the paths in a new task)"
                 if len(absent) > 1 else "waiting: the task goes when it exists (upload it, or fix the path in a new task)")
    return "\n".join(lines)


def warning_lines(absent: Sequence[InputPath]) -> list[str]:
    """The admission webhook's warnings (and argus validate's): one line per missing input."""
    return [f"{i.line()}: the task will wait in the queue (InputMissing) until it exists" for i in absent]
