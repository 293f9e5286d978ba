"""Step 1 of the command checks: the text of ``spec.command`` -> a typed ``Script``.

    spec.command -> check_text -> expand -> **syntax.parse** -> resolve -> launchers -> hydra -> checks -> emit

The language is the small part of bash that verl launch scripts use, read the way bash
reads it, and nothing else (default deny):

* comments, blank lines, ``\\`` continuations, ``;`` between commands;
* ``set`` with ``-e -u -x -o pipefail`` (combined or not, ``+`` to turn off);
* ``NAME=value`` and ``export NAME=value`` / ``export NAME``;
* one entrypoint: ``[NAME=value ...] PROGRAM ARGS... [2>&1] [| tee [-a] FILE]`` where PROGRAM
  is an allowlisted program (what its arguments may be is the launchers' business);
* in words: single and double quotes, backslash escapes, ``$NAME`` / ``${NAME}``, positional
  parameters (empty here: ``$@``, ``"$@"``, ``$*``, ``$1``, and ``${1:-default}`` is its
  default), and ``$(date +FORMAT)``.

Everything else is refused with a ``Refusal`` that names the construct, its line and what
to write instead: other commands (``cd``, ``echo``, functions, ``if``, ``for`` ...), other
operators (``&&``, ``||``, ``&``, subshells, redirections, heredocs), command and arithmetic
substitution, ANSI-C quoting, parameter-expansion operators, special parameters, unquoted
globs (``*`` ``?``), brace expansion and ``~``.

Two readings are decisions of the language, not bash: an unquoted ``[`` is literal text
(every Hydra list is written so; bash would try it as a file pattern, and the emitted
command quotes it so bash never does), and ``$HOME`` has already been expanded as a macro
(``argus.core.expand``) before this step.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Collection
from typing import NamedTuple

from .program import Assign, Date, Export, Part, Refusal, Run, Script, SetOptions, Statement, Tee, Var, Word

# A run of characters that stand for themselves outside quotes.
_PLAIN = re.compile(r"[^ \t\n|&;()<>'\"\\$`*?~]+")
# Blanks and continuations, then a whole word of characters that stand for themselves
# (no braces: they need the brace-expansion check), with the continuations inside it; it
# must end where a word ends. One match per word in the common case.
_W = r"[^ \t\n|&;()<>'\"\\$`*?~{}]"
_PLAIN_STEP = re.compile(r"[ \t]*(?:\\\n[ \t]*)*((?!#)" + _W + "+(?:\\\\\n" + _W + r"*)*)(?=[ \t\n|&;()<>]|\Z)")
_DQ_PLAIN = re.compile(r"[^\"\\$`]+")
_BLANKS = re.compile(r"[ \t]+")
_OPERATOR = re.compile(r"\|\||\|&|\||&&|&>>|&>|&|;;&|;;|;&|;|\(|\)|<<<|<<-|<<|<>|<&|<\(|<|>>|>&|>\||>\(|>")
_TOKEN = re.compile(r"[^ \t\n]{0,200}")
_TILDE_WORD = re.compile(r"~[^/ \t\n|&;()<>'\"\\$`,{}]*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?=)")
_ARRAY_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\[")
_STDERR_TO_STDOUT = re.compile(r"2>&1(?=[ \t\n|;&()<>]|\Z)")
# ${NAME}, ${N}, ${@}, ${*}, ${N:-word}, ${N-word}
_BRACED = re.compile(r"\$\{(?:([A-Za-z_][A-Za-z0-9_]*)|([0-9]+)|([@*]))(?:(:?-)([^}]*))?\}")
# A date format made only of conversions whose output is letters and digits, and of plain
# characters: its output can never hold a blank, a quote, '/' or ','.
DATE_FORMAT = r"(?:%[YmdHMSyjsbBaApuwUVGgNIC]|[A-Za-z0-9_.:\-])+"
_DATE = re.compile(r"\$\(date[ \t]+(?:\+(" + DATE_FORMAT + r")|'\+(" + DATE_FORMAT + r")'|\"\+(" + DATE_FORMAT + r")\")[ \t]*\)")
# The operator of a ${...} the language does not read: after an optional '!' or '#' and
# the name, the operator bash would apply.
_PARAMETER_OPERATOR = re.compile(r"(!|#(?=[A-Za-z_0-9@*]))?(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])?(:[-=+?]|##|%%|//|/#|/%|\^\^|,,|[-=+?#%/^,@:\[])?")
_DEFAULT_WORD = re.compile(r"[A-Za-z0-9_./:@%+,=\-]*")

_DELIMITERS = frozenset(" \t\n|&;()<>")

ADVICE_LANGUAGE = ("a command may only set options (set -euxo pipefail), assign variables (NAME=value, export NAME=value) "
                   "and run the entrypoint ({programs}) once")
_COMMAND_ADVICE = {
    "cd": "write absolute paths ($HOME/...) instead; the job starts in its own folder under $HOME/jobs",
    "source": "write the variables into the command itself",
    ".": "write the variables into the command itself",
    "eval": "write the command out",
    "exec": "run the entrypoint without exec",
    "alias": "write the program name out",
    "unalias": "remove it",
    "hash": "remove it; the entrypoint is looked up on the worker's PATH",
    "function": "write the command out; functions are not part of the language",
    "declare": "write NAME=value or export NAME=value",
    "typeset": "write NAME=value or export NAME=value",
    "local": "write NAME=value",
    "readonly": "write NAME=value",
    "unset": "remove it; a variable is either assigned once or not at all",
    "shift": "write the values out; positional parameters are empty here",
    "if": "write the command for the case you run; put logic in a Python file under $HOME/code",
    "for": "write each value out; put logic in a Python file under $HOME/code",
    "while": "put logic in a Python file under $HOME/code",
    "until": "put logic in a Python file under $HOME/code",
    "case": "write the command for the case you run",
    "trap": "remove it",
    "ulimit": "remove it; limits are the worker's",
    "mkdir": "verl creates its output folders itself",
    "echo": "remove it; the entrypoint's own output is in the job log",
    "printf": "remove it; the entrypoint's own output is in the job log",
    "[": "write the command for the case you run",
    "[[": "write the command for the case you run",
    "{": "write the commands without grouping",
    "!": "remove it",
    "time": "remove it",
    "nohup": "remove it; the job keeps running without it",
    "env": "write NAME=value before the program instead",
    "command": "write the program name out",
    "builtin": "write the program name out",
    "bash": "write the command itself, not a shell that runs it",
    "sh": "write the command itself, not a shell that runs it",
}
_OPERATOR_RULES = {
    "&&": ("'&&' is not allowed", "write one command per line; with set -e a failing command stops the script"),
    "||": ("'||' is not allowed", "write one command per line"),
    "&": ("a background job ('&') is not allowed", "run the entrypoint in the foreground"),
    "(": ("a subshell or function ('(') is not allowed", "write the commands out, one per line"),
    ")": ("a subshell or function (')') is not allowed", "write the commands out, one per line"),
    "|&": ("'|&' is not allowed", "write 2>&1 | tee FILE"),
    ";;": ("a case clause (';;') is not allowed", "write the command for the case you run"),
    ";&": ("a case clause (';&') is not allowed", "write the command for the case you run"),
    ";;&": ("a case clause (';;&') is not allowed", "write the command for the case you run"),
    "<(": ("process substitution is not allowed", "name a file under $HOME instead"),
    ">(": ("process substitution is not allowed", "end the entrypoint with 2>&1 | tee FILE"),
}
_REDIRECT_ADVICE = "to keep a log, end the entrypoint with 2>&1 | tee $HOME/logs/run.log"
_SUBSTITUTION_ADVICE = "write the value, or put the logic in a Python file under $HOME/code"

MAX_REFUSALS = 50


class _Stop(Exception):
    """The rest of the text cannot be read reliably (an unclosed quote, a heredoc)."""


class _RawWord:
    __slots__ = ("parts", "solid", "start", "end", "assign", "assign_op", "line")

    def __init__(self) -> None:
        self.parts: list[Part] = []
        self.solid = False
        self.start = self.end = 0
        self.assign: str | None = None  # NAME of an unquoted NAME= (or NAME+=) prefix
        self.assign_op = ""
        self.line = 0


class _Lexer:
    """Reads the text into words and operators, as bash's tokenizer would."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.refusals: list[Refusal] = []
        self.tokens: list[tuple[str, object, int]] = []  # (kind, value, offset): kind word/op/nl
        self._newlines: list[int] | None = None

    def line_of(self, offset: int) -> int:
        if self._newlines is None:
            self._newlines = [m.start() for m in re.finditer("\n", self.text)]
        return bisect.bisect_right(self._newlines, offset - 1) + 1 if offset else 1

    def refuse(self, offset: int, token: str, rule: str, advice: str = "") -> None:
        if len(self.refusals) < MAX_REFUSALS:
            self.refusals.append(Refusal(self.line_of(offset), token, rule, advice))

    # --- the main loop ------------------------------------------------------------------

    def run(self) -> None:
        text, n = self.text, self.n
        i = 0
        try:
            step = _PLAIN_STEP.match
            while i < n:
                if (m := step(text, i)) is not None:
                    i = self.plain_word(m)  # the common case: a word of plain text
                    continue
                c = text[i]
                if c == " " or c == "\t":
                    i = _BLANKS.match(text, i).end()  # type: ignore[union-attr]
                elif c == "\n":
                    self.tokens.append(("nl", None, i))
                    i += 1
                elif c == "\\" and text.startswith("\\\n", i):
                    i += 2  # a continuation between words joins the lines
                elif c == "#":
                    j = text.find("\n", i)  # a comment runs to the end of its line, '\' included
                    i = n if j < 0 else j
                elif c in "|&;()<>":
                    i = self.operator(i)
                else:
                    i = self.word(i)
        except _Stop:
            pass

    def operator(self, i: int, fd: str = "") -> int:
        m = _OPERATOR.match(self.text, i)
        assert m is not None
        op = m.group()
        if op in ("<<", "<<-"):
            self.refuse(i, fd + op, "a heredoc is not allowed", "put the text in a file under $HOME and name the file")
            raise _Stop
        self.tokens.append(("op", fd + op, i))
        return m.end()

    # --- words -------------------------------------------------------------------------

    def plain_word(self, m: re.Match[str]) -> int:
        """A word of characters that stand for themselves (continuations inside join it)."""
        text = m.group(1)
        if "\\" in text:
            text = text.replace("\\\n", "")
        w = _RawWord()
        w.start, w.end = m.start(1), m.end()
        w.parts.append(text)
        w.solid = True
        if (a := _ASSIGNMENT.match(text)) is not None:
            w.assign, w.assign_op = a.group(1), a.group(2)
        elif "[" in text and _ARRAY_ASSIGNMENT.match(text) and "]=" in text:
            w.assign, w.assign_op = text.split("[", 1)[0], "[]="
        if w.end < self.n and self.text[w.end] in "<>" and text.isdigit():
            if (m2 := _STDERR_TO_STDOUT.match(self.text, w.start)) is not None:
                self.tokens.append(("op", "2>&1", w.start))
                return m2.end()
            return self.operator(w.end, fd=text)
        w.line = self.line_of(w.start)
        self.tokens.append(("word", w, w.start))
        return w.end

    def word(self, i: int) -> int:
        text, n = self.text, self.n
        w = _RawWord()
        w.start = i
        parts = w.parts
        shape: list[str] | None = None  # unquoted text, for the brace-expansion check
        refused = ""  # the kinds of character already refused in this word
        m = _PLAIN.match(text, i)
        if m is not None:
            s = m.group()
            parts.append(s)
            w.solid = True
            i = m.end()
            if (a := _ASSIGNMENT.match(s)) is not None:
                w.assign, w.assign_op = a.group(1), a.group(2)
            elif _ARRAY_ASSIGNMENT.match(s) and "]=" in s:
                w.assign, w.assign_op = s.split("[", 1)[0], "[]="
            if "{" in s:
                shape = [s]
            if i >= n or text[i] in _DELIMITERS:  # the common case: a word of plain text
                return self.finish(w, i, shape)
        while i < n:
            c = text[i]
            if c in _DELIMITERS:
                break
            if (m := _PLAIN.match(text, i)) is not None:
                s = m.group()
                parts.append(s)
                w.solid = True
                if shape is not None:
                    shape.append(s)
                elif "{" in s:
                    shape = [s]
                i = m.end()
            elif c == "'":
                j = text.find("'", i + 1)
                if j < 0:
                    self.refuse(i, text[i:i + 40], "an unclosed ' quote", "close the quote")
                    raise _Stop
                parts.append(text[i + 1:j])
                w.solid = True
                if shape is not None:
                    shape.append("Q")
                i = j + 1
            elif c == '"':
                i = self.double_quoted(i, w)
                if shape is not None:
                    shape.append("Q")
            elif c == "\\":
                if i + 1 >= n:
                    parts.append("\\")  # a final backslash stays, as in bash
                    w.solid = True
                    i += 1
                elif text[i + 1] == "\n":
                    i += 2  # a continuation inside a word joins its halves
                else:
                    parts.append(text[i + 1])
                    w.solid = True
                    if shape is not None:
                        shape.append("Q")
                    i += 2
            elif c == "$":
                i = self.dollar(i, w, quoted=False)
                if shape is not None:
                    shape.append("Q")
            elif c == "`":
                i = self.backtick(i)
            elif c == "~":
                if "~" not in refused:  # one line per word
                    refused += "~"
                    token = _TILDE_WORD.match(text, i).group()  # type: ignore[union-attr]
                    self.refuse(i, token, "'~' expands to the worker's home, not yours", "use $HOME")
                parts.append(c)
                i += 1
            else:  # '*' or '?'
                if "*" not in refused:
                    refused += "*"
                    self.refuse(i, self.token_at(w.start), f"a file pattern ('{c}') is not allowed",
                                "write the names out (a Hydra list: [a.parquet,b.parquet]), or quote the character")
                parts.append(c)
                i += 1
        return self.finish(w, i, shape)

    def token_at(self, start: int) -> str:
        m = _TOKEN.match(self.text, start)
        return m.group() if m else ""

    def finish(self, w: _RawWord, i: int, shape: list[str] | None) -> int:
        w.end = i
        text = self.text
        if shape is not None and _brace_expansion("".join(shape)):
            self.refuse(w.start, text[w.start:i], "brace expansion is not allowed", "quote the value ('...'), or write each word out")
        # A word of digits right before '<' or '>' names a file descriptor.
        if i < self.n and text[i] in "<>" and text[w.start:i].isdigit():
            if (m := _STDERR_TO_STDOUT.match(text, w.start)) is not None:
                self.tokens.append(("op", "2>&1", w.start))
                return m.end()
            return self.operator(i, fd=text[w.start:i])
        w.line = self.line_of(w.start)
        self.tokens.append(("word", w, w.start))
        return i

    def double_quoted(self, i: int, w: _RawWord) -> int:
        text, n = self.text, self.n
        start = i
        i += 1
        # "$@" alone expands to no word at all, even though it is quoted.
        if text.startswith('$@"', i) or text.startswith('${@}"', i):
            return text.index('"', i) + 1
        w.solid = True
        parts = w.parts
        while True:
            if i >= n:
                self.refuse(start, text[start:start + 40], 'an unclosed " quote', "close the quote")
                raise _Stop
            c = text[i]
            if c == '"':
                return i + 1
            if (m := _DQ_PLAIN.match(text, i)) is not None:
                parts.append(m.group())
                i = m.end()
            elif c == "\\":
                nxt = text[i + 1] if i + 1 < n else ""
                if nxt in ("$", "`", '"', "\\"):
                    parts.append(nxt)
                    i += 2
                elif nxt == "\n":
                    i += 2
                else:
                    parts.append("\\")
                    i += 1
            elif c == "$":
                i = self.dollar(i, w, quoted=True)
            else:  # '`'
                i = self.backtick(i)

    def backtick(self, i: int) -> int:
        text = self.text
        j = i + 1
        while j < self.n and text[j] != "`":
            j += 2 if text[j] == "\\" else 1
        end = min(j + 1, self.n)
        self.refuse(i, text[i:end], "command substitution is not allowed", _SUBSTITUTION_ADVICE)
        return end

    def dollar(self, i: int, w: _RawWord, *, quoted: bool) -> int:
        text, n = self.text, self.n
        nxt = text[i + 1] if i + 1 < n else ""
        parts = w.parts
        if nxt == "_" or nxt.isascii() and nxt.isalpha():
            m = _NAME.match(text, i + 1)
            assert m is not None
            parts.append(Var(m.group(), quoted))
            return m.end()
        if nxt == "{":
            m = _BRACED.match(text, i)
            if m is None:
                end = _matching(text, i + 1, "{", "}")
                inner = text[i:end]
                operator = _PARAMETER_OPERATOR.match(inner, 2)
                symbol = operator and (operator.group(1) or operator.group(2))
                what = f"parameter expansion with '{symbol}'" if symbol else "this parameter expansion"
                self.refuse(i, inner, f"{what} is not allowed", "assign the variable first (NAME=value) and write $NAME or ${NAME}")
                return end
            if m.group(2) == "0":
                self.refuse(i, m.group(), "the special parameter $0 is not allowed", "write the value out")
                return m.end()
            name, number, everything, op, default = m.groups()
            if name is not None and op is None:
                parts.append(Var(name, quoted))
            elif (number is not None or everything == "*") and op is None:
                pass  # a positional parameter: empty
            elif everything == "@" and op is None:
                pass
            elif number is not None and op is not None:
                if not _DEFAULT_WORD.fullmatch(default):
                    self.refuse(i, m.group(), "a default with quotes or expansions is not allowed", "write the default as plain text")
                elif default:
                    parts.append(default)  # positional parameters are empty: the default is the value
                    if not quoted:
                        w.solid = True
            else:
                self.refuse(i, m.group(), f"parameter expansion with '{op}' is not allowed",
                            "assign the variable first (NAME=value) and write $NAME or ${NAME}")
            return m.end()
        if nxt == "0":
            self.refuse(i, "$0", "the special parameter $0 is not allowed", "write the value out")
            return i + 2
        if nxt.isdigit() or nxt in ("@", "*"):
            return i + 2  # $1, $@, $*: positional parameters are empty here
        if nxt == "(":
            if text.startswith("$((", i):
                end = _matching(text, i + 1, "(", ")")
                self.refuse(i, text[i:end], "arithmetic expansion is not allowed", "write the number")
                return end
            m = _DATE.match(text, i)
            if m is not None:
                parts.append(Date(m.group(1) or m.group(2) or m.group(3)))
                w.solid = True
                return m.end()
            end = _matching(text, i + 1, "(", ")")
            self.refuse(i, text[i:end], "command substitution is not allowed", _SUBSTITUTION_ADVICE
                        + " ($(date +FORMAT) is allowed in a value such as trainer.experiment_name)")
            return end
        if nxt == "'":
            j = i + 2
            while j < n and text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            end = min(j + 1, n)
            self.refuse(i, text[i:end], "ANSI-C quoting ($'...') is not allowed", "write the characters themselves, in single quotes")
            return end
        if nxt == '"':
            self.refuse(i, text[i:i + 2], "locale quoting ($\"...\") is not allowed", "write the text in double quotes")
            return i + 1
        if nxt == "[":
            end = _matching(text, i + 1, "[", "]")
            self.refuse(i, text[i:end], "arithmetic expansion is not allowed", "write the number")
            return end
        if nxt and nxt in "#?$!-0":
            self.refuse(i, text[i:i + 2], f"the special parameter ${nxt} is not allowed", "write the value out")
            return i + 2
        self.refuse(i, text[i:i + 2] if nxt else "$", "a '$' that starts no variable is not allowed", "write a literal '$' inside single quotes")
        parts.append("$")
        return i + 1


def _matching(text: str, i: int, open_: str, close: str) -> int:
    """The offset after the ``close`` matching the ``open_`` at ``i`` (or the end)."""
    depth = 0
    j = i
    n = len(text)
    while j < n:
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return n


def _brace_expansion(shape: str) -> bool:
    """True when bash would perform a brace expansion in a word's unquoted text: a
    ``{...}`` holding a ``,`` or ``..`` at its own level (``{a,b}``, ``{1..3}``). One pass."""
    stack: list[bool] = []  # per open brace: has a ',' or '..' been seen at its level
    previous = ""
    for c in shape:
        if c == "{":
            stack.append(False)
        elif c == "}":
            if stack and stack.pop():
                return True
        elif stack and (c == "," or (c == "." and previous == ".")):
            stack[-1] = True
        previous = c
    return False


# --- the parser: tokens -> statements ---------------------------------------------------


def _to_word(raw: _RawWord, text: str, parts: list[Part] | None = None, *, assignment: bool = False) -> Word:
    if parts is None and len(raw.parts) == 1 and type(raw.parts[0]) is str and raw.parts[0]:
        return Word((raw.parts[0],), raw.solid, raw.line, text[raw.start:raw.end])
    merged: list[Part] = []
    for p in raw.parts if parts is None else parts:
        if type(p) is str:
            if not p:
                continue
            if merged and type(merged[-1]) is str:
                merged[-1] = merged[-1] + p
                continue
        elif assignment and type(p) is Var and not p.quoted:
            p = Var(p.name, True)  # bash neither splits nor globs an assignment's value
        merged.append(p)
    solid = True if assignment else raw.solid
    return Word(tuple(merged), solid, raw.line, text[raw.start:raw.end])


def _assignment(raw: _RawWord, text: str, export: bool, lexer: _Lexer) -> Assign | None:
    name = raw.assign
    assert name is not None
    source = text[raw.start:raw.end]
    if raw.assign_op == "+=":
        lexer.refusals.append(Refusal(raw.line, source, "'+=' is not allowed", "write the whole value in one assignment"))
        return None
    if raw.assign_op == "[]=":
        lexer.refusals.append(Refusal(raw.line, source, "arrays are not allowed", 'write a Hydra list in a string: NAME="[a,b]"'))
        return None
    first = raw.parts[0]
    assert type(first) is str
    rest = [first[len(name) + 1:], *raw.parts[1:]]
    return Assign(name, _to_word(raw, text, rest, assignment=True), export, raw.line)


def _set_options(words: list[_RawWord], text: str, line: int) -> tuple[SetOptions | None, Refusal | None]:
    """``set -e -u -x -o pipefail`` and their combinations."""
    short = {"e": "errexit", "u": "nounset", "x": "xtrace"}
    named = {"errexit", "nounset", "xtrace", "pipefail"}
    options: list[tuple[str, bool]] = []
    source = " ".join(text[w.start:w.end] for w in words)
    args = [_to_word(w, text).literal for w in words[1:]]
    if not args:
        return None, Refusal(line, "set", "'set' without options is not allowed", "write set -euxo pipefail (any of them)")
    k = 0
    while k < len(args):
        arg = args[k]
        k += 1
        if arg is None or len(arg) < 2 or arg[0] not in "-+" or arg == "--":
            return None, Refusal(line, source, f"set {arg or ''} is not allowed".replace("  ", " "),
                                 "set only -e, -u, -x and -o pipefail (positional parameters stay empty)")
        on = arg[0] == "-"
        for letter in arg[1:]:
            if letter in short:
                options.append((short[letter], on))
            elif letter == "o":
                name = args[k] if k < len(args) else None
                k += 1
                if name not in named:
                    return None, Refusal(line, source, f"set -o {name or ''} is not allowed".rstrip(),
                                         "set only -o pipefail (and errexit, nounset, xtrace)")
                options.append((name, on))
            else:
                return None, Refusal(line, source, f"set -{letter} is not allowed", "set only -e, -u, -x and -o pipefail")
    return SetOptions(tuple(options), line), None


class Parsed(NamedTuple):
    script: Script  # the statements that could be read
    refusals: list[Refusal]
    # Every word was read whole: a refusal inside a word (such as ``$(...)``) leaves the
    # word incomplete, and later checks of it would mislead.
    words_intact: bool
    # Some command started with an allowed program, even if it was refused.
    entrypoint_seen: bool


def parse(text: str, programs: Collection[str] = ("python3", "torchrun")) -> Parsed:
    """Read ``text`` into a ``Script``; what the language does not allow comes back as
    refusals. Never raises on any input."""
    lexer = _Lexer(text)
    lexer.run()
    refusals = lexer.refusals
    words_intact = not refusals
    entrypoint_seen = False
    statements: list[Statement] = []
    run_seen: Run | None = None

    # Group the tokens into commands, split at newlines and ';' (a newline after '|' does
    # not end the pipeline).
    commands: list[list[tuple[str, object, int]]] = []
    current: list[tuple[str, object, int]] = []
    for tok in lexer.tokens:
        kind, value, _ = tok
        if kind == "nl" or (kind == "op" and value == ";"):
            if kind == "nl" and current and current[-1][0] == "op" and current[-1][1] == "|":
                continue
            if current:
                commands.append(current)
            current = []
        else:
            current.append(tok)
    if current:
        commands.append(current)

    for cmd in commands:
        line = lexer.line_of(cmd[0][2])
        head_word = next((t[1] for t in cmd if isinstance(t[1], _RawWord) and t[1].assign is None), None)
        if head_word is not None and text[head_word.start:head_word.end] in programs:
            entrypoint_seen = True
        bad = next((t for t in cmd if t[0] == "op" and t[1] not in ("|", "2>&1")), None)
        if bad is not None:
            op = str(bad[1])
            rule, advice = _OPERATOR_RULES.get(op) or (
                ("redirection is not allowed", _REDIRECT_ADVICE) if "<" in op or ">" in op else (f"'{op}' is not allowed", "write one command per line"))
            refusals.append(Refusal(lexer.line_of(bad[2]), op, rule, advice))
            continue
        if run_seen is not None:
            last = cmd[-1]
            end = last[1].end if isinstance(last[1], _RawWord) else last[2] + len(str(last[1]))
            source = text[cmd[0][2]:end]
            first = cmd[0][1]
            head = text[first.start:first.end] if isinstance(first, _RawWord) else ""
            if head in programs:
                refusals.append(Refusal(line, source, "a second entrypoint is not allowed", "run one entrypoint per task"))
            elif head.startswith(("-", "+")) or "." in head.split("=", 1)[0]:
                refusals.append(Refusal(line, source, "nothing may follow the entrypoint",
                                        "bash ends a command at a comment line, so a '\\' continuation does not carry through one: "
                                        "move the comment below the last line"))
            else:
                refusals.append(Refusal(line, source, "nothing may follow the entrypoint", "move it before the entrypoint, or remove it"))
            continue
        # split at '|': the entrypoint, then tee
        pipe_at = [k for k, t in enumerate(cmd) if t[0] == "op" and t[1] == "|"]
        main = cmd[: pipe_at[0]] if pipe_at else cmd
        tee_part = cmd[pipe_at[0] + 1:] if pipe_at else []
        if len(pipe_at) > 1:
            refusals.append(Refusal(line, "|", "a pipe is allowed only once, into tee", "end the entrypoint with 2>&1 | tee FILE"))
            continue
        stderr = bool(main) and main[-1][0] == "op" and main[-1][1] == "2>&1"
        if stderr:
            main = main[:-1]
        if any(t[0] == "op" for t in main) or (stderr and not pipe_at):
            refusals.append(Refusal(line, "2>&1", "redirection is not allowed", _REDIRECT_ADVICE))
            continue
        words: list[_RawWord] = [t[1] for t in main]  # type: ignore[misc]
        if not words:
            refusals.append(Refusal(line, "|", "a pipe needs a command before it", "end the entrypoint with 2>&1 | tee FILE"))
            continue
        k = 0
        env: list[Assign] = []
        failed = False
        while k < len(words) and words[k].assign is not None:
            a = _assignment(words[k], text, False, lexer)
            failed |= a is None
            if a is not None:
                env.append(a)
            k += 1
        rest = words[k:]
        if failed:
            continue
        if not rest:
            if pipe_at:
                refusals.append(Refusal(line, "|", "a pipe is allowed only after the entrypoint", "end the entrypoint with 2>&1 | tee FILE"))
                continue
            statements.extend(env)
            continue
        name_word = _to_word(rest[0], text)
        name = name_word.literal
        source0 = name_word.source
        if name in ("set", "export") and (env or pipe_at):
            refusals.append(Refusal(line, source0, f"'{name}' with a prefix or a pipe is not allowed", f"write {name} on its own line"))
            continue
        if name == "set":
            opts, refusal = _set_options(rest, text, line)
            if refusal is not None:
                refusals.append(refusal)
            elif opts is not None:
                statements.append(opts)
            continue
        if name == "export":
            flag = next((w for w in rest[1:] if text[w.start:w.end].startswith("-")), None)
            if flag is not None:
                refusals.append(Refusal(line, text[flag.start:flag.end], f"export {text[flag.start:flag.end]} is not allowed",
                                        "write export NAME=value or export NAME"))
                continue
            for w in rest[1:]:
                if w.assign is not None:
                    a = _assignment(w, text, True, lexer)
                    if a is not None:
                        statements.append(a)
                    continue
                arg = _to_word(w, text).literal
                if arg is not None and _NAME.fullmatch(arg):
                    statements.append(Export(arg, line))
                else:
                    refusals.append(Refusal(line, text[w.start:w.end], f"export {text[w.start:w.end]} is not allowed",
                                            "write export NAME=value or export NAME"))
            if len(rest) == 1:
                refusals.append(Refusal(line, "export", "'export' without a name is not allowed", "write export NAME=value"))
            continue
        if name is None or name not in programs:
            what = source0 if name is None else name
            if name is not None and name.rsplit("/", 1)[-1] in programs:
                rule, advice = (f"'{name}' is not an allowed entrypoint program",
                                f"write {name.rsplit('/', 1)[-1]} (allowed programs: {', '.join(sorted(programs))})")
            elif name is None:
                rule, advice = ("a program name built from expansions is not allowed", "write the program name out")
            elif name == "" and not words_intact:
                continue  # a word emptied by a refused expansion: already reported
            else:
                rule = f"'{name if len(name) <= 60 else name[:57] + '...'}' is not allowed"
                advice = _COMMAND_ADVICE.get(name) or ADVICE_LANGUAGE.format(programs=" or ".join(f"{p} ... -m MODULE" for p in sorted(programs)))
                if name not in _COMMAND_ADVICE and name.endswith("()"):
                    rule, advice = "a function definition is not allowed", "write the command out"
            refusals.append(Refusal(line, what, rule, advice))
            continue
        argv = tuple(_to_word(w, text) for w in rest)
        tee: Tee | None = None
        if pipe_at:
            tee_words = [t[1] for t in tee_part if t[0] == "word"]
            if len(tee_words) != len(tee_part) or not tee_words:
                refusals.append(Refusal(line, "|", "a pipe is allowed only into tee", "end the entrypoint with 2>&1 | tee FILE"))
                continue
            tw = [_to_word(w, text) for w in tee_words]  # type: ignore[arg-type]
            if tw[0].literal != "tee":
                refusals.append(Refusal(line, tw[0].source, f"a pipe into '{tw[0].source}' is not allowed",
                                        "a pipe is allowed only into tee: 2>&1 | tee FILE"))
                continue
            append = len(tw) == 3 and tw[1].literal in ("-a", "--append")
            if len(tw) != 2 + append or (tw[1].literal or "").startswith("-") and not append:
                refusals.append(Refusal(line, " ".join(w.source for w in tw), "tee takes one file (and -a) here",
                                        "write 2>&1 | tee [-a] FILE"))
                continue
            tee = Tee(tw[-1], append, stderr)
        run_seen = Run(tuple(env), argv, tee, line)
        statements.append(run_seen)
    if len(refusals) > MAX_REFUSALS:
        more = len(refusals) - MAX_REFUSALS
        refusals = refusals[:MAX_REFUSALS] + [Refusal(0, f"{more} more", "further problems are not listed", "fix the ones above first")]
    return Parsed(Script(tuple(statements)), refusals, words_intact, entrypoint_seen)
