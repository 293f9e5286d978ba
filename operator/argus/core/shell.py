"""Reading a user's command as bash would, to tell what it really runs.

A substring search would count ``echo python3 -m verl.trainer.main_ppo`` or a comment as
the entrypoint. Here the script loses its comments and heredoc bodies (a small quote-aware
scanner, since shlex knows neither), then shlex splits it into words and operators, and the
words are grouped into simple commands. Heredoc bodies are kept apart: they run nothing,
but the path checks still read them.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

_SEPARATORS = set(";&|\n()")
_PUNCTUATION = "();<>|&\n"
# Words that may stand before the program of a simple command without being it.
_PREFIX_WORDS = {"if", "then", "else", "elif", "do", "while", "until", "!", "{", "time", "exec", "nohup", "env", "command"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_HEREDOC = re.compile(r"<<(-?)[ \t]*(?:'([^'\n]*)'|\"([^\"\n]*)\"|\\?([A-Za-z0-9_.\-]+))")


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


def _strip_comments_and_heredocs(text: str) -> tuple[str, list[str]]:
    """Remove ``#`` comments, backslash-newlines and heredoc bodies, respecting quotes."""
    out: list[str] = []
    bodies: list[str] = []
    pending: list[tuple[str, bool]] = []  # heredoc delimiters opened on the current line
    i, n = 0, len(text)
    quote: str | None = None
    while i < n:
        ch = text[i]
        if quote == "'":
            out.append(ch)
            if ch == "'":
                quote = None
            i += 1
            continue
        if ch == "\\" and i + 1 < n:
            if text[i + 1] == "\n":  # line continuation
                i += 2
                continue
            out.append(text[i : i + 2])
            i += 2
            continue
        if quote == '"':
            out.append(ch)
            if ch == '"':
                quote = None
            i += 1
            continue
        if ch in "'\"":
            quote = ch
            out.append(ch)
            i += 1
            continue
        if ch == "#" and (i == 0 or text[i - 1] in " \t\n;&|()"):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if ch == "<" and text.startswith("<<", i) and not text.startswith("<<<", i):
            m = _HEREDOC.match(text, i)
            if m:
                delimiter = next(g for g in m.groups()[1:] if g is not None)
                pending.append((delimiter, m.group(1) == "-"))
                out.append(text[i : m.end()])
                i = m.end()
                continue
        if ch == "\n" and pending:
            out.append("\n")
            i += 1
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
            pending = []
            continue
        out.append(ch)
        i += 1
    if quote:
        raise ShellSyntaxError(f"unclosed {quote} quote")
    return "".join(out), bodies


def _is_separator(token: str) -> bool:
    return bool(token) and all(c in _SEPARATORS for c in token)


def _is_redirection(token: str) -> bool:
    return bool(token) and all(c in "<>&|" for c in token) and ("<" in token or ">" in token)


def parse_script(text: str) -> Script:
    """Split ``text`` into simple commands. Raises ``ShellSyntaxError`` when bash couldn't."""
    code, heredocs = _strip_comments_and_heredocs(text)
    lexer = shlex.shlex(code, posix=True, punctuation_chars=_PUNCTUATION)
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError as exc:
        raise ShellSyntaxError(str(exc).lower()) from None
    script = Script(heredocs=heredocs)
    current: list[str] = []
    skip_next = False
    for token in tokens:
        if _is_separator(token):
            if current:
                script.commands.append(current)
            current = []
            continue
        if _is_redirection(token):
            skip_next = True  # the redirection target is a word, but not an argument
            continue
        script.words.append(token)
        if skip_next:
            skip_next = False
            continue
        current.append(token)
    if current:
        script.commands.append(current)
    for command in script.commands:
        words = command[1:] if command[0] == "export" else command
        if words and all(_ASSIGNMENT.match(w) for w in words):
            for word in words:
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


def substitute(value: str, assignments: dict[str, str]) -> tuple[str, list[str]]:
    """Replace ``$NAME``/``${NAME}`` by the script's own assignments; return the result and
    the names it could not resolve."""
    unknown: list[str] = []

    def replace(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name in assignments:
            return assignments[name]
        unknown.append(name)
        return m.group(0)

    for _ in range(5):  # assignments may refer to earlier ones
        new = _VARIABLE.sub(replace, value)
        if new == value:
            break
        value = new
        unknown.clear()
    return value, unknown


def has_unresolved_expansion(value: str) -> bool:
    """True when ``value`` still holds something the shell would expand at run time."""
    return "$" in value or "`" in value
