"""The validation contract as a table: hostile and malformed ArgusTasks, each with the
message it must produce, and the v3.5 examples that must pass (issue 2).

Every case runs under two path roots (the default ``/private`` and another one) to show
that nothing hard-codes the root. In the commands, ``<R>`` stands for the root and ``<H>``
for alice's home (``<R>/users/alice``).

Decisions the table documents:

* Comments and heredoc bodies never count as the entrypoint (the shell reader drops them),
  but the path scan reads the raw text, comments and heredocs included: a path to another
  user's home is refused wherever it is written, even in a comment.
* ``${HOME}2`` or ``$HOME-x`` (text glued to the macro) is not expanded but refused, since
  it would name a folder beside the home (``alice2`` is another user).
* A path whose part up to the user segment is built at run time (variable, command
  substitution, glob, brace expansion) is refused; a variable the script itself assigns is
  substituted and the result checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from argus.core.config import PlatformConfig
from argus.core.plan import validate_task

pytestmark = pytest.mark.unit

USER = "alice"
ROOTS = ["/private", "/srv/argus-test/private"]

# An error line: "<field>: <value>: <rule>", field first.
FIELD = r"(?:apiVersion|kind|metadata\.name|user|document|spec(?:\.[A-Za-z]+)?(?: \([^)]*\))?)"
LINE = re.compile(rf"^{FIELD}: .+: .+$")

PPO = "python3 -m verl.trainer.main_ppo"
DATA = "data.train_files=$HOME/datasets/gsm8k/train.parquet data.val_files=$HOME/datasets/gsm8k/test.parquet"
RAY = "+ray_kwargs.ray_init.address=auto"
GOOD = f"{PPO} {DATA} {RAY}"  # a command with no problem: cases add one


@pytest.fixture(params=ROOTS, ids=["root-private", "root-custom"])
def root(request: pytest.FixtureRequest) -> str:
    return request.param


def fill(value: Any, root: str) -> Any:
    """Put the root into a case's text (recursively through manifests)."""
    if isinstance(value, str):
        return value.replace("<H>", f"{root}/users/{USER}").replace("<R>", root)
    if isinstance(value, dict):
        return {k: fill(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, root) for v in value]
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
    return manifest({k: v for k, v in base.items() if v is not None})


def without(doc: dict[str, Any], key: str) -> dict[str, Any]:
    doc = dict(doc)
    doc["spec"] = {k: v for k, v in doc["spec"].items() if k != key}
    return doc


@dataclass
class Case:
    id: str
    doc: Any
    # (field prefix, distinctive substring) pairs; each must match one error line.
    expect: list[tuple[str, str]]
    user: str = USER
    note: str = field(default="", repr=False)


CMD = "spec.command"
OTHER = "is in another user's home (bob)"
PATTERN = "the user segment is built from a variable or pattern"
NO_ENTRY = "does not run an allowed entrypoint"
DATA_RULE = "a data file must be under <H>/datasets/ or <R>/datasets/ or <R>/common/datasets/"
REWARD_RULE = "the reward function file must be under <H>/code/"
OUTPUT_RULE = "an output folder must be under <H>/"
BIG = GOOD + " \\\n" + "  +trainer.pad=" + "x" * (64 * 1024) + "\n"

HOSTILE: list[Case] = [
    # --- other users' homes, however the path is spelled -----------------------------
    Case("other-user-absolute", adv(f"{GOOD}\ncat <R>/users/bob/datasets/secret.parquet"), [(CMD, OTHER)]),
    Case("home-dotdot-bob", adv(f"{GOOD}\ncat $HOME/../bob/datasets/x.parquet"), [(CMD, "'..' climbs out of <H> into another user's home (bob)")]),
    Case("braced-home-dotdot-bob", adv(f"{GOOD}\ncat ${{HOME}}/../bob/x"), [(CMD, "climbs out of <H> into another user's home (bob)")]),
    Case("prefix-alice2", adv(f"{GOOD}\ncat <R>/users/alice2/x"), [(CMD, "is in another user's home (alice2)")]),
    Case("prefix-alice-dash", adv(f"{GOOD}\ncat <R>/users/alice-old/x"), [(CMD, "is in another user's home (alice-old)")]),
    Case("home-glued-digit", adv(f"{GOOD}\ncat ${{HOME}}2/x"), [(CMD, "$HOME must be followed by '/' or end the path")]),
    Case("home-glued-dash", adv(f"{GOOD}\ncat $HOME-x/y"), [(CMD, "$HOME must be followed by '/'")]),
    Case("home-glued-through-quotes", adv(f'{GOOD}\ncat "$HOME"2/x'), [(CMD, "is in another user's home (alice2)")]),
    Case("double-slash", adv(f"{GOOD}\ncat <R>//users/bob/x"), [(CMD, OTHER)]),
    Case("dot-segment", adv(f"{GOOD}\ncat <R>/./users/bob/x"), [(CMD, OTHER)]),
    Case("quoted-split-single", adv(f"{GOOD}\ncat <R>/users/'bob'/x"), [(CMD, OTHER)]),
    Case("quoted-split-double", adv(f'{GOOD}\ncat <R>/users/"b"ob/x'), [(CMD, OTHER)]),
    Case("backslash-split", adv(f"{GOOD}\ncat <R>/users/b\\ob/x"), [(CMD, OTHER)]),
    Case("in-heredoc", adv(f"{GOOD}\ncat <<EOF\n<R>/users/bob/notes.txt\nEOF\n"), [(CMD, OTHER)]),
    Case("in-comment", adv(f"{GOOD}\n# copied from <R>/users/bob/run.sh\n"), [(CMD, OTHER)],
         note="comments are dropped when looking for the entrypoint, but the path scan reads them"),
    Case("in-echo", adv(f"{GOOD}\necho <R>/users/bob/x"), [(CMD, OTHER)]),
    Case("as-override-value", adv(f"{GOOD} +trainer.extra=<R>/users/bob/x"), [(CMD, OTHER)]),
    Case("var-segment", adv(f"{GOOD}\ncat <R>/users/$U/x"), [(CMD, PATTERN)]),
    Case("braced-var-segment", adv(f"{GOOD}\ncat <R>/users/${{U}}/x"), [(CMD, PATTERN)]),
    Case("command-substitution-segment", adv(f"{GOOD}\ncat <R>/users/$(whoami)/x"), [(CMD, PATTERN)]),
    Case("backtick-segment", adv(f"{GOOD}\ncat <R>/users/`whoami`/x"), [(CMD, PATTERN)]),
    Case("glob-segment", adv(f"{GOOD}\ncat <R>/users/*/x"), [(CMD, PATTERN)]),
    Case("glob-partial-segment", adv(f"{GOOD}\ncat <R>/users/b*/x"), [(CMD, PATTERN)]),
    Case("glob-own-prefix", adv(f"{GOOD}\ncat <R>/users/alice*/x"), [(CMD, PATTERN)]),
    Case("var-glued-to-own-name", adv(f"{GOOD}\ncat <R>/users/alice$X/x"), [(CMD, PATTERN)]),
    Case("char-class-segment", adv(f"{GOOD}\ncat <R>/users/[b]ob/x"), [(CMD, PATTERN)]),
    Case("brace-segment", adv(f"{GOOD}\ncat <R>/users/{{bob,carol}}/x"), [(CMD, PATTERN)]),
    Case("glob-in-root", adv(f"{GOOD}\ncat <R-3>*/users/bob/x"), [(CMD, PATTERN)]),
    Case("brace-too-many", adv(f"{GOOD}\ncat <R-3>{{" + ",".join(f"a{i}" for i in range(70)) + ",ate}/users/bob/x"),
         [(CMD, "makes more than 64 words by brace expansion")]),
    Case("brace-in-root", adv(f"{GOOD}\ncat <R-3>{{ate,}}/users/bob/x"), [(CMD, OTHER)]),
    Case("variable-built-root", adv(f"{GOOD}\nP=<R-3>\ncat ${{P}}ate/users/bob/x"), [(CMD, OTHER)]),
    Case("variable-blow-up", adv("A=$A$A$A$A$A$A$A$A$A$A$A$A$A$A$A$A$A$A$A$A$A$A$A$A$A$A$A$A$A$A$A$A\n" + GOOD + "\necho $A"),
         [(CMD, "is built from $A, which grows past what the check reads")], note="must not take exponential time or memory"),
    Case("users-root-itself", adv(f"{GOOD}\nls <R>/users"), [(CMD, "names <R>/users itself")]),
    Case("root-itself", adv(f"{GOOD}\nls <R>/"), [(CMD, "names <R> itself")]),
    Case("outside-task-folders", adv(f"{GOOD}\ncat <R>/secrets/token"), [(CMD, "is outside the folders a task may use")]),
    # --- '..' out of the allowed roots and the job directory --------------------------
    Case("dotdot-out-of-shared-data", adv(f"{GOOD}\ncat $HOME/common/datasets/../../etc/passwd"), [(CMD, "'..' climbs out of <R>/datasets")]),
    Case("dotdot-out-of-home", adv(f"{GOOD}\ncat $HOME/../../x"), [(CMD, "'..' climbs out of <H>")]),
    Case("home-parent", adv(f"{GOOD}\ncd $HOME/.."), [(CMD, "'..' climbs out of <H>")]),
    Case("relative-dotdot", adv(f"{GOOD}\ncat ../../bob/x"), [(CMD, "'..' climbs out of the job directory")]),
    Case("relative-dotdot-inside", adv(f"{GOOD}\ncat logs/../../../../bob/x"), [(CMD, "'..' climbs out of the job directory")]),
    Case("cd-dotdot", adv(f"cd .. && {GOOD}"), [(CMD, "'..' climbs out of the job directory")]),
    # --- '~' --------------------------------------------------------------------------
    Case("tilde-slash", adv(f"{GOOD}\nls ~/x"), [(CMD, "'~' expands to the worker's home, not yours: use $HOME")]),
    Case("tilde-after-equals", adv(f"{GOOD} trainer.default_local_dir=~/ckpt"), [(CMD, "use $HOME")]),
    Case("tilde-user", adv(f"{GOOD}\nls ~bob/x"), [(CMD, "'~' expands to the worker's home")]),
    Case("tilde-basic-trainfile", basic(trainFile="~/datasets/train.parquet"), [("spec.trainFile", "use $HOME")]),
    # --- bytes ------------------------------------------------------------------------
    Case("nul-byte", adv(GOOD + "\x00"), [(CMD, "control characters other than newline and tab are not allowed")]),
    Case("escape-char", adv(GOOD + " \x1b[31m"), [(CMD, "control characters")]),
    Case("bell-in-basic-field", basic(trainFile="$HOME/datasets/a\x07.parquet"), [("spec.trainFile", "control characters")]),
    Case("over-64KiB", adv(BIG), [(CMD, "is larger than the 64 KiB limit")]),
    Case("over-64KiB-in-bytes", adv(GOOD + " +x=" + "é" * 33000), [(CMD, "bytes': is larger than the 64 KiB limit")]),
    # --- the entrypoint ---------------------------------------------------------------
    Case("no-entrypoint", adv("echo hello"), [(CMD, NO_ENTRY)]),
    Case("entrypoint-in-echo", adv(f"echo {PPO} {DATA}"), [(CMD, NO_ENTRY)]),
    Case("entrypoint-in-comment", adv(f"# {PPO} {DATA}\nrm -rf $HOME/tmp"), [(CMD, NO_ENTRY)]),
    Case("entrypoint-in-heredoc", adv(f"cat > $HOME/run.sh <<'EOF'\n{GOOD}\nEOF\n"), [(CMD, NO_ENTRY)]),
    Case("entrypoint-in-quoted-string", adv(f"'{GOOD}'"), [(CMD, NO_ENTRY)]),
    Case("entrypoint-in-bash-c", adv(f"bash -c '{GOOD}'"), [(CMD, NO_ENTRY)]),
    Case("entrypoint-as-script-argument", adv(f"python3 script.py -m verl.trainer.main_ppo {DATA}"), [(CMD, NO_ENTRY)]),
    Case("entrypoint-after-python-c", adv(f"python3 -c 'import os' -m verl.trainer.main_ppo {DATA}"), [(CMD, NO_ENTRY)]),
    Case("module-not-allowed", adv("python3 -m os"), [(CMD, NO_ENTRY)]),
    Case("module-prefix-confusion", adv(f"python3 -m verl.trainerx.main_ppo {DATA}"), [(CMD, NO_ENTRY)]),
    Case("program-not-allowed", adv(f"python -m verl.trainer.main_ppo {DATA}"), [(CMD, NO_ENTRY)]),
    Case("empty-command", adv("   \n  "), [(CMD, "must not be empty")]),
    Case("unclosed-single-quote", adv(f"{GOOD} 'trainer.project_name=x"), [(CMD, "is not valid shell: unclosed ' quote")]),
    Case("unclosed-double-quote", adv(f'{GOOD} "trainer.project_name=x'), [(CMD, 'is not valid shell: unclosed " quote')]),
    # --- data files -------------------------------------------------------------------
    Case("data-outside", adv(f"{PPO} data.train_files=/tmp/train.parquet data.val_files=$HOME/datasets/v.parquet {RAY}"),
         [("spec.command (data.train_files)", DATA_RULE)]),
    Case("data-quoted", adv(f"{PPO} data.train_files=$HOME/datasets/t.parquet 'data.val_files=/etc/v.parquet' {RAY}"),
         [("spec.command (data.val_files)", DATA_RULE)]),
    Case("data-hydra-list", adv(f"{PPO} data.train_files=[$HOME/datasets/a.parquet,/tmp/b.parquet] data.val_files=$HOME/datasets/v.parquet {RAY}"),
         [("spec.command (data.train_files)", "'/tmp/b.parquet': a data file must be under")]),
    Case("data-hydra-list-quoted", adv(f"{PPO} data.train_files='[$HOME/datasets/a.parquet, /tmp/b.parquet]' data.val_files=$HOME/datasets/v.parquet {RAY}"),
         [("spec.command (data.train_files)", "'/tmp/b.parquet': a data file must be under")]),
    Case("data-via-variable", adv(f"D=/tmp/d\n{PPO} data.train_files=$D/a.parquet data.val_files=$HOME/datasets/v.parquet {RAY}"),
         [("spec.command (data.train_files)", "'/tmp/d/a.parquet': a data file must be under")]),
    Case("data-via-exported-variable", adv(f"export D=<R>/common/code\n{PPO} data.train_files=${{D}}/a.parquet data.val_files=$HOME/datasets/v.parquet {RAY}"),
         [("spec.command (data.train_files)", DATA_RULE)]),
    Case("data-via-unknown-variable", adv(f"{PPO} data.train_files=$DATA/a.parquet data.val_files=$HOME/datasets/v.parquet {RAY}"),
         [(CMD, "is built from $DATA, which the check cannot resolve")]),
    Case("data-via-hydra-interpolation", adv(f"{PPO} 'data.train_files=${{oc.env:HOME}}/a.parquet' data.val_files=$HOME/datasets/v.parquet {RAY}"),
         [(CMD, "is built from a shell or Hydra expansion, which the check cannot resolve")]),
    Case("data-in-code-dir", adv(f"{PPO} data.train_files=$HOME/code/a.parquet data.val_files=$HOME/datasets/v.parquet {RAY}"),
         [("spec.command (data.train_files)", DATA_RULE)]),
    Case("data-of-other-user", adv(f"{PPO} data.train_files=<R>/users/bob/datasets/a.parquet data.val_files=$HOME/datasets/v.parquet {RAY}"),
         [(CMD, OTHER), ("spec.command (data.train_files)", DATA_RULE)]),
    Case("data-relative", adv(f"{PPO} data.train_files=data/a.parquet data.val_files=$HOME/datasets/v.parquet {RAY}"),
         [("spec.command (data.train_files)", "a data file must be an absolute path under")]),
    Case("data-root-folder-itself", adv(f"{PPO} data.train_files=$HOME/datasets data.val_files=$HOME/datasets/v.parquet {RAY}"),
         [("spec.command (data.train_files)", DATA_RULE)]),
    # --- the custom reward ------------------------------------------------------------
    Case("reward-outside-code", adv(f"{GOOD} custom_reward_function.path=/tmp/reward.py custom_reward_function.name=f"),
         [("spec.command (custom_reward_function.path)", REWARD_RULE)]),
    Case("reward-plus-outside-code", adv(f"{GOOD} +custom_reward_function.path=$HOME/datasets/reward.py"),
         [("spec.command (custom_reward_function.path)", REWARD_RULE)]),
    Case("reward-in-shared-code", adv(f"{GOOD} custom_reward_function.path=<R>/common/code/reward.py"),
         [("spec.command (custom_reward_function.path)", REWARD_RULE)]),
    Case("reward-not-py", adv(f"{GOOD} custom_reward_function.path=$HOME/code/reward.txt"),
         [("spec.command (custom_reward_function.path)", "must be a .py file")]),
    Case("reward-plus-not-py", adv(f"{GOOD} +custom_reward_function.path=$HOME/code/reward"),
         [("spec.command (custom_reward_function.path)", "must be a .py file")]),
    # --- outputs ----------------------------------------------------------------------
    Case("output-in-shared-datasets", adv(f"{GOOD} trainer.default_local_dir=$HOME/common/datasets/ckpt"),
         [("spec.command (trainer.default_local_dir)", OUTPUT_RULE)]),
    Case("output-in-shared-hf", adv(f"{GOOD} trainer.default_local_dir=$HOME/common/hf/ckpt"),
         [("spec.command (trainer.default_local_dir)", OUTPUT_RULE)]),
    Case("output-in-shared-common", adv(f"{GOOD} trainer.rollout_data_dir=<R>/common/rollouts"),
         [("spec.command (trainer.rollout_data_dir)", OUTPUT_RULE)]),
    Case("output-of-other-user", adv(f"{GOOD} trainer.default_local_dir=<R>/users/bob/ckpt"),
         [(CMD, OTHER), ("spec.command (trainer.default_local_dir)", OUTPUT_RULE)]),
    Case("output-outside-root", adv(f"{GOOD} trainer.validation_data_dir=/tmp/val"),
         [("spec.command (trainer.validation_data_dir)", OUTPUT_RULE)]),
    # --- models -----------------------------------------------------------------------
    Case("model-path-outside", adv(f"{GOOD} actor_rollout_ref.model.path=/tmp/model"),
         [("spec.command (actor_rollout_ref.model.path)", "a model path must be under")]),
    Case("model-id-malformed", adv(f"{GOOD} critic.model.path=Qwen/Qwen2.5/extra"),
         [("spec.command (critic.model.path)", "must be a Hugging Face model id")]),
    # --- the GPUs the queue counts ------------------------------------------------------
    Case("trainer-nnodes-mismatch", adv(f"{GOOD} trainer.nnodes=2"), [(CMD, "'trainer.nnodes=2': must equal spec.nnodes (1)")]),
    Case("trainer-gpus-mismatch", adv(f"{GOOD} trainer.n_gpus_per_node=8"), [(CMD, "must equal spec.nGpusPerNode (1)")]),
    Case("torchrun-nproc-mismatch", adv(f"torchrun --standalone --nnodes=1 --nproc_per_node=4 -m verl.trainer.fsdp_sft_trainer {DATA}"),
         [(CMD, "'--nproc_per_node=4': must equal spec.nGpusPerNode (1)")]),
    Case("torchrun-nnodes-mismatch", adv(f"torchrun --nnodes 2 --nproc_per_node 1 -m verl.trainer.fsdp_sft_trainer {DATA}"),
         [(CMD, "'--nnodes=2': must equal spec.nnodes (1)")]),
    # --- kind and fields --------------------------------------------------------------
    Case("basic-field-on-advanced", adv(GOOD, modelId="Qwen/Qwen2.5-0.5B-Instruct"), [("spec.modelId", "is a basic-spec field")]),
    Case("command-on-basic", basic(command=GOOD), [(CMD, "is only allowed when spec.kind is advanced")]),
    Case("command-on-default-kind", manifest({"workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "command": GOOD}),
         [(CMD, "is only allowed when spec.kind is advanced"), ("spec.modelId", "is required when spec.kind is basic")]),
    Case("advanced-without-command", without(adv(GOOD), "command"), [(CMD, "is required when spec.kind is advanced")]),
    Case("basic-without-trainfile", basic(trainFile=None), [("spec.trainFile", "is required when spec.kind is basic")]),
    Case("unknown-field", adv(GOOD, foo=1), [("spec.foo", "is not a field of an ArgusTask spec")]),
    Case("misspelt-field", without(adv(GOOD, nGPUsPerNode=1), "nGpusPerNode"),
         [("spec.nGPUsPerNode", "is not a field"), ("spec.nGpusPerNode", "is required")]),
    Case("nnodes-string", adv(GOOD, nnodes="two"), [("spec.nnodes", "input should be a valid integer")]),
    Case("nnodes-numeric-string", adv(GOOD, nnodes="1"), [("spec.nnodes", "input should be a valid integer")]),
    Case("nnodes-bool", adv(GOOD, nnodes=True), [("spec.nnodes", "input should be a valid integer")]),
    Case("nnodes-fraction", adv(GOOD, nnodes=1.5), [("spec.nnodes", "valid integer")]),
    Case("nnodes-zero", adv(GOOD, nnodes=0), [("spec.nnodes", "greater than or equal to 1")]),
    Case("gpus-negative", adv(GOOD, nGpusPerNode=-1), [("spec.nGpusPerNode", "greater than or equal to 1")]),
    Case("nnodes-missing", without(adv(GOOD), "nnodes"), [("spec.nnodes", "is required")]),
    Case("cancel-string", adv(GOOD, cancel="yes"), [("spec.cancel", "input should be a valid boolean")]),
    Case("command-not-string", adv(42), [(CMD, "input should be a valid string")]),
    Case("command-list", adv(["python3", "-m", "verl.trainer.main_ppo"]), [(CMD, "valid string")]),
    Case("unknown-workload", adv(GOOD, workload="dpo"), [("spec.workload", "input should be 'ppo', 'grpo' or 'sft'")]),
    Case("unknown-kind", adv(GOOD, kind="expert"), [("spec.kind", "input should be 'basic' or 'advanced'")]),
    Case("spec-not-mapping", manifest(["kind", "advanced"]), [("spec", "must be a mapping of fields")]),
    Case("spec-missing", {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask", "metadata": {"name": "t1"}}, [("spec", "is required")]),
    Case("document-not-mapping", "just a string", [("document", "must be an ArgusTask manifest")]),
    # --- the user id (from the namespace label; --user offline) ------------------------
    Case("user-dotdot", adv(GOOD), [("user", "must match")], user=".."),
    Case("user-slash", adv(GOOD), [("user", "must match")], user="a/b"),
    Case("user-empty", adv(GOOD), [("user", "must match")], user=""),
    Case("user-uppercase", adv(GOOD), [("user", "must match")], user="Alice"),
    Case("user-64-chars", adv(GOOD), [("user", "must match")], user="a" * 64),
    Case("user-leading-dash", adv(GOOD), [("user", "must match")], user="-alice"),
    Case("user-newline", adv(GOOD), [("user", "must match")], user="alice\n"),
    # --- the manifest -----------------------------------------------------------------
    Case("bad-api-version", adv(GOOD) | {"apiVersion": "argus.io/v1"}, [("apiVersion", "must be argus.io/v1alpha1")]),
    Case("bad-kind", adv(GOOD) | {"kind": "Pod"}, [("kind", "must be ArgusTask")]),
    Case("bad-name-uppercase", adv(GOOD) | {"metadata": {"name": "My_Task"}}, [("metadata.name", "lowercase DNS label")]),
    Case("bad-name-missing", adv(GOOD) | {"metadata": {}}, [("metadata.name", "lowercase DNS label")]),
    Case("bad-name-too-long", adv(GOOD) | {"metadata": {"name": "t" * 64}}, [("metadata.name", "at most 63 characters")]),
    # --- basic specs ------------------------------------------------------------------
    Case("basic-bad-model-id", basic(modelId="rm -rf /"), [("spec.modelId", "must be a Hugging Face model id")]),
    Case("basic-model-path-outside", basic(modelId="/tmp/models/qwen"), [("spec.modelId", "a model path must be under <H>/models/ or <R>/hf/ or <R>/common/models/")]),
    Case("basic-model-of-other-user", basic(modelId="<R>/users/bob/models/qwen"), [("spec.modelId", OTHER)]),
    Case("basic-trainfile-outside", basic(trainFile="/etc/passwd"), [("spec.trainFile", DATA_RULE)]),
    Case("basic-trainfile-via-dotdot", basic(trainFile="$HOME/../bob/datasets/x.parquet"), [("spec.trainFile", "into another user's home (bob)")]),
    Case("basic-valfile-of-other-user", basic(valFile="<R>/users/bob/datasets/v.parquet"), [("spec.valFile", OTHER)]),
    Case("basic-codepath-outside-common", basic(codePath="$HOME/code/verl"), [("spec.codePath", "the code path must be under <R>/common/")]),
    Case("basic-reward-not-py", basic(workload="grpo", customRewardPath="$HOME/code/reward.sh"), [("spec.customRewardPath", "must be a .py file")]),
    Case("basic-sft-two-nodes", basic(workload="sft", nnodes=2), [("spec.nnodes", "runs torchrun --standalone on one node")]),
    Case("basic-rollout-n-on-ppo", basic(rolloutN=4), [("spec.rolloutN", "applies to the grpo workload only")]),
    Case("basic-reward-name-without-path", basic(customRewardName="score"), [("spec.customRewardName", "needs spec.customRewardPath")]),
]


def _fix_root_cuts(value: Any, root: str) -> Any:
    """``<R-3>`` is the root without its last three characters (``/priv`` for
    ``/private``): a path that only becomes the root at run time."""
    if isinstance(value, str):
        return value.replace("<R-3>", root[:-3])
    if isinstance(value, dict):
        return {k: _fix_root_cuts(v, root) for k, v in value.items()}
    return value


def test_table_is_large_enough() -> None:
    assert len(HOSTILE) >= 60
    assert len({c.id for c in HOSTILE}) == len(HOSTILE), "case ids must be unique"


@pytest.mark.parametrize("case", HOSTILE, ids=[c.id for c in HOSTILE])
def test_hostile_input_is_refused_with_its_message(case: Case, root: str) -> None:
    assert all(r.endswith("private") for r in ROOTS)  # <R-3> relies on it
    doc = fill(_fix_root_cuts(case.doc, root), root)
    verdict = validate_task(doc, case.user, PlatformConfig(root=root))
    lines = verdict.error_lines()
    assert not verdict.valid
    assert verdict.plan is None and verdict.expanded_command is None
    for line in lines:
        assert "\n" not in line, f"error is not one line: {line!r}"
        assert LINE.match(line), f"error does not start with the field, then value and rule: {line!r}"
    for prefix, text in case.expect:
        prefix, text = fill(prefix, root), fill(text, root)
        assert any(line.startswith(prefix + ":") and text in line for line in lines), (
            f"expected an error '{prefix}: ...{text}...', got:\n" + "\n".join(lines)
        )


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
export DATA=$HOME/datasets/gsm8k
mkdir -p $HOME/checkpoints/multi "$HOME/logs"
cat > $HOME/logs/notes.txt <<'EOF'
python3 -m verl.trainer.main_ppo would not count here # nor in this heredoc
EOF
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

VALID: list[tuple[str, dict[str, Any], list[str]]] = [
    # (id, manifest, substrings of the expected warnings: exactly these, in any order)
    ("v35-advanced-ppo", adv(V35_PPO), []),
    ("v35-custom-reward", adv(V35_REWARD), []),
    ("v35-multi-line-comments-lists", adv(V35_MULTILINE, nnodes=2, nGpusPerNode=4), []),
    ("v35-torchrun-sft", adv(V35_SFT, workload="sft", nGpusPerNode=2), []),
    ("virtual-path-form", adv(V35_PPO.replace("$HOME/common/datasets", "<H>/common/datasets")), []),
    ("legacy-common-datasets", adv(V35_PPO.replace("$HOME/common/datasets", "<R>/common/datasets")), []),
    ("shared-paths-outside-overrides", adv(f"ls <R>/datasets/gsm8k/ $HOME/datasets/*.parquet\n{GOOD}"), []),
    ("own-variables", adv(f"OUT=$HOME/checkpoints\nEXP=run1\n{GOOD} trainer.default_local_dir=$OUT/$EXP"), []),
    ("relative-output", adv(f"{GOOD} trainer.default_local_dir=checkpoints/run1"), []),
    ("python3-path-and-env", adv(f"PYTHONUNBUFFERED=1 /usr/bin/python3 -m verl.trainer.main_ppo {DATA} {RAY}"), []),
    ("basic-ppo", basic(), []),
    ("basic-ppo-own-model", basic(modelId="$HOME/models/qwen", codePath="<R>/common/code/verl-0.5"), []),
    ("basic-grpo", basic(workload="grpo", customRewardPath="$HOME/code/reward.py", rolloutN=8), []),
    ("basic-sft", basic(workload="sft", trainFile="$HOME/datasets/sft/train.parquet", valFile="$HOME/datasets/sft/test.parquet", nGpusPerNode=2), []),
    ("basic-hf-cache-model", basic(modelId="$HOME/common/hf/Qwen2.5-0.5B-Instruct"), []),
    # the weak checks: warnings, never errors
    ("warn-no-data-files", adv(f"{PPO} {RAY}"), ["'data.train_files=': is not set", "'data.val_files=': is not set"]),
    ("warn-no-ray-address", adv(f"{PPO} {DATA}"), ["'+ray_kwargs.ray_init.address=auto': is not set: verl may start its own local Ray"]),
    ("warn-reward-kwargs-without-plus",
     adv(f"{GOOD} custom_reward_function.path=$HOME/code/reward.py custom_reward_function.name=f custom_reward_function.reward_kwargs.x=1"),
     ["Hydra refuses this key: write '+custom_reward_function.reward_kwargs.x=1'"]),
    ("warn-reward-path-without-name", adv(f"{GOOD} custom_reward_function.path=$HOME/code/reward.py"),
     ["'custom_reward_function.name=': is not set: verl will look for a function named compute_score"]),
    ("warn-torchrun-no-val-files", adv(V35_SFT.replace("  data.val_files=$HOME/datasets/sft/test.parquet \\\n", ""), workload="sft", nGpusPerNode=2),
     ["'data.val_files=': is not set"]),
]


@pytest.mark.parametrize(("doc", "warnings"), [(d, w) for _, d, w in VALID], ids=[i for i, _, _ in VALID])
def test_valid_task_passes_with_documented_warnings(doc: dict[str, Any], warnings: list[str], root: str) -> None:
    config = PlatformConfig(root=root)
    verdict = validate_task(fill(doc, root), USER, config)
    assert verdict.error_lines() == []
    assert verdict.valid and verdict.plan is not None
    got = verdict.warning_lines()
    assert len(got) == len(warnings), got
    for text in warnings:
        assert any(text in line for line in got), (text, got)
    for line in got:
        assert "\n" not in line and line.startswith("spec.command: ")
    # the expanded command names no macro and only alice's home
    command = verdict.plan.command
    assert "$HOME" not in command and "${HOME}" not in command
    assert f"{root}/users/" not in command.replace(f"{root}/users/{USER}/", "")
    assert "/common/datasets" not in command.replace(f"{root}/common/datasets", "")


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
    # the limit is on what the user wrote: the expanded command is longer, and fine
    assert verdict.valid, verdict.error_lines()
    assert verdict.plan is not None and len(verdict.plan.command.encode()) > 64 * 1024


def test_the_examples_other_user_message_names_the_owner() -> None:
    verdict = validate_task(adv(f"{GOOD}\ncat /private/users/bob/x"), "alice", PlatformConfig())
    assert verdict.error_lines() == [
        "spec.command: '/private/users/bob/x': is in another user's home (bob); only /private/users/alice/... is yours"
    ]
