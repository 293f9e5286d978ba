"""``argus completion bash|zsh|fish``: the scripts are generated from the CLI's own parser.
The bash script is loaded into a real bash and asked, as bash's completion asks it (COMP_WORDS,
COMP_CWORD, then the function ``complete -F`` names); zsh and fish are not on the test machine,
so their scripts are checked against the parser's structure line by line."""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path

import pytest

from argus import cli
from argus.completion import Command, command_tree, script

pytestmark = pytest.mark.unit

BASH = shutil.which("bash")


def generated(shell: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert cli.main(["completion", shell]) == 0
    return capsys.readouterr().out


def complete(text: str, line: str, cwd: Path) -> list[str]:
    """What bash offers for ``line`` (the cursor at its end), with ``text`` loaded."""
    assert BASH is not None
    probe = (
        'source "$1"; read -ra COMP_WORDS <<< "$2"; [[ "$2" == *" " ]] && COMP_WORDS+=("");'
        ' COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=();'
        ' $(complete -p "${COMP_WORDS[0]}" | sed -E "s/.*-F ([^ ]+).*/\\1/"); printf "%s\\n" "${COMPREPLY[@]}"'
    )
    path = cwd / "completion.bash"
    path.write_text(text)
    out = subprocess.run([BASH, "--norc", "-c", probe, "bash", str(path), line], capture_output=True, text=True, cwd=cwd, timeout=30)
    assert out.returncode == 0, out.stderr
    return [w for w in out.stdout.splitlines() if w]


def test_bash_completes_commands_flags_choices_and_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = generated("bash", capsys)
    for name in ("task.yaml", "tasks.yml"):
        (tmp_path / name).write_text("")
    commands = [c.name for c in command_tree(cli.build_parser()).subcommands]
    assert set(commands) >= {"validate", "render", "convert", "crd", "completion", "logs", "onboard", "queue", "doctor"}
    assert complete(text, "argus ", tmp_path)[:len(commands)] == commands
    assert complete(text, "argus va", tmp_path) == ["validate"]
    assert complete(text, "argus validate --r", tmp_path) == ["--recursive", "--root"]
    assert complete(text, "argus validate -o ", tmp_path) == ["text", "json"]
    assert sorted(complete(text, "argus validate -f ta", tmp_path)) == ["task.yaml", "tasks.yml"]
    assert complete(text, "argus validate --user ", tmp_path) == []  # a value of your own: no file names
    assert complete(text, "argus completion ", tmp_path) == ["bash", "zsh", "fish"]
    assert "--follow" in complete(text, "argus logs --", tmp_path) and "--recursive" not in complete(text, "argus logs --", tmp_path)
    assert complete(text, "argus logs --direct-ray --ta", tmp_path) == ["--tail"]  # its value may be left out
    # The kubectl plugin's binary completes the same (kubectl argus runs kubectl-argus).
    assert complete(text, "kubectl-argus queue -o ", tmp_path) == ["table", "json"]


def test_a_new_flag_completes_without_editing_a_script(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser(prog="argus")
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("train", help="a command that does not exist")
    p.add_argument("--color", choices=("red", "green"), help="a flag")
    p.add_argument("--config-file", help="a file")
    p.add_argument("--kubeconfig")
    tree = command_tree(parser)
    assert [c.name for c in tree.subcommands] == ["train"]
    text = script("bash", tree)
    assert complete(text, "argus tr", tmp_path) == ["train"]
    assert complete(text, "argus train --c", tmp_path) == ["--color", "--config-file"]
    assert complete(text, "argus train --color ", tmp_path) == ["red", "green"]
    (tmp_path / "kube.conf").write_text("")
    assert "kube.conf" in complete(text, "argus train --kubeconfig ", tmp_path)


def _every_flag(tree: Command) -> list[tuple[str, str]]:
    return [(c.name, f) for c in tree.subcommands for o in c.options for f in o.flags]


def test_zsh_script_names_every_command_and_flag(capsys: pytest.CaptureFixture[str]) -> None:
    text = generated("zsh", capsys)
    tree = command_tree(cli.build_parser())
    assert text.startswith("#compdef argus kubectl-argus\n")
    lines = text.splitlines()
    for c in tree.subcommands:
        assert any(line.strip().startswith(f"'{c.name}:") for line in lines), c.name
        (arm,) = [line for line in lines if line.strip().startswith(f"{c.name}) _arguments ")]
        for o in c.options:
            spec = "{" + ",".join(o.flags) + "}" if len(o.flags) > 1 else f"'{o.flags[0]}["
            assert spec in arm, (c.name, o.flags)
            if o.choices:
                assert f":value:({' '.join(o.choices)})'" in arm
    assert "(text json)" in text and "1:argument:(bash zsh fish)" in text
    # Every single quote is closed: zsh would read the rest of the file as one word otherwise.
    assert all(line.replace("'\\''", "").count("'") % 2 == 0 for line in lines)


def test_fish_script_names_every_command_and_flag(capsys: pytest.CaptureFixture[str]) -> None:
    text = generated("fish", capsys)
    tree = command_tree(cli.build_parser())
    for program in ("argus", "kubectl-argus"):
        for c in tree.subcommands:
            assert f"complete -c {program} -n 'not __fish_seen_subcommand_from " in text
            assert f" -a {c.name} -d " in text
        for command, flag in _every_flag(tree):
            option = f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}"
            assert any(line.startswith(f"complete -c {program} -n '__fish_seen_subcommand_from {command}'") and option in line
                       for line in text.splitlines()), (program, command, flag)
    assert "-l output -r -f -a 'text json'" in text and "-l filename -r -F" in text
    assert all(line.replace("\\'", "").count("'") % 2 == 0 for line in text.splitlines())


def test_an_unknown_shell_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["completion", "powershell"])
    assert exit_.value.code == 2 and "invalid choice: 'powershell'" in capsys.readouterr().err


def test_kubectl_argus_completes_through_kubectl_complete_argus(capsys: pytest.CaptureFixture[str]) -> None:
    """kubectl (>= 1.26) runs kubectl_complete-argus with the words after `kubectl argus` and
    reads candidates, then cobra's directive (:4 no file names, :0 the shell's file names)."""
    import tomllib  # noqa: PLC0415

    scripts = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = scripts["kubectl_complete-argus"].partition(":")
    assert (module, getattr(cli, function)) == ("argus.cli", cli.kubectl_complete)

    def ask(*words: str) -> list[str]:
        assert cli.kubectl_complete(list(words)) == 0
        return capsys.readouterr().out.splitlines()

    assert ask("va") == ["validate", ":4"]
    assert ask("") [-1] == ":4" and {"validate", "logs", "completion"} <= set(ask(""))
    assert ask("validate", "-o", "") == ["text", "json", ":4"]
    assert ask("validate", "--re") == ["--recursive", ":4"]
    assert ask("validate", "-f", "") == [":0"]          # a file: the shell completes its names
    assert ask("validate", "--user", "") == [":4"]      # a value of your own
    assert ask("completion", "f") == ["fish", ":4"]
    assert ask("logs", "-f", "--ta") == ["--tail", ":4"]  # logs -f is --follow: no value after it
