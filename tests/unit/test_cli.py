"""The ``argus`` command line (offline commands): exit codes, output shapes, and plain
one-line errors for user mistakes, never a traceback. Calls ``argus.cli.main`` in process."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from argus import cli
from argus.core.config import PlatformConfig
from argus.core.plan import validate_task
from verltrees import verl_tree

pytestmark = pytest.mark.unit

ADVANCED = """\
apiVersion: argus.io/v1alpha1
kind: ArgusTask
metadata:
  name: ppo-adv
spec:
  kind: advanced
  workload: ppo
  nnodes: 1
  nGpusPerNode: 1
  command: |
    python3 -m verl.trainer.main_ppo \\
      data.train_files=$HOME/common/datasets/gsm8k/train.parquet \\
      data.val_files=$HOME/datasets/gsm8k/test.parquet \\
      trainer.nnodes=1 trainer.n_gpus_per_node=1 \\
      trainer.default_local_dir=$HOME/checkpoints/ppo-adv \\
      actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \\
      actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 \\
      actor_rollout_ref.rollout.tensor_model_parallel_size=1 actor_rollout_ref.rollout.name=vllm \\
      critic.ppo_micro_batch_size_per_gpu=4 \\
      +ray_kwargs.ray_init.address=auto
"""
BASIC = """\
apiVersion: argus.io/v1alpha1
kind: ArgusTask
metadata:
  name: grpo-basic
spec:
  workload: grpo
  nnodes: 1
  nGpusPerNode: 1
  modelId: Qwen/Qwen2.5-0.5B-Instruct
  trainFile: $HOME/common/datasets/gsm8k/train.parquet
  valFile: $HOME/datasets/gsm8k/test.parquet
"""
HOSTILE = """\
apiVersion: argus.io/v1alpha1
kind: ArgusTask
metadata:
  name: sneaky
spec:
  kind: advanced
  workload: ppo
  nnodes: 1
  nGpusPerNode: 1
  command: python3 -m verl.trainer.main_ppo data.train_files=/private/users/bob/datasets/x.parquet
"""
WARNS = ADVANCED.replace("name: ppo-adv", "name: warns").replace("      +ray_kwargs.ray_init.address=auto\n", "      trainer.total_epochs=1\n")
JSON_KEYS = {"file", "name", "valid", "errors", "warnings", "expandedCommand", "verl"}
# The verl config tree hack/fetch-verl.sh caches, standing in for the cluster's verl snapshot.
VERL_TREE = verl_tree("0.9.1")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ARGUS_ROOT", "ARGUS_USER", "ARGUS_WORKER_RESOURCE", "ARGUS_ENTRYPOINT_SHELL", "ARGUS_ENTRYPOINT_ALLOWLIST",
                "ARGUS_VERL_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ARGUS_VERL_CODE_PATH", VERL_TREE)


def write(tmp_path: Path, text: str | bytes, name: str = "task.yaml") -> str:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(err: str) -> None:
    assert "Traceback" not in err
    assert err.endswith("\n") and err.count("\n") == 1, repr(err)


# --- validate -----------------------------------------------------------------------------


def test_validate_valid_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "validate", "-f", write(tmp_path, ADVANCED), "--user", "alice")
    assert code == 0 and err == ""
    assert out == "ppo-adv: valid\n"


def test_validate_invalid_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", "-f", write(tmp_path, HOSTILE), "--user", "alice")
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "sneaky: INVALID"
    assert "  error: spec.command: '/private/users/bob/datasets/x.parquet': is in another user's home (bob)" in out
    assert all(line.startswith(("  error: ", "  warning: ")) for line in lines[1:])


def test_validate_never_prints_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 34: an input that crashed the composer is a verdict, for this document only."""
    crash = HOSTILE.replace("name: sneaky", "name: crash").replace(
        "data.train_files=/private/users/bob/datasets/x.parquet", """'+x.y="${oc.select:\\"x\\"}"'""")
    code, out, err = run(capsys, "validate", "-f", write(tmp_path, ADVANCED + "---\n" + crash), "--user", "alice")
    assert code == 1 and "Traceback" not in out + err, out + err
    assert out.startswith("ppo-adv: valid\n") and "crash: INVALID\n  error: spec.command: " in out, out
    assert "mismatched input" in out


def test_validate_prints_warnings_and_stays_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", "-f", write(tmp_path, WARNS), "--user", "alice")
    assert code == 0
    assert "warns: valid\n  warning: spec.command: '+ray_kwargs.ray_init.address=auto': is not set" in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),  # no such file
        ("apiVersion: [unclosed\n", "is not valid YAML (line"),
        ("a: b\n  c: d\n", "is not valid YAML"),
        (b"\xff\xfe\x00garbage", "not UTF-8 text"),
        ("", "holds no YAML documents"),
        ("---\n---\n", "holds no YAML documents"),
    ],
    ids=["missing-file", "unclosed-flow", "bad-indent", "not-utf8", "empty", "only-separators"],
)
def test_validate_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: Any, message: str) -> None:
    path = str(tmp_path / "missing.yaml") if content is None else write(tmp_path, content)
    code, out, err = run(capsys, "validate", "-f", path, "--user", "alice")
    assert code == 2 and out == ""
    assert message in err and err.startswith("argus validate: ")
    assert_one_line_error(err)


def test_validate_a_directory_as_kubectl_reads_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # docs/argocd.md: `argus validate -f tasks/alice/` before merging. Every .yaml/.yml/.json
    # file, every document, one line per problem; subdirectories only with -R, as kubectl -f.
    tasks = tmp_path / "tasks"
    (tasks / "old").mkdir(parents=True)
    write(tasks, ADVANCED, "a.yaml")
    write(tasks, BASIC + "---\n" + HOSTILE, "b.yml")
    write(tasks, "not: [yaml", "broken.yaml")
    write(tasks, "ignored, not a manifest suffix", "README.md")
    write(tasks / "old", WARNS, "c.yaml")
    code, out, err = run(capsys, "validate", "-f", str(tasks), "--user", "alice")
    assert code == 1 and err == ""
    headers = [line for line in out.splitlines() if not line.startswith("  ")]
    assert headers == [f"{tasks}/a.yaml: ppo-adv: valid", f"{tasks}/b.yml: grpo-basic: valid", f"{tasks}/b.yml: sneaky: INVALID",
                       f"{tasks}/broken.yaml: INVALID"]
    assert f"{tasks}/b.yml: sneaky: INVALID\n  error: spec.command: '/private/users/bob/datasets/x.parquet': is in another user's home (bob)" in out
    assert f"{tasks}/broken.yaml: INVALID\n  error: {tasks}/broken.yaml is not valid YAML (line 1" in out
    code, out, _ = run(capsys, "validate", "-f", str(tasks), "-R", "--user", "alice", "-o", "json")
    assert code == 1
    assert [(d["file"], d["name"], d["valid"]) for d in json.loads(out)] == [
        (f"{tasks}/a.yaml", "ppo-adv", True), (f"{tasks}/b.yml", "grpo-basic", True), (f"{tasks}/b.yml", "sneaky", False),
        (f"{tasks}/broken.yaml", None, False), (f"{tasks}/old/c.yaml", "warns", True)]
    (tasks / "b.yml").unlink()
    (tasks / "broken.yaml").unlink()
    code, out, _ = run(capsys, "validate", "-f", str(tasks), "--recursive", "--user", "alice")
    assert code == 0 and out.count(": valid") == 2 and f"{tasks}/old/c.yaml: warns: valid\n  warning: " in out


def test_validate_several_files_and_an_empty_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one, two = write(tmp_path, ADVANCED, "one.yaml"), write(tmp_path, HOSTILE, "two.yaml")
    code, out, _ = run(capsys, "validate", "-f", one, "-f", two, "--user", "alice")
    assert code == 1 and out.startswith(f"{one}: ppo-adv: valid\n{two}: sneaky: INVALID\n  error: ")
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    write(empty / "sub", ADVANCED, "deep.yaml")
    code, out, err = run(capsys, "validate", "-f", str(empty), "--user", "alice")
    assert code == 2 and out == "" and err == f"argus validate: {empty} holds no .yaml, .yml or .json files (-R reads its subdirectories too)\n"
    code, _, _ = run(capsys, "validate", "-f", str(empty), "-R", "--user", "alice")
    assert code == 0


@pytest.mark.parametrize("user", ["..", "a/b", "", "Alice", "a" * 64, "-x"])
def test_validate_bad_user_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], user: str) -> None:
    code, out, err = run(capsys, "validate", "-f", write(tmp_path, ADVANCED), f"--user={user}")
    assert code == 2 and out == ""
    assert err.startswith("argus validate: --user: user id ") and "must match" in err
    assert_one_line_error(err)


def test_validate_user_from_environment(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARGUS_USER", "alice")
    code, out, _ = run(capsys, "validate", "-f", write(tmp_path, ADVANCED), "-o", "json")
    assert code == 0 and "/private/users/alice/datasets/gsm8k/test.parquet" in json.loads(out)[0]["expandedCommand"]


def test_bad_flags_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["validate"])  # -f is required
    assert exc.value.code == 2
    assert "Traceback" not in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli.main(["validate", "-f", "x", "-o", "xml"])
    assert exc.value.code == 2


def test_validate_json_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "---\n".join([ADVANCED, BASIC, HOSTILE, WARNS]))
    code, out, _ = run(capsys, "validate", "-f", path, "--user", "alice", "-o", "json")
    assert code == 1  # one of them is invalid
    docs = json.loads(out)
    assert isinstance(docs, list) and len(docs) == 4
    for doc in docs:
        assert set(doc) == JSON_KEYS
        assert isinstance(doc["valid"], bool) and isinstance(doc["errors"], list) and isinstance(doc["warnings"], list)
    adv, basic, hostile, warns = docs
    assert adv["name"] == "ppo-adv" and adv["valid"] and adv["errors"] == [] and adv["warnings"] == []
    assert adv["expandedCommand"].startswith("python3 -m verl.trainer.main_ppo")
    assert "data.train_files=/private/datasets/gsm8k/train.parquet" in adv["expandedCommand"]
    # basic specs show the command the template builds
    assert basic["valid"] and "algorithm.adv_estimator=grpo" in basic["expandedCommand"]
    assert hostile["valid"] is False and hostile["expandedCommand"] is None
    assert any("another user's home (bob)" in e for e in hostile["errors"])
    assert all("\n" not in e for e in hostile["errors"])
    assert warns["valid"] and len(warns["warnings"]) == 1


def test_validate_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(ADVANCED + "---\n" + BASIC))
    code, out, _ = run(capsys, "validate", "-f", "-", "--user", "alice", "-o", "json")
    assert code == 0
    assert [d["name"] for d in json.loads(out)] == ["ppo-adv", "grpo-basic"]


def test_validate_non_manifest_documents(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", "-f", write(tmp_path, "- a list\n---\njust text\n"), "--user", "alice")
    assert code == 1
    assert "document 1: INVALID" in out and "document 2: INVALID" in out
    assert "error: document: " in out


def test_validate_root_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(tmp_path / "shared")
    code, out, _ = run(capsys, "validate", "-f", write(tmp_path, ADVANCED), "--user", "alice", "--root", root, "-o", "json")
    assert code == 0
    assert f"data.val_files={root}/users/alice/datasets/gsm8k/test.parquet" in json.loads(out)[0]["expandedCommand"]
    code, _, err = run(capsys, "validate", "-f", write(tmp_path, ADVANCED), "--user", "alice", "--root", "relative/dir")
    assert code == 2 and "must be an absolute path" in err
    assert_one_line_error(err)


def test_validate_entrypoint_allowlist_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    custom = ADVANCED.replace("verl.trainer.main_ppo", "mylab.train")
    code, out, _ = run(capsys, "validate", "-f", write(tmp_path, custom), "--user", "alice")
    assert code == 1 and "'mylab.train': module mylab.train is not allowed for python3 (line 1): run an allowed module (verl.trainer.*)" in out
    code, out, _ = run(capsys, "validate", "-f", write(tmp_path, custom), "--user", "alice", "--allow-entrypoint", "python3 -m mylab.*")
    # Allowed, and then composed with verl's config tree, which has no such entry point.
    assert code == 1 and "verl 0.9.1 has no module mylab.train with a Hydra entry point" in out, out
    code, _, err = run(capsys, "validate", "-f", write(tmp_path, custom), "--user", "alice", "--allow-entrypoint", "python3 mylab")
    assert code == 2 and "must look like '<program> -m <module glob>'" in err
    assert_one_line_error(err)


# --- render -------------------------------------------------------------------------------


def test_render_prints_the_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "render", "-f", write(tmp_path, ADVANCED + "---\n" + BASIC), "--user", "alice")
    assert code == 0 and err == ""
    plans = list(yaml.safe_load_all(out))
    assert [p["name"] for p in plans] == ["ppo-adv", "grpo-basic"]
    plan = plans[0]
    assert {"entrypoint", "entrypoint_resources", "runtime_env", "metadata", "command", "job_dir"} <= set(plan)
    assert plan["entrypoint"].startswith("bash -lc '")
    assert plan["entrypoint_resources"] == {"worker_node": 1}
    assert plan["runtime_env"]["env_vars"]["PYTHONPATH"] == f"{VERL_TREE}:/private/users/alice/code"  # the snapshot, --verl-code-path
    assert plan["verl"] == {"version": "0.9.1", "source": "cluster", "root": VERL_TREE}
    assert plan["metadata"]["argus.io/user"] == "alice"
    assert plan["job_dir"] == "/private/users/alice/jobs/ppo-adv"


def test_render_worker_resource_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "render", "-f", write(tmp_path, ADVANCED), "--user", "alice", "--worker-resource", "gpu_worker")
    assert code == 0 and yaml.safe_load(out)["entrypoint_resources"] == {"gpu_worker": 1}


def test_render_invalid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "render", "-f", write(tmp_path, HOSTILE + "---\n" + BASIC), "--user", "alice")
    assert code == 1
    assert [p["name"] for p in yaml.safe_load_all(out)] == ["grpo-basic"]
    assert "sneaky: error: spec.command: " in err and "Traceback" not in err


UID = "0b8f0a36-1a8e-4c1e-9d59-3f1f8a2c7e11"
# The warnings of what Argus adds to a command after composing it (issue 21).
ADDITIONS = ("main_ppo reads reward.custom_reward_function", "absolute under the job folder")


def test_render_with_the_namespace_and_uid_is_the_operators_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The job folder, experiment name, checkpoint path and submission id are the ones the
    operator derives for the created task (validate_spec with its namespace, name and uid,
    as the control loop calls it)."""
    from argus.core.plan import validate_spec
    code, out, err = run(capsys, "render", "-f", write(tmp_path, BASIC), "--user", "alice", "--namespace", "team-a", "--uid", UID)
    assert code == 0 and err == "", err
    shown = yaml.safe_load(out)
    from argus.adapters.verlcompose import HydraComposer, find_tree
    platform = PlatformConfig(verl_code_path=VERL_TREE)  # as the CLI has it here (ARGUS_VERL_CODE_PATH)
    composer = HydraComposer(find_tree(None, platform))
    operator = validate_spec(yaml.safe_load(BASIC)["spec"], "alice", platform, namespace="team-a", name="grpo-basic", uid=UID,
                             composer=composer).plan
    assert operator is not None
    assert shown == {"name": "grpo-basic", "namespace": "team-a", **operator.model_dump(mode="json"),
                     "verl": {"version": "0.9.1", "source": "cluster", "root": VERL_TREE}}
    assert shown["submission_id"] == "argus-team-a-grpo-basic-0b8f0a36"
    assert shown["job_dir"] == "/private/users/alice/jobs/team-a-grpo-basic-0b8f0a36"
    assert "trainer.experiment_name=team-a-grpo-basic" in shown["command"]
    assert "trainer.default_local_dir=/private/users/alice/checkpoints/argus/team-a-grpo-basic" in shown["command"]
    # Without them the plan is the file's own: another job folder and experiment, no submission id.
    code, out, _ = run(capsys, "render", "-f", write(tmp_path, BASIC), "--user", "alice")
    alone = yaml.safe_load(out)
    assert alone["submission_id"] is None and alone["job_dir"] == "/private/users/alice/jobs/grpo-basic"
    assert "trainer.experiment_name=default-grpo-basic" in alone["command"]


def test_render_name_renames_the_one_task(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "render", "-f", write(tmp_path, ADVANCED), "--user", "alice", "-n", "team-a", "--name", "other", "--uid", UID)
    assert code == 0
    shown = yaml.safe_load(out)
    assert (shown["name"], shown["submission_id"]) == ("other", "argus-team-a-other-0b8f0a36")


@pytest.mark.parametrize(("extra", "text", "message"), [
    (["--namespace", "Team_A"], ADVANCED, "--namespace: 'Team_A': must be a namespace name"),
    (["--uid", "abc"], ADVANCED, "--uid: 'abc': must be the task's metadata.uid, a UUID"),
    (["--uid", UID], ADVANCED + "---\n" + BASIC, "--name and --uid name one task: the file holds 2 documents"),
    (["--namespace", "b"], ADVANCED.replace("  name: ppo-adv\n", "  name: ppo-adv\n  namespace: a\n"),
     "the document's metadata.namespace 'a' is not --namespace 'b'"),
])
def test_render_identity_mistakes_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], text: str,
                                               message: str) -> None:
    code, out, err = run(capsys, "render", "-f", write(tmp_path, text), "--user", "alice", *extra)
    assert code == 2 and out == "" and message in err
    assert_one_line_error(err)


def test_render_needs_a_user(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["render", "-f", write(tmp_path, ADVANCED)])
    assert exc.value.code == 2


# --- convert ------------------------------------------------------------------------------

V3 = """\
name: grpo-gsm8k
user: alice
workload: grpo
nnodes: 1
n_gpus_per_node: 2
model_id: Qwen/Qwen2.5-0.5B-Instruct
train_file: $HOME/common/datasets/gsm8k/train.parquet
val_file: $HOME/datasets/gsm8k/test.parquet
total_epochs: 2
save_freq: -1
"""


def test_convert_v3_taskspec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "convert", "-f", write(tmp_path, V3), "--namespace", "alice", "--name", "grpo-v3")
    assert code == 0 and err == ""
    manifest = yaml.safe_load(out)
    assert manifest["apiVersion"] == "argus.io/v1alpha1" and manifest["kind"] == "ArgusTask"
    assert manifest["metadata"] == {"name": "grpo-v3", "namespace": "alice"}
    assert manifest["spec"] == {
        "kind": "basic", "workload": "grpo", "nnodes": 1, "nGpusPerNode": 2, "modelId": "Qwen/Qwen2.5-0.5B-Instruct",
        "trainFile": "$HOME/common/datasets/gsm8k/train.parquet", "valFile": "$HOME/datasets/gsm8k/test.parquet",
        "totalEpochs": 2, "saveFreq": -1,
    }
    verdict = validate_task(manifest, "alice", PlatformConfig())
    assert verdict.valid, verdict.error_lines()
    # and the converted file validates through the CLI too
    code, out, _ = run(capsys, "validate", "-f", write(tmp_path, out, "converted.yaml"), "--user", "alice")
    assert code == 0 and out == "grpo-v3: valid\n"


def test_convert_keeps_an_explicit_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = "kind: advanced\nworkload: ppo\nnnodes: 1\nn_gpus_per_node: 1\ncommand: python3 -m verl.trainer.main_ppo\n"
    code, out, _ = run(capsys, "convert", "-f", write(tmp_path, old), "--namespace", "alice", "--name", "adv")
    assert code == 0 and yaml.safe_load(out)["spec"]["kind"] == "advanced"


def test_convert_drops_a_v3_submission_id_with_a_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "convert", "-f", write(tmp_path, V3 + "submission_id: grpo-2024-01\n"), "--namespace", "alice", "--name", "x")
    assert code == 0
    assert err == ("note: submission_id: 'grpo-2024-01': dropped: Argus sets the Ray submission id itself "
                   "(argus-<namespace>-<name>-<uid>, one job per task)\n")
    assert "submission_id" not in out and "submissionId" not in out
    assert yaml.safe_load(out)["spec"]["nGpusPerNode"] == 2


def test_convert_unknown_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "convert", "-f", write(tmp_path, V3 + "gpu_type: a100\n"), "--namespace", "alice", "--name", "x")
    assert code == 1 and out == ""
    assert err == "error: gpu_type: 'a100': is not a v3.x TaskSpec field that ArgusTask knows\n"


def test_convert_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "convert", "-f", write(tmp_path, V3 + "---\n" + V3), "--namespace", "a", "--name", "b")
    assert code == 2 and "--name names one task: " in err and "holds 2 documents (each is named by its own name field)" in err
    assert_one_line_error(err)
    code, _, err = run(capsys, "convert", "-f", write(tmp_path, "- a\n- b\n"), "--namespace", "a", "--name", "b")
    assert code == 1 and "must be a v3.x TaskSpec mapping" in err


# The design's own advanced example as a v3.x TaskSpec: no workload (and with what verl
# requires before training, which the design's example leaves out: Argus now refuses that).
V3_ADVANCED = """\
name: ppo-custom-reward
kind: advanced
nnodes: 1
n_gpus_per_node: 1
command: |
  python3 -m verl.trainer.main_ppo \\
    data.train_files=$COMMON/datasets/gsm8k/train.parquet \\
    data.val_files=$HOME/datasets/gsm8k/test.parquet \\
    custom_reward_function.path=$HOME/code/reward.py \\
    custom_reward_function.name=compute_score \\
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \\
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 \\
    actor_rollout_ref.rollout.tensor_model_parallel_size=1 actor_rollout_ref.rollout.name=vllm \\
    critic.ppo_micro_batch_size_per_gpu=4 \\
    trainer.nnodes=1 trainer.n_gpus_per_node=1 \\
    +ray_kwargs.ray_init.address=auto
"""


def test_convert_reads_the_workload_from_the_command_and_writes_it_as_a_block(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "convert", "-f", write(tmp_path, V3_ADVANCED), "--namespace", "alice")
    assert code == 0, err
    assert err == ("note: command: '$COMMON': rewritten as $HOME/common: v3.5 removed $COMMON\n"
                   "note: workload: 'ppo': added: it runs verl.trainer.main_ppo without algorithm.adv_estimator (verl's default: gae)\n")
    manifest = yaml.safe_load(out)
    assert manifest["metadata"] == {"name": "ppo-custom-reward", "namespace": "alice"}  # the TaskSpec's own name
    assert list(manifest["spec"])[:2] == ["kind", "workload"] and manifest["spec"]["workload"] == "ppo"
    command = yaml.safe_load(V3_ADVANCED)["command"].replace("$COMMON", "$HOME/common")
    assert manifest["spec"]["command"] == command
    # The command is a | block, line for line as written (not an escaped one-line string).
    assert "  command: |\n    python3 -m verl.trainer.main_ppo \\\n      data.train_files=$HOME/common/datasets/gsm8k/train.parquet \\\n" in out
    code, out, _ = run(capsys, "validate", "-f", write(tmp_path, out, "converted.yaml"), "--user", "alice")
    # Valid; on verl 0.9.1 the legacy reward keys are pointed at the ones main_ppo reads, and
    # verl's relative default checkpoint folder is put in the job folder (a warning each).
    assert code == 0 and out.startswith("ppo-custom-reward: valid\n"), out
    assert [line for line in out.splitlines()[1:] if not any(w in line for w in ADDITIONS)] == []


@pytest.mark.parametrize(("module_and_args", "workload"), [
    ("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo actor_rollout_ref.rollout.n=5", "grpo"),
    ("python3 -m verl.trainer.main_ppo 'algorithm.adv_estimator=grpo'", "grpo"),  # Hydra's reading, quotes and all
    ("ALGO=grpo\npython3 -m verl.trainer.main_ppo algorithm.adv_estimator=$ALGO", "grpo"),  # the script's own variable
    ("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=gae", "ppo"),
    ("python3 -u -m verl.trainer.main_ppo data.train_files=x", "ppo"),
    ("torchrun --standalone --nnodes=1 --nproc_per_node=8 -m verl.trainer.fsdp_sft_trainer data.train_files=x", "sft"),
    ("torchrun --nnodes=1 -m verl.trainer.sft_trainer model.path=x", "sft"),
    ("python3 -m verl.trainer.sft_trainer_ray trainer.nnodes=2", "sft"),
])
def test_convert_tells_the_workload_from_the_module(module_and_args: str, workload: str) -> None:
    from argus.core.convert import workload_of
    assert workload_of(module_and_args)[0] == workload


@pytest.mark.parametrize(("command", "why"), [
    ("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=rloo",
     "it runs verl.trainer.main_ppo with algorithm.adv_estimator=rloo, which is neither gae (ppo) nor grpo"),
    ("python3 -m verl.trainer.main_generation x=1",
     "it runs verl.trainer.main_generation, which is none of verl's PPO/GRPO (main_ppo) or SFT (*sft_trainer*) entry points"),
    ("echo python3 -m verl.trainer.main_ppo", "the command does not run an entrypoint Argus can read"),
    ("# python3 -m verl.trainer.sft_trainer\npython3 -m mypkg.train", "the command's entrypoint is not one Argus allows"),
])
def test_convert_says_which_field_to_add_when_the_command_does_not_tell(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                        command: str, why: str) -> None:
    old = yaml.safe_dump({"name": "x", "kind": "advanced", "nnodes": 1, "n_gpus_per_node": 1, "command": command})
    code, out, err = run(capsys, "convert", "-f", write(tmp_path, old), "--namespace", "alice")
    assert code == 1 and out == ""
    assert err == f"error: workload: None: is missing and cannot be told from the command ({why}): add workload: ppo, grpo or sft\n"


def test_convert_a_basic_taskspec_without_workload_names_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = "\n".join(line for line in V3.splitlines() if not line.startswith("workload:")) + "\n"
    code, out, err = run(capsys, "convert", "-f", write(tmp_path, old), "--namespace", "alice")
    assert code == 1 and out == "" and err == "error: workload: None: is missing: add workload: ppo, grpo or sft\n"


def test_convert_several_documents(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "convert", "-f", write(tmp_path, V3 + "---\n" + V3_ADVANCED), "-n", "alice")
    assert code == 0
    assert [(m["metadata"]["name"], m["spec"]["workload"]) for m in yaml.safe_load_all(out)] == [("grpo-gsm8k", "grpo"),
                                                                                                   ("ppo-custom-reward", "ppo")]
    assert err.startswith("document 2: note: command: '$COMMON'")
    code, out, _ = run(capsys, "validate", "-f", write(tmp_path, out, "converted.yaml"), "--user", "alice")
    assert code == 0 and [line for line in out.splitlines() if not any(w in line for w in ADDITIONS)] == [
        "grpo-gsm8k: valid", "ppo-custom-reward: valid"], out
    # One bad document: nothing is written (a half-converted file would be applied as a whole), each problem named.
    code, out, err = run(capsys, "convert", "-f", write(tmp_path, V3 + "---\n" + V3.replace("name: grpo-gsm8k\n", "")), "-n", "alice")
    assert code == 1 and out == ""
    assert err == "document 2: error: name: None: is missing: give the task a name (argus convert --name NAME)\n"


# --- crd ----------------------------------------------------------------------------------


def test_crd(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "crd")
    assert code == 0
    # What `argus crd` prints is what the repository ships (tests/unit/test_crd.py pins that
    # file to the models), header included.
    crds = Path(__file__).resolve().parents[2] / "crds"
    assert out == (crds / "argus.io_argustasks.yaml").read_text() + "---\n" + (crds / "argus.io_argusclusters.yaml").read_text()
    assert out.startswith("# Generated from the pydantic models")
    docs = list(yaml.safe_load_all(out))
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("CustomResourceDefinition", "argustasks.argus.io"), ("CustomResourceDefinition", "argusclusters.argus.io")]
    code, one, _ = run(capsys, "crd", "--kind", "ArgusCluster")
    assert code == 0 and one == (crds / "argus.io_argusclusters.yaml").read_text()
