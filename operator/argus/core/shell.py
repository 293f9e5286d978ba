"""Reading a user's command as bash would, to tell what it really runs.

A substring search would count ``echo python3 -m verl.trainer.main_ppo`` or a comment as
the entrypoint. Here a small lexer splits the script as bash does (quotes, escapes, line
continuations, ``#`` comments, heredocs; shlex knows neither of the last two and reads a
character at a time, too slow for 64 KiB) into words and operators, and the words are
grouped into simple commands. Heredoc bodies are kept apart: they run nothing, but the
path checks still read them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_SEPARATORS = set(";&|\n()")
# Words that may stand before the program of a simple command without being it.
_PREFIX_WORDS = {"if", "then", "else", "elif", "do", "while", "until", "!", "{", "time", "exec", "nohup", "env", "command"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


class ShellSyntaxError(ValueError):
    """The command is not something bash could parse (e.g. an unclosed quote)."""


@dataclass
class Script:
    """A command read as shell: its simple commands (word lists), every word, the heredoc
    bodies, and the variables it assigns at top level (in order; a later one wins)."""

    commands: list[list[str]] = field(default_factory=list)
    words: list[str] = field(default_factory=list)
    heredocs: list[str] = field(default_factory=list)
    assignments: dict[str, str] = field(default_factory=dict)
    # Words whose source spelling differs from their value (quotes, escapes, line
    # continuations): a scan of the raw text does not see them as they are.
    composed: set[str] = field(default_factory=set)


# The lexer: one regular expression per shell token class, so a 64 KiB command is read in
# a few thousand steps rather than character by character (shlex is too slow for that).
_LEX = re.compile(
    r"""(?P<ws>[ \t\r]+(?:\\\n[ \t\r]*)*)"""  # blanks, with the line continuations among them
    r"""|(?P<cont>\\\n)"""
    r"""|(?P<esc>\\.)"""
    r"""|(?P<sq>'[^']*')"""
    r"""|(?P<dq>"(?:[^"\\]|\\.)*")"""
    r"""|(?P<punct>[;&|()\n]+|[<>]+[&|]?)"""
    r"""|(?P<plain>[^ \t\r\\'"();<>|&\n#]+|\#)"""
    r"""|(?P<other>['"\\])""",
    re.S,
)
_DQ_ESCAPE = re.compile(r"\\([$`\"\\\n])")
# Text with no quotes, comments, heredocs or escapes (other than line continuations
# between words) splits in one pass: the common case, and the one a 64 KiB command of
# overrides is.
_CONTINUATION_BEFORE_TEXT = re.compile(r"\\\n(?=[^ \t\r\n])")
_SIMPLE_TOKEN = re.compile(r"([;&|()\n]+|[<>]+[&|]?)|([^ \t\r\n();<>|&]+)")


_COMMENT_START = " \t\r\n;&|()<>"


def _strip_simple_comments(text: str) -> str:
    """Drop the ``#`` comments of a text without quotes, escapes or heredocs: a ``#`` that
    starts a word runs to the end of its line (a backslash there continues nothing)."""
    out: list[str] = []
    i = 0
    while (j := text.find("#", i)) >= 0:
        if j == 0 or text[j - 1] in _COMMENT_START:
            out.append(text[i:j])
            end = text.find("\n", j)
            i = len(text) if end < 0 else end
        else:
            out.append(text[i : j + 1])
            i = j + 1
    out.append(text[i:])
    return "".join(out)


def _is_simple(text: str) -> bool:
    if "'" in text or '"' in text or "<<" in text:
        return False
    backslashes = text.count("\\")
    if not backslashes:
        return True
    if backslashes != text.count("\\\n"):
        return False
    # A continuation inside a word joins two pieces of text the raw scan sees apart.
    return not any(m.start() > 0 and text[m.start() - 1] not in " \t\r\n" for m in _CONTINUATION_BEFORE_TEXT.finditer(text))


def _heredoc_bodies(text: str, i: int, pending: list[tuple[str, bool]], bodies: list[str]) -> int:
    """Read the bodies of the heredocs opened on the line that ended just before ``i``."""
    n = len(text)
    for delimiter, strip_tabs in pending:
        body: list[str] = []
        while i < n:
            end = text.find("\n", i)
            line = text[i:] if end < 0 else text[i:end]
            i = n if end < 0 else end + 1
            if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                break
            body.append(line)
        bodies.append("\n".join(body))
    return i


def _tokens(text: str) -> tuple[list[tuple[bool, str]], list[str], set[str], list[str]]:
    """Split ``text`` as bash would into words and operator tokens (runs of ``();<>|&``
    and newlines), dropping comments and keeping heredoc bodies apart.

    Returns (tokens as (is_word, text), the words, the words spelled differently in the
    source (quotes, escapes, line continuations), heredoc bodies). Raises
    ``ShellSyntaxError`` on an unclosed quote.
    """
    if _is_simple(text):
        if "#" in text:
            text = _strip_simple_comments(text)
        text = text.replace("\\\n", "")
        if text.isascii() and not any(c in text for c in "();<>|&\x0b\x0c\x1c\x1d\x1e\x1f"):
            # Lines of words: for ASCII text without these, str.split splits as bash does.
            tokens: list[tuple[bool, str]] = []
            words: list[str] = []
            for line in text.split("\n"):
                line_words = line.split()
                words += line_words
                tokens += [(True, w) for w in line_words]
                tokens.append((False, "\n"))
            return tokens, words, set(), []
        found = _SIMPLE_TOKEN.findall(text)
        return [(True, w) if w else (False, p) for p, w in found], [w for _, w in found if w], set(), []
    return _tokens_general(text)


def _tokens_general(text: str) -> tuple[list[tuple[bool, str]], list[str], set[str], list[str]]:
    tokens: list[tuple[bool, str]] = []
    words: list[str] = []
    composed: set[str] = set()
    bodies: list[str] = []
    pending: list[tuple[str, bool]] = []
    word: list[str] = []
    in_word = False  # a word has started (even an empty one, like '')
    plain = True  # the current word is spelled in the source exactly as it reads
    i, n = 0, len(text)

    delimiter_next: bool | None = None  # after '<<' (True: '<<-', tabs stripped)

    def finish() -> None:
        nonlocal in_word, plain, word, delimiter_next
        if in_word:
            w = "".join(word)
            tokens.append((True, w))
            words.append(w)
            if not plain:
                composed.add(w)
            if delimiter_next is not None:
                pending.append((w, delimiter_next))
                delimiter_next = None
        word, in_word, plain = [], False, True

    lex = _LEX.match
    while i < n:
        m = lex(text, i)
        assert m is not None  # the last alternatives match any single character
        kind = m.lastgroup
        tok = m.group()
        if kind == "plain":
            if tok == "#" and not in_word:  # a comment runs to the end of the line
                end = text.find("\n", i)
                i = n if end < 0 else end
                continue
            word.append(tok)
            in_word = True
        elif kind == "ws":
            finish()
        elif kind == "cont":
            plain = False
        elif kind == "esc":
            word.append(tok[1])
            in_word, plain = True, False
        elif kind == "sq":
            word.append(tok[1:-1])
            in_word, plain = True, False
        elif kind == "dq":
            word.append(_DQ_ESCAPE.sub(lambda e: "" if e.group(1) == "\n" else e.group(1), tok[1:-1]))
            in_word, plain = True, False
        elif kind == "punct":
            finish()
            if "\n" in tok and (pending or delimiter_next is not None):
                # The heredoc bodies start after the end of the line that opened them.
                tok = tok[: tok.index("\n") + 1]
                tokens.append((False, tok))
                i = _heredoc_bodies(text, i + len(tok), pending, bodies)
                pending, delimiter_next = [], None
                continue
            if tok.endswith("<<") and not tok.endswith("<<<"):
                # A heredoc (not a here-string <<<): the next word is its delimiter.
                if len(tok) > 2:
                    tokens.append((False, tok[:-2]))
                tokens.append((False, "<<"))
                delimiter_next = text.startswith("-", m.end())
                i = m.end() + delimiter_next
                continue
            tokens.append((False, tok))
        elif tok == "\\":  # a backslash at the very end: bash keeps it
            word.append(tok)
            in_word = True
        else:
            raise ShellSyntaxError(f"unclosed {tok} quote")
        i = m.end()
    finish()
    return tokens, words, composed, bodies


def _is_separator(token: str) -> bool:
    return bool(token) and all(c in _SEPARATORS for c in token)


def _is_redirection(token: str) -> bool:
    return bool(token) and all(c in "<>&|" for c in token) and ("<" in token or ">" in token)


def parse_script(text: str) -> Script:
    """Split ``text`` into simple commands. Raises ``ShellSyntaxError`` when bash couldn't."""
    tokens, words, composed, heredocs = _tokens(text)
    script = Script(heredocs=heredocs, words=words, composed=composed)
    current: list[str] = []
    skip_next = False
    for is_word, token in tokens:
        if is_word:
            pass
        elif _is_separator(token):
            if current:
                script.commands.append(current)
            current = []
            continue
        elif _is_redirection(token):
            skip_next = True  # the redirection target is a word, but not an argument
            continue
        if skip_next:
            skip_next = False
            continue
        current.append(token)
    if current:
        script.commands.append(current)
    for command in script.commands:
        words_ = command[1:] if command[0] == "export" else command
        if words_ and all(_ASSIGNMENT.match(w) for w in words_):
            for word in words_:
                name, _, value = word.partition("=")
                script.assignments[name] = value
    return script


def program_and_args(command: list[str]) -> tuple[str, list[str]] | None:
    """The program a simple command runs and its arguments, past assignments and keywords."""
    i = 0
    while i < len(command) and (command[i] in _PREFIX_WORDS or _ASSIGNMENT.match(command[i])):
        i += 1
    if i >= len(command):
        return None
    return command[i], command[i + 1 :]


def module_run_by(args: list[str]) -> tuple[str, list[str]] | None:
    """For ``<program> [options] -m MODULE ARGS``: (MODULE, ARGS), else None.

    Words before ``-m`` must be options, or the value of a ``--long`` option given without
    ``=`` (``torchrun --nnodes 1 -m ...``); a bare word there is a script, and ``-m`` after it
    would be the script's own argument.
    """
    previous_takes_value = False
    for i, word in enumerate(args):
        if word == "-m":
            return (args[i + 1], args[i + 2 :]) if i + 1 < len(args) else None
        if word == "-c":
            return None
        if word.startswith("-"):
            previous_takes_value = (word.startswith("--") and "=" not in word) or word in ("-X", "-W")
            continue
        if not previous_takes_value:
            return None
        previous_takes_value = False
    return None


_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


# Substitution may grow a value (A=$B$B, B=$C$C, ...): past this many substituted
# characters it stops, and the variable counts as unresolved.
MAX_SUBSTITUTED_CHARS = 256 * 1024


class _TooLarge(Exception):
    pass


def substitute(value: str, assignments: dict[str, str], *, limit: int = MAX_SUBSTITUTED_CHARS) -> tuple[str, list[str]]:
    """Replace ``$NAME``/``${NAME}`` by the script's own assignments; return the result and
    the names it could not resolve. A name that would make the result larger than
    ``limit`` characters is returned as unresolved, with ``value`` as given."""
    unknown: list[str] = []
    budget = limit
    original = value

    def replace(m: re.Match[str]) -> str:
        nonlocal budget
        name = m.group(1) or m.group(2)
        if name in assignments:
            budget -= len(assignments[name])
            if budget < 0:
                raise _TooLarge(name)
            return assignments[name]
        unknown.append(name)
        return m.group(0)

    for _ in range(5):  # assignments may refer to earlier ones
        try:
            new = _VARIABLE.sub(replace, value)
        except _TooLarge as exc:
            return original, [str(exc)]
        if new == value:
            break
        value = new
        unknown.clear()
    return value, unknown


def has_unresolved_expansion(value: str) -> bool:
    """True when ``value`` still holds something the shell would expand at run time."""
    return "$" in value or "`" in value
