"""The path policy: which paths a task may name, read and write.

``PathPolicy`` answers for one user on parsed, normalised values (``//``, ``/./`` and ``..``
collapsed): another user's home, ``..`` out of an allowed root, the data, model, code and
output roots. The command checks (``argus.core.command.checks``) call it on the values
they read out of the parsed program; the basic spec's checks call it on its fields.
``check_text`` is the first check of every text field (size, control and invisible
characters). Problems are reported through ``Findings``, every one at once.

These checks make the command sound; they cannot follow symlinks or see what a program
does at run time, so the file system's own permissions stay the boundary underneath
(see docs/security.md).
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .config import PlatformConfig
from .problems import Problem
from .spec import MAX_COMMAND_BYTES, MAX_PATH_CHARS

if TYPE_CHECKING:
    from .inputs import InputPath

HF_MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}(/[A-Za-z0-9][A-Za-z0-9_.\-]{0,95})?$")
# Characters a consumer of a value might split it at (lists, key:value, PATH-like, URLs).
# A value is checked whole and piece by piece, so a '..' can hide behind none of them.
_SEPARATORS = re.compile(r"[\s,:;=\[\]{}()<>|&'\"`?#*@]+")
_SLASH_AFTER_SEPARATOR = re.compile(r"(?<=[\s,:;=\[\]{}()<>|&'\"`?#*@])/")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Paths through these lead anywhere (/proc/self/root/..., /proc/self/cwd/..).
_MAGIC_ROOTS = ("/proc", "/dev/fd")


@dataclass
class Findings:
    """Problems found so far, without repeats, in the order found."""

    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    # The paths the task reads, each with its key, as the checks of the composed
    # configuration pass them (core.inputs): what must exist in the shared tree.
    inputs: list[InputPath] = field(default_factory=list)
    # verl's trainer.save_freq and trainer.resume_mode as composed (None: not composed, or
    # not an integer): what a preemption of the task loses (core.preemption).
    save_freq: int | None = None
    resume_mode: str | None = None
    _seen: set[tuple[bool, str, str, str]] = field(default_factory=set, repr=False, compare=False)

    def _add(self, to: list[Problem], warning: bool, p: Problem) -> None:
        key = (warning, p.field, repr(p.value), p.rule)  # values may be unhashable (lists)
        if key not in self._seen:
            self._seen.add(key)
            to.append(p)

    def error(self, field_: str, value: object, rule: str) -> None:
        self._add(self.errors, False, Problem(field_, value, rule))

    def warn(self, field_: str, value: object, rule: str) -> None:
        self._add(self.warnings, True, Problem(field_, value, rule))


def _under(path: str, root: str) -> bool:
    """Component-wise containment: /a/alice2 is not under /a/alice."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def _normalised(raw: str) -> str:
    path = posixpath.normpath(raw)
    return "/" + path.lstrip("/") if path.startswith("//") else path


def climbs(relative: str) -> bool:
    """True when a relative path climbs above the folder it starts in."""
    if ".." not in relative:
        return False
    norm = posixpath.normpath(relative)
    return norm == ".." or norm.startswith("../")


class PathPolicy:
    """Where ``user`` may point: their home, and the shared read-only data and code."""

    def __init__(self, config: PlatformConfig, user: str):
        self.config = config
        self.user = user
        self.root = config.root
        self.home = config.home(user)
        self._home_slash = self.home + "/"
        self.users_root = config.users_root()
        self.shared_roots = tuple(config.shared(p) for p in ("datasets", "hf", "common"))
        self.data_roots = (posixpath.join(self.home, "datasets"), config.shared("datasets"), config.shared("common", "datasets"))
        # A model may be anything in the user's home (their own SFT checkpoint), the shared
        # Hugging Face cache (both its current and its v3.0 place) and the shared models.
        self.model_roots = (self.home, config.shared("hf"), config.shared("common", "hf"), config.shared("common", "models"))
        self.code_root = posixpath.join(self.home, "code")
        self.common_root = config.shared("common")

    def _root_of(self, path: str) -> str | None:
        for root in (self.home, *self.shared_roots):
            if _under(path, root):
                return root
        return None

    def _owner(self, path: str) -> str | None:
        """Whose home a normalised path is in, if any."""
        if not path.startswith(self.users_root + "/"):
            return None
        return path[len(self.users_root) + 1 :].split("/", 1)[0] or None

    def absolute_problem(self, raw: str) -> str | None:
        """Why this user may not name the absolute path ``raw``, or None."""
        if raw.startswith(self._home_slash) and "/." not in raw and "//" not in raw:
            return None  # in the user's own home, and nothing to normalise
        path = _normalised(raw)
        if "/../" in f"{raw}/" or raw.endswith("/.."):
            before = raw.split("/../", 1)[0] if "/../" in raw else raw[: -len("/..")]
            start = self._root_of(_normalised(before or "/"))
            if start is not None and not _under(path, start):
                owner = self._owner(path)
                where = f" into another user's home ({owner}); only {self.home}/... is yours" if owner not in (None, self.user) else ""
                return f"'..' climbs out of {start}{where}"
        if any(_under(path, m) for m in _MAGIC_ROOTS):
            return f"names a path through {' or '.join(_MAGIC_ROOTS)}, which can lead anywhere: write the path itself"
        if not _under(path, self.root):
            return None
        if path in (self.root, self.users_root):
            return f"names {path} itself; only {self.home}/... and the shared {', '.join(self.shared_roots)} are allowed"
        if _under(path, self.users_root):
            owner = self._owner(path)
            return None if owner == self.user else f"is in another user's home ({owner}); only {self.home}/... is yours"
        if self._root_of(path) is None:
            return f"is outside the folders a task may use ({self.home}, {', '.join(self.shared_roots)})"
        return None

    def check_absolute(self, field_: str, raw: str, findings: Findings) -> None:
        """One absolute path met anywhere in the task: may this user name it?"""
        rule = self.absolute_problem(raw)
        if rule is not None:
            findings.error(field_, raw, rule)

    def _piece_problem(self, piece: str) -> str | None:
        if piece.startswith("~"):
            return "'~' expands to the worker's home, not yours: use $HOME"
        if piece.startswith("/"):
            return self.absolute_problem(piece)
        if climbs(piece):
            return "'..' climbs out of the job directory; use an absolute path under $HOME"
        return None

    def check_string(self, field_: str, value: str, findings: Findings) -> None:
        """Any text value the task passes on (an override, an environment variable): read
        as a path whole, piece by piece at every separator a consumer might split it at,
        and from every '/' that follows such a separator to the end. Reports the first
        problem."""
        if self.root not in value and ".." not in value and "~" not in value and not any(m in value for m in _MAGIC_ROOTS):
            return
        if value.startswith(self._home_slash) and "/." not in value and "//" not in value and not _SEPARATORS.search(value):
            return  # one path in the user's own home: the common case
        if ".." in value and len(value) > MAX_PATH_CHARS:
            findings.error(field_, value, f"holds '..' in a value longer than {MAX_PATH_CHARS} characters, more than the check "
                           "reads: write the paths out normalised")
            return
        rule = self._piece_problem(value)
        if rule is not None:
            findings.error(field_, value, rule)
            return
        if not _SEPARATORS.search(value):
            return
        candidates = [p for p in _SEPARATORS.split(value) if p]
        candidates += [value[m.start():] for m in _SLASH_AFTER_SEPARATOR.finditer(value)]
        for candidate in dict.fromkeys(candidates):
            rule = self._piece_problem(candidate)
            if rule is not None:
                findings.error(field_, candidate, rule)
                return

    def check_under(self, field_: str, value: str, roots: tuple[str, ...], what: str, findings: Findings, suffix: str | None = None) -> None:
        """A path that must sit under one of ``roots`` (after normalisation)."""
        if not value.startswith("/"):
            findings.error(field_, value, f"{what} must be an absolute path under {' or '.join(r + '/' for r in roots)}")
            return
        path = _normalised(value)
        if not any(_under(path, r) and path != r for r in roots):
            findings.error(field_, value, f"{what} must be under {' or '.join(r + '/' for r in roots)}")
        elif suffix and not path.endswith(suffix):
            findings.error(field_, value, f"{what} must be a {suffix} file")

    def check_output(self, field_: str, value: str, what: str, findings: Findings) -> None:
        """A folder or file a run writes: in the user's home, or relative to the job folder
        without climbing out of it."""
        if value.startswith("/"):
            self.check_under(field_, value, (self.home,), what, findings)
        elif climbs(value) or value.startswith("~"):
            findings.error(field_, value, f"{what} must not climb out of the job directory; use an absolute path under $HOME")

    def check_model(self, field_: str, value: str, findings: Findings) -> None:
        if value.startswith(("/", ".", "~")) or ".." in value:
            self.check_under(field_, value, self.model_roots, "a model path", findings)
        elif not HF_MODEL_ID.fullmatch(value):
            findings.error(field_, value, "must be a Hugging Face model id like Qwen/Qwen2.5-0.5B-Instruct, or an absolute model path")


def _bad_character(text: str) -> tuple[int, str, str] | None:
    """(offset, character, rule) of the first character no field may hold."""
    if text.isascii():
        # str.isprintable is quick and false for every ASCII control character.
        if text.replace("\n", "").replace("\t", "").isprintable():
            return None
        m = _CONTROL.search(text)
        return (m.start(), m.group(), "control characters other than newline and tab are not allowed") if m else None
    for i, c in enumerate(text):
        if c.isascii():
            if c < " " and c not in "\n\t" or c == "\x7f":
                return i, c, "control characters other than newline and tab are not allowed"
            continue
        category = unicodedata.category(c)
        if category == "Cc":
            return i, c, "control characters other than newline and tab are not allowed"
        if category in ("Zs", "Zl", "Zp"):
            return i, c, (f"a Unicode space or line separator (U+{ord(c):04X}) looks like a blank, but bash keeps it "
                          "inside a word: use a plain space or newline")
        if category in ("Cf", "Cs", "Co", "Cn"):
            return i, c, (f"invisible, private or unassigned characters (U+{ord(c):04X}) are not allowed: "
                          "they make the text read differently from what runs")
    return None


def check_text(field_: str, text: str, findings: Findings, *, max_bytes: int = MAX_COMMAND_BYTES, what: str = "") -> bool:
    """Size, control and invisible characters. Returns False when the text is unusable."""
    size = len(text) if len(text) * 4 <= max_bytes else len(text.encode("utf-8"))
    if size > max_bytes:
        findings.error(field_, f"{size} bytes", f"{what}is larger than the {max_bytes // 1024} KiB limit")
        return False
    bad = _bad_character(text)
    if bad is not None:
        offset, c, rule = bad
        code = f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"
        findings.error(field_, f"{code} at offset {offset}", rule)
        return False
    return True
