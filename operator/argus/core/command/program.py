"""The typed program: what a parsed ``spec.command`` is made of.

Flow of the command checks (``argus.core.command``)::

    spec.command -> check_text -> expand ($HOME macros) -> syntax.parse -> Script
        -> resolve (static variables)      -> Script with every script variable substituted
        -> launchers (python3 / torchrun)  -> Launch: program, options, module, Hydra arguments
        -> hydra (Hydra's own parser)      -> Settings: key, typed value
        -> checks (path policy, counts)    -> Problems, and the counts to add
        -> emit                            -> the text Ray runs (SubmissionPlan.command)

This module holds the types every step shares. A ``Word`` is a shell word as bash builds
it: literal text, references to variables (``Var``) and ``$(date +FORMAT)`` (``Date``), the
only command substitution the language has. Quoting is gone once a word is parsed; what
remains of it is whether an unquoted expansion may vanish (``Word.solid``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Var:
    """``$NAME`` or ``${NAME}``. ``quoted``: inside double quotes (then bash neither splits
    nor globs the value)."""

    name: str
    quoted: bool = True


@dataclass(frozen=True, slots=True)
class Date:
    """``$(date +FORMAT)``: the one substitution left to bash, kept as written."""

    format: str


Part = str | Var | Date


class Word:
    """One shell word. ``parts`` never holds an empty string nor two strings in a row.

    ``solid`` is false when the word is made only of unquoted expansions: bash drops such a
    word when it expands to nothing (``$EMPTY``), and keeps it otherwise (``"$EMPTY"``, ``''``).
    ``line`` and ``source`` say where the word stands, for messages; they are not part of
    its meaning (equality ignores them).
    """

    # A plain class: a 64 KiB command holds a thousand words, and a frozen dataclass's
    # __init__ is several times slower.
    __slots__ = ("parts", "solid", "line", "source")

    def __init__(self, parts: tuple[Part, ...], solid: bool = True, line: int = 0, source: str = ""):
        self.parts = parts
        self.solid = solid
        self.line = line
        self.source = source

    def __eq__(self, other: object) -> bool:
        return type(other) is Word and self.parts == other.parts and self.solid == other.solid

    def __hash__(self) -> int:
        return hash((self.parts, self.solid))

    def __repr__(self) -> str:
        return f"Word({self.parts!r}{'' if self.solid else ', solid=False'})"

    @property
    def literal(self) -> str | None:
        """The word's text when it is plain text, else None."""
        if not self.parts:
            return ""
        if len(self.parts) == 1 and type(self.parts[0]) is str:
            return self.parts[0]
        return None

    def shown(self) -> str:
        """The word as a message shows it: text, with expansions spelled as written."""
        out = []
        for p in self.parts:
            if type(p) is str:
                out.append(p)
            elif type(p) is Var:
                out.append(f"${{{p.name}}}")
            else:
                out.append(f"$(date +{p.format})")  # type: ignore[union-attr]
        return "".join(out)


def merge_text(parts: Iterable[Part]) -> list[Part]:
    """The parts with adjacent text merged and empty text dropped: the one form a ``Word``'s
    parts take, whichever step (parse, resolve) made them."""
    merged: list[Part] = []
    for p in parts:
        if type(p) is str:
            if not p:
                continue
            if merged and type(merged[-1]) is str:
                merged[-1] = merged[-1] + p
                continue
        merged.append(p)
    return merged


def word(*parts: Part, solid: bool = True, line: int = 0) -> Word:
    """A ``Word`` from parts, merging adjacent text and dropping empty text."""
    return Word(tuple(merge_text(parts)), solid, line)


@dataclass(frozen=True, slots=True)
class SetOptions:
    """``set -e -u -x -o pipefail`` (any of them, on or off): (option name, on) pairs."""

    options: tuple[tuple[str, bool], ...]
    line: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Assign:
    """``NAME=value``, or ``export NAME=value`` when ``export``."""

    name: str
    value: Word
    export: bool = False
    line: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Export:
    """``export NAME`` for a variable assigned earlier."""

    name: str
    line: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Tee:
    """``[2>&1] | tee [-a] FILE`` after the entrypoint."""

    file: Word
    append: bool = False
    stderr: bool = True


@dataclass(frozen=True, slots=True)
class Run:
    """The entrypoint: environment prefixes, the program and its arguments, an optional tee."""

    env: tuple[Assign, ...]
    argv: tuple[Word, ...]
    tee: Tee | None = None
    line: int = field(default=0, compare=False)


Statement = SetOptions | Assign | Export | Run


@dataclass(frozen=True, slots=True)
class Script:
    statements: tuple[Statement, ...]

    @property
    def run(self) -> Run | None:
        for s in self.statements:
            if type(s) is Run:
                return s
        return None


@dataclass(frozen=True, slots=True)
class Refusal:
    """Something the language does not allow, with where it is and what to do instead.

    Reported as ``<field>: <token>: <rule> (line N): <advice>``.
    """

    line: int
    token: str
    rule: str
    advice: str = ""

    def text(self) -> str:
        where = f" (line {self.line})" if self.line else ""
        return f"{self.rule}{where}: {self.advice}" if self.advice else f"{self.rule}{where}"
