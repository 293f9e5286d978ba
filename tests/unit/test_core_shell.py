"""Reading a command as bash would (argus.core.shell): words, simple commands, comments,
heredocs, assignments; the entrypoint detection built on it; and the agreement of the
fast path with the general lexer and with shlex."""

from __future__ import annotations

import shlex
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from argus.core import shell
from argus.core.shell import (
    ShellSyntaxError,
    has_unresolved_expansion,
    module_run_by,
    parse_script,
    program_and_args,
    substitute,
)

pytestmark = pytest.mark.unit


def commands(text: str) -> list[list[str]]:
    return parse_script(text).commands


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("python3 -m verl.trainer.main_ppo a=1 b=2", [["python3", "-m", "verl.trainer.main_ppo", "a=1", "b=2"]]),
        ("python3 -m m \\\n  a=1 \\\n  b=2\n", [["python3", "-m", "m", "a=1", "b=2"]]),
        ("a=1\\\nb", [["a=1b"]]),  # a continuation inside a word joins it
        ("echo a; echo b && echo c || echo d | cat & wait", [["echo", "a"], ["echo", "b"], ["echo", "c"], ["echo", "d"], ["cat"], ["wait"]]),
        ("(cd x && run) ; { other; }", [["cd", "x"], ["run"], ["{", "other"], ["}"]]),
        ("echo $(python3 -m m)", [["echo", "$"], ["python3", "-m", "m"]]),  # command substitution runs
        ("run 2>&1 > out.log < in.txt | tee x", [["run", "2"], ["tee", "x"]]),
        ("cat <<< 'here string' && go", [["cat"], ["go"]]),
        ("# only a comment\n", []),
        ("run # trailing comment with 'quote\nnext", [["run"], ["next"]]),
        ("run a#b", [["run", "a#b"]]),  # '#' inside a word is no comment
        ("run ''#b", [["run", "#b"]]),
        ("run >#file", [["run"]]),  # bash: '#' after an operator starts a comment
        ("echo 'a b' \"c d\" e\\ f", [["echo", "a b", "c d", "e f"]]),
        ("echo \"a\\\"b\" 'x\\y' \"\\$HOME\" \"p\\q\"", [["echo", 'a"b', "x\\y", "$HOME", "p\\q"]]),
        ("echo \"multi\nline\"", [["echo", "multi\nline"]]),
        ("echo \"joined \\\nline\"", [["echo", "joined line"]]),
        ("echo 'no \\\njoin'", [["echo", "no \\\njoin"]]),
        ("echo x\\", [["echo", "x\\"]]),  # a final backslash stays, as in bash
        ("cat <<EOF\npython3 -m m\nEOF\ngo", [["cat"], ["go"]]),
        ("cat <<'EOF' > f\n$HOME\nEOF\ngo", [["cat"], ["go"]]),
        ("cat <<-\"END\"\n\tbody\n\tEND\ngo", [["cat"], ["go"]]),
        ("cat <<A <<B\na\nA\nb\nB\ngo", [["cat"], ["go"]]),
        ("cat <<EOF; echo same-line\nbody\nEOF\n", [["cat"], ["echo", "same-line"]]),
        ("cat <<EOF\nnever closed", [["cat"]]),
        ("FOO=1 BAR=2 python3 -m m", [["FOO=1", "BAR=2", "python3", "-m", "m"]]),
        ("\n\n  \t\n", []),
    ],
)
def test_simple_commands(text: str, expected: list[list[str]]) -> None:
    assert commands(text) == expected


def test_heredoc_bodies_are_kept_apart() -> None:
    script = parse_script("cat <<EOF > a\nline 1\n/private/users/bob\nEOF\ncat <<-'X'\n\tindented\n\tX\n")
    assert script.heredocs == ["line 1\n/private/users/bob", "\tindented"]
    assert ["cat"] in script.commands


def test_composed_words_are_marked() -> None:
    script = parse_script("a 'b' c\\d \"e\"f g\\\nh /x/y")
    assert script.words == ["a", "b", "cd", "ef", "gh", "/x/y"]
    assert script.composed == {"b", "cd", "ef", "gh"}


def test_assignments() -> None:
    script = parse_script("A=1\nexport B=$A/x C=3\nD=4 run\nA=5\necho E=6")
    assert script.assignments == {"A": "5", "B": "$A/x", "C": "3"}


@pytest.mark.parametrize(("text", "message"), [("echo 'open", "unclosed ' quote"), ('echo "open', 'unclosed " quote'), ("a 'b' \"c", 'unclosed " quote')])
def test_unclosed_quotes(text: str, message: str) -> None:
    with pytest.raises(ShellSyntaxError, match=message):
        parse_script(text)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["python3", "-m", "x"], ("python3", ["-m", "x"])),
        (["A=1", "B=2", "python3", "-m", "x"], ("python3", ["-m", "x"])),
        (["if", "python3", "-m", "x"], ("python3", ["-m", "x"])),
        (["exec", "nohup", "torchrun", "-m", "x"], ("torchrun", ["-m", "x"])),
        (["A=1"], None),
    ],
)
def test_program_and_args(command: list[str], expected: object) -> None:
    assert program_and_args(command) == expected


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-m", "verl.trainer.main_ppo", "a=1"], ("verl.trainer.main_ppo", ["a=1"])),
        (["-u", "-X", "dev", "-m", "mod"], ("mod", [])),
        (["--standalone", "--nnodes=1", "--nproc_per_node", "2", "-m", "mod", "x"], ("mod", ["x"])),
        (["script.py", "-m", "mod"], None),  # -m is the script's argument
        (["-c", "print()", "-m", "mod"], None),
        (["-m"], None),
        ([], None),
    ],
)
def test_module_run_by(args: list[str], expected: object) -> None:
    assert module_run_by(args) == expected


def test_substitute() -> None:
    assignments = {"D": "/data", "E": "$D/x", "F": "${E}/y"}
    assert substitute("$D/a ${D}/b", assignments) == ("/data/a /data/b", [])
    assert substitute("$F/z", assignments) == ("/data/x/y/z", [])
    assert substitute("$G/a", assignments) == ("$G/a", ["G"])
    assert has_unresolved_expansion("$G/a") and has_unresolved_expansion("`x`")


def test_substitute_is_bounded() -> None:
    """A=$A$A...: each round would multiply the size; substitution gives up instead."""
    assert substitute("x/$A", {"A": "$A" * 50}) == ("x/$A", ["A"])
    assert substitute("$B", {"B": "y" * 10}, limit=5) == ("$B", ["B"])
    assert substitute("$B", {"B": "y" * 5}, limit=5) == ("yyyyy", [])
    assert not has_unresolved_expansion("/data/a")


# --- agreement with shlex and between the lexer's two paths ---------------------------

_plain = st.text(alphabet="abcxyz019_-./=+,:$%@{}[]*?~", min_size=1, max_size=6)
_single = _plain.map(lambda s: f"'{s} {s}'")
_double = st.text(alphabet="abc $/=.-_", max_size=6).map(lambda s: f'"{s}"')
_escaped = st.sampled_from(["\\ ", "\\'", '\\"', "\\a", "\\$", "\\\\"])
_word = st.lists(st.one_of(_plain, _single, _double, _escaped), min_size=1, max_size=4).map("".join)
_line = st.lists(_word, min_size=1, max_size=6).map(" ".join)


@settings(max_examples=400, deadline=None)
@given(_line)
def test_words_agree_with_shlex(line: str) -> None:
    """Without comments, heredocs or backslashes inside double quotes, the words are
    exactly what shlex (POSIX mode) makes of the line."""
    assert parse_script(line).words == shlex.split(line, comments=False, posix=True)


_pieces = st.sampled_from([
    "python3", "-m", "verl.trainer.main_ppo", "a=b", "x", "/p", "$HOME", "${X}", " ", " ", "\t", "\r", "\n",
    "\\\n", " \\\n  ", ";", "&&", "||", "|", "&", "(", ")", "<", ">", ">>", "2>&1", "<<<", "{", "}", ",", "=", "é", "\x0b",
    "#", " # note ", "$#", "a#b", "# c \\\n",
])


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_pieces, max_size=20).map("".join))
def test_fast_path_agrees_with_the_general_lexer(text: str) -> None:
    fast = parse_script(text)
    with mock.patch.object(shell, "_is_simple", return_value=False):
        general = parse_script(text)
    assert fast.commands == general.commands
    assert fast.words == general.words
    assert fast.assignments == general.assignments
    assert fast.composed <= general.composed
