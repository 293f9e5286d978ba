"""Tests of the verl stand-in (hack/verl-standin), the test and demo double of the training
workload that runs where real verl (which needs GPUs) cannot.

They start the stand-in as a subprocess; each run takes well under a second."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from argus.core.progress import verl_lines
from argus_testbed.verl import standin_snapshot

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
# The stand-in with verl 0.9.1's real config tree copied in (the testbed's verl snapshot).
STANDIN = standin_snapshot()
TORCHRUN = STANDIN / "bin" / "torchrun"
# What verl requires before training, for one GPU (a command without it is refused at start,
# as verl refuses it); each test's own words come after these, and Hydra keeps the last value.
PPO_BASE = [
    "data.train_batch_size=4", "data.val_files=null", "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2", "actor_rollout_ref.rollout.name=vllm",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1", "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
    "critic.ppo_micro_batch_size_per_gpu=2", "trainer.n_gpus_per_node=1", "trainer.nnodes=1", "trainer.total_epochs=1",
]
STEP_RE = re.compile(r"^step:(\d+) - critic/score/mean:([0-9.]+) - actor/lr:1e-06 - timing_s/step:[0-9.e-]+$", re.M)

REWARD_PY = '''
import json, os
CALLS = os.environ.get("REWARD_CALLS_FILE")

def _log(record):
    if CALLS:
        with open(CALLS, "a") as fh:
            fh.write(json.dumps(record) + "\\n")

def compute_score(*, data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    _log({"fn": "compute_score", "data_source": data_source, "solution_str": solution_str,
          "ground_truth": ground_truth, "extra_info": extra_info, "kwargs": kwargs})
    correct = solution_str.rsplit("####", 1)[-1].strip() == str(ground_truth)
    return {"score": kwargs.get("alpha", 1.0) if correct else 0.0, "acc": correct}

def length_reward(*, data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    _log({"fn": "length_reward"})
    return 0.25
'''

ROWS = [
    {
        "data_source": "openai/gsm8k",
        "prompt": [{"role": "user", "content": "What is 2+2? Answer after ####."}],
        "reward_model": {"style": "rule", "ground_truth": "4"},
        "extra_info": {"index": 0, "split": "train"},
    },
    {
        "data_source": "openai/gsm8k",
        "prompt": "What is 3*3?",
        "reward_model": {"style": "rule", "ground_truth": "9"},
        "extra_info": {"index": 1, "split": "train"},
    },
]


def run(args: list[str], cwd: Path, env: dict | None = None, exe: list[str] | None = None, pythonpath: str | None = None):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("VERL_STANDIN_")}
    full_env["PYTHONPATH"] = pythonpath if pythonpath is not None else str(STANDIN)
    full_env.update(env or {})
    cmd = (exe or [sys.executable, "-m", "verl.trainer.main_ppo", *PPO_BASE]) + args
    done = subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=60)
    # The log as the stand-in wrote it (in real verl's form: Ray's actor prefix, tqdm's bar) is
    # done.raw; stdout is its lines as verl printed them (argus.core.progress.verl_lines).
    done.raw = done.stdout  # type: ignore[attr-defined]
    done.stdout = "\n".join(verl_lines(done.stdout)) + "\n"
    return done


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "reward.py").write_text(REWARD_PY)
    with open(tmp_path / "train.jsonl", "w") as fh:
        for row in ROWS:
            fh.write(json.dumps(row) + "\n")
    return tmp_path


def calls(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_custom_reward_jsonl_progress_and_checkpoints(work: Path) -> None:
    log = work / "calls.jsonl"
    ckpt = work / "ckpt"
    r = run(
        [
            "data.train_files=[train.jsonl]",
            "data.val_files=train.jsonl",
            "reward.custom_reward_function.path=reward.py",
            "trainer.total_epochs=2",
            "trainer.save_freq=2",
            f"trainer.default_local_dir={ckpt}",
            "algorithm.adv_estimator=grpo",
            "actor_rollout_ref.rollout.n=4",
        ],
        work,
        env={"REWARD_CALLS_FILE": str(log)},
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout
    # verl 0.9 prints nothing when it loads the function (0.3-0.6 said "using customized
    # reward function ..."): the calls it recorded show that it ran.
    assert "using customized reward function" not in out
    assert "Total training steps: 4" in out
    steps = STEP_RE.findall(out)
    assert [int(n) for n, _ in steps] == [1, 2, 3, 4]
    assert float(steps[-1][1]) == 1.0  # the fake learning curve ends with all answers right
    assert "Initial validation metrics: {" in out
    assert "Final validation metrics: {'val-core/openai/gsm8k/reward/mean@1': 1.0}" in out
    assert out.index("Total training steps") < out.index("step:1 ") < out.index("Final validation")
    assert sorted(p.name for p in ckpt.iterdir()) == ["global_step_2", "global_step_4", "latest_checkpointed_iteration.txt"]
    assert any((ckpt / "global_step_2").iterdir())
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text() == "4"
    recorded = calls(log)
    assert recorded and all(c["fn"] == "compute_score" for c in recorded)
    first = recorded[0]
    assert first["data_source"] == "openai/gsm8k"
    assert first["ground_truth"] == "4"
    assert first["extra_info"] == {"index": 0, "split": "train"}
    assert "2+2" in first["solution_str"]
    assert first["kwargs"] == {}


def test_parquet_and_named_function(work: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [
        {**row, "prompt": [{"role": "user", "content": f"What is {i}+{i}?"}], "reward_model": {"ground_truth": str(2 * i)}}
        for i, row in enumerate(ROWS * 3)
    ]
    pq.write_table(pa.Table.from_pylist(rows), work / "train.parquet")
    log = work / "calls.jsonl"
    r = run(
        [
            "data.train_files=[train.parquet,'train.jsonl']",
            "reward.custom_reward_function.path=reward.py",
            "reward.custom_reward_function.name=length_reward",
        ],
        work,
        env={"REWARD_CALLS_FILE": str(log)},
    )
    assert r.returncode == 0, r.stderr
    assert "using customized reward function" not in r.stdout  # verl 0.9 prints nothing
    assert "Total training steps: 4" in r.stdout  # at most 4 rows are read
    steps = STEP_RE.findall(r.stdout)
    assert len(steps) == 4 and all(float(score) == 0.25 for _, score in steps)
    assert {c["fn"] for c in calls(log)} == {"length_reward"}

    r = run(["data.train_files=train.parquet", "reward.custom_reward_function.path=reward.py"], work,
            env={"REWARD_CALLS_FILE": str(log)})
    assert r.returncode == 0, r.stderr
    first = [c for c in calls(log) if c["fn"] == "compute_score"][0]
    assert first["ground_truth"] == "0" and "What is 0+0?" in first["solution_str"]
    assert first["extra_info"] == {"index": 0, "split": "train"}


def test_reward_kwargs_need_plus(work: Path) -> None:
    r = run(
        ["data.train_files=train.jsonl", "reward.custom_reward_function.path=reward.py", "reward.custom_reward_function.reward_kwargs.alpha=0.2"],
        work,
    )
    assert r.returncode == 1
    # Hydra's own refusal (verl 0.9.1's config declares no reward_kwargs).
    assert (
        "Could not override 'reward.custom_reward_function.reward_kwargs.alpha'.\n"
        "To append to your config use +reward.custom_reward_function.reward_kwargs.alpha=0.2\n"
    ) in r.stderr and "Key 'reward_kwargs' is not in struct" in r.stderr
    assert "Total training steps" not in r.stdout


def test_reward_kwargs_with_plus_are_passed(work: Path) -> None:
    log = work / "calls.jsonl"
    r = run(
        [
            "data.train_files=train.jsonl",
            "reward.custom_reward_function.path=reward.py",
            "+reward.custom_reward_function.reward_kwargs.alpha=0.2",
            "++reward.custom_reward_function.reward_kwargs.mode='strict'",
            "trainer.total_training_steps=3",
        ],
        work,
        env={"REWARD_CALLS_FILE": str(log)},
    )
    assert r.returncode == 0, r.stderr
    assert STEP_RE.findall(r.stdout)[-1][1] == "0.200"
    assert all(c["kwargs"] == {"alpha": 0.2, "mode": "strict"} for c in calls(log))


def test_missing_reward_file(work: Path) -> None:
    r = run(["data.train_files=train.jsonl", "reward.custom_reward_function.path=nope.py"], work)
    assert r.returncode == 1
    assert "FileNotFoundError: Reward function file 'nope.py' not found." in r.stderr


def test_missing_reward_function(work: Path) -> None:
    r = run(
        ["data.train_files=train.jsonl", "reward.custom_reward_function.path=reward.py", "reward.custom_reward_function.name=nope"],
        work,
    )
    assert r.returncode == 1
    assert "Reward function 'nope' not found in 'reward.py'." in r.stderr


def test_reward_module_import_error(work: Path) -> None:
    (work / "broken.py").write_text("import not_a_module_anywhere_xyz\n")
    r = run(["data.train_files=train.jsonl", "reward.custom_reward_function.path=broken.py"], work)
    assert r.returncode == 1
    assert "Error loading module from 'broken.py': No module named 'not_a_module_anywhere_xyz'" in r.stderr


def test_builtin_reward_without_custom_function(work: Path) -> None:
    r = run(["data.train_files=train.jsonl"], work)
    assert r.returncode == 0, r.stderr
    assert "using customized reward function" not in r.stdout
    scores = [float(s) for _, s in STEP_RE.findall(r.stdout)]
    assert len(scores) == 3 and scores[-1] == 1.0


def test_missing_train_and_val_files(work: Path) -> None:
    r = run(["data.train_files=[train.jsonl,missing.parquet]"], work)
    assert r.returncode == 1
    assert "missing.parquet' not found" in r.stderr
    r = run(["data.train_files=train.jsonl", "data.val_files=nope.parquet"], work)
    assert r.returncode == 1
    assert "data.val_files" in r.stderr and "nope.parquet' not found" in r.stderr
    # verl's own default train file (~/data/rlhf/gsm8k/train.parquet), which is not there.
    r = run([], work)
    assert r.returncode == 1
    assert "gsm8k/train.parquet' not found" in r.stderr


@pytest.mark.parametrize(
    "arg, message, code",
    [
        ("foo", "Error parsing override 'foo'", 1),
        ("--instant", "unrecognized arguments: --instant", 2),  # Hydra's argparse
        ("data.train_files=a.jsonl,b.jsonl", "Ambiguous value for argument", 1),
        ("ray_kwargs.ray_init.address=auto", "Key 'address' is not in struct", 1),
        ("trainer.n_gpus_per_nod=1", "Could not override 'trainer.n_gpus_per_nod'.", 1),
    ],
)
def test_bad_arguments_are_hydra_s_refusals(work: Path, arg: str, message: str, code: int) -> None:
    r = run(["data.train_files=train.jsonl", arg], work)
    assert r.returncode == code
    assert message in r.stderr
    assert "Total training steps" not in r.stdout


def test_ray_init_address(work: Path) -> None:
    r = run(["data.train_files=train.jsonl", "+ray_kwargs.ray_init.address=auto"], work)
    assert r.returncode == 0, r.stderr
    assert "ray_init address=auto" in r.stdout


def test_exit_code_knob(work: Path) -> None:
    r = run(["data.train_files=train.jsonl"], work, env={"VERL_STANDIN_EXIT_CODE": "7"})
    assert r.returncode == 7
    assert "Total training steps: 3" in r.stdout
    assert "VERL_STANDIN_EXIT_CODE" in r.stderr
    assert not STEP_RE.findall(r.stdout)


def test_instant_mode_reads_nothing(work: Path) -> None:
    r = run(["data.train_files=does-not-exist.parquet"], work, env={"VERL_STANDIN_INSTANT": "1"})
    assert r.returncode == 0, r.stderr
    assert "Total training steps: 0" in r.stdout
    assert "step:" not in r.stdout


def test_step_seconds_knob(work: Path) -> None:
    r = run(["data.train_files=train.jsonl"], work, env={"VERL_STANDIN_STEP_SECONDS": "0.05"})
    assert r.returncode == 0, r.stderr
    timings = [float(t) for t in re.findall(r"timing_s/step:([0-9.]+)", r.stdout)]
    assert len(timings) == 3 and all(t >= 0.05 for t in timings)
    r = run(["data.train_files=train.jsonl"], work, env={"VERL_STANDIN_STEP_SECONDS": "soon"})
    assert r.returncode == 1


def test_jsonl_works_without_pyarrow(work: Path) -> None:
    blocker = work / "blocker" / "pyarrow"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('pyarrow blocked for this test')\n")
    path = os.pathsep.join([str(work / "blocker"), str(STANDIN)])
    r = run(["data.train_files=train.jsonl"], work, pythonpath=path)
    assert r.returncode == 0, r.stderr
    (work / "x.parquet").write_bytes(b"PAR1")
    r = run(["data.train_files=x.parquet"], work, pythonpath=path)
    assert r.returncode == 1
    assert "needs pyarrow" in r.stderr


def test_sft_through_torchrun_standin(work: Path) -> None:
    (work / "sft.jsonl").write_text(json.dumps({"question": "2+2?", "answer": "4"}) + "\n")
    ckpt = work / "sft-ckpt"
    # verl 0.9.1: sft_trainer, config sft_trainer_engine, model.path.
    exe = [sys.executable, str(TORCHRUN), "--standalone", "--nnodes=1", "--nproc_per_node=2",
           "--master_port", "29501", "-m", "verl.trainer.sft_trainer"]
    base = ["data.train_batch_size=4", "data.val_files=null", "trainer.total_epochs=1"]
    r = run(
        [
            *base,
            "data.train_files=sft.jsonl",
            "model.path=Qwen/Qwen2.5-0.5B-Instruct",
            "trainer.save_freq=1",
            f"trainer.default_local_dir={ckpt}",
        ],
        work,
        exe=exe,
        env={"VERL_SFT_LOGGING_LEVEL": "INFO"},  # as Argus sets it: verl 0.9's SFT trainer logs its total at INFO
    )
    assert r.returncode == 0, r.stderr
    assert "model.path: Qwen/Qwen2.5-0.5B-Instruct" in r.stdout
    assert "[Rank 0] Total training steps: 3," in r.stdout
    assert len(re.findall(r"^step:\d+ - train/loss:[0-9.]+ - ", r.stdout, re.M)) == 3
    assert "Final validation metrics: {" in r.stdout
    assert (ckpt / "global_step_3").is_dir()

    # The module's exit code comes back through the torchrun stand-in.
    r = run([*base, "data.train_files=sft.jsonl", "model.path=null"], work, exe=exe)
    assert r.returncode == 1
    assert "model.path is not set" in r.stderr
    r = run([*base, "data.train_files=sft.jsonl", "model.path=m"], work, exe=exe, env={"VERL_STANDIN_EXIT_CODE": "5"})
    assert r.returncode == 5


def test_sft_trainer_of_each_release(work: Path) -> None:
    """verl 0.9 has no fsdp_sft_trainer; verl 0.6.1's reads model.partial_pretrain and splits
    the batch over the GPUs into whole micro batches, as verl does."""
    (work / "sft.jsonl").write_text(json.dumps({"question": "2+2?", "answer": "4"}) + "\n")
    legacy = ["-m", "verl.trainer.fsdp_sft_trainer", "data.train_files=sft.jsonl", "data.val_files=null",
              "model.partial_pretrain=m", "trainer.total_epochs=1", "data.train_batch_size=8", "data.micro_batch_size_per_gpu=4"]
    r = run(legacy[2:], work, exe=[sys.executable, *legacy[:2]])
    assert r.returncode == 1 and "No module named verl.trainer.fsdp_sft_trainer" in r.stderr
    old = str(standin_snapshot("0.6.1"))
    r = run(legacy[2:] + ["trainer.n_gpus_per_node=1"], work, exe=[sys.executable, *legacy[:2]], pythonpath=old)
    assert r.returncode == 0, r.stderr
    assert "model.partial_pretrain: m" in r.stdout
    r = run(legacy[2:] + ["trainer.n_gpus_per_node=3"], work, exe=[sys.executable, *legacy[:2]], pythonpath=old)
    assert r.returncode == 1 and "Global batch size 8 is not divisible by dp size 3" in r.stderr


def test_torchrun_standin_flags(work: Path) -> None:
    script = work / "hello.py"
    script.write_text("import os, sys\nprint('args', sys.argv[1:], os.environ['WORLD_SIZE'])\nsys.exit(4)\n")
    r = subprocess.run(
        [sys.executable, str(TORCHRUN), "--nnodes", "1", "--nproc-per-node", "8", "--node_rank=0",
         "--master_addr", "10.0.0.1", "--rdzv_backend=c10d", "--rdzv_endpoint=h:1", str(script), "a=1", "--x"],
        cwd=work, capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 4
    assert "args ['a=1', '--x'] 1" in r.stdout
    r = subprocess.run([sys.executable, str(TORCHRUN), "--bogus", "-m", "x"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "unrecognized argument --bogus" in r.stderr
    assert os.access(TORCHRUN, os.X_OK)
    assert TORCHRUN.read_text().startswith("#!/usr/bin/env python3\n")


def test_resumes_from_the_newest_checkpoint_as_verl_does(work: Path) -> None:
    """trainer.resume_mode=auto (verl's default): a second run in the same folder finds
    latest_checkpointed_iteration.txt under the default checkpoint folder (relative to the
    working directory) and goes on from there, printing what verl prints."""
    args = ["data.train_files=[train.jsonl]", "trainer.total_training_steps=6", "trainer.save_freq=2",
            "trainer.project_name=p", "trainer.experiment_name=e"]
    first = run(args, work, env={"VERL_STANDIN_EXIT_AFTER_STEP": "3"})  # dies after step 3: checkpoint at 2
    assert "Training from scratch" in first.stdout
    ckpt = work / "checkpoints" / "p" / "e"
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text() == "2"
    second = run(args, work)
    assert second.returncode == 0, second.stderr
    assert re.search(rf"^INFO:[\d :,-]+:Resuming from {re.escape(str(ckpt))}/global_step_2, setting global step to 2$",
                     second.stdout, re.M), second.stdout
    assert [int(n) for n, _ in STEP_RE.findall(second.stdout)] == [3, 4, 5, 6]
    disabled = run([*args, "trainer.resume_mode=disable"], work)
    assert [int(n) for n, _ in STEP_RE.findall(disabled.stdout)] == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize(("drop", "message"), [
    ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "[actor] Please set at least one of"),
    ("actor_rollout_ref.rollout.tensor_model_parallel_size", "rollout world_size: 1 is not divisible by infer_world_size: 2"),
    ("critic.ppo_micro_batch_size_per_gpu", "[critic] Please set at least one of"),
    ("actor_rollout_ref.rollout.name", "Missing mandatory value: actor_rollout_ref.rollout.name"),
])
def test_a_command_verl_refuses_at_start_fails(work: Path, drop: str, message: str) -> None:
    """What Argus generated before (no micro batch sizes, verl's tensor-parallel size 2 on
    one GPU) fails in the stand-in as it fails in verl, before training."""
    words = [w for w in PPO_BASE if not w.startswith(drop + "=")]
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("VERL_STANDIN_")}
    full_env["PYTHONPATH"] = str(STANDIN)
    r = subprocess.run([sys.executable, "-m", "verl.trainer.main_ppo", *words, "data.train_files=train.jsonl"], cwd=work,
                       env=full_env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and message in r.stderr, r.stderr
    assert "Total training steps" not in r.stdout


def test_without_default_local_dir_checkpoints_land_in_the_working_folder(work: Path) -> None:
    """verl's default trainer.default_local_dir is the relative checkpoints/<project>/<experiment>:
    relative to the process's working folder (for Argus's jobs, the job folder); Hydra's run
    folder (outputs/<date>/<time>, with .hydra and main_ppo.log) lands there too."""
    r = run(["data.train_files=train.jsonl", "trainer.save_freq=1", "trainer.project_name=p", "trainer.experiment_name=e"], work)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (work / "checkpoints" / "p" / "e").iterdir())[0] == "global_step_1"
    assert list(work.glob("outputs/*/*/.hydra/config.yaml")) and list(work.glob("outputs/*/*/main_ppo.log"))
    # Started again in the same folder, it resumes there (trainer.resume_mode=auto).
    again = run(["data.train_files=train.jsonl", "trainer.save_freq=1", "trainer.project_name=p",
                 "trainer.experiment_name=e", "trainer.total_training_steps=4"], work)
    assert "Resuming from " + str(work / "checkpoints" / "p" / "e" / "global_step_3") in again.stdout, again.stdout


# ---------------------------------------------------------------------------------- fidelity

REAL_LOGS = Path(__file__).parents[1] / "unit" / "verl_logs" / "0.9.1"
# The words verl prints in each kind of progress line (what core.progress reads).
KINDS = {
    "total": "Total training steps:",
    "step": "step:",
    "resumed": ("Resuming from", "Found latest checkpoint:"),
    "scratch": "Training from scratch",
    "final": "Final validation metrics:",
}


def forms(text: str) -> dict[str, set[str]]:
    """Each progress line's form: what stands before verl's words (Ray's actor prefix, a
    logger's prefix, tqdm's bar), with numbers, times, files and bars made alike; and for
    step lines, the metric keys."""
    out: dict[str, set[str]] = {}
    for raw in re.split(r"[\r\n]", text):
        line = verl_lines(raw)[0] if raw else ""
        for kind, words in KINDS.items():
            words = (words,) if isinstance(words, str) else words
            if kind == "step":
                hit = "step:" if re.match(r"step:\d+ - ", line) else None
            else:  # after whatever prefix the logger put before the words
                hit = next((w for w in words if w in line), None)
            if hit is None:
                continue
            before = raw[: raw.index(hit)] if kind != "step" else raw[: len(raw) - len(line)]
            form = re.sub(r"\|[^|]*\|", "|BAR|", before)
            form = re.sub(r"\[[^\]]*\]", "[T]", re.sub(r"/\S+?\.py", "FILE.py", form))
            out.setdefault(kind, set()).add(re.sub(r"\d+", "9", form))
            if kind == "step":
                out.setdefault("step keys", set()).update(re.findall(r" - ([^:]+):", line))
    return out


def test_the_standin_speaks_as_real_verl_0_9_1(work: Path) -> None:
    """The stand-in's progress lines have the form of real verl 0.9.1's, recorded from real
    runs (tests/unit/verl_logs/0.9.1): the same prefixes (Ray's coloured actor prefix,
    verl's logger prefixes, tqdm's bar), only metric keys real verl prints, and each kind of
    line the reader needs. The real logs' reading is tested in tests/unit/test_progress_real_logs.py."""
    ckpt = work / "ckpt"
    args = ["data.train_files=[train.jsonl]", "trainer.total_training_steps=4", "trainer.save_freq=2",
            f"trainer.default_local_dir={ckpt}", "reward.custom_reward_function.path=reward.py"]
    first = run(args, work, env={"VERL_STANDIN_EXIT_AFTER_STEP": "3"})
    second = run(args, work)
    ppo = forms(first.raw + second.raw)  # type: ignore[attr-defined]
    real_ppo = forms((REAL_LOGS / "main_ppo-grpo.log").read_text() + (REAL_LOGS / "main_ppo-grpo-resumed.log").read_text())
    for kind in ("total", "step", "resumed", "scratch"):
        assert ppo.get(kind) and ppo[kind] <= real_ppo[kind], (kind, ppo.get(kind), real_ppo.get(kind))
    assert ppo["step keys"] <= real_ppo["step keys"], ppo["step keys"] - real_ppo["step keys"]

    (work / "sft.jsonl").write_text(json.dumps({"question": "2+2?", "answer": "4"}) + "\n")
    exe = [sys.executable, str(TORCHRUN), "--standalone", "--nnodes=1", "--nproc_per_node=1", "-m", "verl.trainer.sft_trainer"]
    sft_args = ["data.train_batch_size=4", "data.val_files=null", "trainer.total_epochs=1", "data.train_files=sft.jsonl",
                "model.path=m", "trainer.save_freq=2", f"trainer.default_local_dir={work / 'sft-ckpt'}"]
    env = {"VERL_SFT_LOGGING_LEVEL": "INFO"}
    sft_first = run(sft_args, work, exe=exe, env={**env, "VERL_STANDIN_EXIT_AFTER_STEP": "2"})
    sft_second = run(sft_args, work, exe=exe, env=env)
    sft = forms(sft_first.raw + sft_second.raw)  # type: ignore[attr-defined]
    real_sft = forms((REAL_LOGS / "sft_trainer.log").read_text() + (REAL_LOGS / "sft_trainer-resumed.log").read_text())
    for kind in ("total", "step", "resumed"):
        assert sft.get(kind) and sft[kind] <= real_sft[kind], (kind, sft.get(kind), real_sft.get(kind))
    assert sft["step keys"] <= real_sft["step keys"], sft["step keys"] - real_sft["step keys"]
    # Without INFO, verl 0.9's SFT trainer says no total, and neither does the stand-in.
    quiet = run(sft_args + ["trainer.default_local_dir=" + str(work / "sft-quiet")], work, exe=exe)
    assert "Total training steps" not in quiet.stdout and "step:1 - " in quiet.stdout
