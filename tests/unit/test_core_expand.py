"""Macro expansion (v3.5 design): every rule, and properties checked with hypothesis:
expansion is idempotent, and a command that names no user's home never expands into
another user's home."""

from __future__ import annotations

import posixpath
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from argus.core.config import PlatformConfig
from argus.core.expand import expand
from argus.core.plan import validate_task

pytestmark = pytest.mark.unit

P = PlatformConfig()  # root /private


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        ("$HOME/common/datasets/gsm8k/train.parquet", "/private/datasets/gsm8k/train.parquet"),
        ("$HOME/common/hf/Qwen2.5-0.5B", "/private/hf/Qwen2.5-0.5B"),
        ("$HOME/common/datasets", "/private/datasets"),
        ("$HOME/common/hf", "/private/hf"),
        ("$HOME/datasets/x.parquet", "/private/users/alice/datasets/x.parquet"),
        ("$HOME", "/private/users/alice"),
        ("$HOME/", "/private/users/alice/"),
        ("$HOME/code/reward.py", "/private/users/alice/code/reward.py"),
        ("${HOME}/common/datasets/a", "/private/datasets/a"),
        ("${HOME}/common/hf/m", "/private/hf/m"),
        ("${HOME}/x", "/private/users/alice/x"),
        ('"$HOME"', '"/private/users/alice"'),
        ("'${HOME}'/x", "'/private/users/alice'/x"),
        ("cd $HOME && ls", "cd /private/users/alice && ls"),
        ("PATH=$HOME/bin:$PATH", "PATH=/private/users/alice/bin:$PATH"),
        ("[$HOME/a,$HOME/common/datasets/b]", "[/private/users/alice/a,/private/datasets/b]"),
        ("x=$HOME\\\n  y", "x=/private/users/alice\\\n  y"),
        ("x=$HOME\\\n", "x=/private/users/alice\\\n"),
        ("x=$HOME\\\ny", "x=$HOME\\\ny"),  # bash would join: /private/users/alicey
        ("$HOME$HOME", "/private/users/alice/private/users/alice"),
        # only the shared folders themselves, at a path boundary
        ("$HOME/common/datasets2/x", "/private/users/alice/common/datasets2/x"),
        ("$HOME/common/hf-cache", "/private/users/alice/common/hf-cache"),
        ("$HOME/common/models/x", "/private/users/alice/common/models/x"),
        ("$HOME/common/datasets.bak", "/private/users/alice/common/datasets.bak"),
        # the virtual form the file browser shows maps like the macro
        ("/private/users/alice/common/datasets/gsm8k", "/private/datasets/gsm8k"),
        ("/private/users/alice/common/hf", "/private/hf"),
        ("data.train_files=/private/users/alice/common/datasets/a", "data.train_files=/private/datasets/a"),
        # ... but only alice's, and only as a whole path
        ("/private/users/bob/common/datasets/a", "/private/users/bob/common/datasets/a"),
        ("/x/private/users/alice/common/datasets/a", "/x/private/users/alice/common/datasets/a"),
        # not the macro
        ("$HOMEDIR/x", "$HOMEDIR/x"),
        ("$HOME_2/x", "$HOME_2/x"),
        ("${HOMEDIR}/x", "${HOMEDIR}/x"),
        ("$home/x", "$home/x"),
        ("HOME/x", "HOME/x"),
        ("~/x", "~/x"),  # refused by the policy, never expanded
        # text glued to the macro would name a folder beside the home: left for the policy
        ("${HOME}2/x", "${HOME}2/x"),
        ("$HOME-old/x", "$HOME-old/x"),
        ("$HOME.bak", "$HOME.bak"),
        ("$HOME$USER", "$HOME$USER"),
        ("$HOME*", "$HOME*"),
        # escaped: bash reads \$HOME as the text $HOME
        ("\\$HOME/x", "\\$HOME/x"),
        ("\\${HOME}/common/hf", "\\${HOME}/common/hf"),
    ],
)
def test_expansion_rules(text: str, expanded: str) -> None:
    assert expand(text, "alice", P) == expanded


def test_root_is_configurable() -> None:
    config = PlatformConfig(root="/mnt/shared/")
    assert config.root == "/mnt/shared"
    assert expand("$HOME/common/datasets/a $HOME/common/hf/b $HOME/c", "bob", config) == (
        "/mnt/shared/datasets/a /mnt/shared/hf/b /mnt/shared/users/bob/c"
    )
    assert expand("/mnt/shared/users/bob/common/hf/m", "bob", config) == "/mnt/shared/hf/m"
    # the default root's virtual form is just a path under another root
    assert expand("/private/users/bob/common/hf/m", "bob", config) == "/private/users/bob/common/hf/m"


def test_root_with_regex_characters() -> None:
    config = PlatformConfig(root="/data/a+b(c)")
    assert expand("$HOME/common/hf/m /data/a+b(c)/users/u1/common/datasets/d", "u1", config) == "/data/a+b(c)/hf/m /data/a+b(c)/datasets/d"


def test_relative_root_is_refused() -> None:
    with pytest.raises(ValueError, match="must be an absolute path"):
        PlatformConfig(root="private")


def test_expansion_in_a_real_multiline_command() -> None:
    command = (
        "python3 -m verl.trainer.main_ppo \\\n"
        "  data.train_files=$HOME/common/datasets/gsm8k/train.parquet \\\n"
        "  data.val_files=${HOME}/datasets/gsm8k/test.parquet \\\n"
        "  custom_reward_function.path=$HOME/code/reward.py\n"
    )
    assert expand(command, "alice", P) == (
        "python3 -m verl.trainer.main_ppo \\\n"
        "  data.train_files=/private/datasets/gsm8k/train.parquet \\\n"
        "  data.val_files=/private/users/alice/datasets/gsm8k/test.parquet \\\n"
        "  custom_reward_function.path=/private/users/alice/code/reward.py\n"
    )


# --- properties --------------------------------------------------------------------------

PIECES = [
    "$HOME", "${HOME}", "$HOMEDIR", "${HOME", "$", "{", "}", "/common/", "common", "datasets", "hf", "/", "//",
    "users", "..", ".", "a", "b", "x", "alice", "bob", "2", "-", "_", " ", "\n", "=", ",", "[", "]", "'", '"',
    "\\", "\\\n", ":", ";", "*", "~",
]
USERS = st.sampled_from(["alice", "bob", "u1", "a-b", "x_y9"])
ROOTS = st.sampled_from(["/private", "/srv/argus/private", "/p"])
texts = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, user=USERS, root=ROOTS)
@example(text="$HOME$HOME/common/hf", user="alice", root="/private")
@example(text="${HOME}/common/datasets$HOME", user="alice", root="/private")
@example(text="$HOME/common/hf/users/common/datasets", user="alice", root="/private")
def test_expansion_is_idempotent(text: str, user: str, root: str) -> None:
    config = PlatformConfig(root=root)
    once = expand(text, user, config)
    assert expand(once, user, config) == once


# A user segment ends where a path segment or a shell word/Hydra value ends (a line
# continuation followed by a blank ends it too).
_SEGMENT = r"((?:[^/\s'\";|&()<>,:=\]}\\]|\\(?!\n[ \t\r\n]|\n$))*)"


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, user=USERS, root=ROOTS)
@example(text="${HOME}2", user="alice", root="/private")
@example(text="$HOME-x", user="alice", root="/private")
@example(text="\"$HOME\"2", user="alice", root="/private")
@example(text="$HOME\\\n2", user="alice", root="/private")
@example(text="$HOME$HOME$HOMEDIR", user="alice", root="/private")
def test_expansion_never_names_another_users_home(text: str, user: str, root: str) -> None:
    """Whatever the text, if it does not already say '/users/', every '<root>/users/<seg>'
    in its expansion is the user's own home."""
    if "/users/" in text or root + "/users" in text:
        return
    config = PlatformConfig(root=root)
    out = expand(text, user, config)
    for m in re.finditer(re.escape(root + "/users/") + _SEGMENT, out):
        assert m.group(1) == user, (text, out)


# The validator's view: after lexical normalisation too, a command naming no home that
# passes validation never reaches another user's home.
_PATH_WORD = re.compile(r"[^\s'\"=,:;\[\](){}<>|&`$]+")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.lists(st.sampled_from(["$HOME", "${HOME}", "/", "..", "users", "bob", "alice", "common", "datasets", "x", " ", "2", "/common/", "hf"]), max_size=25).map("".join))
@example(text="$HOME/../bob/x")
@example(text="${HOME}/../../users/bob")
def test_accepted_commands_stay_in_the_users_home(text: str) -> None:
    command = f"python3 -m verl.trainer.main_ppo +ray_kwargs.ray_init.address=auto\necho {text}"
    doc = {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask", "metadata": {"name": "p"},
           "spec": {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "command": command}}
    verdict = validate_task(doc, "alice", P)
    if not verdict.valid:
        return
    assert verdict.plan is not None
    for word in _PATH_WORD.findall(verdict.plan.command):
        slash = word.find("/")
        if slash < 0:
            continue
        path = posixpath.normpath(word[slash:])
        if path.startswith("/private/users/"):
            assert path.split("/")[3] == "alice", (text, word)


# --------------------------------------------------------------------------- v3.0's $COMMON

COMMON_RULE = "v3.5 removed $COMMON (v3.0's shared tree)"


@pytest.mark.parametrize(
    ("text", "rewritten"),
    [
        ("$COMMON/datasets/gsm8k/train.parquet", "$HOME/common/datasets/gsm8k/train.parquet"),
        ("${COMMON}/hf/Qwen", "$HOME/common/hf/Qwen"),
        ("data.train_files=[$COMMON/a.parquet,$COMMON/b.parquet]", "data.train_files=[$HOME/common/a.parquet,$HOME/common/b.parquet]"),
    ],
)
def test_common_is_recognised_and_rewritten(text: str, rewritten: str) -> None:
    from argus.core.expand import uses_common, without_common
    assert uses_common(text) and without_common(text) == rewritten
    assert expand(text, "alice", P) == text  # never expanded: it is refused where it stands


@pytest.mark.parametrize("text", ["$COMMONS/x", "$HOME/common/datasets/x", "COMMON/x", "${COMMON_X}/y"])
def test_other_names_are_not_common(text: str) -> None:
    from argus.core.expand import uses_common
    assert not uses_common(text)


def _doc(spec: dict) -> dict:
    return {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask", "metadata": {"name": "t"}, "spec": spec}


def test_common_in_a_command_is_refused_with_the_v35_spelling() -> None:
    command = ("python3 -m verl.trainer.main_ppo data.train_files=$COMMON/datasets/gsm8k/train.parquet "
               "data.val_files=$HOME/datasets/t.parquet +ray_kwargs.ray_init.address=auto")
    v = validate_task(_doc({"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "command": command}), "alice", P)
    assert v.error_lines() == [
        f"spec.command: 'data.train_files=$COMMON/datasets/gsm8k/train.parquet': {COMMON_RULE} (line 1): $HOME/common/... replaces "
        "it: write data.train_files=$HOME/common/datasets/gsm8k/train.parquet"]


def test_common_in_a_basic_path_is_refused_with_the_v35_spelling() -> None:
    v = validate_task(_doc({"workload": "grpo", "nnodes": 1, "nGpusPerNode": 1, "modelId": "Qwen/Qwen2.5-0.5B-Instruct",
                            "trainFile": "${COMMON}/datasets/gsm8k/train.parquet", "valFile": "$HOME/datasets/t.parquet"}), "alice", P)
    assert v.error_lines() == [
        f"spec.trainFile: '${{COMMON}}/datasets/gsm8k/train.parquet': {COMMON_RULE}: $HOME/common/... replaces it: "
        "write $HOME/common/datasets/gsm8k/train.parquet"]


def test_a_command_that_assigns_common_itself_uses_its_own_value() -> None:
    command = ("COMMON=$HOME/datasets\npython3 -m verl.trainer.main_ppo data.train_files=$COMMON/a.parquet "
               "data.val_files=$COMMON/b.parquet +ray_kwargs.ray_init.address=auto")
    v = validate_task(_doc({"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "command": command}), "alice", P)
    assert v.valid, v.error_lines()
