"""Step 1 of the command checks: the text of ``spec.command`` -> a typed ``Script``.

    spec.command -> check_text -> expand -> **syntax.parse** -> resolve -> launchers -> hydra -> checks -> emit

The text is read into tokens by ``argus.core.command.lexer`` (quotes, escapes, expansions:
what a word may hold); this module groups the tokens into commands and reads each into a
statement.

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

from collections.abc import Collection
from typing import NamedTuple

from .lexer import MAX_REFUSALS, NAME, Lexer, RawWord, Token
from .program import Assign, Export, Part, Refusal, Run, Script, SetOptions, Statement, Tee, Var, Word, merge_text

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


# --- the parser: tokens -> statements ---------------------------------------------------


def _to_word(raw: RawWord, text: str, parts: list[Part] | None = None, *, assignment: bool = False) -> Word:
    if parts is None and len(raw.parts) == 1 and type(raw.parts[0]) is str and raw.parts[0]:
        return Word((raw.parts[0],), raw.solid, raw.line, text[raw.start:raw.end])
    given: list[Part] = list(raw.parts) if parts is None else parts
    if assignment:  # bash neither splits nor globs an assignment's value
        given = [Var(p.name, True) if type(p) is Var and not p.quoted else p for p in given]
    merged = merge_text(given)
    solid = True if assignment else raw.solid
    return Word(tuple(merged), solid, raw.line, text[raw.start:raw.end])


def _assignment(raw: RawWord, text: str, export: bool, lexer: Lexer) -> Assign | None:
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


def _set_options(words: list[RawWord], text: str, line: int) -> tuple[SetOptions | None, Refusal | None]:
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
    lexer = Lexer(text)
    lexer.run()
    parser = _Parser(text, programs, lexer)
    for cmd in _commands(lexer.tokens):
        parser.command(cmd)
    refusals = parser.refusals
    if len(refusals) > MAX_REFUSALS:
        more = len(refusals) - MAX_REFUSALS
        refusals = refusals[:MAX_REFUSALS] + [Refusal(0, f"{more} more", "further problems are not listed", "fix the ones above first")]
    return Parsed(Script(tuple(parser.statements)), refusals, parser.words_intact, parser.entrypoint_seen)


def _commands(tokens: list[Token]) -> list[list[Token]]:
    """The tokens grouped into commands, split at newlines and ';' (a newline after '|' does
    not end the pipeline)."""
    commands: list[list[Token]] = []
    current: list[Token] = []
    for tok in tokens:
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
    return commands


class _Parser:
    """Reads the commands one by one into statements; what is not allowed becomes a refusal
    (appended to the lexer's, in order)."""

    def __init__(self, text: str, programs: Collection[str], lexer: Lexer) -> None:
        self.text = text
        self.programs = programs
        self.lexer = lexer
        self.refusals = lexer.refusals
        self.words_intact = not self.refusals
        self.entrypoint_seen = False  # some command started with an allowed program, even if refused
        self.statements: list[Statement] = []
        self.run_seen: Run | None = None

    def command(self, cmd: list[Token]) -> None:
        text, programs, refusals = self.text, self.programs, self.refusals
        line = self.lexer.line_of(cmd[0][2])
        head_word = next((t[1] for t in cmd if isinstance(t[1], RawWord) and t[1].assign is None), None)
        if head_word is not None and text[head_word.start:head_word.end] in programs:
            self.entrypoint_seen = True
        bad = next((t for t in cmd if t[0] == "op" and t[1] not in ("|", "2>&1")), None)
        if bad is not None:
            op = str(bad[1])
            rule, advice = _OPERATOR_RULES.get(op) or (
                ("redirection is not allowed", _REDIRECT_ADVICE) if "<" in op or ">" in op else (f"'{op}' is not allowed", "write one command per line"))
            refusals.append(Refusal(self.lexer.line_of(bad[2]), op, rule, advice))
            return
        if self.run_seen is not None:
            refusals.append(self.after_entrypoint(cmd, line))
            return
        # split at '|': the entrypoint, then tee
        pipe_at = [k for k, t in enumerate(cmd) if t[0] == "op" and t[1] == "|"]
        main = cmd[: pipe_at[0]] if pipe_at else cmd
        tee_part = cmd[pipe_at[0] + 1:] if pipe_at else []
        if len(pipe_at) > 1:
            refusals.append(Refusal(line, "|", "a pipe is allowed only once, into tee", "end the entrypoint with 2>&1 | tee FILE"))
            return
        stderr = bool(main) and main[-1][0] == "op" and main[-1][1] == "2>&1"
        if stderr:
            main = main[:-1]
        if any(t[0] == "op" for t in main) or (stderr and not pipe_at):
            refusals.append(Refusal(line, "2>&1", "redirection is not allowed", _REDIRECT_ADVICE))
            return
        words: list[RawWord] = [t[1] for t in main]  # type: ignore[misc]
        if not words:
            refusals.append(Refusal(line, "|", "a pipe needs a command before it", "end the entrypoint with 2>&1 | tee FILE"))
            return
        env, rest, failed = self.prefix(words)
        if failed:
            return
        if not rest:
            if pipe_at:
                refusals.append(Refusal(line, "|", "a pipe is allowed only after the entrypoint", "end the entrypoint with 2>&1 | tee FILE"))
                return
            self.statements.extend(env)
            return
        name_word = _to_word(rest[0], text)
        name = name_word.literal
        if name in ("set", "export") and (env or pipe_at):
            refusals.append(Refusal(line, name_word.source, f"'{name}' with a prefix or a pipe is not allowed", f"write {name} on its own line"))
        elif name == "set":
            opts, refusal = _set_options(rest, text, line)
            if refusal is not None:
                refusals.append(refusal)
            elif opts is not None:
                self.statements.append(opts)
        elif name == "export":
            self.export(rest, line)
        elif name is None or name not in programs:
            refusal = self.not_a_program(name, name_word.source, line)
            if refusal is not None:
                refusals.append(refusal)
        else:
            self.entrypoint(env, rest, tee_part if pipe_at else None, stderr, line)

    def prefix(self, words: list[RawWord]) -> tuple[list[Assign], list[RawWord], bool]:
        """The assignments before a command's program (``NAME=value PROGRAM``), the words
        after them, and whether an assignment was refused."""
        k = 0
        env: list[Assign] = []
        failed = False
        while k < len(words) and words[k].assign is not None:
            a = _assignment(words[k], self.text, False, self.lexer)
            failed |= a is None
            if a is not None:
                env.append(a)
            k += 1
        return env, words[k:], failed

    def after_entrypoint(self, cmd: list[Token], line: int) -> Refusal:
        """A command after the entrypoint (nothing may follow it), with a hint when it is the
        entrypoint's own continuation cut off by a comment line."""
        text, programs = self.text, self.programs
        last = cmd[-1]
        end = last[1].end if isinstance(last[1], RawWord) else last[2] + len(str(last[1]))
        source = text[cmd[0][2]:end]
        first = cmd[0][1]
        head = text[first.start:first.end] if isinstance(first, RawWord) else ""
        if head in programs:
            return Refusal(line, source, "a second entrypoint is not allowed", "run one entrypoint per task")
        if head.startswith(("-", "+")) or "." in head.split("=", 1)[0]:
            return Refusal(line, source, "nothing may follow the entrypoint",
                           "bash ends a command at a comment line, so a '\\' continuation does not carry through one: "
                           "move the comment below the last line")
        return Refusal(line, source, "nothing may follow the entrypoint", "move it before the entrypoint, or remove it")

    def export(self, rest: list[RawWord], line: int) -> None:
        """``export NAME=value`` and ``export NAME`` (any number of them; no flags)."""
        text, refusals = self.text, self.refusals
        flag = next((w for w in rest[1:] if text[w.start:w.end].startswith("-")), None)
        if flag is not None:
            refusals.append(Refusal(line, text[flag.start:flag.end], f"export {text[flag.start:flag.end]} is not allowed",
                                    "write export NAME=value or export NAME"))
            return
        for w in rest[1:]:
            if w.assign is not None:
                a = _assignment(w, text, True, self.lexer)
                if a is not None:
                    self.statements.append(a)
                continue
            arg = _to_word(w, text).literal
            if arg is not None and NAME.fullmatch(arg):
                self.statements.append(Export(arg, line))
            else:
                refusals.append(Refusal(line, text[w.start:w.end], f"export {text[w.start:w.end]} is not allowed",
                                        "write export NAME=value or export NAME"))
        if len(rest) == 1:
            refusals.append(Refusal(line, "export", "'export' without a name is not allowed", "write export NAME=value"))

    def not_a_program(self, name: str | None, source: str, line: int) -> Refusal | None:
        """The refusal of a command whose first word is not an allowed program (None: a word
        emptied by a refused expansion, already reported)."""
        programs = self.programs
        what = source if name is None else name
        if name is not None and name.rsplit("/", 1)[-1] in programs:
            rule, advice = (f"'{name}' is not an allowed entrypoint program",
                            f"write {name.rsplit('/', 1)[-1]} (allowed programs: {', '.join(sorted(programs))})")
        elif name is None:
            rule, advice = ("a program name built from expansions is not allowed", "write the program name out")
        elif name == "" and not self.words_intact:
            return None
        else:
            rule = f"'{name if len(name) <= 60 else name[:57] + '...'}' is not allowed"
            advice = _COMMAND_ADVICE.get(name) or ADVICE_LANGUAGE.format(programs=" or ".join(f"{p} ... -m MODULE" for p in sorted(programs)))
            if name not in _COMMAND_ADVICE and name.endswith("()"):
                rule, advice = "a function definition is not allowed", "write the command out"
        return Refusal(line, what, rule, advice)

    def entrypoint(self, env: list[Assign], rest: list[RawWord], tee_part: list[Token] | None, stderr: bool, line: int) -> None:
        """The entrypoint's run, with its ``| tee`` when piped (``tee_part``: the tokens after
        the pipe)."""
        text = self.text
        argv = tuple(_to_word(w, text) for w in rest)
        tee: Tee | None = None
        if tee_part is not None:
            tee_words = [t[1] for t in tee_part if t[0] == "word"]
            if len(tee_words) != len(tee_part) or not tee_words:
                self.refusals.append(Refusal(line, "|", "a pipe is allowed only into tee", "end the entrypoint with 2>&1 | tee FILE"))
                return
            tw = [_to_word(w, text) for w in tee_words]  # type: ignore[arg-type]
            if tw[0].literal != "tee":
                self.refusals.append(Refusal(line, tw[0].source, f"a pipe into '{tw[0].source}' is not allowed",
                                             "a pipe is allowed only into tee: 2>&1 | tee FILE"))
                return
            append = len(tw) == 3 and tw[1].literal in ("-a", "--append")
            if len(tw) != 2 + append or (tw[1].literal or "").startswith("-") and not append:
                self.refusals.append(Refusal(line, " ".join(w.source for w in tw), "tee takes one file (and -a) here",
                                             "write 2>&1 | tee [-a] FILE"))
                return
            tee = Tee(tw[-1], append, stderr)
        self.run_seen = Run(tuple(env), argv, tee, line)
        self.statements.append(self.run_seen)
