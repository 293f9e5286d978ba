"""The validation contract as a table: hostile and malformed ArgusTasks, each with every
line the user sees (issues 2 and 11), and the v3.5 examples that must pass.

Every case runs under two path roots (the default ``/private`` and another one) to show
that nothing hard-codes the root. In the commands, ``<R>`` stands for the root, ``<H>``
for alice's home (``<R>/users/alice``) and ``<R-3>`` for the root without its last three
characters (a path that only becomes the root at run time).

The expected lines are written out by hand: each case lists exactly the error lines the
verdict must hold (in any order). The groups follow issue 11's classes of holes:

1. characters bash keeps inside a word (``,`` ``=`` ``:`` ``]`` ``}``, Unicode spaces) hiding ``..``;
2. paths built by the shell (ANSI-C quoting, parameter operators, ``+=``, ``declare``,
   reassignment, loops, heredocs, arithmetic, globs, braces, variables);
3. ``cd`` and ``~``;
4. the entrypoint that runs not being the allowed one (functions, aliases, ``hash``,
   arrays, interpreter options, torchrun's options);
5. overrides the checks never saw (after ``$(...)``, in variables, after a comment);
6. Hydra's own grammar (dicts, whitespace, sweeps, interpolations, groups, its settings);
7. spec edge cases (nulls, C1 and invisible characters, ``codePath`` with ``:``);

then the path rules (data, reward, outputs, models, counts), the environment, ``tee``,
other shell constructs, and the manifest's fields.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest

from argus.core.command.checks import TORCHRUN_ONE_NODE
from argus.core.config import PlatformConfig
from argus.core.plan import validate_task

pytestmark = pytest.mark.unit

USER = "alice"
ROOTS = ["/private", "/srv/argus-test/private"]

# An error line: "<field>: <value>: <rule>", field first.
FIELD = r"(?:apiVersion|kind|metadata\.name|user|document|spec(?:\.[A-Za-z]+)?(?: \([^)]*\))?)"
LINE = re.compile(rf"^{FIELD}: .+: .+$")

PPO = "python3 -m verl.trainer.main_ppo"
SFT = "torchrun --standalone --nnodes=1 --nproc_per_node=1 -m verl.trainer.fsdp_sft_trainer"
DATA = "data.train_files=$HOME/datasets/gsm8k/train.parquet data.val_files=$HOME/datasets/gsm8k/test.parquet"
COUNTS = "trainer.nnodes=1 trainer.n_gpus_per_node=1"
RAY = "+ray_kwargs.ray_init.address=auto"
GOOD = f"{PPO} {DATA} {COUNTS} {RAY}"  # a command with no problem: cases add one
GOOD_SFT = f"{SFT} {DATA}"
CMD = "spec.command"


@pytest.fixture(params=ROOTS, ids=["root-private", "root-custom"])
def root(request: pytest.FixtureRequest) -> str:
    return request.param


def fill(value: Any, root: str) -> Any:
    """Put the root into a case's text (recursively through manifests)."""
    if isinstance(value, str):
        return value.replace("<H>", f"{root}/users/{USER}").replace("<R-3>", root[:-3]).replace("<R>", root)
    if isinstance(value, dict):
        return {k: fill(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, root) for v in value]
    return value


def _fix_root_cuts(value: Any, root: str) -> Any:
    """``<R-3>`` put in (``fill`` does it too; bench/chaos.py calls this before ``fill``)."""
    if isinstance(value, str):
        return value.replace("<R-3>", root[:-3])
    if isinstance(value, dict):
        return {k: _fix_root_cuts(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [_fix_root_cuts(v, root) for v in value]
    return value


def manifest(spec: Any, **top: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask", "metadata": {"name": "t1"}, "spec": spec}
    doc.update(top)
    return doc


def adv(command: Any, **spec: Any) -> dict[str, Any]:
    return manifest({"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "command": command, **spec})


def basic(**spec: Any) -> dict[str, Any]:
    base = {
        "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "modelId": "Qwen/Qwen2.5-0.5B-Instruct",
        "trainFile": "$HOME/common/datasets/gsm8k/train.parquet", "valFile": "$HOME/datasets/gsm8k/test.parquet",
    }
    base.update(spec)
    return manifest({k: v for k, v in base.items() if v is not ...})


def without(doc: dict[str, Any], key: str) -> dict[str, Any]:
    doc = dict(doc)
    doc["spec"] = {k: v for k, v in doc["spec"].items() if k != key}
    return doc


@dataclass
class Case:
    id: str
    doc: Any
    lines: list[str]  # every error line the verdict holds, exactly
    user: str = USER


def E(value: object, rule: str, field: str = CMD) -> str:
    """An expected line: the field, the value (as Python shows it) and the rule."""
    return f"{field}: {value!r}: {rule}"


def K(key: str, value: object, rule: str) -> str:
    return E(value, rule, f"{CMD} ({key})")


def at(line: int, rule: str, advice: str) -> str:
    return f"{rule} (line {line}): {advice}"


def other(user: str) -> str:
    return f"is in another user's home ({user}); only <H>/... is yours"


CLIMB_BOB = "'..' climbs out of <H> into another user's home (bob); only <H>/... is yours"
JOBDIR = "'..' climbs out of the job directory; use an absolute path under $HOME"
TILDE = "'~' expands to the worker's home, not yours"
NO_ENTRY = ("does not run an allowed entrypoint ('python3 [options] -m verl.trainer.*', 'torchrun [options] -m verl.trainer.*'); "
            "one in a comment, an echo, a quoted string or a heredoc does not count")
LANGUAGE = ("a command may only set options (set -euxo pipefail), assign variables (NAME=value, export NAME=value) "
            "and run the entrypoint (python3 ... -m MODULE or torchrun ... -m MODULE) once")
SUBST = "write the value, or put the logic in a Python file under $HOME/code"
SUBST_DATE = SUBST + " ($(date +FORMAT) is allowed in a value such as trainer.experiment_name)"
PARAM = "assign the variable first (NAME=value) and write $NAME or ${NAME}"
RAY_READS = "Ray reads it past the checks (the job's runtime env, the cluster address, hooks); remove it"
HYDRA_READS = "Hydra reads it past the checks (HYDRA_MAIN_MODULE picks the primary config); remove it"
NOT_ALLOWED = ("it is not on the list of environment variables a command may set (Ray, Hydra, torchrun and the dynamic linker "
               "read others past the checks; see docs/security.md); a variable the command only uses in its own words needs "
               "no export: Argus substitutes it where it is used; remove it")
UNSET = ("assign it before its use (NAME=value), or write the value out; only the command's own variables and $HOME "
         "are substituted")
PROGRAM = "it changes which program runs or how bash or Python start; remove it"
TORCHRUN_ENV = "torchrun reads its options from it, past the checks: give torchrun's options on its command line; remove it"
LOCALE = "it changes how bash reads the rest of the command; for Python's text encoding set PYTHONUTF8=1; remove it"
GLOB = "write the names out (a Hydra list: [a.parquet,b.parquet]), or quote the character"
BRACE = "quote the value ('...'), or write each word out"
REDIRECT = "to keep a log, end the entrypoint with 2>&1 | tee $HOME/logs/run.log"
HYDRA_ADVICE = ("quote a value with blanks or special characters inside the override (key='a b'); "
                "see https://hydra.cc/docs/advanced/override_grammar/basic/")
SWEEP = "is a Hydra sweep (it would run one job per value): give one value; write a list as [a,b]"
DATA_RULE = "a data file must be under <H>/datasets/ or <R>/datasets/ or <R>/common/datasets/"
REWARD_RULE = "the reward function file must be under <H>/code/"
OUTPUT_RULE = "an output folder must be under <H>/"
OUTPUT_CLIMB = "an output folder must not climb out of the job directory; use an absolute path under $HOME"
MODEL_RULE = "a model path must be under <H>/ or <R>/hf/ or <R>/common/hf/ or <R>/common/models/"
CONTROL = "control characters other than newline and tab are not allowed"
DATE_PATH = "$(date ...) may stand only in a non-path value such as trainer.experiment_name: write the path out"
DATE_ENV = ("$(date +FORMAT) may stand only in a non-path override value such as trainer.experiment_name, "
            "or in a variable used only there")
TWICE = "set each key once"
COUNT_POOL = ("asks for GPUs beyond trainer.nnodes x trainer.n_gpus_per_node (a separate pool), which the queue does not count: "
              "the task gets the spec's nnodes x nGpusPerNode GPUs; share them instead")
NOT_INT_N = "must be a plain integer equal to spec.nnodes (1)"
NOT_INT_G = "must be a plain integer equal to spec.nGpusPerNode (1)"
CUSTOM_CONFIG = "Hydra instantiation keys (_target_ and the like) name Python code to run: not allowed"
NOTHING_AFTER = "nothing may follow the entrypoint"
HYDRA_SETTING = ("is a Hydra setting Argus does not allow: only hydra.run.dir, hydra.sweep.dir, hydra.searchpath, "
                 "hydra.job.chdir, hydra.output_subdir, hydra.verbose and hydra.job.name")
BIG = GOOD + " \\\n" + "  +trainer.pad=" + "x" * (64 * 1024) + "\n"
NO_COUNTS = f"{PPO} {DATA} {RAY}"

HOSTILE: list[Case] = [
    # --- 1. characters bash keeps inside a word must not hide a '..' ------------------------
    Case("c1-comma-in-quoted-value", adv(f"{GOOD} \"+x='<H>/a,/../../bob'\""), [E("<H>/a,/../../bob", CLIMB_BOB)]),
    Case("c1-equals-in-quoted-value", adv(f"{GOOD} \"+x='<H>/a=/../../bob'\""), [E("<H>/a=/../../bob", CLIMB_BOB)]),
    Case("c1-colon-in-value", adv(f"{GOOD} +x=<H>/a:/../../bob"), [E("<H>/a:/../../bob", CLIMB_BOB)]),
    Case("c1-bracket-in-quoted-value", adv(f"{GOOD} \"+x='<H>/a]/../../bob'\""), [E("<H>/a]/../../bob", CLIMB_BOB)]),
    Case("c1-brace-in-quoted-value", adv(f"{GOOD} \"+x='<H>/a}}/../../bob'\""), [E("<H>/a}/../../bob", CLIMB_BOB)]),
    Case("c1-tab-in-quoted-value", adv(f"{GOOD} \"+x='<H>/a\t/../../bob'\""), [E("<H>/a\t/../../bob", CLIMB_BOB)]),
    Case("c1-hydra-escaped-comma", adv(f"{GOOD} '+x=<H>/a\\,/../../bob'"), [E("<H>/a,/../../bob", CLIMB_BOB)]),
    Case("c1-comma-in-list-item", adv(f"{GOOD} \"+x=[a,'<H>/b,/../../bob']\""), [E("<H>/b,/../../bob", CLIMB_BOB)]),
    Case("c1-colon-prefix-strips-to-root", adv(f"{GOOD} +ckpt=ckpt:/../../.."), [E("ckpt:/../../..", JOBDIR)]),
    Case("c1-url-prefix", adv(f"{GOOD} +x=file://<R>/users/bob/x"), [E("//<R>/users/bob/x", other("bob"))]),
    Case("c1-key-value-prefix", adv(f"{GOOD} +x=a:<R>/users/bob/x"), [E("<R>/users/bob/x", other("bob"))]),
    Case("c1-comma-in-env-value", adv(f"export WANDB_NOTES=<H>/a,/../../bob\n{GOOD}"), [E("<H>/a,/../../bob", CLIMB_BOB)]),
    Case("c1-colon-in-env-value", adv(f"export WANDB_TAGS=<H>/a:/../../bob\n{GOOD}"), [E("<H>/a:/../../bob", CLIMB_BOB)]),
    Case("c1-comma-in-tee-file", adv(f"{GOOD} 2>&1 | tee <H>/a,/../../bob"),
         [E("<H>/a,/../../bob", CLIMB_BOB), E("<H>/a,/../../bob", "the tee file must be under <H>/")]),
    Case("c1-nbsp", adv(f"{GOOD} +x=$HOME/a\u00a0/../../bob"),
         [E(f"\\xa0 at offset {len(GOOD) + 11}", "a Unicode space or line separator (U+00A0) looks like a blank, but bash keeps "
            "it inside a word: use a plain space or newline")]),
    Case("c1-line-separator", adv(f"{GOOD} +x=$HOME/a\u2028/../../bob"),
         [E(f"\\u2028 at offset {len(GOOD) + 11}", "a Unicode space or line separator (U+2028) looks like a blank, but bash "
            "keeps it inside a word: use a plain space or newline")]),
    Case("c1-ideographic-space", adv(f"{GOOD}\u3000+x=1"),
         [E(f"\\u3000 at offset {len(GOOD)}", "a Unicode space or line separator (U+3000) looks like a blank, but bash "
            "keeps it inside a word: use a plain space or newline")]),
    # --- 2. paths built by the shell -------------------------------------------------------
    Case("c2-ansi-c-quoting", adv(f"X=$'\\x2e\\x2e'\n{GOOD} trainer.default_local_dir=$HOME/$X/bob"),
         [E("$'\\x2e\\x2e'", at(1, "ANSI-C quoting ($'...') is not allowed", "write the characters themselves, in single quotes"))]),
    Case("c2-default-operator", adv(f"{GOOD} trainer.default_local_dir=${{X:-..}}/bob"),
         [E("${X:-..}", at(1, "parameter expansion with ':-' is not allowed", PARAM))]),
    Case("c2-default-builds-root", adv(f"{GOOD} trainer.default_local_dir=${{P:-<R-3>}}ate/users/bob"),
         [E("${P:-<R-3>}", at(1, "parameter expansion with ':-' is not allowed", PARAM))]),
    Case("c2-assign-default", adv(f"{GOOD} trainer.default_local_dir=${{P:=x}}"),
         [E("${P:=x}", at(1, "parameter expansion with ':=' is not allowed", PARAM))]),
    Case("c2-alternative", adv(f"{GOOD} trainer.default_local_dir=${{P:+x}}"),
         [E("${P:+x}", at(1, "parameter expansion with ':+' is not allowed", PARAM))]),
    Case("c2-pattern-substitution", adv(f"X=a\n{GOOD} trainer.default_local_dir=${{X/a/..}}"),
         [E("${X/a/..}", at(2, "parameter expansion with '/' is not allowed", PARAM))]),
    Case("c2-prefix-removal", adv(f"X=a\n{GOOD} trainer.default_local_dir=${{X#a}}"),
         [E("${X#a}", at(2, "parameter expansion with '#' is not allowed", PARAM))]),
    Case("c2-suffix-removal", adv(f"X=a\n{GOOD} trainer.default_local_dir=${{X%/*}}"),
         [E("${X%/*}", at(2, "parameter expansion with '%' is not allowed", PARAM))]),
    Case("c2-indirection", adv(f"X=a\n{GOOD} trainer.default_local_dir=${{!X}}"),
         [E("${!X}", at(2, "parameter expansion with '!' is not allowed", PARAM))]),
    Case("c2-substring", adv(f"X=abc\n{GOOD} trainer.default_local_dir=${{X:0:1}}"),
         [E("${X:0:1}", at(2, "parameter expansion with ':' is not allowed", PARAM))]),
    Case("c2-case-change", adv(f"X=abc\n{GOOD} trainer.experiment_name=${{X^^}}"),
         [E("${X^^}", at(2, "parameter expansion with '^^' is not allowed", PARAM))]),
    Case("c2-plus-equals", adv(f"X=a\nX+=/../../bob\n{GOOD}"),
         [E("X+=/../../bob", at(2, "'+=' is not allowed", "write the whole value in one assignment"))]),
    Case("c2-declare", adv(f"declare X=..\n{GOOD}"), [E("declare", at(1, "'declare' is not allowed", "write NAME=value or export NAME=value"))]),
    Case("c2-typeset", adv(f"typeset -x X=..\n{GOOD}"), [E("typeset", at(1, "'typeset' is not allowed", "write NAME=value or export NAME=value"))]),
    Case("c2-local", adv(f"local X=..\n{GOOD}"), [E("local", at(1, "'local' is not allowed", "write NAME=value"))]),
    Case("c2-readonly", adv(f"readonly X=..\n{GOOD}"), [E("readonly", at(1, "'readonly' is not allowed", "write NAME=value"))]),
    Case("c2-reassignment-before-use", adv(f"X=$HOME/ok\nX=<R>/users/bob\n{GOOD} trainer.default_local_dir=$X"),
         [E("X=<R>/users/bob", at(2, "X is assigned twice (lines 1 and 2)", "give each value its own name"))]),
    Case("c2-reassignment-after-use", adv(f"X=$HOME/ok\n{GOOD} trainer.default_local_dir=$X\nX=<R>/users/bob"),
         [E("X=<R>/users/bob", at(3, NOTHING_AFTER, "move it before the entrypoint, or remove it"))]),
    Case("c2-for-loop", adv(f"for d in ..; do\n{GOOD}\ndone"),
         [E("for", at(1, "'for' is not allowed", "write each value out; put logic in a Python file under $HOME/code")),
          E("do", at(1, "'do' is not allowed", LANGUAGE)),
          E("done", at(3, NOTHING_AFTER, "move it before the entrypoint, or remove it"))]),
    Case("c2-heredoc-continuation", adv(f"cat <<EOF\n<H>/..\\\n/bob\nEOF\n{GOOD}"),
         [E("<<", at(1, "a heredoc is not allowed", "put the text in a file under $HOME and name the file")),
          E("cat", at(1, "'cat' is not allowed", LANGUAGE))]),
    Case("c2-arithmetic", adv(f"{GOOD} trainer.total_epochs=$((1 + 1))"),
         [E("$((1 + 1))", at(1, "arithmetic expansion is not allowed", "write the number"))]),
    Case("c2-old-arithmetic", adv(f"{GOOD} trainer.total_epochs=$[1+1]"),
         [E("$[1+1]", at(1, "arithmetic expansion is not allowed", "write the number"))]),
    Case("c2-command-substitution", adv(f"{GOOD} trainer.default_local_dir=<R>/users/$(whoami)/x"),
         [E("$(whoami)", at(1, "command substitution is not allowed", SUBST_DATE))]),
    Case("c2-backticks", adv(f"{GOOD} trainer.default_local_dir=<R>/users/`whoami`/x"),
         [E("`whoami`", at(1, "command substitution is not allowed", SUBST))]),
    Case("c2-date-without-format", adv(f"{GOOD} trainer.experiment_name=$(date)"),
         [E("$(date)", at(1, "command substitution is not allowed", SUBST_DATE))]),
    Case("c2-date-with-slash", adv(f"{GOOD} trainer.experiment_name=$(date +%Y/%m)"),
         [E("$(date +%Y/%m)", at(1, "command substitution is not allowed", SUBST_DATE))]),
    Case("c2-date-other-option", adv(f"{GOOD} trainer.experiment_name=$(date -d @0 +%s)"),
         [E("$(date -d @0 +%s)", at(1, "command substitution is not allowed", SUBST_DATE))]),
    Case("c2-eval", adv(f"eval 'X=..'\n{GOOD}"), [E("eval", at(1, "'eval' is not allowed", "write the command out"))]),
    Case("c2-process-substitution", adv(f"{GOOD} +x=<(cat <R>/users/bob/x)"),
         [E("<(", at(1, "process substitution is not allowed", "name a file under $HOME instead"))]),
    Case("c2-brace-list", adv(f"{GOOD} trainer.default_local_dir=<R>/users/{{bob,alice}}/x"),
         [E("trainer.default_local_dir=<R>/users/{bob,alice}/x", at(1, "brace expansion is not allowed", BRACE))]),
    Case("c2-brace-sequence", adv(f"{GOOD} +x=a{{1..3}}"), [E("+x=a{1..3}", at(1, "brace expansion is not allowed", BRACE))]),
    Case("c2-brace-builds-root", adv(f"{GOOD} +x=<R-3>{{ate,}}/users/bob"),
         [E("+x=<R-3>{ate,}/users/bob", at(1, "brace expansion is not allowed", BRACE))]),
    Case("c2-unquoted-dict-is-brace-expansion", adv(f"{GOOD} +x={{a:1,b:2}}"),
         [E("+x={a:1,b:2}", at(1, "brace expansion is not allowed", BRACE))]),
    Case("c2-glob-star", adv(f"{GOOD} +x=<R>/users/*/x"), [E("+x=<R>/users/*/x", at(1, "a file pattern ('*') is not allowed", GLOB))]),
    Case("c2-glob-question", adv(f"{GOOD} +x=<R>/users/b?b/x"), [E("+x=<R>/users/b?b/x", at(1, "a file pattern ('?') is not allowed", GLOB))]),
    Case("c2-variable-user-segment", adv(f"U=bob\n{GOOD} trainer.default_local_dir=<R>/users/$U/x"),
         [E("<R>/users/bob/x", other("bob")), K("trainer.default_local_dir", "<R>/users/bob/x", OUTPUT_RULE)]),
    Case("c2-variable-glued-to-own-name", adv(f"X=2\n{GOOD} trainer.default_local_dir=<H>$X/x"),
         [E("<H>2/x", other("alice2")), K("trainer.default_local_dir", "<H>2/x", OUTPUT_RULE)]),
    Case("c2-variable-built-root", adv(f"P=<R-3>\n{GOOD} trainer.default_local_dir=${{P}}ate/users/bob/x"),
         [E("<R>/users/bob/x", other("bob")), K("trainer.default_local_dir", "<R>/users/bob/x", OUTPUT_RULE)]),
    Case("c2-variable-blow-up", adv("A=" + "x" * 1000 + "\n" + "\n".join(f"A{i + 1}=$A{i}$A{i}".replace("$A0", "$A") for i in range(10))
                                    + f"\n{GOOD} +x=$A10"),
         [E("A9=$A8$A8", at(10, "the value grows past 256 KiB by substitution", "write the value out"))]),
    Case("c2-unquoted-variable-with-blanks", adv(f"X='a b'\n{GOOD} +x=$X"),
         [E("$X", at(2, "unquoted $X holds blanks, so bash would split it into 2 words", 'write the words out, or quote it ("$X") to keep one word'))]),
    Case("c2-unquoted-variable-with-glob", adv(f"X='<R>/users/*'\n{GOOD} +x=$X"),
         [E("$X", at(2, "unquoted $X holds a file pattern ('*' or '?') that bash would expand", 'write the names out, or quote it ("$X")'))]),
    Case("c2-home-glued-digit", adv(f"{GOOD} trainer.default_local_dir=${{HOME}}2/x"),
         [E("trainer.default_local_dir=${HOME}2/x", at(1, "$HOME must be followed by '/' or end the path",
            "write $HOME/..., or ${HOME}/...; text glued to $HOME would name another folder"))]),
    Case("c2-home-glued-dash", adv(f"{GOOD} trainer.default_local_dir=$HOME-x/y"),
         [E("trainer.default_local_dir=$HOME-x/y", at(1, "$HOME must be followed by '/' or end the path",
            "write $HOME/..., or ${HOME}/...; text glued to $HOME would name another folder"))]),
    Case("c2-home-glued-through-quotes", adv(f"{GOOD} trainer.default_local_dir=\"$HOME\"2/x"),
         [E("<H>2/x", other("alice2")), K("trainer.default_local_dir", "<H>2/x", OUTPUT_RULE)]),
    Case("c2-unset-variable", adv(f"{GOOD} trainer.default_local_dir=$OUT/x"), [E("$OUT", at(1, "$OUT is not assigned earlier in the command", UNSET))]),
    Case("c2-user-variable", adv(f"{GOOD} trainer.default_local_dir=<R>/users/$USER"), [E("$USER", at(1, "$USER is not assigned earlier in the command", UNSET))]),
    Case("c2-pwd-variable", adv(f"{GOOD} trainer.default_local_dir=$PWD/../x"), [E("$PWD", at(1, "$PWD is not assigned earlier in the command", UNSET))]),
    Case("c2-homedir-is-not-home", adv(f"{GOOD} trainer.default_local_dir=$HOMEDIR/x"), [E("$HOMEDIR", at(1, "$HOMEDIR is not assigned earlier in the command", UNSET))]),
    Case("c2-used-before-assigned", adv(f"{GOOD} trainer.default_local_dir=$OUT\nOUT=$HOME/x"),
         [E("$OUT", at(1, "$OUT is not assigned earlier in the command", UNSET)),
          E("OUT=<H>/x", at(2, NOTHING_AFTER, "move it before the entrypoint, or remove it"))]),
    Case("c2-prefix-is-not-a-script-variable", adv(f"WANDB_DIR=<H>/x {PPO} {DATA} {COUNTS} {RAY} trainer.default_local_dir=$WANDB_DIR"),
         [E("$WANDB_DIR", at(1, "$WANDB_DIR is not assigned earlier in the command", UNSET))]),
    Case("c2-special-pid", adv(f"{GOOD} +x=$$"), [E("$$", at(1, "the special parameter $$ is not allowed", "write the value out"))]),
    Case("c2-special-status", adv(f"{GOOD} +x=$?"), [E("$?", at(1, "the special parameter $? is not allowed", "write the value out"))]),
    Case("c2-special-count", adv(f"{GOOD} +x=$#"), [E("$#", at(1, "the special parameter $# is not allowed", "write the value out"))]),
    Case("c2-special-zero", adv(f"{GOOD} +x=$0"), [E("$0", at(1, "the special parameter $0 is not allowed", "write the value out"))]),
    Case("c2-bare-dollar", adv(f"{GOOD} +x=a$"), [E("$", at(1, "a '$' that starts no variable is not allowed", "write a literal '$' inside single quotes"))]),
    Case("c2-positional-default-expands", adv(f"X=a\n{GOOD} +x=${{1:-$X}}"),
         [E("${1:-$X}", at(2, "a default with quotes or expansions is not allowed", "write the default as plain text"))]),
    Case("c2-positional-is-empty", adv(f"{GOOD} trainer.default_local_dir=$1/x"), [K("trainer.default_local_dir", "/x", OUTPUT_RULE)]),
    Case("c2-positional-default-is-checked", adv(f"{GOOD} trainer.default_local_dir=${{1:-<R>/users/bob}}"),
         [E("<R>/users/bob", other("bob")), K("trainer.default_local_dir", "<R>/users/bob", OUTPUT_RULE)]),
    # --- 3. cd and '~' ------------------------------------------------------------------------
    Case("c3-cd-other-home", adv(f"cd <R>/users/bob\n{GOOD} trainer.default_local_dir=ckpt"),
         [E("cd", at(1, "'cd' is not allowed", "write absolute paths ($HOME/...) instead; the job starts in its own folder under $HOME/jobs"))]),
    Case("c3-cd-up", adv(f"cd ..; {GOOD}"),
         [E("cd", at(1, "'cd' is not allowed", "write absolute paths ($HOME/...) instead; the job starts in its own folder under $HOME/jobs"))]),
    Case("c3-pushd", adv(f"pushd ..\n{GOOD}"), [E("pushd", at(1, "'pushd' is not allowed", LANGUAGE))]),
    Case("c3-tilde-user-in-tee", adv(f"{GOOD} 2>&1 | tee ~bob/x"), [E("~bob", at(1, TILDE, "use $HOME"))]),
    Case("c3-tilde-slash", adv(f"{GOOD} trainer.default_local_dir=~/ckpt"), [E("~", at(1, TILDE, "use $HOME"))]),
    Case("c3-tilde-after-colon", adv(f"{GOOD} +x=a:~bob/y"), [E("~bob", at(1, TILDE, "use $HOME"))]),
    Case("c3-tilde-after-semicolon", adv(f"set -x;~bob/run.sh\n{GOOD}"),
         [E("~bob", at(1, TILDE, "use $HOME")), E("~bob/run.sh", at(1, "'~bob/run.sh' is not allowed", LANGUAGE))]),
    Case("c3-tilde-in-brace-list", adv(f"{GOOD} +x={{~bob,x}}/y"),
         [E("~bob", at(1, TILDE, "use $HOME")), E("+x={~bob,x}/y", at(1, "brace expansion is not allowed", BRACE))]),
    Case("c3-tilde-in-assignment", adv(f"X=~bob\n{GOOD}"), [E("~bob", at(1, TILDE, "use $HOME"))]),
    Case("c3-quoted-tilde-in-output", adv(f"{GOOD} \"trainer.default_local_dir='~/ckpt'\""),
         [E("~/ckpt", TILDE + ": use $HOME"), K("trainer.default_local_dir", "~/ckpt", OUTPUT_CLIMB)]),
    Case("c3-relative-climb-in-output", adv(f"{GOOD} trainer.default_local_dir=../../bob"),
         [E("../../bob", JOBDIR), K("trainer.default_local_dir", "../../bob", OUTPUT_CLIMB)]),
    Case("c3-relative-climb-anywhere", adv(f"{GOOD} +x=logs/../../../../bob/x"), [E("logs/../../../../bob/x", JOBDIR)]),
    # --- 4. the entrypoint that runs -------------------------------------------------------------
    Case("c4-function-shadows-python3", adv(f"python3() {{ cat <R>/users/bob/x; }}\n{GOOD}"),
         [E("(", at(1, "a subshell or function ('(') is not allowed", "write the commands out, one per line")),
          E("}", at(1, "'}' is not allowed", LANGUAGE))]),
    Case("c4-function-keyword", adv(f"function python3 {{ cat x; }}\n{GOOD}"),
         [E("function", at(1, "'function' is not allowed", "write the command out; functions are not part of the language")),
          E("}", at(1, "'}' is not allowed", LANGUAGE))]),
    Case("c4-function-never-called", adv(f"f() {{ cat <R>/users/bob/x; }}\n{GOOD}"),
         [E("(", at(1, "a subshell or function ('(') is not allowed", "write the commands out, one per line")),
          E("}", at(1, "'}' is not allowed", LANGUAGE))]),
    Case("c4-alias", adv(f"alias python3=cat\n{GOOD}"), [E("alias", at(1, "'alias' is not allowed", "write the program name out"))]),
    Case("c4-hash", adv(f"hash -p /bin/cat python3\n{GOOD}"),
         [E("hash", at(1, "'hash' is not allowed", "remove it; the entrypoint is looked up on the worker's PATH"))]),
    Case("c4-array", adv("A=(python3 -m verl.trainer.main_ppo)\n\"${A[@]}\""),
         [E("${A[@]}", at(2, "parameter expansion with '[' is not allowed", PARAM)),
          E("(", at(1, "a subshell or function ('(') is not allowed", "write the commands out, one per line"))]),
    Case("c4-array-element", adv(f"A[0]=x\n{GOOD}"), [E("A[0]=x", at(1, "arrays are not allowed", 'write a Hydra list in a string: NAME="[a,b]"'))]),
    Case("c4-python-stdin-heredoc", adv("python3 - <<EOF\nimport os\nEOF\n"),
         [E("<<", at(1, "a heredoc is not allowed", "put the text in a file under $HOME and name the file"))]),
    Case("c4-python-dash", adv("python3 - -m verl.trainer.main_ppo"),
         [E("-", at(1, "python3 takes only -u and -B before -m here", "run the module: python3 [-u] [-B] -m MODULE (allowed: verl.trainer.*)"))]),
    Case("c4-python-double-dash", adv(f"python3 -- x.py -m verl.trainer.main_ppo {DATA}"),
         [E("--", at(1, "python3 takes only -u and -B before -m here", "run the module: python3 [-u] [-B] -m MODULE (allowed: verl.trainer.*)"))]),
    Case("c4-python-script", adv(f"python3 script.py -m verl.trainer.main_ppo {DATA}"),
         [E("script.py", at(1, "python3 takes only -u and -B before -m here", "run the module: python3 [-u] [-B] -m MODULE (allowed: verl.trainer.*)"))]),
    Case("c4-python-c", adv(f"python3 -c 'import os' -m verl.trainer.main_ppo {DATA}"),
         [E("-c", at(1, "python3 takes only -u and -B before -m here", "run the module: python3 [-u] [-B] -m MODULE (allowed: verl.trainer.*)"))]),
    Case("c4-python-x-option", adv(f"python3 -X importtime -m verl.trainer.main_ppo {DATA}"),
         [E("-X", at(1, "python3 takes only -u and -B before -m here", "run the module: python3 [-u] [-B] -m MODULE (allowed: verl.trainer.*)"))]),
    Case("c4-python-isolated", adv(f"python3 -I -m verl.trainer.main_ppo {DATA}"),
         [E("-I", at(1, "python3 takes only -u and -B before -m here", "run the module: python3 [-u] [-B] -m MODULE (allowed: verl.trainer.*)"))]),
    Case("c4-python-joined-options", adv(f"python3 -um verl.trainer.main_ppo {DATA}"),
         [E("-um", at(1, "python3 takes only -u and -B before -m here", "run the module: python3 [-u] [-B] -m MODULE (allowed: verl.trainer.*)"))]),
    Case("c4-python-joined-module", adv(f"python3 -mverl.trainer.main_ppo {DATA}"),
         [E("-mverl.trainer.main_ppo", at(1, "python3 takes only -u and -B before -m here", "run the module: python3 [-u] [-B] -m MODULE (allowed: verl.trainer.*)"))]),
    Case("c4-python-option-twice", adv(f"python3 -u -u -m verl.trainer.main_ppo {DATA}"), [E("-u", at(1, "python3 option -u is given twice", "give -u once"))]),
    Case("c4-module-not-allowed", adv("python3 -m os"), [E("os", at(1, "module os is not allowed for python3", "run an allowed module (verl.trainer.*)"))]),
    Case("c4-module-prefix-confusion", adv(f"python3 -m verl.trainerx.main_ppo {DATA}"),
         [E("verl.trainerx.main_ppo", at(1, "module verl.trainerx.main_ppo is not allowed for python3", "run an allowed module (verl.trainer.*)"))]),
    Case("c4-module-package-itself", adv(f"python3 -m verl.trainer {DATA}"),
         [E("verl.trainer", at(1, "module verl.trainer is not allowed for python3", "run an allowed module (verl.trainer.*)"))]),
    Case("c4-module-with-slash", adv(f"python3 -m verl.trainer.x/../../y {DATA}"),
         [E("verl.trainer.x/../../y", at(1, "module verl.trainer.x/../../y is not allowed for python3", "run an allowed module (verl.trainer.*)"))]),
    Case("c4-module-missing", adv("python3 -m"), [E("python3", at(1, "python3 names no module", "write python3 ... -m MODULE (allowed: verl.trainer.*)"))]),
    Case("c4-program-python", adv("python -m verl.trainer.main_ppo"),
         [E("python", at(1, "'python' is not allowed", LANGUAGE)), E("python -m verl.trainer.main_ppo", NO_ENTRY)]),
    Case("c4-program-path", adv("/usr/bin/python3 -m verl.trainer.main_ppo"),
         [E("/usr/bin/python3", at(1, "'/usr/bin/python3' is not an allowed entrypoint program", "write python3 (allowed programs: python3, torchrun)")),
          E("/usr/bin/python3 -m verl.trainer.main_ppo", NO_ENTRY)]),
    Case("c4-program-in-home", adv("$HOME/bin/python3 -m verl.trainer.main_ppo"),
         [E("<H>/bin/python3", at(1, "'<H>/bin/python3' is not an allowed entrypoint program", "write python3 (allowed programs: python3, torchrun)")),
          E("<H>/bin/python3 -m verl.trainer.main_ppo", NO_ENTRY)]),
    Case("c4-program-from-variable", adv(f"PY=python3\n$PY -m verl.trainer.main_ppo {DATA}"),
         [E("$PY", at(2, "a program name built from expansions is not allowed", "write the program name out")), E("PY=python3", NO_ENTRY)]),
    Case("c4-exec", adv(f"exec {PPO}"), [E("exec", at(1, "'exec' is not allowed", "run the entrypoint without exec")), E(f"exec {PPO}", NO_ENTRY)]),
    Case("c4-env", adv(f"env {PPO}"), [E("env", at(1, "'env' is not allowed", "write NAME=value before the program instead")), E(f"env {PPO}", NO_ENTRY)]),
    Case("c4-command-builtin", adv(f"command {PPO}"),
         [E("command", at(1, "'command' is not allowed", "write the program name out")), E(f"command {PPO}", NO_ENTRY)]),
    Case("c4-bash-c", adv(f"bash -c '{PPO}'"),
         [E("bash", at(1, "'bash' is not allowed", "write the command itself, not a shell that runs it")), E(f"bash -c '{PPO}'", NO_ENTRY)]),
    Case("c4-source", adv(f"source $HOME/env.sh\n{GOOD}"), [E("source", at(1, "'source' is not allowed", "write the variables into the command itself"))]),
    Case("c4-dot-source", adv(f". $HOME/env.sh\n{GOOD}"), [E(".", at(1, "'.' is not allowed", "write the variables into the command itself"))]),
    Case("c4-no-entrypoint", adv("set -x"), [E("set -x", NO_ENTRY)]),
    Case("c4-entrypoint-in-echo", adv(f"echo {PPO}"),
         [E("echo", at(1, "'echo' is not allowed", "remove it; the entrypoint's own output is in the job log")), E(f"echo {PPO}", NO_ENTRY)]),
    Case("c4-entrypoint-in-comment", adv(f"# {GOOD}\nset -x"), [E("set -x", NO_ENTRY)]),
    Case("c4-entrypoint-in-quoted-string", adv(f"'{PPO}'"), [E(PPO, at(1, f"'{PPO}' is not allowed", LANGUAGE)), E(f"'{PPO}'", NO_ENTRY)]),
    Case("c4-second-entrypoint", adv(f"{GOOD}\n{PPO}"), [E(PPO, at(2, "a second entrypoint is not allowed", "run one entrypoint per task"))]),
    Case("c4-pipe-into-python", adv(f"{GOOD} | python3 -c 'import os'"),
         [E("python3", at(1, "a pipe into 'python3' is not allowed", "a pipe is allowed only into tee: 2>&1 | tee FILE"))]),
    Case("c4-torchrun-standalone-takes-no-value", adv("torchrun --standalone 1 -m verl.trainer.fsdp_sft_trainer", workload="sft"),
         [E("1", at(1, "torchrun runs a script here, not a module", "write torchrun [options] -m MODULE (allowed: verl.trainer.*)"))]),
    Case("c4-torchrun-standalone-equals", adv("torchrun --standalone=1 -m verl.trainer.fsdp_sft_trainer", workload="sft"),
         [E("--standalone=1", at(1, "torchrun --standalone takes no value", "write --standalone alone"))]),
    Case("c4-torchrun-duplicate", adv("torchrun --nproc_per_node=1 --nproc_per_node=8 -m verl.trainer.fsdp_sft_trainer", workload="sft"),
         [E("--nproc_per_node=8", at(1, "torchrun's nproc_per_node is given twice (--nproc_per_node and --nproc_per_node)",
            "give each option once (torchrun would take the last)"))]),
    Case("c4-torchrun-duplicate-spellings", adv("torchrun --nproc-per-node=1 --nproc_per_node 8 -m verl.trainer.fsdp_sft_trainer", workload="sft"),
         [E("--nproc_per_node", at(1, "torchrun's nproc_per_node is given twice (--nproc-per-node and --nproc_per_node)",
            "give each option once (torchrun would take the last)"))]),
    Case("c4-torchrun-abbreviation", adv("torchrun --nproc_per=8 -m verl.trainer.fsdp_sft_trainer", workload="sft"),
         [E("--nproc_per=8", at(1, "--nproc_per is not a torchrun option", "write the full name (--nproc_per_node); abbreviations are not read"))]),
    Case("c4-torchrun-abbreviation-nnodes", adv("torchrun --nn 2 -m verl.trainer.fsdp_sft_trainer", workload="sft"),
         [E("--nn", at(1, "--nn is not a torchrun option", "write the full name (--nnodes); abbreviations are not read"))]),
    Case("c4-torchrun-unknown-option", adv("torchrun --foo=1 -m verl.trainer.fsdp_sft_trainer", workload="sft"),
         [E("--foo=1", at(1, "--foo is not a torchrun option", "give only torchrun's own options (torch/distributed/run.py), each spelled out"))]),
    Case("c4-torchrun-joined-short", adv("torchrun -r3 -m verl.trainer.fsdp_sft_trainer", workload="sft"),
         [E("-r3", at(1, "-r3 is not a torchrun option", "give only torchrun's own options (torch/distributed/run.py), each spelled out"))]),
    Case("c4-torchrun-elastic-nnodes", adv(f"torchrun --nnodes=1:4 --nproc_per_node=1 -m verl.trainer.fsdp_sft_trainer {DATA}", workload="sft"),
         [E("--nnodes=1:4", "must be a plain integer equal to spec.nnodes (1)")]),
    Case("c4-torchrun-nproc-gpu", adv(f"torchrun --nnodes=1 --nproc_per_node=gpu -m verl.trainer.fsdp_sft_trainer {DATA}", workload="sft"),
         [E("--nproc_per_node=gpu", NOT_INT_G)]),
    Case("c4-torchrun-nproc-auto", adv(f"torchrun --nnodes=1 --nproc-per-node auto -m verl.trainer.fsdp_sft_trainer {DATA}", workload="sft"),
         [E("--nproc-per-node=auto", NOT_INT_G)]),
    Case("c4-torchrun-nproc-underscored", adv(f"torchrun --nnodes=1 --nproc_per_node=0_8 -m verl.trainer.fsdp_sft_trainer {DATA}", workload="sft"),
         [E("--nproc_per_node=0_8", NOT_INT_G)]),
    Case("c4-torchrun-no-python", adv("torchrun --no-python -m verl.trainer.fsdp_sft_trainer", workload="sft"),
         [E("--no-python", at(1, "torchrun --no-python is not allowed", "it runs the script as a program, not Python; run -m MODULE"))]),
    Case("c4-torchrun-run-path", adv("torchrun --run_path -m verl.trainer.fsdp_sft_trainer", workload="sft"),
         [E("--run_path", at(1, "torchrun --run_path is not allowed", "it runs a script file, not the module; run -m MODULE"))]),
    Case("c4-torchrun-logs-specs", adv("torchrun --logs-specs=x -m verl.trainer.fsdp_sft_trainer", workload="sft"),
         [E("--logs-specs=x", at(1, "torchrun --logs-specs is not allowed", "it loads a logging plugin by name; run -m MODULE"))]),
    Case("c4-torchrun-script", adv("torchrun --standalone verl/trainer/fsdp_sft_trainer.py", workload="sft"),
         [E("verl/trainer/fsdp_sft_trainer.py", at(1, "torchrun runs a script here, not a module", "write torchrun [options] -m MODULE (allowed: verl.trainer.*)"))]),
    Case("c4-torchrun-double-dash", adv("torchrun -- -m verl.trainer.fsdp_sft_trainer", workload="sft"),
         [E("--", at(1, "torchrun's '--' is not allowed", "write torchrun OPTIONS -m MODULE ARGS"))]),
    Case("c4-torchrun-missing-value", adv("torchrun --nnodes -m verl.trainer.fsdp_sft_trainer", workload="sft"),
         [E("--nnodes", at(1, "torchrun --nnodes needs a value", "write --nnodes=VALUE"))]),
    Case("c4-torchrun-log-dir", adv(f"torchrun --log-dir=<R>/users/bob/logs -m verl.trainer.fsdp_sft_trainer {DATA}", workload="sft"),
         [E("<R>/users/bob/logs", "torchrun's log folder must be under <H>/", f"{CMD} (torchrun --log-dir)"), E("<R>/users/bob/logs", other("bob"))]),
    Case("c4-torchrun-env-nproc", adv(f"PET_NPROC_PER_NODE=8 {GOOD_SFT}", workload="sft"),
         [E("PET_NPROC_PER_NODE=8", at(1, "setting PET_NPROC_PER_NODE is not allowed", TORCHRUN_ENV))]),
    Case("c4-torchrun-env-exported", adv(f"export PET_NNODES=4\n{GOOD_SFT}", workload="sft"),
         [E("PET_NNODES=4", at(1, "setting PET_NNODES is not allowed", TORCHRUN_ENV))]),
    Case("c4-torchrun-elastic-env", adv(f"export TORCHELASTIC_RUN_ID=x\n{GOOD_SFT}", workload="sft"),
         [E("TORCHELASTIC_RUN_ID=x", at(1, "setting TORCHELASTIC_RUN_ID is not allowed",
            "torchrun reads its settings from it, past the checks: give torchrun's options on its command line; remove it"))]),
    Case("c4-torchrun-python-exec", adv(f"PYTHON_EXEC=$HOME/bin/x {GOOD_SFT}", workload="sft"),
         [E("PYTHON_EXEC=<H>/bin/x", at(1, "setting PYTHON_EXEC is not allowed", PROGRAM))]),
    Case("c4-torchrun-help", adv("torchrun -h -m verl.trainer.fsdp_sft_trainer", workload="sft"),
         [E("-h", at(1, "torchrun -h is not allowed", "it prints the help and runs nothing; run -m MODULE"))]),
    # --- 5. overrides the checks never saw -----------------------------------------------------
    Case("c5-after-command-substitution", adv(f"{GOOD} +x=$(echo) trainer.default_local_dir=<R>/users/bob"),
         [E("$(echo)", at(1, "command substitution is not allowed", SUBST_DATE))]),
    Case("c5-alternative-as-comment", adv(f"X=1\n{GOOD} +x=${{X:+ #}} trainer.default_local_dir=<R>/users/bob"),
         [E("${X:+ #}", at(2, "parameter expansion with ':+' is not allowed", PARAM))]),
    Case("c5-overrides-in-unquoted-variable", adv(f"EXTRA='trainer.n_gpus_per_node=8 +x=1'\n{NO_COUNTS} trainer.nnodes=1 $EXTRA"),
         [E("$EXTRA", at(2, "unquoted $EXTRA holds blanks, so bash would split it into 2 words", 'write the words out, or quote it ("$EXTRA") to keep one word'))]),
    Case("c5-override-in-quoted-variable", adv(f"EXTRA=trainer.default_local_dir=<R>/users/bob\n{GOOD} \"$EXTRA\""),
         [E("<R>/users/bob", other("bob")), K("trainer.default_local_dir", "<R>/users/bob", OUTPUT_RULE)]),
    Case("c5-count-in-variable", adv(f"G=8\n{NO_COUNTS} trainer.nnodes=1 trainer.n_gpus_per_node=$G"),
         [E("trainer.n_gpus_per_node=8", "must equal spec.nGpusPerNode (1); the queue counts GPUs from the spec")]),
    Case("c5-continuation-into-comment", adv(f"{NO_COUNTS} \\\n  # a note \\\n  {COUNTS}"),
         [E(COUNTS, at(3, NOTHING_AFTER, "bash ends a command at a comment line, so a '\\' continuation does not carry through one: "
                       "move the comment below the last line"))]),
    Case("c5-after-semicolon", adv(f"{GOOD}; trainer.n_gpus_per_node=8"),
         [E("trainer.n_gpus_per_node=8", at(1, NOTHING_AFTER, "bash ends a command at a comment line, so a '\\' continuation does not "
                                           "carry through one: move the comment below the last line"))]),
    Case("c5-escaped-blank-joins-overrides", adv(f"{GOOD} +x=1\\ trainer.n_gpus_per_node=8"),
         [E("+x=1 trainer.n_gpus_per_node=8", at(1, "is not a Hydra override verl can read (mismatched input '=' expecting <EOF>)", HYDRA_ADVICE))]),
    # --- 6. Hydra's own grammar ------------------------------------------------------------------
    Case("c6-dict-count", adv(f"{NO_COUNTS} trainer.nnodes=1 'trainer={{n_gpus_per_node:8}}'"),
         [E("trainer={n_gpus_per_node:8}", "must equal spec.nGpusPerNode (1); the queue counts GPUs from the spec")]),
    Case("c6-dict-count-unquoted", adv(f"{NO_COUNTS} trainer.nnodes=1 trainer={{n_gpus_per_node:8}}"),
         [E("trainer={n_gpus_per_node:8}", "must equal spec.nGpusPerNode (1); the queue counts GPUs from the spec")]),
    Case("c6-dict-count-twice", adv(f"{GOOD} 'trainer={{n_gpus_per_node:8}}'"),
         [E("trainer={n_gpus_per_node:8}", f"sets trainer.n_gpus_per_node a second time (also in 'trainer.n_gpus_per_node=1'): {TWICE}")]),
    Case("c6-dict-data", adv(f"{PPO} data.val_files=$HOME/datasets/v.parquet {COUNTS} {RAY} 'data={{train_files:<R>/users/bob/x}}'"),
         [E("<R>/users/bob/x", other("bob")), K("data.train_files", "<R>/users/bob/x", DATA_RULE)]),
    Case("c6-dict-output", adv(f"{GOOD} 'trainer={{default_local_dir:<R>/users/bob/x}}'"),
         [E("<R>/users/bob/x", other("bob")), K("trainer.default_local_dir", "<R>/users/bob/x", OUTPUT_RULE)]),
    Case("c6-nested-dict", adv(f"{NO_COUNTS} trainer.n_gpus_per_node=1 '+trainer={{a:{{b:1}},nnodes:4}}'"),
         [E("+trainer={a:{b:1},nnodes:4}", "must equal spec.nnodes (1); the queue counts GPUs from the spec")]),
    Case("c6-whitespace-after-equals", adv(f"{GOOD} 'trainer.default_local_dir= <R>/users/bob'"),
         [E("<R>/users/bob", other("bob")), K("trainer.default_local_dir", "<R>/users/bob", OUTPUT_RULE)]),
    Case("c6-sweep", adv(f"{GOOD} trainer.total_epochs=1,2"), [E("trainer.total_epochs=1,2", SWEEP)]),
    Case("c6-sweep-choice", adv(f"{GOOD} 'trainer.total_epochs=choice(1,2)'"), [E("trainer.total_epochs=choice(1,2)", SWEEP)]),
    Case("c6-sweep-range", adv(f"{GOOD} 'trainer.total_epochs=range(1,3)'"), [E("trainer.total_epochs=range(1,3)", SWEEP)]),
    Case("c6-sweep-glob", adv(f"{GOOD} 'trainer=glob(*)'"), [E("trainer=glob(*)", SWEEP)]),
    Case("c6-sweep-interval", adv(f"{GOOD} 'optim.lr=interval(0,1)'"), [E("optim.lr=interval(0,1)", SWEEP)]),
    Case("c6-sweep-of-paths", adv(f"{GOOD} trainer.default_local_dir=$HOME/a,<R>/users/bob"), [E("trainer.default_local_dir=<H>/a,<R>/users/bob", SWEEP)]),
    Case("c6-multirun", adv(f"{GOOD} --multirun"), [E("--multirun", at(1, "Hydra's --multirun is not allowed", "it runs one job per value of a sweep; remove it"))]),
    Case("c6-multirun-short", adv(f"{GOOD} -m"), [E("-m", at(1, "Hydra's -m is not allowed", "it runs one job per value of a sweep (--multirun); remove it"))]),
    Case("c6-hydra-mode", adv(f"{GOOD} hydra.mode=MULTIRUN"), [E("hydra.mode=MULTIRUN", f"hydra.mode {HYDRA_SETTING}")]),
    Case("c6-hydra-sweeper-group", adv(f"{GOOD} hydra/sweeper=basic"),
         [E("hydra/sweeper=basic", "selects a Hydra config group (hydra/sweeper), which the check cannot read: set the keys themselves (a.b=...)")]),
    Case("c6-hydra-launcher-group", adv(f"{GOOD} hydra/launcher=submitit_local"),
         [E("hydra/launcher=submitit_local", "selects a Hydra config group (hydra/launcher), which the check cannot read: set the keys themselves (a.b=...)")]),
    Case("c6-hydra-callbacks", adv(f"{GOOD} +hydra.callbacks.x._target_=os.system"), [E("+hydra.callbacks.x._target_=os.system", CUSTOM_CONFIG)]),
    Case("c6-hydra-job-logging-key", adv(f"{GOOD} +hydra.job_logging.handlers.x.class=os.system"),
         [E("+hydra.job_logging.handlers.x.class=os.system", f"hydra.job_logging.handlers.x.class {HYDRA_SETTING}")]),
    Case("c6-target-key", adv(f"{GOOD} +actor_rollout_ref.actor._target_=os.system"), [E("+actor_rollout_ref.actor._target_=os.system", CUSTOM_CONFIG)]),
    Case("c6-target-in-dict", adv(f"{GOOD} '+foo={{_target_:os.system}}'"), [E("+foo={_target_:os.system}", CUSTOM_CONFIG)]),
    Case("c6-config-group", adv(f"{GOOD} actor_rollout_ref/rollout=hf"),
         [E("actor_rollout_ref/rollout=hf", "selects a Hydra config group (actor_rollout_ref/rollout), which the check cannot read: set the keys themselves (a.b=...)")]),
    Case("c6-package-override", adv(f"{GOOD} data@trainer=x"), [E("data@trainer=x", "a package override (@trainer) is not allowed: set the keys themselves (a.b=...)")]),
    Case("c6-dotdot-after-colon", adv(f"{GOOD} +trainer.resume_from_path=ckpt:/../../.."), [E("ckpt:/../../..", JOBDIR)]),
    Case("c6-resolver-in-checked-key", adv(f"{GOOD} 'trainer.default_local_dir=${{oc.env:HOME}}/x'"),
         [K("trainer.default_local_dir", "trainer.default_local_dir=${oc.env:HOME}/x",
            "${oc.env:HOME} is a resolver or an expression, which the check cannot read: write the value out")]),
    Case("c6-now-resolver-in-checked-key", adv(f"{GOOD} 'hydra.run.dir=outputs/${{now:%H}}'"),
         [K("hydra.run.dir", "hydra.run.dir=outputs/${now:%H}", "${now:%H} is a resolver or an expression, which the check cannot read: write the value out")]),
    Case("c6-interpolation-of-unset-key", adv(f"{GOOD} 'trainer.default_local_dir=${{actor_rollout_ref.model.path}}/ckpt'"),
         [K("trainer.default_local_dir", "trainer.default_local_dir=${actor_rollout_ref.model.path}/ckpt",
            "${actor_rollout_ref.model.path} names actor_rollout_ref.model.path, which the command does not set: set it, or write the value out")]),
    Case("c6-interpolation-to-other-home", adv(f"{GOOD} 'trainer.default_local_dir=${{foo.dir}}' +foo.dir=<R>/users/bob"),
         [E("<R>/users/bob", other("bob")), K("trainer.default_local_dir", "<R>/users/bob", OUTPUT_RULE)]),
    Case("c6-relative-interpolation", adv(f"{GOOD} 'trainer.default_local_dir=${{.x}}'"),
         [K("trainer.default_local_dir", "trainer.default_local_dir=${.x}", "${.x} is a resolver or an expression, which the check cannot read: write the value out")]),
    Case("c6-delete-checked-key", adv(f"{NO_COUNTS} trainer.nnodes=1 '~trainer.n_gpus_per_node'"),
         [E("~trainer.n_gpus_per_node", "deleting trainer.n_gpus_per_node is not allowed: the checks read it (or keys inside it); set it instead")]),
    Case("c6-delete-block", adv(f"{GOOD} '~trainer'"),
         [E("~trainer", "deleting trainer is not allowed: the checks read it (or keys inside it); set it instead")]),
    Case("c6-replace-block-null", adv(f"{GOOD} trainer=null"),
         [E("trainer=null", "replaces the whole trainer block, which holds keys the checks read: set its keys one by one (trainer.x=...)")]),
    Case("c6-replace-block-group-name", adv(f"{GOOD} data=legacy_data"),
         [E("data=legacy_data", "replaces the whole data block, which holds keys the checks read: set its keys one by one (data.x=...)")]),
    Case("c6-part-of-checked-list", adv(f"{GOOD} data.train_files.0=<R>/users/bob/x"),
         [E("data.train_files.0=<R>/users/bob/x", "sets part of data.train_files: give the whole value (data.train_files=...)")]),
    Case("c6-dict-for-a-path", adv(f"{GOOD} 'trainer.default_local_dir={{a:1}}'"), [K("trainer.default_local_dir", "trainer.default_local_dir={a:1}", "must be a path")]),
    Case("c6-key-twice", adv(f"{GOOD} trainer.total_epochs=1 +trainer.total_epochs=2"),
         [E("+trainer.total_epochs=2", f"sets trainer.total_epochs a second time (also in 'trainer.total_epochs=1'): {TWICE}")]),
    Case("c6-not-an-override", adv(f"{GOOD} verbose"),
         [E("verbose", at(1, "is not a Hydra override verl can read (missing EQUAL at '<EOF>')", HYDRA_ADVICE))]),
    Case("c6-empty-argument", adv(f"{GOOD} ''"), [E("''", at(1, "an empty argument is not a Hydra override", "remove it"))]),
    Case("c6-unknown-function", adv(f"{GOOD} 'data.train_files=extend_list(<R>/users/bob/x)'"),
         [E("data.train_files=extend_list(<R>/users/bob/x)",
            at(1, "is not a Hydra override verl can read (HydraException while evaluating 'extend_list(<R>/users/bob/x)': Unknown function 'extend_list')", HYDRA_ADVICE))]),
    Case("c6-config-path-other-home", adv(f"{GOOD} --config-path=<R>/users/bob/cfg --config-name=x"),
         [E("<R>/users/bob/cfg", other("bob")), E("<R>/users/bob/cfg", "Hydra's --config-path must be under <H>/")]),
    Case("c6-config-path-climbs", adv(f"{GOOD} --config-path=../../x"),
         [E("--config-path=../../x", "a relative --config-path is read inside verl's own package and must not climb out of it")]),
    Case("c6-config-dir-shared", adv(f"{GOOD} --config-dir=<R>/common/cfg"), [E("<R>/common/cfg", "Hydra's --config-dir must be under <H>/")]),
    Case("c6-config-dir-short-tmp", adv(f"{GOOD} -cd /tmp/cfg"), [E("/tmp/cfg", "Hydra's -cd must be under <H>/")]),
    Case("c6-config-name-absolute", adv(f"{GOOD} --config-name=/etc/x"),
         [E("--config-name=/etc/x", "--config-name must name a config inside the config path (no '/' at the start, no '..')")]),
    Case("c6-config-name-climbs", adv(f"{GOOD} -cn ../x"),
         [E("-cn=../x", "--config-name must name a config inside the config path (no '/' at the start, no '..')")]),
    Case("c6-config-name-twice", adv(f"{GOOD} --config-name=a --config-name=b"), [E("--config-name=b", "Hydra's --config-name is given twice: give it once")]),
    Case("c6-config-name-no-value", adv(f"{GOOD} --config-name"), [E("--config-name", at(1, "--config-name needs a value", "write --config-name=VALUE"))]),
    Case("c6-config-path-url", adv(f"{GOOD} --config-path=pkg://x"), [E("--config-path=pkg://x", "--config-path must be a folder, not a URL")]),
    Case("c6-searchpath-other-home", adv(f"{GOOD} 'hydra.searchpath=[file://<R>/users/bob/c]'"),
         [E("//<R>/users/bob/c", other("bob")),
          K("hydra.searchpath", "<R>/users/bob/c", "a Hydra search path must be under <H>/")]),
    Case("c6-searchpath-package", adv(f"{GOOD} 'hydra.searchpath=[pkg://x]'"),
         [K("hydra.searchpath", "hydra.searchpath=[pkg://x]", "hydra.searchpath may only hold folders (file://...) in your home")]),
    Case("c6-cfg", adv(f"{GOOD} --cfg job"),
         [E("--cfg", at(1, "Hydra's --cfg is not allowed", "it prints the config and runs nothing; remove it")),
          E("job", at(1, "is not a Hydra override verl can read (missing EQUAL at '<EOF>')", HYDRA_ADVICE))]),
    Case("c6-info", adv(f"{GOOD} --info"), [E("--info", at(1, "Hydra's --info is not allowed", "it prints information and runs nothing; remove it"))]),
    Case("c6-help", adv(f"{GOOD} --hydra-help"), [E("--hydra-help", at(1, "Hydra's --hydra-help is not allowed", "it prints the help and runs nothing; remove it"))]),
    Case("c6-rerun", adv(f"{GOOD} --experimental-rerun=x"),
         [E("--experimental-rerun=x", at(1, "Hydra's --experimental-rerun is not allowed", "it reruns another job from its pickled config; remove it"))]),
    Case("c6-torchrun-option-after-module", adv(f"{GOOD_SFT} --nnodes=2", workload="sft"),
         [E("--nnodes=2", at(1, "--nnodes is not a Hydra override or option verl reads",
            "give overrides as key=value (Hydra's options: --config-name, --config-path, --config-dir)"))]),
    # --- 7. spec edge cases --------------------------------------------------------------------
    Case("c7-advanced-command-null", adv(None), [E(None, "must not be null: leave the field out, or give it a value", "spec.command")]),
    Case("c7-basic-trainfile-null", basic(trainFile=None), [E(None, "must not be null: leave the field out, or give it a value", "spec.trainFile")]),
    Case("c7-basic-valfile-null", basic(valFile=None), [E(None, "must not be null: leave the field out, or give it a value", "spec.valFile")]),
    Case("c7-basic-modelid-null", basic(modelId=None), [E(None, "must not be null: leave the field out, or give it a value", "spec.modelId")]),
    Case("c7-c1-in-command", adv(GOOD + " +x=a\x85b"), [E(f"\\x85 at offset {len(GOOD) + 5}", CONTROL)]),
    Case("c7-c1-csi-in-command", adv(GOOD + " \x9b31m"), [E(f"\\x9b at offset {len(GOOD) + 1}", CONTROL)]),
    Case("c7-c1-in-basic-field", basic(trainFile="$HOME/datasets/a\x85.parquet"), [E("\\x85 at offset 16", CONTROL, "spec.trainFile")]),
    Case("c7-bidi-override", adv(GOOD + " +x=\u202eevil"),
         [E(f"\\u202e at offset {len(GOOD) + 4}", "invisible, private or unassigned characters (U+202E) are not allowed: "
            "they make the text read differently from what runs")]),
    Case("c7-zero-width-space", adv("python3\u200b -m verl.trainer.main_ppo"),
         [E("\\u200b at offset 7", "invisible, private or unassigned characters (U+200B) are not allowed: they make the text read differently from what runs")]),
    Case("c7-codepath-with-colon", basic(codePath="<R>/common/code:<R>/users/bob/code"),
         [E("<R>/common/code:<R>/users/bob/code", "must be one folder (no ':'): it becomes an entry of PYTHONPATH", "spec.codePath"),
          E("<R>/users/bob/code", other("bob"), "spec.codePath")]),
    Case("c7-nul-byte", adv(GOOD + "\x00"), [E(f"\\x00 at offset {len(GOOD)}", CONTROL)]),
    Case("c7-escape-char", adv(GOOD + " \x1b[31m"), [E(f"\\x1b at offset {len(GOOD) + 1}", CONTROL)]),
    Case("c7-carriage-return", adv(GOOD + "\r\n"), [E(f"\\x0d at offset {len(GOOD)}", CONTROL)]),
    Case("c7-over-64KiB", adv(BIG), [E(f"{len(BIG)} bytes", "is larger than the 64 KiB limit")]),
    Case("c7-over-64KiB-in-bytes", adv(GOOD + " +x=" + "é" * 33000), [E(f"{len(GOOD) + 4 + 66000} bytes", "is larger than the 64 KiB limit")]),
    # --- data files ----------------------------------------------------------------------------
    Case("data-outside", adv(f"{PPO} data.train_files=/tmp/train.parquet data.val_files=$HOME/datasets/v.parquet {COUNTS} {RAY}"),
         [K("data.train_files", "/tmp/train.parquet", DATA_RULE)]),
    Case("data-quoted", adv(f"{PPO} data.train_files=$HOME/datasets/t.parquet 'data.val_files=/etc/v.parquet' {COUNTS} {RAY}"),
         [K("data.val_files", "/etc/v.parquet", DATA_RULE)]),
    Case("data-hydra-list", adv(f"{PPO} data.train_files=[$HOME/datasets/a.parquet,/tmp/b.parquet] data.val_files=$HOME/datasets/v.parquet {COUNTS} {RAY}"),
         [K("data.train_files", "/tmp/b.parquet", DATA_RULE)]),
    Case("data-hydra-list-quoted", adv(f"{PPO} data.train_files=\"['$HOME/datasets/a.parquet', '/tmp/b.parquet']\" data.val_files=$HOME/datasets/v.parquet {COUNTS} {RAY}"),
         [K("data.train_files", "/tmp/b.parquet", DATA_RULE)]),
    Case("data-via-variable", adv(f"D=/tmp/d\n{PPO} data.train_files=$D/a.parquet data.val_files=$HOME/datasets/v.parquet {COUNTS} {RAY}"),
         [K("data.train_files", "/tmp/d/a.parquet", DATA_RULE)]),
    Case("data-via-script-variable", adv(f"D=<R>/common/code\n{PPO} data.train_files=${{D}}/a.parquet data.val_files=$HOME/datasets/v.parquet {COUNTS} {RAY}"),
         [K("data.train_files", "<R>/common/code/a.parquet", DATA_RULE)]),
    Case("data-list-in-variable", adv(f"F=\"['<R>/users/bob/a.parquet']\"\n{PPO} data.train_files=\"$F\" data.val_files=$HOME/datasets/v.parquet {COUNTS} {RAY}"),
         [E("<R>/users/bob/a.parquet", other("bob")), K("data.train_files", "<R>/users/bob/a.parquet", DATA_RULE)]),
    Case("data-in-code-dir", adv(f"{PPO} data.train_files=$HOME/code/a.parquet data.val_files=$HOME/datasets/v.parquet {COUNTS} {RAY}"),
         [K("data.train_files", "<H>/code/a.parquet", DATA_RULE)]),
    Case("data-of-other-user", adv(f"{PPO} data.train_files=<R>/users/bob/datasets/a.parquet data.val_files=$HOME/datasets/v.parquet {COUNTS} {RAY}"),
         [E("<R>/users/bob/datasets/a.parquet", other("bob")), K("data.train_files", "<R>/users/bob/datasets/a.parquet", DATA_RULE)]),
    Case("data-dotdot-to-other-user", adv(f"{PPO} data.train_files=$HOME/../bob/datasets/a.parquet data.val_files=$HOME/datasets/v.parquet {COUNTS} {RAY}"),
         [E("<H>/../bob/datasets/a.parquet", CLIMB_BOB), K("data.train_files", "<H>/../bob/datasets/a.parquet", DATA_RULE)]),
    Case("data-relative", adv(f"{PPO} data.train_files=data/a.parquet data.val_files=$HOME/datasets/v.parquet {COUNTS} {RAY}"),
         [K("data.train_files", "data/a.parquet", "a data file must be an absolute path under <H>/datasets/ or <R>/datasets/ or <R>/common/datasets/")]),
    Case("data-root-folder-itself", adv(f"{PPO} data.train_files=$HOME/datasets data.val_files=$HOME/datasets/v.parquet {COUNTS} {RAY}"),
         [K("data.train_files", "<H>/datasets", DATA_RULE)]),
    Case("data-dotdot-out-of-shared", adv(f"{PPO} data.train_files=$HOME/common/datasets/../../etc/passwd data.val_files=$HOME/datasets/v.parquet {COUNTS} {RAY}"),
         [E("<R>/datasets/../../etc/passwd", "'..' climbs out of <R>/datasets"), K("data.train_files", "<R>/datasets/../../etc/passwd", DATA_RULE)]),
    Case("data-number", adv(f"{PPO} data.train_files=[1] data.val_files=$HOME/datasets/v.parquet {COUNTS} {RAY}"),
         [K("data.train_files", "data.train_files=[1]", "must be a path or a list of paths")]),
    Case("data-date-in-path", adv(f"{PPO} data.train_files=$HOME/datasets/$(date +%Y).parquet data.val_files=$HOME/datasets/v.parquet {COUNTS} {RAY}"),
         [E("data.train_files=<H>/datasets/$(date +%Y).parquet", DATE_PATH)]),
    # --- the custom reward and other Python files ---------------------------------------------------
    Case("reward-outside-code", adv(f"{GOOD} custom_reward_function.path=/tmp/reward.py custom_reward_function.name=f"),
         [K("custom_reward_function.path", "/tmp/reward.py", REWARD_RULE)]),
    Case("reward-plus-outside-code", adv(f"{GOOD} +custom_reward_function.path=$HOME/datasets/reward.py"),
         [K("custom_reward_function.path", "<H>/datasets/reward.py", REWARD_RULE)]),
    Case("reward-in-shared-code", adv(f"{GOOD} custom_reward_function.path=<R>/common/code/reward.py"),
         [K("custom_reward_function.path", "<R>/common/code/reward.py", REWARD_RULE)]),
    Case("reward-not-py", adv(f"{GOOD} custom_reward_function.path=$HOME/code/reward.txt"),
         [K("custom_reward_function.path", "<H>/code/reward.txt", "the reward function file must be a .py file")]),
    Case("reward-of-other-user", adv(f"{GOOD} custom_reward_function.path=<R>/users/bob/code/r.py"),
         [E("<R>/users/bob/code/r.py", other("bob")), K("custom_reward_function.path", "<R>/users/bob/code/r.py", REWARD_RULE)]),
    Case("custom-dataset-class-outside-code", adv(f"{GOOD} data.custom_cls.path=/tmp/ds.py"),
         [K("data.custom_cls.path", "/tmp/ds.py", "a Python file verl loads must be under <H>/code/")]),
    # --- outputs -------------------------------------------------------------------------------
    Case("output-in-shared-datasets", adv(f"{GOOD} trainer.default_local_dir=$HOME/common/datasets/ckpt"),
         [K("trainer.default_local_dir", "<R>/datasets/ckpt", OUTPUT_RULE)]),
    Case("output-in-shared-hf", adv(f"{GOOD} trainer.default_local_dir=$HOME/common/hf/ckpt"), [K("trainer.default_local_dir", "<R>/hf/ckpt", OUTPUT_RULE)]),
    Case("output-in-shared-common", adv(f"{GOOD} trainer.rollout_data_dir=<R>/common/rollouts"), [K("trainer.rollout_data_dir", "<R>/common/rollouts", OUTPUT_RULE)]),
    Case("output-of-other-user", adv(f"{GOOD} trainer.default_local_dir=<R>/users/bob/ckpt"),
         [E("<R>/users/bob/ckpt", other("bob")), K("trainer.default_local_dir", "<R>/users/bob/ckpt", OUTPUT_RULE)]),
    Case("output-outside-root", adv(f"{GOOD} trainer.validation_data_dir=/tmp/val"), [K("trainer.validation_data_dir", "/tmp/val", OUTPUT_RULE)]),
    Case("output-hdfs-dir-absolute", adv(f"{GOOD} trainer.default_hdfs_dir=/tmp/x"), [K("trainer.default_hdfs_dir", "/tmp/x", OUTPUT_RULE)]),
    Case("output-hydra-run-dir", adv(f"{GOOD} hydra.run.dir=<R>/users/bob/out"),
         [E("<R>/users/bob/out", other("bob")), K("hydra.run.dir", "<R>/users/bob/out", OUTPUT_RULE)]),
    Case("output-hydra-sweep-dir", adv(f"{GOOD} hydra.sweep.dir=<R>/datasets/x"), [K("hydra.sweep.dir", "<R>/datasets/x", OUTPUT_RULE)]),
    Case("output-experiment-name-climbs", adv(f"{GOOD} trainer.experiment_name=../../../bob"),
         [E("../../../bob", JOBDIR), K("trainer.experiment_name", "trainer.experiment_name=../../../bob",
          "becomes a folder name in verl's default checkpoint path (checkpoints/<project>/<experiment>): no '/', and not '.' or '..'")]),
    Case("output-project-name-slash", adv(f"{GOOD} trainer.project_name=a/b"),
         [K("trainer.project_name", "trainer.project_name=a/b",
            "becomes a folder name in verl's default checkpoint path (checkpoints/<project>/<experiment>): no '/', and not '.' or '..'")]),
    Case("output-project-name-dotdot", adv(f"{GOOD} trainer.project_name=.."),
         [E("..", JOBDIR), K("trainer.project_name", "trainer.project_name=..",
          "becomes a folder name in verl's default checkpoint path (checkpoints/<project>/<experiment>): no '/', and not '.' or '..'")]),
    Case("output-date-in-path", adv(f"{GOOD} trainer.default_local_dir=$HOME/ck_$(date +%Y%m%d)"),
         [E("trainer.default_local_dir=<H>/ck_$(date +%Y%m%d)", DATE_PATH)]),
    Case("output-date-with-slash-in-unchecked-key", adv(f"{GOOD} +trainer.x=a/$(date +%s)"), [E("+trainer.x=a/$(date +%s)", DATE_PATH)]),
    # --- models --------------------------------------------------------------------------------
    Case("model-path-outside", adv(f"{GOOD} actor_rollout_ref.model.path=/tmp/model"), [K("actor_rollout_ref.model.path", "/tmp/model", MODEL_RULE)]),
    Case("model-id-malformed", adv(f"{GOOD} critic.model.path=Qwen/Qwen2.5/extra"),
         [K("critic.model.path", "Qwen/Qwen2.5/extra", "must be a Hugging Face model id like Qwen/Qwen2.5-0.5B-Instruct, or an absolute model path")]),
    Case("model-of-other-user", adv(f"{GOOD} actor_rollout_ref.model.path=<R>/users/bob/models/q"),
         [E("<R>/users/bob/models/q", other("bob")), K("actor_rollout_ref.model.path", "<R>/users/bob/models/q", MODEL_RULE)]),
    Case("model-in-shared-code", adv(f"{GOOD} model.partial_pretrain=<R>/common/code/m"), [K("model.partial_pretrain", "<R>/common/code/m", MODEL_RULE)]),
    Case("model-relative", adv(f"{GOOD} reward_model.model.path=./m"),
         [K("reward_model.model.path", "./m", "a model path must be an absolute path under <H>/ or <R>/hf/ or <R>/common/hf/ or <R>/common/models/")]),
    Case("model-hdfs", adv(f"{GOOD} critic.model.path=hdfs://nn/m"),
         [K("critic.model.path", "hdfs://nn/m", "must be a Hugging Face model id like Qwen/Qwen2.5-0.5B-Instruct, or an absolute model path")]),
    Case("model-tokenizer-outside", adv(f"{GOOD} reward_model.model.input_tokenizer=/tmp/tok"), [K("reward_model.model.input_tokenizer", "/tmp/tok", MODEL_RULE)]),
    # --- the GPUs the queue counts -------------------------------------------------------------------
    Case("count-nnodes-mismatch", adv(f"{NO_COUNTS} trainer.nnodes=2 trainer.n_gpus_per_node=1"),
         [E("trainer.nnodes=2", "must equal spec.nnodes (1); the queue counts GPUs from the spec")]),
    Case("count-gpus-mismatch", adv(f"{NO_COUNTS} trainer.nnodes=1 trainer.n_gpus_per_node=8"),
         [E("trainer.n_gpus_per_node=8", "must equal spec.nGpusPerNode (1); the queue counts GPUs from the spec")]),
    Case("count-quoted-string", adv(f"{NO_COUNTS} \"trainer.nnodes='1'\" trainer.n_gpus_per_node=1"), [E("trainer.nnodes='1'", NOT_INT_N)]),
    Case("count-float", adv(f"{NO_COUNTS} trainer.nnodes=1.0 trainer.n_gpus_per_node=1"), [E("trainer.nnodes=1.0", NOT_INT_N)]),
    Case("count-bool", adv(f"{NO_COUNTS} trainer.nnodes=true trainer.n_gpus_per_node=1"), [E("trainer.nnodes=true", NOT_INT_N)]),
    Case("count-leading-zero", adv(f"{NO_COUNTS} trainer.nnodes=01 trainer.n_gpus_per_node=1"), [E("trainer.nnodes=01", NOT_INT_N)]),
    Case("count-interpolation", adv(f"{NO_COUNTS} trainer.nnodes=1 'trainer.n_gpus_per_node=${{x}}' +x=8"), [E("trainer.n_gpus_per_node=${x}", NOT_INT_G)]),
    Case("count-twice", adv(f"{GOOD} trainer.nnodes=2"), [E("trainer.nnodes=2", f"sets trainer.nnodes a second time (also in 'trainer.nnodes=1'): {TWICE}")]),
    Case("count-torchrun-nproc-mismatch", adv(f"torchrun --standalone --nnodes=1 --nproc_per_node=4 -m verl.trainer.fsdp_sft_trainer {DATA}", workload="sft"),
         [E("--nproc_per_node=4", "must equal spec.nGpusPerNode (1); the queue counts GPUs from the spec")]),
    Case("count-torchrun-nnodes-two", adv(f"torchrun --nnodes 2 --nproc_per_node 1 -m verl.trainer.fsdp_sft_trainer {DATA}", workload="sft"),
         [E("--nnodes=2", TORCHRUN_ONE_NODE)]),
    Case("count-torchrun-spec-two-nodes", adv(f"torchrun --nnodes 2 --nproc_per_node 1 -m verl.trainer.fsdp_sft_trainer {DATA}", workload="sft",
                                              nnodes=2),
         [E(2, TORCHRUN_ONE_NODE, "spec.nnodes")]),
    Case("count-torchrun-trainer-key", adv(f"{GOOD_SFT} trainer.n_gpus_per_node=8", workload="sft"),
         [E("trainer.n_gpus_per_node=8", "must equal spec.nGpusPerNode (1); the queue counts GPUs from the spec")]),
    Case("count-separate-reward-pool", adv(f"{GOOD} reward_model.enable_resource_pool=True reward_model.n_gpus_per_node=8 reward_model.nnodes=1"),
         [E("reward_model.n_gpus_per_node=8", COUNT_POOL), E("reward_model.nnodes=1", COUNT_POOL)]),
    # --- the environment -----------------------------------------------------------------------
    Case("env-path", adv(f"PATH=$HOME/bin:$PATH {GOOD}"), [E("PATH=<H>/bin:$PATH", at(1, "setting PATH is not allowed", PROGRAM))]),
    Case("env-ld-preload", adv(f"export LD_PRELOAD=$HOME/x.so\n{GOOD}"), [E("LD_PRELOAD=<H>/x.so", at(1, "setting LD_PRELOAD is not allowed", PROGRAM))]),
    Case("env-ld-library-path", adv(f"export LD_LIBRARY_PATH=$HOME/lib\n{GOOD}"), [E("LD_LIBRARY_PATH=<H>/lib", at(1, "setting LD_LIBRARY_PATH is not allowed", PROGRAM))]),
    Case("env-bash-env", adv(f"export BASH_ENV=$HOME/x.sh\n{GOOD}"), [E("BASH_ENV=<H>/x.sh", at(1, "setting BASH_ENV is not allowed", PROGRAM))]),
    Case("env-env", adv(f"ENV=$HOME/x.sh {GOOD}"), [E("ENV=<H>/x.sh", at(1, "setting ENV is not allowed", PROGRAM))]),
    Case("env-bash-function", adv(f"export BASH_FUNC_python3=x\n{GOOD}"), [E("BASH_FUNC_python3=x", at(1, "setting BASH_FUNC_python3 is not allowed", PROGRAM))]),
    Case("env-ifs", adv(f"IFS=/\n{GOOD}"), [E("IFS=/", at(1, "setting IFS is not allowed", "it changes how bash splits the words of the command; remove it"))]),
    Case("env-home", adv(f"HOME=<R>/users/bob\n{GOOD}"),
         [E("HOME=<R>/users/bob", at(1, "setting HOME is not allowed", "Argus expands $HOME to your home before anything runs; remove it"))]),
    Case("env-ps4", adv(f"export PS4='$(cat x)'\nset -x\n{GOOD}"), [E("PS4='$(cat x)'", at(1, "setting PS4 is not allowed", PROGRAM))]),
    Case("env-python-startup", adv(f"export PYTHONSTARTUP=$HOME/s.py\n{GOOD}"), [E("PYTHONSTARTUP=<H>/s.py", at(1, "setting PYTHONSTARTUP is not allowed", PROGRAM))]),
    Case("env-python-home", adv(f"PYTHONHOME=$HOME/py {GOOD}"), [E("PYTHONHOME=<H>/py", at(1, "setting PYTHONHOME is not allowed", PROGRAM))]),
    Case("env-python-warnings", adv(f"export PYTHONWARNINGS=ignore::mymod.W\n{GOOD}"),
         [E("PYTHONWARNINGS=ignore::mymod.W", at(1, "setting PYTHONWARNINGS is not allowed", PROGRAM))]),
    Case("env-locale", adv(f"export LC_ALL=zh_TW.BIG5\n{GOOD}"), [E("LC_ALL=zh_TW.BIG5", at(1, "setting LC_ALL is not allowed", LOCALE))]),
    Case("env-lang", adv(f"LANG=C {GOOD}"), [E("LANG=C", at(1, "setting LANG is not allowed", LOCALE))]),
    Case("env-shellopts", adv(f"SHELLOPTS=xtrace\n{GOOD}"), [E("SHELLOPTS=xtrace", at(1, "setting SHELLOPTS is not allowed", PROGRAM))]),
    Case("env-gconv", adv(f"export GCONV_PATH=$HOME/g\n{GOOD}"), [E("GCONV_PATH=<H>/g", at(1, "setting GCONV_PATH is not allowed", PROGRAM))]),
    Case("env-value-other-home", adv(f"export HF_HOME=<R>/users/bob/hf\n{GOOD}"),
         [E("<R>/users/bob/hf", other("bob")), E("<R>/users/bob/hf", "HF_HOME must be under <H>/ or <R>/hf/")]),
    # Issue 21 class 6: names Ray, Hydra and their plugins read are not on the allowlist.
    Case("env-ray-job-config", adv(f"export RAY_JOB_CONFIG_JSON_ENV_VAR='{{}}'\n{GOOD}"),
         [E("RAY_JOB_CONFIG_JSON_ENV_VAR='{}'", at(1, "setting RAY_JOB_CONFIG_JSON_ENV_VAR is not allowed", RAY_READS))]),
    Case("env-ray-address-local", adv(f"RAY_ADDRESS=local {GOOD}"),
         [E("RAY_ADDRESS=local", at(1, "setting RAY_ADDRESS is not allowed", RAY_READS))]),
    Case("env-ray-runtime-env-hook", adv(f"export RAY_RUNTIME_ENV_HOOK=x.y\n{GOOD}"),
         [E("RAY_RUNTIME_ENV_HOOK=x.y", at(1, "setting RAY_RUNTIME_ENV_HOOK is not allowed", RAY_READS))]),
    Case("env-ray-namespace", adv(f"export RAY_NAMESPACE=bob\n{GOOD}"),
         [E("RAY_NAMESPACE=bob", at(1, "setting RAY_NAMESPACE is not allowed", RAY_READS))]),
    Case("env-ray-override-runtime-env", adv(f"export RAY_OVERRIDE_JOB_RUNTIME_ENV=1\n{GOOD}"),
         [E("RAY_OVERRIDE_JOB_RUNTIME_ENV=1", at(1, "setting RAY_OVERRIDE_JOB_RUNTIME_ENV is not allowed", RAY_READS))]),
    Case("env-hydra-main-module", adv(f"export HYDRA_MAIN_MODULE=mine\n{GOOD}"),
         [E("HYDRA_MAIN_MODULE=mine", at(1, "setting HYDRA_MAIN_MODULE is not allowed", HYDRA_READS))]),
    Case("env-fb-plugin", adv(f"FB_PAR_RUNTIME_FILES=x {GOOD}"),
         [E("FB_PAR_RUNTIME_FILES=x", at(1, "setting FB_PAR_RUNTIME_FILES is not allowed", "Hydra's plugins read it past the checks; remove it"))]),
    Case("env-not-on-allowlist", adv(f"export DATA=$HOME/datasets\n{GOOD}"),
         [E("DATA=<H>/datasets", at(1, "setting DATA is not allowed", NOT_ALLOWED))]),
    Case("env-value-climbs", adv(f"export WANDB_NOTES=$HOME/../bob\n{GOOD}"), [E("<H>/../bob", CLIMB_BOB)]),
    Case("env-pythonpath-other-home", adv(f"export PYTHONPATH=$HOME/code:<R>/users/bob/code\n{GOOD}"),
         [E("<R>/users/bob/code", "a PYTHONPATH entry must be under <H>/ or <R>/datasets/ or <R>/hf/ or <R>/common/"),
          E("<R>/users/bob/code", other("bob"))]),
    Case("env-pythonpath-outside", adv(f"export PYTHONPATH=/tmp/x:$PYTHONPATH\n{GOOD}"),
         [E("/tmp/x", "a PYTHONPATH entry must be under <H>/ or <R>/datasets/ or <R>/hf/ or <R>/common/")]),
    Case("env-pythonpath-empty-entry", adv(f"export PYTHONPATH=$HOME/code:\n{GOOD}"),
         [E("PYTHONPATH=<H>/code:", "an empty PYTHONPATH entry is the current folder: write absolute paths under $HOME")]),
    Case("env-pythonpath-relative", adv(f"PYTHONPATH=code {GOOD}"),
         [E("code", "a PYTHONPATH entry must be an absolute path under <H>/ or <R>/datasets/ or <R>/hf/ or <R>/common/")]),
    Case("env-inherited-in-the-middle", adv(f"export PYTHONPATH=$HOME/a:$PYTHONPATH:$HOME/b\n{GOOD}"),
         [E("PYTHONPATH=$HOME/a:$PYTHONPATH:$HOME/b".replace("$HOME", "<H>"), at(1, "PYTHONPATH may add to its inherited value only at the start or the end, next to ':'",
            "write PYTHONPATH=$HOME/...:$PYTHONPATH or PYTHONPATH=$PYTHONPATH:$HOME/..."))]),
    Case("env-inherited-used-later", adv(f"export PYTHONPATH=$PYTHONPATH:$HOME/code\n{GOOD} +x=$PYTHONPATH"),
         [E("$PYTHONPATH", at(2, "$PYTHONPATH holds the inherited value of PYTHONPATH, which the check cannot see", "write the value out"))]),
    Case("env-export-unassigned", adv(f"export CUDA_HOME\n{GOOD}"), [E("export CUDA_HOME", at(1, "export CUDA_HOME names no variable assigned earlier", "write export CUDA_HOME=value"))]),
    Case("env-export-option", adv(f"export -n X\n{GOOD}"), [E("-n", at(1, "export -n is not allowed", "write export NAME=value or export NAME"))]),
    Case("env-export-alone", adv(f"export\n{GOOD}"), [E("export", at(1, "'export' without a name is not allowed", "write export NAME=value"))]),
    Case("env-prefix-shadows-variable", adv(f"X=1\nX=2 {GOOD}"),
         [E("X=2", at(2, "X is already assigned on line 1", "give the variable one value: assign it once, before the entrypoint, or only as the prefix"))]),
    Case("env-date-exported", adv(f"export EXP=x_$(date +%s)\n{GOOD}"), [E("EXP=x_$(date +%s)", at(1, "$(date ...) is not allowed in the environment (EXP)", DATE_ENV))]),
    Case("env-date-exported-later", adv(f"EXP=x_$(date +%s)\nexport EXP\n{GOOD}"), [E("export EXP", at(2, "$(date ...) is not allowed in the environment (EXP)", DATE_ENV))]),
    Case("env-date-in-prefix", adv(f"EXP=$(date +%s) {GOOD}"), [E("EXP=$(date +%s)", at(1, "$(date ...) is not allowed in the environment (EXP)", DATE_ENV))]),
    Case("env-date-in-tee", adv(f"{GOOD} 2>&1 | tee log_$(date +%s).txt"), [E("log_$(date +%s).txt", "the tee file must be written out ($(date ...) is allowed only in non-path values)")]),
    Case("env-date-in-key", adv(f"{GOOD} +x_$(date +%s)=1"), [E("+x_$(date +%s)=1", at(1, "$(date ...) in an override key is not allowed", "write the key out"))]),
    Case("env-date-in-module", adv(f"python3 -m verl.trainer.$(date +%s) {DATA}"),
         [E("verl.trainer.$(date +%s)", at(1, "module verl.trainer.$(date +%s) is not allowed for python3", "run an allowed module (verl.trainer.*)"))]),
    # --- tee and redirections ---------------------------------------------------------------------
    Case("tee-other-home", adv(f"{GOOD} | tee -a <R>/users/bob/log"), [E("<R>/users/bob/log", other("bob")), E("<R>/users/bob/log", "the tee file must be under <H>/")]),
    Case("tee-climbs", adv(f"{GOOD} 2>&1 | tee ../../../bob/log"),
         [E("../../../bob/log", JOBDIR), E("../../../bob/log", "the tee file must not climb out of the job directory; use an absolute path under $HOME")]),
    Case("tee-option-from-variable", adv(f"L=--output-error=exit\n{GOOD} 2>&1 | tee $L"), [E("--output-error=exit", "the tee file must not start with '-' (tee would read it as an option)")]),
    Case("tee-two-files", adv(f"{GOOD} 2>&1 | tee a.log b.log"), [E("tee a.log b.log", at(1, "tee takes one file (and -a) here", "write 2>&1 | tee [-a] FILE"))]),
    Case("tee-other-option", adv(f"{GOOD} 2>&1 | tee -i a.log"), [E("tee -i a.log", at(1, "tee takes one file (and -a) here", "write 2>&1 | tee [-a] FILE"))]),
    Case("pipe-into-grep", adv(f"{GOOD} 2>&1 | grep step"), [E("grep", at(1, "a pipe into 'grep' is not allowed", "a pipe is allowed only into tee: 2>&1 | tee FILE"))]),
    Case("pipe-twice", adv(f"{GOOD} | tee a.log | tee b.log"), [E("|", at(1, "a pipe is allowed only once, into tee", "end the entrypoint with 2>&1 | tee FILE"))]),
    Case("pipe-ampersand", adv(f"{GOOD} |& tee a.log"), [E("|&", at(1, "'|&' is not allowed", "write 2>&1 | tee FILE"))]),
    Case("pipe-from-assignment", adv(f"X=1 | tee a.log\n{GOOD}"), [E("|", at(1, "a pipe is allowed only after the entrypoint", "end the entrypoint with 2>&1 | tee FILE"))]),
    Case("redirect-stdout", adv(f"{GOOD} > out.log"), [E(">", at(1, "redirection is not allowed", REDIRECT))]),
    Case("redirect-append", adv(f"{GOOD} >> out.log"), [E(">>", at(1, "redirection is not allowed", REDIRECT))]),
    Case("redirect-both", adv(f"{GOOD} &> out.log"), [E("&>", at(1, "redirection is not allowed", REDIRECT))]),
    Case("redirect-stderr", adv(f"{GOOD} 2> <R>/users/bob/err"), [E("2>", at(1, "redirection is not allowed", REDIRECT))]),
    Case("redirect-stdin", adv(f"{GOOD} < <R>/users/bob/in"), [E("<", at(1, "redirection is not allowed", REDIRECT))]),
    Case("redirect-stderr-without-pipe", adv(f"{GOOD} 2>&1"), [E("2>&1", at(1, "redirection is not allowed", REDIRECT))]),
    Case("redirect-here-string", adv(f"{GOOD} <<< x"), [E("<<<", at(1, "redirection is not allowed", REDIRECT))]),
    # --- other shell constructs ---------------------------------------------------------------------
    Case("shell-and", adv(f"{GOOD} && echo done"), [E("&&", at(1, "'&&' is not allowed", "write one command per line; with set -e a failing command stops the script"))]),
    Case("shell-or", adv(f"{GOOD} || true"), [E("||", at(1, "'||' is not allowed", "write one command per line"))]),
    Case("shell-background", adv(f"{GOOD} &"), [E("&", at(1, "a background job ('&') is not allowed", "run the entrypoint in the foreground"))]),
    Case("shell-subshell", adv(f"({GOOD})"), [E("(", at(1, "a subshell or function ('(') is not allowed", "write the commands out, one per line"))]),
    Case("shell-group", adv(f"{{ {PPO}; }}"), [E("{", at(1, "'{' is not allowed", "write the commands without grouping")),
                                                E("}", at(1, "'}' is not allowed", LANGUAGE)), E(f"{{ {PPO}; }}", NO_ENTRY)]),
    Case("shell-negation", adv(f"! {PPO}"), [E("!", at(1, "'!' is not allowed", "remove it")), E(f"! {PPO}", NO_ENTRY)]),
    Case("shell-if", adv(f"if true; then\n{GOOD}\nfi"),
         [E("if", at(1, "'if' is not allowed", "write the command for the case you run; put logic in a Python file under $HOME/code")),
          E("then", at(1, "'then' is not allowed", LANGUAGE)), E("fi", at(3, NOTHING_AFTER, "move it before the entrypoint, or remove it"))]),
    Case("shell-test", adv(f"[ -d x ]\n{GOOD}"), [E("[", at(1, "'[' is not allowed", "write the command for the case you run"))]),
    Case("shell-trap", adv(f"trap 'cat x' EXIT\n{GOOD}"), [E("trap", at(1, "'trap' is not allowed", "remove it"))]),
    Case("shell-ulimit", adv(f"ulimit -n 65536\n{GOOD}"), [E("ulimit", at(1, "'ulimit' is not allowed", "remove it; limits are the worker's"))]),
    Case("shell-mkdir", adv(f"mkdir -p $HOME/logs\n{GOOD}"), [E("mkdir", at(1, "'mkdir' is not allowed", "verl creates its output folders itself"))]),
    Case("shell-shift", adv(f"shift 2\n{GOOD}"), [E("shift", at(1, "'shift' is not allowed", "write the values out; positional parameters are empty here"))]),
    Case("shell-unset", adv(f"unset PYTHONPATH\n{GOOD}"), [E("unset", at(1, "'unset' is not allowed", "remove it; a variable is either assigned once or not at all"))]),
    Case("shell-cat", adv(f"cat <R>/users/bob/x\n{GOOD}"), [E("cat", at(1, "'cat' is not allowed", LANGUAGE))]),
    Case("shell-set-alone", adv(f"set\n{GOOD}"), [E("set", at(1, "'set' without options is not allowed", "write set -euxo pipefail (any of them)"))]),
    Case("shell-set-allexport", adv(f"set -a\n{GOOD}"), [E("set -a", at(1, "set -a is not allowed", "set only -e, -u, -x and -o pipefail"))]),
    Case("shell-set-posix", adv(f"set -o posix\n{GOOD}"), [E("set -o posix", at(1, "set -o posix is not allowed", "set only -o pipefail (and errexit, nounset, xtrace)"))]),
    Case("shell-set-positional", adv(f"set -- a=1\n{GOOD}"),
         [E("set -- a=1", at(1, "set -- is not allowed", "set only -e, -u, -x and -o pipefail (positional parameters stay empty)"))]),
    Case("shell-set-with-pipe", adv(f"set -x | tee a\n{GOOD}"), [E("set", at(1, "'set' with a prefix or a pipe is not allowed", "write set on its own line"))]),
    Case("shell-unclosed-single-quote", adv(f"{GOOD} 'trainer.project_name=x"), [E("'trainer.project_name=x", at(1, "an unclosed ' quote", "close the quote"))]),
    Case("shell-unclosed-double-quote", adv(f'{GOOD} "trainer.project_name=x'), [E('"trainer.project_name=x', at(1, 'an unclosed " quote', "close the quote"))]),
    Case("shell-locale-quoting", adv(f'{GOOD} +x=$"a"'), [E('$"', at(1, 'locale quoting ($"...") is not allowed', "write the text in double quotes"))]),
    Case("shell-empty", adv("   \n  "), [E("   \n  ", "must not be empty")]),
    Case("shell-only-comments", adv("# nothing here\n"), [E("# nothing here", NO_ENTRY)]),
    # --- kind and fields ------------------------------------------------------------------------
    Case("basic-field-on-advanced", adv(GOOD, modelId="Qwen/Qwen2.5-0.5B-Instruct"),
         [E("Qwen/Qwen2.5-0.5B-Instruct", "is a basic-spec field; an advanced spec gives the whole command in spec.command", "spec.modelId")]),
    Case("command-on-basic", basic(command=PPO),
         [E(PPO, "is only allowed when spec.kind is advanced (a basic spec builds the command from its template fields)", CMD)]),
    Case("advanced-without-command", without(adv(GOOD), "command"), [E(None, "is required when spec.kind is advanced", CMD)]),
    Case("basic-without-trainfile", basic(trainFile=...), [E(None, "is required when spec.kind is basic", "spec.trainFile")]),
    Case("unknown-field", adv(GOOD, foo=1), [E(1, "is not a field of an ArgusTask spec (see: kubectl explain argustask.spec)", "spec.foo")]),
    Case("nnodes-string", adv(GOOD, nnodes="two"), [E("two", "input should be a valid integer", "spec.nnodes")]),
    Case("nnodes-zero", adv(GOOD, nnodes=0), [E(0, "input should be greater than or equal to 1", "spec.nnodes")]),
    Case("command-not-string", adv(42), [E(42, "input should be a valid string", CMD)]),
    Case("spec-not-mapping", manifest(["kind", "advanced"]), [E(["kind", "advanced"], "must be a mapping of fields", "spec")]),
    Case("user-dotdot", adv(GOOD), [E("..", "must match ^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$", "user")], user=".."),
    Case("bad-api-version", adv(GOOD) | {"apiVersion": "argus.io/v1"}, [E("argus.io/v1", "must be argus.io/v1alpha1", "apiVersion")]),
    # --- basic specs ------------------------------------------------------------------------------
    Case("basic-bad-model-id", basic(modelId="rm -rf /"),
         [E("rm -rf /", "must be a Hugging Face model id like Qwen/Qwen2.5-0.5B-Instruct, or an absolute model path", "spec.modelId")]),
    Case("basic-model-path-outside", basic(modelId="/tmp/models/qwen"), [E("/tmp/models/qwen", MODEL_RULE, "spec.modelId")]),
    Case("basic-model-of-other-user", basic(modelId="<R>/users/bob/models/qwen"),
         [E("<R>/users/bob/models/qwen", MODEL_RULE, "spec.modelId"), E("<R>/users/bob/models/qwen", other("bob"), "spec.modelId")]),
    Case("basic-trainfile-via-dotdot", basic(trainFile="$HOME/../bob/datasets/x.parquet"),
         [E("<H>/../bob/datasets/x.parquet", DATA_RULE, "spec.trainFile"), E("<H>/../bob/datasets/x.parquet", CLIMB_BOB, "spec.trainFile")]),
    Case("basic-tilde-trainfile", basic(trainFile="~/datasets/train.parquet"),
         [E("~/datasets/train.parquet", DATA_RULE.replace("must be under", "must be an absolute path under"), "spec.trainFile"),
          E("~/datasets/train.parquet", TILDE + ": use $HOME", "spec.trainFile")]),
    Case("basic-codepath-outside-common", basic(codePath="$HOME/code/verl"), [E("<H>/code/verl", "the code path must be under <R>/common/", "spec.codePath")]),
    Case("basic-reward-not-py", basic(workload="grpo", customRewardPath="$HOME/code/reward.sh"),
         [E("<H>/code/reward.sh", "the reward function file must be a .py file", "spec.customRewardPath")]),
    Case("basic-sft-two-nodes", basic(workload="sft", nnodes=2),
         [E(2, f"a basic sft task runs torchrun --standalone; {TORCHRUN_ONE_NODE}", "spec.nnodes")]),
]


def test_table_is_large_enough() -> None:
    assert len(HOSTILE) >= 150
    assert len({c.id for c in HOSTILE}) == len(HOSTILE), "case ids must be unique"
    for group in ("c1-", "c2-", "c3-", "c4-", "c5-", "c6-", "c7-"):
        assert sum(c.id.startswith(group) for c in HOSTILE) >= 7, group


@pytest.mark.parametrize("case", HOSTILE, ids=[c.id for c in HOSTILE])
def test_hostile_input_is_refused_with_its_lines(case: Case, root: str) -> None:
    doc = fill(case.doc, root)
    verdict = validate_task(doc, case.user, PlatformConfig(root=root))
    lines = verdict.error_lines()
    assert not verdict.valid
    assert verdict.plan is None and verdict.expanded_command is None
    for line in lines:
        assert "\n" not in line, f"error is not one line: {line!r}"
        assert LINE.match(line), f"error does not start with the field, then value and rule: {line!r}"
    assert sorted(lines) == sorted(fill(case.lines, root))


# --- the v3.5 examples: valid, with exactly the documented warnings ---------------------

V35_PPO = """\
# PPO on GSM8K, written as the file browser shows the paths
python3 -m verl.trainer.main_ppo \\
  algorithm.adv_estimator=gae \\
  data.train_files=$HOME/common/datasets/gsm8k/train.parquet \\
  data.val_files=$HOME/datasets/gsm8k/test.parquet \\
  actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct \\
  critic.model.path=$HOME/common/hf/Qwen2.5-0.5B-Instruct \\
  trainer.nnodes=1 trainer.n_gpus_per_node=1 \\
  trainer.total_epochs=1 \\
  trainer.default_local_dir=$HOME/checkpoints/ppo-demo \\
  +ray_kwargs.ray_init.address=auto
"""

V35_REWARD = """\
python3 -m verl.trainer.main_ppo \\
  data.train_files=$HOME/common/datasets/gsm8k/train.parquet \\
  data.val_files=$HOME/datasets/gsm8k/test.parquet \\
  actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct \\
  custom_reward_function.path=$HOME/code/reward.py \\
  custom_reward_function.name=compute_score \\
  +custom_reward_function.reward_kwargs.x=1 \\
  trainer.nnodes=1 trainer.n_gpus_per_node=1 \\
  +ray_kwargs.ray_init.address=auto
"""

V35_MULTILINE = """\
set -euo pipefail
# my data: two shards of my own plus the shared one; quoted and unquoted Hydra lists
DATA=$HOME/datasets/gsm8k
python3 -u -m verl.trainer.main_ppo \\
  data.train_files="[$DATA/a.parquet,$DATA/b.parquet,${HOME}/common/datasets/gsm8k/train.parquet]" \\
  data.val_files='[$HOME/datasets/gsm8k/test.parquet]' \\
  actor_rollout_ref.model.path=$HOME/models/qwen-0.5b \\
  trainer.nnodes=2 \\
  trainer.n_gpus_per_node=4 \\
  trainer.default_local_dir=$HOME/checkpoints/multi \\
  +ray_kwargs.ray_init.address=auto 2>&1 | tee $HOME/logs/train.log  # keep a copy
"""

V35_SFT = """\
torchrun --standalone --nnodes=1 --nproc_per_node=2 -m verl.trainer.fsdp_sft_trainer \\
  data.train_files=$HOME/datasets/sft/train.parquet \\
  data.val_files=$HOME/datasets/sft/test.parquet \\
  model.partial_pretrain=Qwen/Qwen2.5-0.5B-Instruct \\
  trainer.default_local_dir=$HOME/checkpoints/sft \\
  trainer.total_epochs=1
"""

COUNTS_ADDED = ("'trainer.nnodes=1 trainer.n_gpus_per_node=1': are not set: verl would use its defaults (1 node, 8 GPUs per node) "
                "while the queue reserves the spec's GPUs; Argus adds them to the command (see status.command)")

VALID: list[tuple[str, dict[str, Any], list[str]]] = [
    # (id, manifest, the expected warnings, exactly, after "spec.command: ")
    ("v35-advanced-ppo", adv(V35_PPO), []),
    ("v35-custom-reward", adv(V35_REWARD), []),
    ("v35-multi-line-comments-lists", adv(V35_MULTILINE, nnodes=2, nGpusPerNode=4), []),
    ("v35-torchrun-sft", adv(V35_SFT, workload="sft", nGpusPerNode=2), []),
    ("virtual-path-form", adv(V35_PPO.replace("$HOME/common/datasets", "<H>/common/datasets")), []),
    ("legacy-common-datasets", adv(V35_PPO.replace("$HOME/common/datasets", "<R>/common/datasets")), []),
    ("own-variables", adv(f"OUT=$HOME/checkpoints\nEXP=run1\n{GOOD} trainer.default_local_dir=$OUT/$EXP"), []),
    ("relative-output", adv(f"{GOOD} trainer.default_local_dir=checkpoints/run1"), []),
    ("python3-env-prefix", adv(f"PYTHONUNBUFFERED=1 VLLM_USE_V1=1 {GOOD}"), []),
    ("quoted-program-name", adv(f"'python3' -m verl.trainer.main_ppo {DATA} {COUNTS} {RAY}"), []),
    ("model-in-own-home", adv(f"{GOOD} actor_rollout_ref.model.path=$HOME/checkpoints/sft/global_step_100/huggingface"), []),
    ("model-in-v30-shared-hf", adv(f"{GOOD} actor_rollout_ref.model.path=<R>/common/hf/Qwen2.5-7B-Instruct"), []),
    ("interpolation-of-set-key", adv(f"{GOOD} trainer.project_name=p 'trainer.default_local_dir=$HOME/ckpt/${{trainer.project_name}}'"), []),
    ("date-in-experiment-name", adv(f"{GOOD} trainer.experiment_name=run_$(date +%Y%m%d_%H%M)"), []),
    ("date-in-a-variable-used-in-a-name", adv(f"EXP=run_\"$(date '+%Y%m%d')\"\n{GOOD} trainer.experiment_name=$EXP"), []),
    ("positional-default", adv(f"ENGINE=${{1:-vllm}}\n{GOOD} actor_rollout_ref.rollout.name=$ENGINE $@ \"$@\""), []),
    ("pythonpath-prepend", adv(f"export PYTHONPATH=$HOME/code:$PYTHONPATH\n{GOOD}"), []),
    ("hydra-job-logging-disabled", adv(f"{GOOD} hydra/job_logging=disabled hydra.run.dir=$HOME/outputs"), []),
    ("relative-config-path-in-verl", adv(f"{GOOD} --config-path=config --config-name=ppo_megatron_trainer"), []),
    ("basic-ppo", basic(), []),
    ("basic-ppo-own-model", basic(modelId="$HOME/models/qwen", codePath="<R>/common/code/verl-0.5"), []),
    ("basic-grpo", basic(workload="grpo", customRewardPath="$HOME/code/reward.py", rolloutN=8), []),
    ("basic-sft", basic(workload="sft", trainFile="$HOME/datasets/sft/train.parquet", valFile="$HOME/datasets/sft/test.parquet", nGpusPerNode=2), []),
    ("basic-hf-cache-model", basic(modelId="$HOME/common/hf/Qwen2.5-0.5B-Instruct"), []),
    ("basic-sft-checkpoint-model", basic(modelId="$HOME/checkpoints/sft/global_step_100/huggingface"), []),
    # the weak checks: warnings, never errors
    ("warn-no-data-files", adv(f"{PPO} {COUNTS} {RAY}"),
     ["'data.train_files=': is not set: verl falls back to its default data files, which are likely not yours",
      "'data.val_files=': is not set: verl falls back to its default data files, which are likely not yours"]),
    ("warn-no-ray-address", adv(f"{PPO} {DATA} {COUNTS}"),
     ["'+ray_kwargs.ray_init.address=auto': is not set: verl may start its own local Ray instead of joining the cluster"]),
    ("warn-other-ray-address", adv(f"{PPO} {DATA} {COUNTS} +ray_kwargs.ray_init.address=10.0.0.5:6379"),
     ["'+ray_kwargs.ray_init.address=10.0.0.5:6379': joins or starts a Ray other than the cluster's: a private Ray instance on "
      "the worker would take the node's GPUs outside the queue; write +ray_kwargs.ray_init.address=auto"]),
    ("warn-counts-added", adv(NO_COUNTS), [COUNTS_ADDED]),
    ("warn-one-count-added", adv(f"{NO_COUNTS} trainer.nnodes=1"),
     ["'trainer.n_gpus_per_node=1': is not set: verl would use its defaults (1 node, 8 GPUs per node) while the queue reserves "
      "the spec's GPUs; Argus adds it to the command (see status.command)"]),
    ("warn-torchrun-counts-added", adv(f"torchrun --standalone -m verl.trainer.fsdp_sft_trainer {DATA}", workload="sft"),
     ["'--nnodes=1 --nproc_per_node=1': are not set: torchrun would use its defaults (1 node, 1 process) while the queue "
      "reserves the spec's GPUs; Argus adds them to the command (see status.command)"]),
    ("warn-reward-kwargs-without-plus",
     adv(f"{GOOD} custom_reward_function.path=$HOME/code/reward.py custom_reward_function.name=f custom_reward_function.reward_kwargs.x=1"),
     ["'custom_reward_function.reward_kwargs.x=1': verl does not declare custom_reward_function.reward_kwargs, so Hydra refuses "
      "this key: write '+custom_reward_function.reward_kwargs.x=1'"]),
    ("warn-reward-path-without-name", adv(f"{GOOD} custom_reward_function.path=$HOME/code/reward.py"),
     ["'custom_reward_function.name=': is not set: verl will look for a function named compute_score in the reward file"]),
    ("warn-config-in-own-home", adv(f"{GOOD} --config-path=$HOME/configs --config-name=mine"),
     ["'--config-path=<H>/configs --config-name=mine': makes verl read a config file of your own: Argus composes and checks "
      "it as it is now, verl reads it as it is when the task starts; set data, model, reward and output paths on the command line"]),
    ("warn-torchrun-no-val-files", adv(V35_SFT.replace("  data.val_files=$HOME/datasets/sft/test.parquet \\\n", ""), workload="sft", nGpusPerNode=2),
     ["'data.val_files=': is not set: verl falls back to its default data files, which are likely not yours"]),
]


@pytest.mark.parametrize(("doc", "warnings"), [(d, w) for _, d, w in VALID], ids=[i for i, _, _ in VALID])
def test_valid_task_passes_with_documented_warnings(doc: dict[str, Any], warnings: list[str], root: str) -> None:
    config = PlatformConfig(root=root)
    verdict = validate_task(fill(doc, root), USER, config)
    assert verdict.error_lines() == []
    assert verdict.valid and verdict.plan is not None
    assert sorted(verdict.warning_lines()) == sorted(fill([f"spec.command: {w}" for w in warnings], root))
    # the generated command names no macro and only alice's home
    command = verdict.plan.command
    assert "$HOME" not in command and "${HOME}" not in command
    assert f"{root}/users/" not in command.replace(f"{root}/users/{USER}/", "")
    assert "/common/datasets" not in command.replace(f"{root}/common/datasets", "")


def test_a_null_optional_field_is_refused_offline() -> None:
    """Not in HOSTILE (which bench/chaos.py applies to a cluster): the API server drops a
    null field that its schema does not allow, so there the task is valid; argus validate,
    reading the file, refuses it."""
    verdict = validate_task(adv(GOOD, priority=None), USER, PlatformConfig())
    assert verdict.error_lines() == ["spec.priority: None: must not be null: leave the field out, or give it a value"]


def test_all_problems_are_reported_at_once() -> None:
    doc = adv(
        "python3 -m verl.trainer.main_ppo data.train_files=/tmp/a.parquet data.val_files=/private/users/bob/v.parquet "
        "custom_reward_function.path=$HOME/code/r.txt trainer.nnodes=3 trainer.default_local_dir=/private/hf/x",
        nGpusPerNode=0,
    )
    lines = validate_task(doc, USER, PlatformConfig()).error_lines()
    for expected in ("spec.nGpusPerNode:", "(data.train_files)", "(data.val_files)", "another user's home (bob)",
                     "must be a .py file", "trainer.nnodes=3", "(trainer.default_local_dir)"):
        assert any(expected in line for line in lines), (expected, lines)


def test_all_problems_of_a_basic_task_are_reported_at_once() -> None:
    doc = basic(trainFile="/tmp/train.parquet", modelId="/tmp/model", rolloutN=3) | {"apiVersion": "v1", "metadata": {"name": "Bad"}}
    lines = validate_task(doc, USER, PlatformConfig()).error_lines()
    for expected in ("apiVersion:", "metadata.name:", "spec.trainFile:", "spec.modelId:", "spec.rolloutN:"):
        assert any(line.startswith(expected) for line in lines), (expected, lines)


def test_expansion_is_what_the_plan_runs() -> None:
    verdict = validate_task(adv(V35_PPO), USER, PlatformConfig(root="/data/p"))
    assert verdict.plan is not None
    assert "data.train_files=/data/p/datasets/gsm8k/train.parquet" in verdict.plan.command
    assert "data.val_files=/data/p/users/alice/datasets/gsm8k/test.parquet" in verdict.plan.command
    assert "critic.model.path=/data/p/hf/Qwen2.5-0.5B-Instruct" in verdict.plan.command
    assert "trainer.default_local_dir=/data/p/users/alice/checkpoints/ppo-demo" in verdict.plan.command


def test_a_command_of_64_kib_is_accepted() -> None:
    line = "  +trainer.extra.k{i}=$HOME/checkpoints/x{i} \\\n"
    body = GOOD + " \\\n"
    i = 0
    while len((body + line.format(i=i)).encode()) < 64 * 1024 - 40:
        body += line.format(i=i)
        i += 1
    body += "  trainer.total_epochs=1\n"
    assert 64 * 1024 - 100 < len(body.encode()) <= 64 * 1024
    verdict = validate_task(adv(body), USER, PlatformConfig())
    # the limit is on what the user wrote: the generated command is longer, and fine
    assert verdict.valid, verdict.error_lines()
    assert verdict.plan is not None and len(verdict.plan.command.encode()) > 64 * 1024


def test_the_examples_other_user_message_names_the_owner() -> None:
    verdict = validate_task(adv(f"{GOOD} +x=/private/users/bob/x"), "alice", PlatformConfig())
    assert verdict.error_lines() == [
        "spec.command: '/private/users/bob/x': is in another user's home (bob); only /private/users/alice/... is yours"
    ]
