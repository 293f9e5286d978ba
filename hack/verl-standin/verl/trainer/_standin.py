"""Shared code of the verl STAND-IN trainers.

This is a TEST AND DEMO DOUBLE of the training workload, not of the system under test: real verl
needs GPUs, so the argus operator's tests and demos on machines without accelerators run this
instead. It imitates the parts of verl that the operator depends on:

* the configuration: Hydra's own ``@hydra.main`` composes verl's real config tree (the
  release's ``verl/trainer/config``, copied next to these modules by the testbed; never kept
  in the repository) with the command line, so overrides, ``hydra.*`` settings (run folder,
  ``.hydra`` output, the job's log file) and Hydra's refusals are Hydra's own;
* verl's start-up checks that read only the config (``startup_checks``: micro batch sizes,
  batch divisibility, the rollout engine and tensor-parallel size), written here from what
  verl checks, not copied, and held to verl's own by tests/integration/test_verl_oracle.py;
* verl's custom reward function loading, from the key the release's main_ppo reads
  (``reward.custom_reward_function`` from 0.9, ``custom_reward_function`` before), with
  verl's messages;
* reading a few rows of the training data (``.parquet`` through pyarrow when it is installed,
  ``.jsonl``/``.json`` with the standard library only) and scoring fake responses with the
  reward function;
* the console progress output (``Total training steps: N``, ``step:<n> - key:value ...``,
  ``Final validation metrics: {...}``) as the job's log shows it, in the form recorded from
  real verl 0.9.1 runs (tests/unit/verl_logs/0.9.1, and a test holds the stand-in to it):
  main_ppo's lines as its TaskRunner Ray actor prints them (Ray's coloured
  ``(TaskRunnerV1 pid=N)`` prefix, verl's ``INFO:<time>:`` logger prefix), the SFT trainer's
  step lines glued after tqdm's bar and its total at INFO level; the older form (clean
  lines) for older releases, of which no real run was recorded; and ``global_step_<n>``
  checkpoint folders under
  ``trainer.default_local_dir`` (verl's default ``checkpoints/<project>/<experiment>``,
  relative to the working folder), resumed as ``trainer.resume_mode`` says.

It does no training, loads no model and never imports torch; it imports ray only for the
``VERL_STANDIN_PLACEMENT_GROUP`` knob. It needs hydra-core (and pyarrow, lazily, for parquet
files alone).

Environment knobs (all optional):

* ``VERL_STANDIN_STEP_SECONDS`` -- seconds to sleep in each step (float, default 0).
* ``VERL_STANDIN_EXIT_CODE`` -- when set to a non-zero integer, print an error and exit with
  that code right after startup (after ``Total training steps: N``), to imitate a failed task.
* ``VERL_STANDIN_EXIT_AFTER_STEP`` -- exit 1 right after that step (and its checkpoint), to
  imitate a run that crashed mid-way; a run started again in the same folder resumes from the
  newest checkpoint (``trainer.resume_mode=auto``, verl's default), printing what verl prints.
* ``VERL_STANDIN_PLACEMENT_GROUP`` -- when ``1``/``true``/``yes``, main_ppo joins the Ray cluster
  its job runs on and holds ``trainer.n_gpus_per_node`` GPU bundles on each of
  ``trainer.nnodes`` nodes in placement groups for its whole run, as verl's resource pools do
  (``RayResourcePool``): Ray then shows the job's GPUs in use on their nodes, as it does for
  real verl (the queue's claims and preemption read them). Off by default: it costs a Ray
  connection per job.
* ``VERL_STANDIN_INSTANT`` -- when ``1``/``true``/``yes``, print ``Total training steps: 0`` and
  exit 0 right after composing the config, without the start-up checks, the reward function
  or the data (for benchmarks that start many tasks).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
import re
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

MAX_ROWS = 4
MIN_STEPS = 3


def release() -> tuple[int, ...]:
    """The verl release whose config tree the testbed copied in (verl/version/version)."""
    folder = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        with open(os.path.join(folder, "version", "version"), encoding="utf-8") as fh:
            text = fh.read().strip()
    except OSError:
        return (0, 0)
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


# The log form recorded from real runs (tests/unit/verl_logs/0.9.1): from verl 0.9 on.
RECORDED_FORM = release() >= (0, 9)



# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


class KnobError(Exception):
    """A stand-in environment knob with a bad value."""


def known(exc: BaseException) -> BaseException:
    """Mark an exception as an expected failure (kept for the callers' readability; Hydra's
    @hydra.main reports every exception from the job the same way)."""
    exc.standin_known = True  # type: ignore[attr-defined]
    return exc


# --------------------------------------------------------------------------------------------
# The config: composed by Hydra's own @hydra.main from the verl release's config tree
# --------------------------------------------------------------------------------------------


class Config:
    """Dotted reads of the DictConfig Hydra composed (interpolations resolved on read, as
    verl resolves the whole config); containers come back as plain dicts and lists."""

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg

    def get(self, key: str, default: Any = None) -> Any:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        node: Any = self.cfg
        for part in key.split("."):
            if not isinstance(node, DictConfig) or part not in node.keys():  # a ??? value is "not in" a DictConfig
                return default
            if OmegaConf.is_missing(node, part):
                return MISSING
            node = node[part]
        if isinstance(node, (DictConfig, ListConfig)):
            return OmegaConf.to_container(node, resolve=True)
        return node

    def has(self, key: str) -> bool:
        return self.get(key, _ABSENT) is not _ABSENT


MISSING = "???"  # OmegaConf's mark for a mandatory value nobody set
_ABSENT = object()


# --------------------------------------------------------------------------------------------
# Environment knobs
# --------------------------------------------------------------------------------------------


@dataclass
class Knobs:
    step_seconds: float
    exit_code: int
    instant: bool
    exit_after_step: int = 0  # die (exit 1) right after this step, as a crashed run does
    placement_group: bool = False  # hold the run's GPUs in Ray placement groups, as verl does


def read_knobs() -> Knobs:
    raw = os.environ.get("VERL_STANDIN_STEP_SECONDS", "").strip()
    try:
        step_seconds = float(raw) if raw else 0.0
    except ValueError:
        raise KnobError(f"VERL_STANDIN_STEP_SECONDS must be a number, got {raw!r}") from None
    if not math.isfinite(step_seconds) or step_seconds < 0:
        raise KnobError(f"VERL_STANDIN_STEP_SECONDS must be >= 0, got {raw!r}")
    raw = os.environ.get("VERL_STANDIN_EXIT_CODE", "").strip()
    try:
        exit_code = int(raw) if raw else 0
    except ValueError:
        raise KnobError(f"VERL_STANDIN_EXIT_CODE must be an integer, got {raw!r}") from None
    instant = os.environ.get("VERL_STANDIN_INSTANT", "").strip().lower() in ("1", "true", "yes")
    raw = os.environ.get("VERL_STANDIN_EXIT_AFTER_STEP", "").strip()
    try:
        exit_after_step = int(raw) if raw else 0
    except ValueError:
        raise KnobError(f"VERL_STANDIN_EXIT_AFTER_STEP must be an integer, got {raw!r}") from None
    placement_group = os.environ.get("VERL_STANDIN_PLACEMENT_GROUP", "").strip().lower() in ("1", "true", "yes")
    return Knobs(step_seconds, exit_code, instant, exit_after_step, placement_group)


def hold_gpus(config: Config, knobs: Knobs) -> Any:
    """The VERL_STANDIN_PLACEMENT_GROUP knob: join the job's Ray cluster and hold the run's
    GPUs as verl's resource pools do, one placement group of ``n_gpus_per_node`` one-GPU
    bundles per node (STRICT_PACK); Ray removes them when the job's driver ends. Returns what
    keeps them (None without the knob)."""
    if not knobs.placement_group:
        return None
    import ray  # noqa: PLC0415 - only with the knob (module docstring)
    from ray.util.placement_group import placement_group  # noqa: PLC0415

    ray.init(address="auto", log_to_driver=False, logging_level="warning")
    per_node, nnodes = int(config.get("trainer.n_gpus_per_node") or 1), int(config.get("trainer.nnodes") or 1)
    groups = [placement_group([{"GPU": 1.0, "CPU": 0.0}] * per_node, strategy="STRICT_PACK") for _ in range(nnodes)]
    ray.get([g.ready() for g in groups], timeout=120)
    say(f"resource pool: {nnodes} placement group(s) of {per_node} GPU bundle(s) ready")
    return groups


def crash_after(knobs: Knobs, step: int) -> int | None:
    """The VERL_STANDIN_EXIT_AFTER_STEP knob: exit 1 after that step (its checkpoint, if
    any, is written), as a run that crashed mid-way."""
    if knobs.exit_after_step and step == knobs.exit_after_step:
        sys.stdout.flush()
        print(f"verl stand-in: crashing on purpose after step {step} (VERL_STANDIN_EXIT_AFTER_STEP)", file=sys.stderr, flush=True)
        return 1
    return None


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


def as_paths(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]


def _read_json_rows(path: str, limit: int) -> list[dict]:
    rows: list = []
    with open(path, encoding="utf-8") as fh:
        head = fh.read(1)
        while head and head.isspace():
            head = fh.read(1)
        fh.seek(0)
        if head == "[":  # a whole-file JSON array
            try:
                data = json.load(fh)
            except json.JSONDecodeError as exc:
                raise known(ValueError(f"Data file '{path}' is not valid JSON: {exc}")) from None
            rows = list(data[:limit])
        else:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise known(
                        ValueError(f"Data file '{path}' line {lineno} is not valid JSON: {exc}")
                    ) from None
                if len(rows) >= limit:
                    break
    for n, row in enumerate(rows):
        if not isinstance(row, dict):
            raise known(ValueError(f"Data file '{path}' row {n} is not a JSON object: {row!r}"))
    return rows


def _read_parquet_rows(path: str, limit: int) -> list[dict]:
    try:
        import pyarrow.parquet as pq  # lazy: only parquet files need it
    except ImportError as exc:
        raise known(
            RuntimeError(
                f"Reading '{path}' needs pyarrow, which is not installed ({exc}); "
                "install pyarrow or use .jsonl data"
            )
        ) from None
    try:
        pf = pq.ParquetFile(path)
        for batch in pf.iter_batches(batch_size=limit):
            return batch.to_pylist()[:limit]
        return []
    except Exception as exc:  # pyarrow raises several types for bad files
        raise known(RuntimeError(f"Cannot read parquet file '{path}': {exc}")) from None


def read_rows(paths: list[str], what: str, limit: int = MAX_ROWS) -> list[dict]:
    """Check every file of ``paths`` exists and return up to ``limit`` rows from them."""
    resolved = [os.path.expanduser(p) for p in paths]
    for p in resolved:
        if not os.path.isfile(p):
            raise known(FileNotFoundError(f"{what}: data file '{p}' not found."))
    rows: list[dict] = []
    for p in resolved:
        if len(rows) >= limit:
            break
        low = p.lower()
        if low.endswith(".parquet"):
            rows.extend(_read_parquet_rows(p, limit - len(rows)))
        elif low.endswith((".jsonl", ".json")):
            rows.extend(_read_json_rows(p, limit - len(rows)))
        else:
            raise known(
                ValueError(f"{what}: unsupported data file '{p}' (expected .parquet, .jsonl or .json)")
            )
    if not rows:
        raise known(ValueError(f"{what}: no rows in {paths}"))
    return rows


# --------------------------------------------------------------------------------------------
# Reward function (verl's loader, same messages)
# --------------------------------------------------------------------------------------------


def reward_key(config: Config) -> str:
    """Where the release's main_ppo reads the reward function: the ``reward`` group's
    ``custom_reward_function`` from verl 0.9 (the top-level keys still compose there, for
    backward compatibility, but main_ppo does not read them), the top level before."""
    return "reward.custom_reward_function" if config.has("reward.custom_reward_function") else "custom_reward_function"


def get_custom_reward_fn(config: Config) -> Callable[..., Any] | None:
    """Load the reward function (``reward_key``) the way verl v0.4/v0.5 does.

    Messages are verl's: ``Reward function file '<path>' not found.`` (FileNotFoundError),
    ``Error loading module from '<path>': <error>`` (RuntimeError), ``Reward function '<name>'
    not found in '<path>'.`` (AttributeError), and on success ``using customized reward function
    '<name>' from '<path>'``. ``custom_reward_function.reward_kwargs`` become keyword arguments
    of each call (verl binds them with functools.partial)."""
    block = config.get(reward_key(config)) or {}
    file_path = block.get("path")
    if not file_path:
        return None
    if not os.path.exists(file_path):
        raise known(FileNotFoundError(f"Reward function file '{file_path}' not found."))
    spec = importlib.util.spec_from_file_location("custom_module", file_path)
    if spec is None or spec.loader is None:
        raise known(RuntimeError(f"Error loading module from '{file_path}': not a Python file"))
    module = importlib.util.module_from_spec(spec)
    try:
        sys.modules["custom_module"] = module
        spec.loader.exec_module(module)
    except Exception as exc:
        raise known(RuntimeError(f"Error loading module from '{file_path}': {exc}")) from exc
    function_name = block.get("name") or "compute_score"
    if not hasattr(module, function_name):
        raise known(AttributeError(f"Reward function '{function_name}' not found in '{file_path}'."))
    if release() < (0, 7):  # verl 0.7 and later print nothing when the function loads
        print(f"using customized reward function '{function_name}' from '{file_path}'", flush=True)
    raw_fn = getattr(module, function_name)
    reward_kwargs = dict(block.get("reward_kwargs") or {})
    fn = functools.partial(raw_fn, **reward_kwargs)
    fn.standin_name = function_name  # type: ignore[attr-defined]
    return fn


def default_compute_score(data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None) -> float:
    """The stand-in's built-in trivial score: 1.0 when the text after the last ``####`` equals
    the ground truth, else 0.0."""
    if ground_truth is None or "####" not in solution_str:
        return 0.0
    return 1.0 if solution_str.rsplit("####", 1)[1].strip() == str(ground_truth).strip() else 0.0


def prompt_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, (list, tuple)):
        parts = []
        for msg in prompt:
            if isinstance(msg, dict):
                parts.append(str(msg.get("content", "")))
            else:
                parts.append(str(msg))
        return "\n".join(parts)
    return str(prompt)


def fake_response(text: str, ground_truth: Any, correct: bool) -> str:
    """A deterministic fake model response derived from the prompt, ending in a GSM8K-style
    ``#### <answer>``; the answer is the ground truth when ``correct``, else a wrong one."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    gist = (lines[-1] if lines else "")[:160]
    truth = "" if ground_truth is None else str(ground_truth)
    answer = truth if correct else (truth + "0" if truth else "0")
    return f"Let me work this out. {gist}\nSo the answer is:\n#### {answer}"


@dataclass
class RLRow:
    data_source: Any
    text: str
    ground_truth: Any
    extra_info: Any


def to_rl_rows(rows: list[dict], prompt_key: str, what: str) -> list[RLRow]:
    out = []
    for n, row in enumerate(rows):
        if prompt_key not in row:
            raise known(
                KeyError(f"{what}: row {n} has no '{prompt_key}' field (data.prompt_key); keys: {sorted(row)}")
            )
        rm = row.get("reward_model")
        ground_truth = rm.get("ground_truth") if isinstance(rm, dict) else None
        out.append(RLRow(row.get("data_source", "unknown"), prompt_text(row[prompt_key]), ground_truth, row.get("extra_info")))
    return out


def score_rows(fn: Callable[..., Any], name: str, rows: list[RLRow], correct_count: int) -> list[float]:
    scores = []
    for n, row in enumerate(rows):
        result = fn(
            data_source=row.data_source,
            solution_str=fake_response(row.text, row.ground_truth, n < correct_count),
            ground_truth=row.ground_truth,
            extra_info=row.extra_info,
        )
        if isinstance(result, dict) and "score" in result:
            result = result["score"]
        if isinstance(result, (int, float)):
            scores.append(float(result))
        else:
            raise known(
                TypeError(
                    f"Reward function '{name}' returned {type(result).__name__} {result!r}; "
                    "expected a float or a dict with a 'score' key"
                )
            )
    return scores


# --------------------------------------------------------------------------------------------
# Output helpers
# --------------------------------------------------------------------------------------------


def fmt(v: float) -> str:
    if v != 0 and abs(v) < 1e-3:
        return f"{v:g}"
    return f"{v:.3f}"


def step_line(step: int, metrics: dict[str, Any]) -> str:
    parts = [f"step:{step}"]
    for k, v in metrics.items():
        parts.append(f"{k}:{fmt(v) if isinstance(v, float) else v}")
    return " - ".join(parts)


def say(*args: Any) -> None:
    print(*args, flush=True)


def _now() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f",{int(t * 1000) % 1000:03d}"


class Voice:
    """How a trainer's progress lines reach the job's log: plain lines (releases before 0.9,
    of which no real run was recorded)."""

    def say(self, text: str) -> None:
        say(text)

    def info(self, text: str) -> None:
        """A line verl prints through its logger at INFO level."""
        say(text)

    def step(self, step: int, total: int, text: str) -> None:
        say(text)

    def resumed(self, folder: str, step: int) -> None:
        say(f"Load from checkpoint folder: {folder}")
        say(f"Setting global step to {step}")
        say(f"Resuming from {folder}")


class TaskRunnerVoice(Voice):
    """main_ppo from verl 0.9: its TaskRunner is a Ray actor, so each line it prints reaches
    the job's log behind Ray's coloured actor prefix, and its logger adds ``INFO:<time>:``."""

    def say(self, text: str) -> None:
        say(f"\x1b[36m(TaskRunnerV1 pid={os.getpid()})\x1b[0m {text}")

    def info(self, text: str) -> None:
        self.say(f"INFO:{_now()}:{text}")

    def step(self, step: int, total: int, text: str) -> None:
        self.say(text)

    def resumed(self, folder: str, step: int) -> None:
        self.info(f"Resuming from {folder}, setting global step to {step}")


class SFTVoice(Voice):
    """verl 0.9's SFT trainer under torchrun: its logger writes ``[<time>][<file>][INFO] -
    [Rank 0] ...``, and each step line follows tqdm's bar on the same line."""

    def info(self, text: str) -> None:
        trainer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sft_trainer.py")
        say(f"[{_now()}][{trainer}][INFO] - [Rank 0] {text}")

    def step(self, step: int, total: int, text: str) -> None:
        done = step - 1
        filled = int(10 * done / total) if total else 0
        bar = ("\u2588" * filled).ljust(10)
        percent = int(100 * done / total) if total else 0
        if done == 0:  # the first step line comes after the bar's first drawing and a newline
            sys.stdout.write(f"Epoch 1/1: {percent:3d}%|{bar}| {done}/{total} [00:00<?, ?it/s]\n{text}\n")
        else:
            sys.stdout.write(f"\rEpoch 1/1: {percent:3d}%|{bar}| {done}/{total} [00:00<00:00,  3.45it/s]{text}\n")
        sys.stdout.flush()

    def resumed(self, folder: str, step: int) -> None:
        say(f"Found latest checkpoint: {folder} (step {step})")


def sft_total_line(out: Voice, total: int) -> str:
    return f"Total training steps: {total}," if isinstance(out, SFTVoice) else f"Total training steps: {total}"


def voice(entry: str) -> Voice:
    if not RECORDED_FORM:
        return Voice()
    return TaskRunnerVoice() if entry == "main_ppo" else SFTVoice()


def total_steps(config: Config, n_rows: int) -> int:
    explicit = config.get("trainer.total_training_steps")
    if explicit is not None:
        if not isinstance(explicit, int) or isinstance(explicit, bool) or explicit < 0:
            raise known(ValueError(f"trainer.total_training_steps must be a non-negative int, got {explicit!r}"))
        return explicit
    epochs = config.get("trainer.total_epochs", 1)
    if not isinstance(epochs, int) or isinstance(epochs, bool) or epochs < 1:
        raise known(ValueError(f"trainer.total_epochs must be a positive int, got {epochs!r}"))
    return max(MIN_STEPS, n_rows * epochs)


def checkpoint_dir(config: Config) -> str:
    """Where checkpoints go: trainer.default_local_dir, by default (as in verl)
    checkpoints/<project>/<experiment>, relative to the working directory (the job folder)."""
    out_dir = config.get("trainer.default_local_dir")
    if not out_dir:
        project = config.get("trainer.project_name") or "verl_examples"
        experiment = config.get("trainer.experiment_name") or "gsm8k"
        out_dir = os.path.join("checkpoints", str(project), str(experiment))
    out_dir = os.path.expanduser(str(out_dir))
    return out_dir if os.path.isabs(out_dir) else os.path.join(os.getcwd(), out_dir)


def resume_step(config: Config, out: Voice | None = None) -> int:
    """The step training starts after, as verl's trainer.resume_mode decides: ``auto`` (the
    default) resumes from the newest checkpoint that latest_checkpointed_iteration.txt names,
    ``resume_path`` from trainer.resume_from_path, ``disable`` from scratch. Prints what verl
    prints."""
    mode = config.get("trainer.resume_mode", "auto")
    if mode == "disable":
        return 0
    folder: str | None = None
    if mode == "resume_path":
        folder = str(config.get("trainer.resume_from_path") or "")
        if "global_step_" not in folder:
            raise known(ValueError("resume ckpt must specify the global_steps"))
    else:
        out_dir = checkpoint_dir(config)
        try:
            with open(os.path.join(out_dir, "latest_checkpointed_iteration.txt"), encoding="utf-8") as fh:
                latest = int(fh.read().strip())
        except (OSError, ValueError):
            latest = None
        candidate = os.path.join(out_dir, f"global_step_{latest}") if latest is not None else None
        folder = candidate if candidate and os.path.isdir(candidate) else None
        if folder is None:
            (out or Voice()).info("Training from scratch")
            return 0
    step = int(folder.rstrip("/").split("global_step_")[-1])
    (out or Voice()).resumed(folder, step)
    return step


def maybe_checkpoint(config: Config, step: int, total: int, metrics: dict[str, Any]) -> None:
    save_freq = config.get("trainer.save_freq", -1)
    if not isinstance(save_freq, int) or save_freq <= 0:
        return
    if step % save_freq != 0 and step != total:
        return
    out_dir = checkpoint_dir(config)
    folder = os.path.join(out_dir, f"global_step_{step}")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "standin_checkpoint.json"), "w", encoding="utf-8") as fh:
        json.dump({"global_step": step, "metrics": metrics, "standin": True}, fh)
        fh.write("\n")
    with open(os.path.join(out_dir, "latest_checkpointed_iteration.txt"), "w", encoding="utf-8") as fh:
        fh.write(str(step))
    say(f"local_global_step_folder: {folder}")


def check_val_files(config: Config) -> list[str]:
    paths = as_paths(config.get("data.val_files"))
    for p in paths:
        if not os.path.isfile(os.path.expanduser(p)):
            raise known(FileNotFoundError(f"data.val_files: data file '{os.path.expanduser(p)}' not found."))
    return paths


# --------------------------------------------------------------------------------------------
# Running an entry point the way Hydra reports errors
# --------------------------------------------------------------------------------------------


def run_task(cfg: Any, task: Callable[[Config, Knobs], int]) -> None:
    """Run ``task`` on the config Hydra composed; exit with its code. An exception from the
    job is left to @hydra.main, which reports it as verl's runs do (``Error executing job
    with overrides: [...]``, the error, exit 1)."""
    knobs = read_knobs()
    code = task(Config(cfg), knobs)
    sys.stdout.flush()
    if code:
        sys.exit(code)


def startup_done(knobs: Knobs) -> int | None:
    """Called right after ``Total training steps: N``: the simulated-failure knob."""
    if knobs.exit_code:
        sys.stdout.flush()
        print(
            f"verl stand-in: failing on purpose with exit code {knobs.exit_code} "
            f"(VERL_STANDIN_EXIT_CODE)",
            file=sys.stderr,
            flush=True,
        )
        return knobs.exit_code
    return None


def timed_sleep(seconds: float) -> None:
    if seconds > 0:
        time.sleep(seconds)


# --------------------------------------------------------------------------------------------
# verl's start-up checks (those that read only the config)
# --------------------------------------------------------------------------------------------


def _positive_int(config: Config, key: str) -> int:
    value = config.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise known(ValueError(f"{key} must be a positive integer, got {value!r}"))
    return value


def _exactly_one(config: Config, section: str, param: str, label: str) -> None:
    old, per_gpu = config.get(f"{section}.{param}"), config.get(f"{section}.{param}_per_gpu")
    if old is None and per_gpu is None:
        raise known(ValueError(f"[{label}] Please set at least one of '{section}.{param}' or '{section}.{param}_per_gpu'."))
    if old is not None and per_gpu is not None:
        raise known(ValueError(f"[{label}] You have set both '{section}.{param}' AND '{section}.{param}_per_gpu'. "
                               f"Please remove '{section}.{param}' because only '*_{param}_per_gpu' is supported "
                               "(the former is deprecated)."))


def startup_checks(config: Config, entry: str) -> None:
    """What verl refuses before training, reading only the config; raises the first refusal.

    main_ppo: the micro batch sizes (actor; rollout log-probs; the reference model when a KL
    term needs it; the critic with GAE), unless dynamic batch sizes are on; the batch times
    the responses per prompt divisible by the GPUs and not below the actor's mini batch; the
    rollout engine set; its tensor x data x pipeline parallel size dividing the GPUs. SFT: the
    batch split over the GPUs (fsdp_sft_trainer: evenly, into whole micro batches)."""
    gpus = _positive_int(config, "trainer.n_gpus_per_node") * _positive_int(config, "trainer.nnodes")
    batch = _positive_int(config, "data.train_batch_size")
    if entry == "main_ppo":
        actor, rollout = "actor_rollout_ref.actor", "actor_rollout_ref.rollout"
        if not config.get(f"{actor}.use_dynamic_bsz"):
            n = _positive_int(config, f"{rollout}.n")
            if (batch * n) % gpus:
                raise known(AssertionError(f"real_train_batch_size ({batch * n}) must be divisible by minimal possible "
                                           f"batch size ({gpus})"))
            _exactly_one(config, actor, "ppo_micro_batch_size", "actor")
            mini = _positive_int(config, f"{actor}.ppo_mini_batch_size")
            if batch < mini:
                raise known(ValueError(f"train_batch_size ({batch}) must be >= actor.ppo_mini_batch_size ({mini})"))
            if config.get("algorithm.use_kl_in_reward") or config.get(f"{actor}.use_kl_loss"):
                _exactly_one(config, "actor_rollout_ref.ref", "log_prob_micro_batch_size", "actor_rollout_ref.ref")
            _exactly_one(config, rollout, "log_prob_micro_batch_size", rollout)
        critic = config.get("critic.enable")
        if (critic if critic is not None else config.get("algorithm.adv_estimator") == "gae") \
                and not config.get("critic.use_dynamic_bsz"):
            _exactly_one(config, "critic", "ppo_micro_batch_size", "critic")
        name = config.get(f"{rollout}.name")
        if name == MISSING:
            raise known(ValueError(f"Missing mandatory value: {rollout}.name"))
        if name not in ("vllm", "sglang", "trtllm"):
            raise known(ValueError(f"Unknown rollout engine: {name}"))
        size = 1
        for key in ("tensor_model_parallel_size", "data_parallel_size", "pipeline_model_parallel_size"):
            size *= _positive_int(config, f"{rollout}.{key}")
        if gpus % size:
            raise known(AssertionError(f"rollout world_size: {gpus} is not divisible by infer_world_size: {size}"))
    elif entry == "fsdp_sft_trainer":
        if batch % gpus:
            raise known(AssertionError(f"Global batch size {batch} is not divisible by dp size {gpus}"))
        micro = _positive_int(config, "data.micro_batch_size_per_gpu")
        if (batch // gpus) % micro:
            raise known(AssertionError(f"data.train_batch_size per GPU ({batch // gpus}) is not divisible by "
                                       f"data.micro_batch_size_per_gpu ({micro})"))
    elif batch < gpus:
        raise known(ValueError(f"batch_size should be a positive integer value, but got batch_size={batch // gpus}"))
