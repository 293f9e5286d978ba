"""Step 2 of the command checks: static substitution of the script's own variables.

    spec.command -> check_text -> expand -> syntax.parse -> **resolve** -> launchers -> hydra -> checks -> emit

Every ``$NAME`` must name a variable the script assigned earlier (``$HOME`` is a macro,
already expanded); its value, itself resolved, replaces the reference, so the words the
later checks read, and the command that runs, hold no script variable. The one reference
left to bash is a variable's own inherited value prepended or appended in its assignment
(``export PYTHONPATH=$HOME/code:$PYTHONPATH``); a later use of such a variable is refused,
since its value is not known here. ``$(date +FORMAT)`` travels along inside values.

A script variable that is never exported is substituted where it is used and left out of
the resolved script, so it never reaches the job's environment (bash would otherwise pass
on an assignment to a name the job inherited, exported or not). A name that does reach
it (``export NAME``, a prefix of the entrypoint) must be on the allowlist of
``environment.py``.

Refused here: references to anything else (``$USER``, ``$PWD``, an unset name), a variable
assigned twice, names bash itself reads (``PATH``, ``IFS`` ...), environment names that
are not on the allowlist (``LD_PRELOAD``, ``RAY_*``, ``HYDRA_*`` ...), an unquoted expansion that bash
would split into several words or expand as a file pattern, and values that grow past
``MAX_WORD_CHARS`` by substitution.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..expand import REMOVED_COMMON, without_common
from .environment import environment_reason, shell_name_reason
from .program import Assign, Date, Export, Part, Refusal, Run, Script, SetOptions, Statement, Tee, Var, Word, merge_text

# A value substituted into itself over and over (A=xx, B=$A$A, C=$B$B ...) grows
# exponentially; past this size it is refused rather than built.
MAX_WORD_CHARS = 256 * 1024

DATE_ADVICE = ("$(date +FORMAT) may stand only in a non-path override value such as trainer.experiment_name, "
               "or in a variable used only there")


@dataclass(slots=True)
class Binding:
    """A variable of the script: its resolved value and what is known about it."""

    parts: tuple[Part, ...]
    size: int
    line: int
    exported: bool = False
    inherited: bool = False  # holds its own inherited value ($NAME in its own assignment)

    @property
    def has_date(self) -> bool:
        return any(type(p) is Date for p in self.parts)


def _size(parts: tuple[Part, ...]) -> int:
    return sum(len(p) if type(p) is str else 16 for p in parts)


class _Resolver:
    def __init__(self) -> None:
        self.bindings: dict[str, Binding] = {}
        self.refusals: list[Refusal] = []
        self.refused: set[str] = set()  # variables whose assignment was refused (and reported)

    def refuse(self, line: int, token: str, rule: str, advice: str = "") -> None:
        self.refusals.append(Refusal(line, token, rule, advice))

    def word(self, w: Word, *, scope: dict[str, Binding] | None = None, own: str | None = None) -> Word | None:
        """``w`` with its variables substituted: a solid word of text and ``Date`` parts
        (and, for ``own``, the inherited ``Var``). None when it vanishes or is refused."""
        if all(type(p) is str for p in w.parts):
            return w if w.solid or w.parts else None
        out: list[Part] = []
        size = 0
        ok = True
        for p in w.parts:
            if type(p) is not Var:
                out.append(p)
                size += len(p) if type(p) is str else 16
                continue
            name = p.name
            if name == own:
                out.append(Var(name, True))
                continue
            b = (scope or {}).get(name) or self.bindings.get(name)
            if b is None:
                ok = False
                if name in self.refused:
                    continue  # its assignment was refused: one line is enough
                if name == "HOME":
                    self.refuse(w.line, w.source, "$HOME must be followed by '/' or end the path",
                                "write $HOME/..., or ${HOME}/...; text glued to $HOME would name another folder")
                elif name == "COMMON":
                    self.refuse(w.line, w.source or "$COMMON", REMOVED_COMMON,
                                f"$HOME/common/... replaces it: write {without_common(w.source) if w.source else '$HOME/common/...'}")
                else:
                    self.refuse(w.line, f"${name}", f"${name} is not assigned earlier in the command",
                                "assign it before its use (NAME=value), or write the value out; only the command's own "
                                "variables and $HOME are substituted")
                continue
            if b.inherited:
                ok = False
                self.refuse(w.line, f"${name}", f"${name} holds the inherited value of {name}, which the check cannot see",
                            "write the value out")
                continue
            if not p.quoted:
                text = "".join(x for x in b.parts if type(x) is str)
                if any(c in text for c in " \t\n"):
                    ok = False
                    self.refuse(w.line, f"${name}", f"unquoted ${name} holds blanks, so bash would split it into "
                                f"{len(text.split())} words", f'write the words out, or quote it ("${name}") to keep one word')
                    continue
                if "*" in text or "?" in text:
                    ok = False
                    self.refuse(w.line, f"${name}", f"unquoted ${name} holds a file pattern ('*' or '?') that bash would expand",
                                f'write the names out, or quote it ("${name}")')
                    continue
            size += b.size
            if size > MAX_WORD_CHARS:
                self.refuse(w.line, w.source[:60], f"the value grows past {MAX_WORD_CHARS // 1024} KiB by substitution",
                            "write the value out")
                return None
            out.extend(b.parts)
        if not ok:
            return None
        merged = merge_text(out)
        if not merged and not w.solid:
            return None  # an unquoted expansion to nothing: bash drops the word
        return Word(tuple(merged), True, w.line, w.source)

    def check_name(self, name: str, line: int, token: str, *, environment: bool) -> bool:
        """``environment``: the name reaches the job's environment (exported or a prefix of
        the entrypoint), so it must be on the allowlist; else it is a script variable,
        substituted where used, and only bash's own names are refused."""
        reason = environment_reason(name) if environment else shell_name_reason(name)
        if reason is not None:
            self.refuse(line, token, f"setting {name} is not allowed", f"{reason}; remove it")
            return False
        return True

    def assign(self, a: Assign, *, scope: dict[str, Binding] | None = None) -> Assign | None:
        result = self._assign(a, scope=scope)
        if result is None and a.name not in self.bindings:
            self.refused.add(a.name)
        return result

    def _assign(self, a: Assign, *, scope: dict[str, Binding] | None = None) -> Assign | None:
        token = a.value.source or f"{a.name}={a.value.shown()}"  # the source word, NAME= included
        environment = a.export or scope is not None
        if not self.check_name(a.name, a.line, token, environment=False):
            return None
        earlier = self.bindings.get(a.name)
        if earlier is not None:
            self.refuse(a.line, token, f"{a.name} is assigned twice (lines {earlier.line} and {a.line})",
                        "give each value its own name")
            return None
        own = a.name if any(type(p) is Var and p.name == a.name for p in a.value.parts) else None
        value = self.word(a.value, scope=scope, own=own)
        if value is None:
            if a.value.parts:
                return None
            value = Word((), True, a.line, "")
        inherited = own is not None
        if inherited and not _inherited_at_an_end(value.parts, a.name):
            self.refuse(a.line, token, f"{a.name} may add to its inherited value only at the start or the end, next to ':'",
                        f"write {a.name}=$HOME/...:${a.name} or {a.name}=${a.name}:$HOME/...")
            return None
        if environment and any(type(p) is Date for p in value.parts):
            self.refuse(a.line, token, f"$(date ...) is not allowed in the environment ({a.name})", DATE_ADVICE)
            return None
        if environment and not self.check_name(a.name, a.line, token, environment=True):
            return None
        binding = Binding(value.parts, _size(value.parts), a.line, a.export, inherited)
        if scope is not None:
            scope[a.name] = binding
        else:
            self.bindings[a.name] = binding
        return Assign(a.name, value, a.export, a.line)

    def statement(self, s: Statement) -> Statement | None:
        if type(s) is SetOptions:
            return s
        if type(s) is Assign:
            return self.assign(s)
        if type(s) is Export:
            name = s.name
            b = self.bindings.get(name)
            if b is None:
                if name not in self.refused:
                    self.refuse(s.line, f"export {name}", f"export {name} names no variable assigned earlier",
                                f"write export {name}=value")
                return None
            if b.has_date:
                self.refuse(s.line, f"export {name}", f"$(date ...) is not allowed in the environment ({name})", DATE_ADVICE)
                return None
            if not self.check_name(name, s.line, f"export {name}", environment=True):
                return None
            b.exported = True
            return s
        assert type(s) is Run
        scope: dict[str, Binding] = {}
        env: list[Assign] = []
        for a in s.env:
            if a.name in self.bindings:
                self.refuse(a.line, (a.value.source or a.name), f"{a.name} is already assigned on line {self.bindings[a.name].line}",
                            "give the variable one value: assign it once, before the entrypoint, or only as the prefix")
                continue
            r = self.assign(a, scope=scope)
            if r is not None:
                env.append(r)
        argv = [word for w in s.argv if (word := self.word(w)) is not None]
        tee = None
        if s.tee is not None:
            f = self.word(s.tee.file)
            if f is None:
                self.refuse(s.line, s.tee.file.source, "the tee file expands to nothing", "name a file under $HOME")
            else:
                tee = Tee(f, s.tee.append, s.tee.stderr)
        return Run(tuple(env), tuple(argv), tee, s.line)


def _inherited_at_an_end(parts: tuple[Part, ...], name: str) -> bool:
    own = [k for k, p in enumerate(parts) if type(p) is Var]
    if len(own) != 1:
        return False
    k = own[0]
    if len(parts) == 1:
        return True
    if k == 0:
        nxt = parts[1]
        return type(nxt) is str and nxt.startswith(":")
    if k == len(parts) - 1:
        prev = parts[-2]
        return type(prev) is str and prev.endswith(":")
    return False


def resolve(script: Script) -> tuple[Script, dict[str, Binding], list[Refusal]]:
    """Substitute the script's variables. Returns the resolved script (statements refused
    here are left out), the variables, and the refusals."""
    r = _Resolver()
    out = [x for s in script.statements if (x := r.statement(s)) is not None]
    exported = {s.name for s in out if type(s) is Export} | {s.name for s in out if type(s) is Assign and s.export}
    # Every use of a script variable is substituted: one never exported has no reader left.
    out = [s for s in out if type(s) is not Assign or s.name in exported]
    return Script(tuple(out)), r.bindings, r.refusals
