"""The last step of the command checks: a ``Script`` -> the bash text Ray runs.

    spec.command -> check_text -> expand -> syntax.parse -> resolve -> launchers -> hydra -> checks -> **emit**

The text is generated from the checked program, never copied from the user's: every word
is quoted here, so bash reads back exactly the words that were checked (no globbing, no
brace expansion, no splitting), and ``syntax.parse(emit(script))`` gives ``script`` back.
Comments and blank lines are gone; the entrypoint gets one argument per line.
"""

from __future__ import annotations

import re

from .program import Assign, Date, Export, Run, Script, SetOptions, Var, Word

# Characters bash gives no meaning to anywhere in a word (shlex.quote's set).
_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_SHORT_SET_OPTIONS = {"errexit": "e", "nounset": "u", "xtrace": "x"}


_DOUBLE_QUOTE_SPECIAL = re.compile(r'[$`"\\]')


def quote(text: str) -> str:
    """``text`` as one bash word that means exactly ``text``."""
    if _SAFE.fullmatch(text):
        return text
    if "'" in text and not _DOUBLE_QUOTE_SPECIAL.search(text):
        return f'"{text}"'  # a Hydra list of quoted strings reads better this way
    return "'" + text.replace("'", "'\"'\"'") + "'"


def emit_word(w: Word) -> str:
    if not w.parts:
        return "''"
    out = []
    anchored = False  # has something that keeps the word when its expansions are empty
    for p in w.parts:
        t = type(p)
        if t is str:
            out.append(quote(p))  # type: ignore[arg-type]
            anchored = True
        elif t is Var:
            if p.quoted:  # type: ignore[union-attr]
                out.append(f'"${{{p.name}}}"')  # type: ignore[union-attr]
                anchored = True
            else:
                out.append(f"${{{p.name}}}")  # type: ignore[union-attr]
        else:
            assert t is Date
            out.append(f'"$(date +{p.format})"')  # type: ignore[union-attr]
            anchored = True
    if w.solid and not anchored:
        out.insert(0, "''")
    return "".join(out)


def _assignment(a: Assign) -> str:
    return f"{'export ' if a.export else ''}{a.name}={emit_word(a.value)}"


def _set(s: SetOptions) -> str:
    words = ["set"]
    for name, on in s.options:
        sign = "-" if on else "+"
        short = _SHORT_SET_OPTIONS.get(name)
        words.append(f"{sign}{short}" if short else f"{sign}o {name}")
    return " ".join(words)


def _run(r: Run) -> str:
    words = [emit_word(w) for w in r.argv]
    # The head (program, its options and the module) on the first line, then one argument a line.
    head = len(words)
    for k, w in enumerate(r.argv):
        if w.literal in ("-m", "--module") and k + 1 < len(r.argv):
            head = k + 2
            break
    first = " ".join([*(_assignment(a) for a in r.env), *words[:head]])
    lines = [first, *("  " + w for w in words[head:])]
    text = " \\\n".join(lines)
    if r.tee is not None:
        text += f"{' 2>&1' if r.tee.stderr else ''} | tee {'-a ' if r.tee.append else ''}{emit_word(r.tee.file)}"
    return text


def emit(script: Script) -> str:
    """The script as bash text, one statement a line, ending with a newline."""
    out = []
    for s in script.statements:
        t = type(s)
        if t is Run:
            out.append(_run(s))  # type: ignore[arg-type]
        elif t is Assign:
            out.append(_assignment(s))  # type: ignore[arg-type]
        elif t is Export:
            out.append(f"export {s.name}")  # type: ignore[union-attr]
        else:
            out.append(_set(s))  # type: ignore[arg-type]
    return "\n".join(out) + "\n"
