"""The command language (argus.core.command): how the syntax reads words, the generated
command, and the properties issue 11 asks for:

* random programs of the language round-trip emit -> parse -> the same program;
* checking the generated command again gives it back unchanged (expansion is idempotent);
* random shell noise never crashes the checks: a verdict, one line per problem;
* the fast path for simple Hydra overrides gives exactly what Hydra's own parser gives;
* real bash, running the generated command with stub programs that print their argv,
  passes exactly the words the checks read.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from argus.core.command import CheckedCommand, check_command
from argus.core.command.emit import emit, quote
from argus.core.command.hydra import fast_override, hydra_override
from argus.core.command.program import Assign, Date, Export, Run, Script, SetOptions, Tee, Var, Word, word
from argus.core.command.syntax import parse
from argus.core.config import PlatformConfig
from argus.core.expand import expand
from argus.core.plan import validate_task
from argus.core.policy import Findings, PathPolicy

pytestmark = pytest.mark.unit

CONFIG = PlatformConfig()
PROGRAMS = {"python3", "torchrun"}


def argv_of(text: str) -> list[Word]:
    script, refusals, *_ = parse(text, PROGRAMS)
    assert refusals == [], refusals
    assert script.run is not None
    return list(script.run.argv)


# --- how words are read ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("python3 -m m a=1 b=2", [("python3",), ("-m",), ("m",), ("a=1",), ("b=2",)]),
        ("python3 -m m \\\n  a=1 \\\n  b=2\n", [("python3",), ("-m",), ("m",), ("a=1",), ("b=2",)]),
        ("python3 -m m a=1\\\nb", [("python3",), ("-m",), ("m",), ("a=1b",)]),  # a continuation inside a word joins it
        ("python3 -m m 'a b' \"c d\" e\\ f", [("python3",), ("-m",), ("m",), ("a b",), ("c d",), ("e f",)]),
        ("python3 -m m \"a\\\"b\" 'x\\y' \"\\$X\" \"p\\q\"", [("python3",), ("-m",), ("m",), ('a"b',), ("x\\y",), ("$X",), ("p\\q",)]),
        ("python3 -m m a#b ''#c", [("python3",), ("-m",), ("m",), ("a#b",), ("#c",)]),  # '#' inside a word is no comment
        ("python3 -m m x # a comment 'with a quote\n", [("python3",), ("-m",), ("m",), ("x",)]),
        ("python3 -m m [a,b] {x:1}", [("python3",), ("-m",), ("m",), ("[a,b]",), ("{x:1}",)]),  # '[' and a comma-less brace are text
        ("python3 -m m x\\", [("python3",), ("-m",), ("m",), ("x\\",)]),  # a final backslash stays, as in bash
        ("python3 -m m $A \"$B\" x${C}y", [("python3",), ("-m",), ("m",), (Var("A", False),), (Var("B", True),), ("x", Var("C", False), "y")]),
        ("python3 -m m n=$(date +%Y%m%d) \"$(date '+%H')\"", [("python3",), ("-m",), ("m",), ("n=", Date("%Y%m%d")), (Date("%H"),)]),
        ("python3 -m m ${1:-vllm} x${2}y", [("python3",), ("-m",), ("m",), ("vllm",), ("xy",)]),
    ],
)
def test_words(text: str, words: list[tuple[Any, ...]]) -> None:
    assert [w.parts for w in argv_of(text)] == words


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("python3 -m m $@", []),
        ('python3 -m m "$@"', []),
        ("python3 -m m ${@} $* $1", []),
        ('python3 -m m "$*"', [()]),  # bash passes one empty word
        ('python3 -m m ""$@', [()]),
        ('python3 -m m "$1"', [()]),
        ("python3 -m m x$@", [("x",)]),
    ],
)
def test_positional_parameters_are_empty(text: str, kept: list[tuple[Any, ...]]) -> None:
    """As bash expands them with no arguments (checked against bash in test_bash_agrees_on_positional_parameters)."""
    script, refusals, *_ = parse(text, PROGRAMS)
    assert refusals == []
    from argus.core.command.resolve import resolve

    resolved, _, refusals = resolve(script)
    assert refusals == [] and resolved.run is not None
    assert [w.parts for w in resolved.run.argv[3:]] == kept


def test_bash_agrees_on_positional_parameters() -> None:
    out = subprocess.run(["bash", "-c", 'printf "<%s>" "$@"; printf "|"; printf "<%s>" "$*"; printf "<%s>" ""$@; printf "<%s>" x$@'],
                         capture_output=True, text=True, check=True).stdout
    assert out == "<>|<><><x>"


def test_statements() -> None:
    text = ("set -euxo pipefail\nset +x\n# a comment\n\nA=1 B=\"$A x\"\nexport C=2\nexport A\n"
            "D=1 python3 -u -m verl.trainer.main_ppo a=1 2>&1 | tee -a log.txt\n")
    script, refusals, intact, _ = parse(text, PROGRAMS)
    assert refusals == [] and intact
    assert script == Script((
        SetOptions((("errexit", True), ("nounset", True), ("xtrace", True), ("pipefail", True))),
        SetOptions((("xtrace", False),)),
        Assign("A", word("1")),
        Assign("B", word(Var("A"), " x")),
        Assign("C", word("2"), export=True),
        Export("A"),
        Run((Assign("D", word("1")),), (word("python3"), word("-u"), word("-m"), word("verl.trainer.main_ppo"), word("a=1")),
            Tee(word("log.txt"), append=True, stderr=True)),
    ))


def test_a_comment_line_ends_a_continued_command() -> None:
    script, refusals, *_ = parse("python3 -m m a=1 \\\n  # b=2 \\\n  c=3\n", PROGRAMS)
    assert [w.parts for w in script.run.argv] == [("python3",), ("-m",), ("m",), ("a=1",)]  # type: ignore[union-attr]
    assert [(r.line, r.token, r.rule) for r in refusals] == [(3, "c=3", "nothing may follow the entrypoint")]


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("a", "a"), ("a=b:c,d/e.f-g+h%i@j", "a=b:c,d/e.f-g+h%i@j"), ("", "''"), ("a b", "'a b'"), ("[a,b]", "'[a,b]'"),
        ("it's", '"it\'s"'), ("['a', 'b']", "\"['a', 'b']\""), ("a'$b", "'a'\"'\"'$b'"), ("~x", "'~x'"), ("#x", "'#x'"),
        ("*", "'*'"), ("{a,b}", "'{a,b}'"), ("a\nb", "'a\nb'"),
    ],
)
def test_quote(text: str, quoted: str) -> None:
    assert quote(text) == quoted
    assert shlex.split(quoted) == [text]  # the standard library reads it back


# --- round trip: emit -> parse -> the same program ----------------------------------------

_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
_text = st.text(st.sampled_from(list("ab Z09_-./=:,@%+[]{}()<>|&;*?~#!$`'\"\\\né\t")), min_size=1, max_size=12)
_formats = st.lists(st.sampled_from(["%Y", "%m", "%d", "%H", "%M", "%S", "%s", "-", "_", "."]), min_size=1, max_size=4).map("".join)
_part = st.one_of(_text, st.builds(Var, _names, st.booleans()), st.builds(Date, _formats))


@st.composite
def _words(draw: st.DrawFn, *, quoted_vars: bool = False) -> Word:
    parts = draw(st.lists(_part, max_size=4))
    if quoted_vars:
        parts = [Var(p.name, True) if type(p) is Var else p for p in parts]
    w = word(*parts)
    only_unquoted_vars = bool(w.parts) and all(type(p) is Var and not p.quoted for p in w.parts)
    return word(*parts, solid=not (only_unquoted_vars and draw(st.booleans())))


_assign = st.builds(Assign, _names, _words(quoted_vars=True), st.booleans())
_set = st.builds(SetOptions, st.lists(st.tuples(st.sampled_from(["errexit", "nounset", "xtrace", "pipefail"]), st.booleans()),
                                      min_size=1, max_size=4).map(tuple))
_run = st.builds(
    Run,
    st.lists(st.builds(Assign, _names, _words(quoted_vars=True)), max_size=2).map(tuple),
    st.tuples(st.sampled_from(["python3", "torchrun"]).map(word), st.sampled_from(["-m", "-u", "--nnodes=1"]).map(word))
    .flatmap(lambda head: st.lists(_words(), max_size=5).map(lambda rest: (*head, *rest))),
    # (a tee file that starts with '-' is not in the language: tee would read it as an option)
    st.one_of(st.none(), st.builds(Tee, _words(quoted_vars=True).filter(lambda w: w.solid and not w.shown().startswith("-")),
                                   st.booleans(), st.booleans())),
)
_scripts = st.builds(lambda before, run: Script((*before, run)),
                     st.lists(st.one_of(_assign, _set, _names.map(Export)), max_size=4), _run)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scripts)
def test_random_programs_round_trip(script: Script) -> None:
    text = emit(script)
    parsed, refusals, *_ = parse(text, PROGRAMS)
    assert refusals == [], (text, refusals)
    assert parsed == script, text


# --- checking the generated command gives it back (expansion is idempotent) --------------


def checked(text: str, *, user: str = "alice", config: PlatformConfig = CONFIG, nnodes: int = 1, gpus: int = 1) -> CheckedCommand:
    findings = Findings()
    result = check_command("spec.command", expand(text, user, config), policy=PathPolicy(config, user), nnodes=nnodes,
                           gpus_per_node=gpus, findings=findings)
    assert findings.errors == [], [str(e) for e in findings.errors]
    assert result is not None
    return result


_key = st.sampled_from(["actor_rollout_ref.rollout.n", "+trainer.extra", "trainer.logger", "data.max_prompt_length",
                        "actor_rollout_ref.actor.optim.lr", "+foo.bar_baz", "algorithm.adv_estimator"])
_value = st.one_of(st.from_regex(r"[A-Za-z0-9_.\-]{1,10}", fullmatch=True).filter(lambda v: ".." not in v),  # '..' is refused
                   st.integers(-5, 10**6).map(str),
                   st.sampled_from(["[console,wandb]", "['console', 'wandb']", "{a:1}", "true", "1e-6", "null"]))
_style = st.sampled_from(["plain", "single", "double", "var-quoted", "var-braced"])


@st.composite
def _commands(draw: st.DrawFn) -> str:
    """Valid commands of the language: preambles, variables in every quoting style,
    comments, continuations, $(date), $@, a tee."""
    lines = [draw(st.sampled_from(["", "set -x", "set -euo pipefail", "# a note", "export VLLM_USE_V1=1"]))]
    overrides = ["data.train_files=$HOME/datasets/a.parquet", "data.val_files=$HOME/datasets/b.parquet",
                 "+ray_kwargs.ray_init.address=auto"]
    used: set[str] = set()
    for i, (key, value, style) in enumerate(draw(st.lists(st.tuples(_key, _value, _style), max_size=6))):
        if key in used:
            continue
        used.add(key)
        if style.startswith("var"):
            lines.append(f"V{i}={shlex.quote(value)}")
            ref = f'"$V{i}"' if style == "var-quoted" else f"${{V{i}}}"
            if style == "var-braced" and re.search(r"[\s*?]", value):
                ref = f'"${{V{i}}}"'
            overrides.append(f"{key}={ref}")
        elif style == "single":
            overrides.append(shlex.quote(f"{key}={value}"))
        elif style == "double":
            overrides.append(f'"{key}={value}"')
        else:
            overrides.append(f"{key}={shlex.quote(value)}")
    if draw(st.booleans()):
        overrides.append("trainer.experiment_name=run_$(date +%Y%m%d)")
    if draw(st.booleans()):
        overrides += ["trainer.nnodes=1", "trainer.n_gpus_per_node=1"]
    sep = draw(st.sampled_from([" ", " \\\n  "]))
    entry = "python3 -m verl.trainer.main_ppo" + sep + sep.join(overrides)
    if draw(st.booleans()):
        entry += " $@"
    if draw(st.booleans()):
        entry += " 2>&1 | tee $HOME/logs/run.log"
    return "\n".join([*lines, entry, draw(st.sampled_from(["", "# trainer.save_freq=20 \\"]))])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_commands())
def test_checking_the_generated_command_gives_it_back(text: str) -> None:
    first = checked(text)
    second = checked(first.text)
    assert second.text == first.text
    assert second.argv == first.argv


def test_generated_command_of_a_verl_style_script() -> None:
    text = ("set -x\n# export VLLM_ATTENTION_BACKEND=XFORMERS\ntrain=$HOME/datasets/gsm8k/train.parquet\n"
            "files=\"['$train', '$HOME/common/datasets/math/train.parquet']\"\n"
            "python3 -m verl.trainer.main_ppo \\\n  data.train_files=\"$files\" \\\n  data.val_files=$train \\\n"
            "  trainer.logger=['console','wandb'] \\\n  +ray_kwargs.ray_init.address=auto \\\n"
            "  trainer.experiment_name=q_$(date +%Y%m%d) $@ 2>&1 | tee $HOME/logs/run.log\n\n  # trainer.save_freq=20 \\\n")
    # The script variables are substituted where they are used, and, never exported, left out.
    assert checked(text).text == (
        "set -x\n"
        "python3 -m verl.trainer.main_ppo \\\n"
        "  \"data.train_files=['/private/users/alice/datasets/gsm8k/train.parquet', '/private/datasets/math/train.parquet']\" \\\n"
        "  data.val_files=/private/users/alice/datasets/gsm8k/train.parquet \\\n"
        "  'trainer.logger=[console,wandb]' \\\n"
        "  +ray_kwargs.ray_init.address=auto \\\n"
        "  trainer.experiment_name=q_\"$(date +%Y%m%d)\" \\\n"
        "  trainer.nnodes=1 \\\n"
        "  trainer.n_gpus_per_node=1 2>&1 | tee /private/users/alice/logs/run.log\n"
    )


# --- random shell noise never crashes the checks -----------------------------------------

_noise = st.lists(st.sampled_from([
    *"ab $'\"\\`!;&|()<>*?#~{}[]=,:\n\t-/.@%^+é", "$(", "${", "$((", "<<", "<<EOF\n", "\\\n", "2>&1", "| tee x", "python3 -m verl.trainer.x ",
    "torchrun ", "--nnodes=", "$HOME", "${1:-", "$@", '"$@"', "set -", "export ", "X=", "+a.b=", "[", "{", "}", "'", '"', "\u00a0", "\x85",
    "$(date +%Y)", "hydra.run.dir=", "~trainer", "--config-path=", "-cn ", "$X", "trainer.nnodes=", "'trainer={a:1}'",
]), max_size=40).map("".join)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_noise)
@example("python3 -m verl.trainer.x ${1:-")
@example("python3 -m verl.trainer.x <<EOF\n")
@example("python3 -m verl.trainer.x '" + "a" * 50)
def test_random_shell_noise_gets_a_verdict(text: str) -> None:
    verdict = validate_task(hostile_task(text), "alice", CONFIG)  # never raises
    assert verdict.valid is (verdict.plan is not None)
    for line in verdict.error_lines() + verdict.warning_lines():
        assert "\n" not in line and re.match(r"^spec\.command(?: \([^)]*\))?: .+: .+$", line), line
    if verdict.valid:
        assert verdict.expanded_command is not None


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=60))
def test_any_text_parses_without_an_exception(text: str) -> None:
    script, refusals, *_ = parse(text, PROGRAMS)
    assert isinstance(script, Script) and all(r.line >= 1 for r in refusals)


# --- the fast path for simple overrides is Hydra's own reading ----------------------------


def _typed(value: Any) -> Any:
    """A value with its exact type, so that 1, 1.0 and True differ (and nan equals nan)."""
    if isinstance(value, list):
        return ("list", [_typed(v) for v in value])
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    return (type(value).__name__, value)


_fast_key = st.from_regex(r"\+{0,2}[A-Za-z_][A-Za-z0-9_\-]{0,5}(\.[A-Za-z_0-9][A-Za-z0-9_\-]{0,5}){0,2}", fullmatch=True)
_fast_atom = st.one_of(
    st.text(st.sampled_from(list("0123456789_.eE+-iInNfaFAtTrRuUlLsSx/:%@")), min_size=1, max_size=8),
    st.sampled_from(["inf", "-inf", "nan", "NaN", "true", "False", "null", "NULL", "1_000", "0_1", "1e-6", ".5", "5.", "-0", "01", "1.0.0"]),
    st.text(st.sampled_from(list("ab '\",/$\\")), max_size=5).map(lambda t: f"'{t}'"),
    st.text(st.sampled_from(list("ab '\",/$\\")), max_size=5).map(lambda t: f'"{t}"'),
)
_fast_value = st.one_of(_fast_atom,
                        st.tuples(st.lists(_fast_atom, max_size=4), st.sampled_from([",", ", ", " , ", "\t,"]), st.sampled_from(["", " "]))
                        .map(lambda t: "[" + t[2] + t[1].join(t[0]) + t[2] + "]"),
                        st.text(st.sampled_from(list("ab1 ,[]{}:'\"")), max_size=6))


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_fast_key, _fast_value)
@example("a", "1_000")
@example("a.b", "[console,wandb]")
@example("a", "'x y'")
@example("a", "1.0.0")
@example("a", "nan")
def test_fast_path_reads_overrides_as_hydra_does(key: str, value: str) -> None:
    text = f"{key}={value}"
    fast = fast_override(text)
    if fast is None:
        return  # left to Hydra
    parsed = hydra_override(text)
    assert not isinstance(parsed, str), (text, parsed)
    op, hydra_key, package, hydra_value, sweep = parsed
    assert (package, sweep) == (None, False)
    assert (fast[0], fast[1], _typed(fast[2])) == (op, hydra_key, _typed(hydra_value)), text


def test_fast_path_takes_the_common_overrides() -> None:
    for text in ("a.b=1", "+ray_kwargs.ray_init.address=auto", "x.y=/private/users/alice/a.parquet", "trainer.logger=[console,wandb]",
                 "data.train_files=['/a/b.parquet','/c/d.parquet']", "data.val_files=['/a/b.parquet', '/c/d.parquet']",
                 "trainer.project_name=verl_grpo_example_gsm8k", "lr=1e-6"):
        assert fast_override(text) is not None, text
    for text in ("a={b:1}", "a=x,y", "a='x\\'y'", "~a", "a@b=1", "a/b=c", "a=[a b]", "a=${b}"):
        assert fast_override(text) is None, text


# --- real bash runs exactly what was checked ----------------------------------------------

STUB = """#!{python}
import json, os, sys
names = os.environ["STUB_ENV"].split(",")
with open(os.environ["ARGV_OUT"], "w") as f:
    json.dump({{"program": os.path.basename(sys.argv[0]), "argv": sys.argv[1:],
               "env": {{n: os.environ.get(n) for n in names}}}}, f)
print("stub ran", flush=True)
"""


@pytest.fixture(scope="module")
def stub_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bin")
    for program in ("python3", "torchrun"):
        path = folder / program
        path.write_text(STUB.format(python=sys.executable))
        path.chmod(0o755)
    return folder


def run_under_bash(command: str, stub_bin: Path, tmp_path: Path, *, nnodes: int = 1, gpus: int = 1,
                   env_names: tuple[str, ...] = ()) -> tuple[CheckedCommand, dict[str, Any], Path]:
    """Validate ``command`` for alice under a root in tmp_path, run the plan's entrypoint
    with real bash (stub python3 and torchrun first on PATH), and return what the stub saw."""
    root = tmp_path / "private"
    (root / "users" / "alice").mkdir(parents=True)
    config = PlatformConfig(root=str(root), entrypoint_shell="bash -c")
    doc = {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask", "metadata": {"name": "t", "namespace": "ns", "uid": "0" * 8},
           "spec": {"kind": "advanced", "workload": "sft" if "torchrun" in command else "ppo", "nnodes": nnodes,
                    "nGpusPerNode": gpus, "command": command}}
    verdict = validate_task(doc, "alice", config)
    assert verdict.valid, verdict.error_lines()
    assert verdict.plan is not None
    out = tmp_path / "argv.json"
    env = {"PATH": f"{stub_bin}:{os.environ['PATH']}", "ARGV_OUT": str(out), "STUB_ENV": ",".join(env_names),
           "PYTHONPATH": "/inherited/path", "HOME": "/nonexistent-worker-home"}
    result = subprocess.run(shlex.split(verdict.plan.entrypoint), env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return checked(command, config=config, nnodes=nnodes, gpus=gpus), json.loads(out.read_text()), root


def test_bash_passes_exactly_the_checked_words(stub_bin: Path, tmp_path: Path) -> None:
    command = (
        "set -euxo pipefail\n"
        "export VLLM_ATTENTION_BACKEND=XFORMERS\n"
        "export PYTHONPATH=$HOME/code:$PYTHONPATH\n"
        "data=$HOME/datasets\n"
        "files=\"['$data/a b.parquet', '$data/c.parquet']\"\n"
        "VLLM_USE_V1=1 python3 -u -m verl.trainer.main_ppo \\\n"
        "  data.train_files=\"$files\" \\\n"
        "  data.val_files=${data}/v.parquet \\\n"
        "  trainer.logger=['console','wandb'] \\\n"
        "  \"trainer.project_name='it is'\" \\\n"
        "  +x='*' +z=\"\\$HOME\" \\\n"
        "  trainer.experiment_name=q_$(date +%Y%m%d) \\\n"
        "  +ray_kwargs.ray_init.address=auto $@ 2>&1 | tee $HOME/run.log\n"
    )
    seen, ran, root = run_under_bash(command, stub_bin, tmp_path, env_names=("VLLM_ATTENTION_BACKEND", "VLLM_USE_V1", "PYTHONPATH"))
    home = f"{root}/users/alice"
    # what the checks read is what bash passed (the date as date printed it) ...
    date_arg = next(a for a in ran["argv"] if a.startswith("trainer.experiment_name="))
    assert re.fullmatch(r"trainer\.experiment_name=q_\d{8}", date_arg)
    assert ["python3", *[date_arg if a.startswith("trainer.experiment_name=") else a for a in seen.argv[1:]]] == ["python3", *ran["argv"]]
    # ... and, written out independently, what the user meant
    assert ran["argv"] == [
        "-u", "-m", "verl.trainer.main_ppo",
        f"data.train_files=['{home}/datasets/a b.parquet', '{home}/datasets/c.parquet']",
        f"data.val_files={home}/datasets/v.parquet",
        "trainer.logger=[console,wandb]",
        "trainer.project_name='it is'",
        "+x=*", "+z=$HOME",
        date_arg,
        "+ray_kwargs.ray_init.address=auto",
        "trainer.nnodes=1", "trainer.n_gpus_per_node=1",
    ]
    assert ran["env"] == {"VLLM_ATTENTION_BACKEND": "XFORMERS", "VLLM_USE_V1": "1", "PYTHONPATH": f"{home}/code:/inherited/path"}
    assert (root / "users" / "alice" / "run.log").read_text() == "stub ran\n"


def test_bash_passes_torchruns_options_as_checked(stub_bin: Path, tmp_path: Path) -> None:
    command = ("nproc_per_node=2\n"
               "torchrun --standalone --nnodes 1 --nproc_per_node=$nproc_per_node -m verl.trainer.fsdp_sft_trainer \\\n"
               "  data.train_files=$HOME/datasets/sft/train.parquet model.partial_pretrain=Qwen/Qwen2.5-0.5B-Instruct $@ \\\n"
               "  model.lora_rank=32\\\n  model.target_modules=all-linear\n\n  # model.target_modules=[q_proj,v_proj] \\\n")
    seen, ran, root = run_under_bash(command, stub_bin, tmp_path, gpus=2)
    assert ["torchrun", *ran["argv"]] == seen.argv
    assert ran["argv"] == ["--standalone", "--nnodes=1", "--nproc_per_node=2", "-m", "verl.trainer.fsdp_sft_trainer",
                           f"data.train_files={root}/users/alice/datasets/sft/train.parquet",
                           "model.partial_pretrain=Qwen/Qwen2.5-0.5B-Instruct", "model.lora_rank=32", "model.target_modules=all-linear"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(_commands())
def test_bash_agrees_on_random_commands(stub_bin: Path, tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    tmp_path = tmp_path_factory.mktemp("run")
    text = text.replace(" 2>&1 | tee $HOME/logs/run.log", " 2>&1 | tee $HOME/run.log")
    seen, ran, _ = run_under_bash(text, stub_bin, tmp_path)
    expected = seen.argv[1:]
    got = ran["argv"]
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        if "$(date" in e:
            assert re.fullmatch(re.escape(e.split("$(date", 1)[0]) + r"\d{8}", g), (g, e)
        else:
            assert g == e


# --- hostile sizes: every step stays near linear ------------------------------------------

_P = "python3 -m verl.trainer.main_ppo "
_N = 64 * 1024 - 100
PATHOLOGICAL = {
    "open-braces": _P + "+x=" + "{" * _N,
    "brace-lists": _P + "+x=" + "{a," * (_N // 3),
    "nested-substitutions": _P + "+x=" + "$(" * (_N // 2),
    "nested-parameters": _P + "+x=" + "${" * (_N // 2),
    "tildes": _P + "+x=" + "~" * _N,
    "globs": _P + "+x=" + "*" * _N,
    "backslashes": _P + "+x=" + "\\" * _N,
    "empty-quotes": _P + "+x=" + "''" * (_N // 2),
    "many-overrides": _P + "a=1 " * (_N // 4),
    "many-entrypoints": (_P + "\n") * (_N // 34),
    "one-huge-sweep": _P + "'+x=" + "/..," * (_N // 4 - 10) + "'",
    "deep-nesting": _P + "'+x=" + "[" * 2000 + "]" * 2000 + "'",
    "huge-integer": _P + "+x=" + "1" * 30000,
    "dates": _P + "+x=" + "$(date +%Y)" * (_N // 12),
    "assignments": "A=1 " * (_N // 4) + _P,
}


def hostile_task(text: str) -> dict[str, Any]:
    """An advanced task whose command is ``text`` (bench/bench_hostile.py builds the same)."""
    return {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask", "metadata": {"name": "t"},
            "spec": {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "command": text}}


@pytest.mark.parametrize("text", PATHOLOGICAL.values(), ids=PATHOLOGICAL.keys())
@pytest.mark.timeout(60)  # a hang guard, not a speed claim: bench/bench_hostile.py measures each case
def test_hostile_sizes_get_a_quick_verdict(text: str) -> None:
    """A verdict of a few bounded lines for each. Their speed (each well under 0.2 s; quadratic
    steps took 10 to 60 s before) is measured by bench/bench_hostile.py, not here."""
    verdict = validate_task(hostile_task(text), "alice", CONFIG)
    assert len(verdict.errors) <= 51
    for line in verdict.error_lines():
        assert "\n" not in line and len(line) < 1000
