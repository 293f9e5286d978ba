"""Step 1 of the command checks, its first half: the text of ``spec.command`` -> tokens
(words and operators), read as bash's tokenizer reads them.

    spec.command -> check_text -> expand -> syntax.parse (**lexer**: text -> tokens; syntax: tokens -> Script) -> resolve -> ...

``Lexer.run`` reads quotes, escapes, continuations, comments, ``$NAME`` / ``${...}`` and
``$(date +FORMAT)`` into ``RawWord`` parts, and the operators between words. What no word
of the language may hold (command and arithmetic substitution, ANSI-C quoting,
parameter-expansion operators, special parameters, unquoted globs, brace expansion, ``~``,
heredocs) is refused here, with its line; which commands and operators may be used is the
parser's business (``argus.core.command.syntax``, whose docstring describes the language).
"""

from __future__ import annotations

import bisect
import re

from .program import Date, Part, Refusal, Var

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
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
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

_SUBSTITUTION_ADVICE = "write the value, or put the logic in a Python file under $HOME/code"

MAX_REFUSALS = 50

# A token: ("word", RawWord, offset), ("op", the operator's text, offset) or ("nl", None, offset).
Token = tuple[str, object, int]


class _Stop(Exception):
    """The rest of the text cannot be read reliably (an unclosed quote, a heredoc)."""


class RawWord:
    __slots__ = ("parts", "solid", "start", "end", "assign", "assign_op", "line")

    def __init__(self) -> None:
        self.parts: list[Part] = []
        self.solid = False
        self.start = self.end = 0
        self.assign: str | None = None  # NAME of an unquoted NAME= (or NAME+=) prefix
        self.assign_op = ""
        self.line = 0


class Lexer:
    """Reads the text into words and operators, as bash's tokenizer would."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.refusals: list[Refusal] = []
        self.tokens: list[Token] = []
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
        w = RawWord()
        w.start, w.end = m.start(1), m.end()
        w.parts.append(text)
        w.solid = True
        _mark_assignment(w, text)
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
        w = RawWord()
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
            _mark_assignment(w, s)
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
                i = self.single_quoted(i, w)
                if shape is not None:
                    shape.append("Q")
            elif c == '"':
                i = self.double_quoted(i, w)
                if shape is not None:
                    shape.append("Q")
            elif c == "\\":
                i, escaped = _backslash(text, i, w)
                if escaped and shape is not None:
                    shape.append("Q")
            elif c == "$":
                i = self.dollar(i, w, quoted=False)
                if shape is not None:
                    shape.append("Q")
            elif c == "`":
                i = self.backtick(i)
            else:  # '~', '*' or '?': kept as text, refused once per word and kind
                kind = "~" if c == "~" else "*"
                if kind not in refused:
                    refused += kind
                    self.refuse_unquoted(i, w, c)
                parts.append(c)
                i += 1
        return self.finish(w, i, shape)

    def single_quoted(self, i: int, w: RawWord) -> int:
        """A single-quoted string: every character up to the next ' stands for itself."""
        text = self.text
        j = text.find("'", i + 1)
        if j < 0:
            self.refuse(i, text[i:i + 40], "an unclosed ' quote", "close the quote")
            raise _Stop
        w.parts.append(text[i + 1:j])
        w.solid = True
        return j + 1

    def refuse_unquoted(self, i: int, w: RawWord, c: str) -> None:
        """An unquoted '~' (the worker's home) or file pattern character ('*', '?')."""
        if c == "~":
            token = _TILDE_WORD.match(self.text, i).group()  # type: ignore[union-attr]
            self.refuse(i, token, "'~' expands to the worker's home, not yours", "use $HOME")
        else:
            self.refuse(i, self.token_at(w.start), f"a file pattern ('{c}') is not allowed",
                        "write the names out (a Hydra list: [a.parquet,b.parquet]), or quote the character")

    def token_at(self, start: int) -> str:
        m = _TOKEN.match(self.text, start)
        return m.group() if m else ""

    def finish(self, w: RawWord, i: int, shape: list[str] | None) -> int:
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

    def double_quoted(self, i: int, w: RawWord) -> int:
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

    def dollar(self, i: int, w: RawWord, *, quoted: bool) -> int:
        text, n = self.text, self.n
        nxt = text[i + 1] if i + 1 < n else ""
        parts = w.parts
        if nxt == "_" or nxt.isascii() and nxt.isalpha():
            m = NAME.match(text, i + 1)
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


def _mark_assignment(w: RawWord, text: str) -> None:
    """Marks a word whose unquoted start ``text`` is ``NAME=``, ``NAME+=`` or ``NAME[...]=``."""
    if (a := _ASSIGNMENT.match(text)) is not None:
        w.assign, w.assign_op = a.group(1), a.group(2)
    elif "[" in text and _ARRAY_ASSIGNMENT.match(text) and "]=" in text:
        w.assign, w.assign_op = text.split("[", 1)[0], "[]="


def _backslash(text: str, i: int, w: RawWord) -> tuple[int, bool]:
    """A backslash outside quotes at ``i``: where the word goes on, and whether it escaped a
    character (which then stands for itself)."""
    if i + 1 >= len(text):
        w.parts.append("\\")  # a final backslash stays, as in bash
        w.solid = True
        return i + 1, False
    if text[i + 1] == "\n":
        return i + 2, False  # a continuation inside a word joins its halves
    w.parts.append(text[i + 1])
    w.solid = True
    return i + 2, True


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
