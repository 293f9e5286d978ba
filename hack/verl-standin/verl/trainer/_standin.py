"""Shared code of the verl STAND-IN trainers.

This is a TEST AND DEMO DOUBLE of the training workload, not of the system under test: real verl
needs GPUs, so the argus operator's tests and demos on machines without accelerators run this
instead. It imitates the parts of verl that the operator depends on:

* Hydra-style command line overrides (``key=value``, ``+key=value``, ``++key=value``,
  ``~key``), with Hydra's strict-mode refusal of undeclared keys for the config blocks whose
  declared keys are known here (``custom_reward_function``, ``ray_kwargs``);
* verl's custom reward function loading, with verl's exact messages;
* reading a few rows of the training data (``.parquet`` through pyarrow when it is installed,
  ``.jsonl``/``.json`` with the standard library only) and scoring fake responses with the
  reward function;
* the console progress output (``Total training steps: N``, ``step:<n> - key:value ...``,
  ``Final validation metrics: {...}``) and ``global_step_<n>`` checkpoint folders.

It does no training, loads no model and never imports ray or torch. Standard library only
(pyarrow is imported lazily, for parquet files alone).

Environment knobs (all optional):

* ``VERL_STANDIN_STEP_SECONDS`` -- seconds to sleep in each step (float, default 0).
* ``VERL_STANDIN_EXIT_CODE`` -- when set to a non-zero integer, print an error and exit with
  that code right after startup (after ``Total training steps: N``), to imitate a failed task.
* ``VERL_STANDIN_EXIT_AFTER_STEP`` -- exit 1 right after that step (and its checkpoint), to
  imitate a run that crashed mid-way; a run started again in the same folder resumes from the
  newest checkpoint (``trainer.resume_mode=auto``, verl's default), printing what verl prints.
* ``VERL_STANDIN_INSTANT`` -- when ``1``/``true``/``yes``, print ``Total training steps: 0`` and
  exit 0 right after parsing the overrides, without loading the reward function or reading
  data (for benchmarks that start many tasks).
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

HYDRA_FOOTER = "\nSet the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace."
GRAMMAR_URL = "https://hydra.cc/docs/1.2/advanced/override_grammar/basic"
MAX_ROWS = 4
MIN_STEPS = 3

_MISSING = object()


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


class OverrideError(Exception):
    """A command line override that Hydra would refuse before the job starts (exit code 1)."""


def known(exc: BaseException) -> BaseException:
    """Mark an exception as an expected failure: it is reported without a traceback."""
    exc.standin_known = True  # type: ignore[attr-defined]
    return exc


# --------------------------------------------------------------------------------------------
# Hydra-style override values
# --------------------------------------------------------------------------------------------

_INT_RE = re.compile(r"^[+-]?\d+(_\d+)*$")
_FLOAT_RE = re.compile(
    r"^[+-]?("
    r"(\d+(_\d+)*)?\.\d+([eE][+-]?\d+)?"
    r"|\d+(_\d+)*\.(\d+)?([eE][+-]?\d+)?"
    r"|\d+(_\d+)*[eE][+-]?\d+"
    r"|inf|nan"
    r")$",
    re.IGNORECASE,
)


def convert_primitive(text: str) -> Any:
    """Turn an unquoted Hydra primitive into null, a bool, an int, a float or a string."""
    s = text.strip()
    low = s.lower()
    if low == "null":
        return None
    if low == "true":
        return True
    if low == "false":
        return False
    if _INT_RE.match(s):
        return int(s.replace("_", ""))
    if _FLOAT_RE.match(s):
        return float(s.replace("_", ""))
    return s


class _ValueParser:
    """A small recursive-descent parser for Hydra override values: primitives, quoted strings,
    lists ``[a,b]`` and dicts ``{a:1,b:2}`` (nested)."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def error(self, msg: str) -> ValueError:
        return ValueError(msg)

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def skip_ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in " \t":
            self.i += 1

    def parse_top(self) -> Any:
        self.skip_ws()
        if self.i >= len(self.s):
            return ""
        if self.peek() in "[{'\"":
            value = self.parse_element()
            self.skip_ws()
            if self.i != len(self.s):
                raise self.error(f"extraneous input '{self.s[self.i:]}'")
            return value
        rest = self.s[self.i :]
        if self._has_top_level_comma(rest):
            raise self.error("ambiguous")
        return convert_primitive(rest)

    @staticmethod
    def _has_top_level_comma(text: str) -> bool:
        quote = ""
        for ch in text:
            if quote:
                if ch == quote:
                    quote = ""
            elif ch in "'\"":
                quote = ch
            elif ch == ",":
                return True
        return False

    def parse_element(self) -> Any:
        self.skip_ws()
        ch = self.peek()
        if ch == "[":
            return self.parse_list()
        if ch == "{":
            return self.parse_dict()
        if ch in "'\"":
            return self.parse_quoted()
        return self.parse_bare(stop=",]}")

    def parse_bare(self, stop: str) -> Any:
        start = self.i
        while self.i < len(self.s) and self.s[self.i] not in stop:
            if self.s[self.i] in "[{":
                raise self.error(f"unexpected '{self.s[self.i]}'")
            self.i += 1
        return convert_primitive(self.s[start : self.i])

    def parse_quoted(self) -> str:
        quote = self.s[self.i]
        self.i += 1
        out = []
        while self.i < len(self.s):
            ch = self.s[self.i]
            if ch == "\\" and self.i + 1 < len(self.s) and self.s[self.i + 1] in (quote, "\\"):
                out.append(self.s[self.i + 1])
                self.i += 2
                continue
            if ch == quote:
                self.i += 1
                return "".join(out)
            out.append(ch)
            self.i += 1
        raise self.error("unterminated quoted string")

    def parse_list(self) -> list:
        self.i += 1  # '['
        items: list = []
        self.skip_ws()
        if self.peek() == "]":
            self.i += 1
            return items
        while True:
            items.append(self.parse_element())
            self.skip_ws()
            ch = self.peek()
            if ch == ",":
                self.i += 1
                continue
            if ch == "]":
                self.i += 1
                return items
            raise self.error("missing ']'")

    def parse_dict(self) -> dict:
        self.i += 1  # '{'
        out: dict = {}
        self.skip_ws()
        if self.peek() == "}":
            self.i += 1
            return out
        while True:
            self.skip_ws()
            if self.peek() in "'\"":
                key = self.parse_quoted()
            else:
                start = self.i
                while self.i < len(self.s) and self.s[self.i] not in ":,}":
                    self.i += 1
                key = self.s[start : self.i].strip()
            self.skip_ws()
            if self.peek() != ":" or not key:
                raise self.error("missing ':' in dictionary")
            self.i += 1
            out[key] = self.parse_element()
            self.skip_ws()
            ch = self.peek()
            if ch == ",":
                self.i += 1
                continue
            if ch == "}":
                self.i += 1
                return out
            raise self.error("missing '}'")


def parse_value(text: str) -> Any:
    return _ValueParser(text).parse_top()


# --------------------------------------------------------------------------------------------
# Overrides and the config tree
# --------------------------------------------------------------------------------------------

_KEY_RE = re.compile(r"^[A-Za-z0-9_\-/@]+(\.[A-Za-z0-9_\-/@]+)*$")


@dataclass
class Override:
    text: str
    prefix: str  # "", "+", "++" or "~"
    key: str
    value_text: str | None
    value: Any


def parse_override(arg: str) -> Override:
    def bad(detail: str) -> OverrideError:
        return OverrideError(f"Error parsing override '{arg}'\n{detail}\nSee {GRAMMAR_URL} for details")

    if arg.startswith("-"):
        raise OverrideError(
            f"unrecognized arguments: {arg}\n"
            "(the verl entry points take Hydra overrides of the form key=value only)"
        )
    prefix = ""
    body = arg
    for p in ("++", "+", "~"):
        if body.startswith(p):
            prefix, body = p, body[len(p) :]
            break
    if "=" not in body:
        if prefix == "~" and _KEY_RE.match(body):
            return Override(arg, "~", body, None, None)
        raise bad("missing EQUAL at '<EOF>'")
    key, value_text = body.split("=", 1)
    key = key.strip()
    if not key or not _KEY_RE.match(key):
        raise bad(f"no viable key in '{body}'")
    try:
        value = parse_value(value_text)
    except ValueError as exc:
        if str(exc) == "ambiguous":
            raise OverrideError(
                f"Ambiguous value for argument '{arg}'\n"
                f"1. To use it as a list, use key=[value1,value2]\n"
                f"2. To use it as string, quote the value: key=\\'value1,value2\\'\n"
                f"3. To sweep over it, add --multirun to your command line"
            ) from None
        raise bad(str(exc)) from None
    return Override(arg, prefix, key, value_text, value)


class Config:
    """A nested dict config with Hydra struct-mode semantics for the ``closed`` subtrees.

    ``closed`` holds top-level keys whose declared content is known here: inside them an
    undeclared key can only be added with ``+`` (or ``++``), as with Hydra's strict mode.
    Elsewhere the stand-in is lenient (it does not know all of verl's several hundred keys),
    so any key is accepted there."""

    def __init__(self, defaults: dict, closed: set[str]) -> None:
        self.data = json.loads(json.dumps(defaults))
        self.closed = closed

    def _is_closed(self, parts: list[str]) -> bool:
        return bool(parts) and parts[0] in self.closed

    def apply(self, ov: Override) -> None:
        parts = ov.key.split(".")
        if ov.prefix == "~":
            node = self.data
            for seg in parts[:-1]:
                node = node.get(seg) if isinstance(node, dict) else None
            if not isinstance(node, dict) or parts[-1] not in node:
                raise OverrideError(f"Could not delete from config. '{ov.key}' does not exist.")
            del node[parts[-1]]
            return
        node = self.data
        for depth, seg in enumerate(parts):
            last = depth == len(parts) - 1
            here = parts[: depth + 1]
            if not isinstance(node, dict):
                raise OverrideError(
                    f"Could not override '{ov.key}'.\n"
                    f"Key '{parts[depth - 1]}' holds a value ({node!r}), not a config node\n"
                    f"    full_key: {'.'.join(parts[:depth])}"
                )
            if seg not in node:
                if ov.prefix == "" and self._is_closed(here):
                    raise OverrideError(
                        f"Could not override '{ov.key}'.\n"
                        f"To append to your config use +{ov.key}={ov.value_text}\n"
                        f"Key '{seg}' is not in struct\n"
                        f"    full_key: {'.'.join(here)}\n"
                        f"    object_type=dict"
                    )
                if last:
                    node[seg] = ov.value
                    return
                node[seg] = {}
            elif last:
                if ov.prefix == "+":
                    raise OverrideError(
                        f"Could not append to config. An item is already at '{ov.key}'."
                    )
                node[seg] = ov.value
                return
            node = node[seg]

    def get(self, key: str, default: Any = None) -> Any:
        node: Any = self.data
        for seg in key.split("."):
            if not isinstance(node, dict) or seg not in node:
                return default
            node = node[seg]
        return node


def build_config(argv: list[str], defaults: dict, closed: set[str]) -> Config:
    cfg = Config(defaults, closed)
    i = 0
    while i < len(argv):
        arg = argv[i]
        # Hydra's own flags that select a config: accepted and ignored by the stand-in.
        if arg in ("--config-name", "-cn", "--config-path", "-cp", "--config-dir", "-cd"):
            if i + 1 >= len(argv):
                raise OverrideError(f"argument {arg}: expected one argument")
            i += 2
            continue
        if arg.split("=", 1)[0] in ("--config-name", "--config-path", "--config-dir"):
            i += 1
            continue
        cfg.apply(parse_override(arg))
        i += 1
    return cfg


# --------------------------------------------------------------------------------------------
# Environment knobs
# --------------------------------------------------------------------------------------------


@dataclass
class Knobs:
    step_seconds: float
    exit_code: int
    instant: bool
    exit_after_step: int = 0  # die (exit 1) right after this step, as a crashed run does


def read_knobs() -> Knobs:
    raw = os.environ.get("VERL_STANDIN_STEP_SECONDS", "").strip()
    try:
        step_seconds = float(raw) if raw else 0.0
    except ValueError:
        raise OverrideError(f"VERL_STANDIN_STEP_SECONDS must be a number, got {raw!r}") from None
    if not math.isfinite(step_seconds) or step_seconds < 0:
        raise OverrideError(f"VERL_STANDIN_STEP_SECONDS must be >= 0, got {raw!r}")
    raw = os.environ.get("VERL_STANDIN_EXIT_CODE", "").strip()
    try:
        exit_code = int(raw) if raw else 0
    except ValueError:
        raise OverrideError(f"VERL_STANDIN_EXIT_CODE must be an integer, got {raw!r}") from None
    instant = os.environ.get("VERL_STANDIN_INSTANT", "").strip().lower() in ("1", "true", "yes")
    raw = os.environ.get("VERL_STANDIN_EXIT_AFTER_STEP", "").strip()
    try:
        exit_after_step = int(raw) if raw else 0
    except ValueError:
        raise OverrideError(f"VERL_STANDIN_EXIT_AFTER_STEP must be an integer, got {raw!r}") from None
    return Knobs(step_seconds, exit_code, instant, exit_after_step)


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


def get_custom_reward_fn(config: Config) -> Callable[..., Any] | None:
    """Load ``custom_reward_function.path`` the way verl v0.4/v0.5 does.

    Messages are verl's: ``Reward function file '<path>' not found.`` (FileNotFoundError),
    ``Error loading module from '<path>': <error>`` (RuntimeError), ``Reward function '<name>'
    not found in '<path>'.`` (AttributeError), and on success ``using customized reward function
    '<name>' from '<path>'``. ``custom_reward_function.reward_kwargs`` become keyword arguments
    of each call (verl binds them with functools.partial)."""
    block = config.get("custom_reward_function") or {}
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


def resume_step(config: Config) -> int:
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
            say("Training from scratch")
            return 0
    say(f"Load from checkpoint folder: {folder}")
    step = int(folder.rstrip("/").split("global_step_")[-1])
    say(f"Setting global step to {step}")
    say(f"Resuming from {folder}")
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


def run_entry(
    argv: list[str],
    defaults: dict,
    closed: set[str],
    task: Callable[[Config, Knobs], int],
) -> int:
    """Parse overrides, then run ``task``; return the process exit code.

    Override errors are reported like Hydra (message plus the HYDRA_FULL_ERROR hint, exit 1).
    Errors in the job are reported as ``Error executing job with overrides: [...]`` followed by
    ``<ExceptionType>: <message>`` for expected failures, or a full traceback for others."""
    try:
        knobs = read_knobs()
        config = build_config(argv, defaults, closed)
    except OverrideError as exc:
        print(f"{exc}\n{HYDRA_FOOTER}", file=sys.stderr, flush=True)
        return 1
    try:
        return task(config, knobs)
    except Exception as exc:  # noqa: BLE001 - this is the top level of the process
        sys.stdout.flush()
        print(f"Error executing job with overrides: {argv!r}", file=sys.stderr)
        if getattr(exc, "standin_known", False):
            print(f"{type(exc).__name__}: {exc.args[0] if exc.args else exc}", file=sys.stderr)
            print(HYDRA_FOOTER.lstrip("\n"), file=sys.stderr, flush=True)
        else:
            traceback.print_exc(file=sys.stderr)
            sys.stderr.flush()
        return 1


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
