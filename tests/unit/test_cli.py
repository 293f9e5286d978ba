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
JSON_KEYS = {"name", "valid", "errors", "warnings", "expandedCommand", "verl"}
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


def test_validate_directory_is_unreadable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "validate", "-f", str(tmp_path), "--user", "alice")
    assert code == 2 and "cannot read" in err
    assert_one_line_error(err)


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
    assert code == 2 and "expected one v3.x TaskSpec, found 2 documents" in err
    assert_one_line_error(err)
    code, _, err = run(capsys, "convert", "-f", write(tmp_path, "- a\n- b\n"), "--namespace", "a", "--name", "b")
    assert code == 1 and "must be a v3.x TaskSpec mapping" in err


# --- crd ----------------------------------------------------------------------------------


def test_crd(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "crd")
    assert code == 0
    # What `argus crd` prints is what the repository ships (tests/unit/test_crd.py pins that
    # file to the models), header included.
    assert out == (Path(__file__).resolve().parents[2] / "crds" / "argus.io_argustasks.yaml").read_text()
    assert out.startswith("# Generated from the pydantic models")
    crd = yaml.safe_load(out)
    assert crd["kind"] == "CustomResourceDefinition" and crd["metadata"]["name"] == "argustasks.argus.io"
