"""Which environment variables a command may set, and what each may hold: one table of
roles (issue 21 item 4, issue 34 item 3).

The environment reaches more readers than the command line: Ray reads ``RAY_*`` (a
``RAY_JOB_CONFIG_JSON_ENV_VAR`` replaces the job's runtime env, ``RAY_ADDRESS=local``
starts a private Ray), Hydra reads ``HYDRA_*`` (``HYDRA_MAIN_MODULE`` picks the primary
config), torchrun reads ``PET_*``, the dynamic linker ``LD_*``, NCCL loads plugins named by
``NCCL_*_PLUGIN``. A list of refused names never converges, so a name a command exports
(``export NAME=...``, ``NAME=... python3 ...``) must match a rule of ``ENVIRONMENT_RULES``;
every other name is refused with one line that names it.

Each rule is a name or a ``PREFIX_*`` pattern (the first rule that matches decides) with a
role:

* ``knob``: a setting; the value gets only the general path checks of every value;
* ``path``: a file or folder the job reads or writes: in the home (the Hugging Face caches:
  or the shared cache, ``--hf-home``); a relative one is made absolute under the job folder
  in the generated command (verl's Ray actors run in the raylet's folder, shared by all);
* ``url``: a tracking URL: ``http(s)://`` (a server), or ``file://``/``sqlite:///`` with a
  path in the home (a relative ``file:`` path goes under the job folder);
* ``search-path``: ``PYTHONPATH``: absolute entries in the home or the shared roots;
* ``refused``: named here with the reason, so that the message says who reads it (a
  plugin rule may allow the one value that turns the plugin off, ``none``).

``ENVIRONMENT_RULES`` is the one place the table is declared; docs/security.md renders it
(a unit test keeps the page in step).

A script variable that is not exported (``MODEL=...`` used in the overrides) never reaches
the environment, so any name may be used for it, except the names bash itself reads as
it runs the rest of the command (``SHELL_NAMES``).
"""

from __future__ import annotations

import fnmatch
import functools
import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..policy import PathPolicy

KNOB = "knob"
PATH = "path"
URL = "url"
SEARCH_PATH = "search-path"
REFUSED = "refused"

_STARTS = "it changes which program runs or how bash or Python start"


@dataclass(frozen=True)
class EnvRule:
    """One rule: a name, or a prefix written ``NAME_*``, its role and what it is for (for a
    ``refused`` rule: why). ``shared_cache``: a ``path`` that may also be the shared Hugging
    Face cache; ``allowed_values``: the values a ``refused`` rule still lets through."""

    pattern: str
    role: str
    why: str
    shared_cache: bool = False
    allowed_values: tuple[str, ...] = ()
    # For an output verl writes outside the job by default (in the raylet's folder, /tmp):
    # what Argus sets in the job's runtime env, relative to the job folder ({job}: its path),
    # unless the command sets it (job_outputs).
    job_default: str | None = None
    # verl's trackers read it in its Ray actors (the TaskRunner), which get the job's runtime
    # env, not the driver's shell: the command's value is put into the runtime env too.
    actors: bool = False

    def matches(self, name: str) -> bool:
        return fnmatch.fnmatchcase(name, self.pattern)

    # The name the allowlist's callers knew: a path role holds a folder or file in the home.
    @property
    def path(self) -> bool:
        return self.role == PATH


# Kept for callers that spoke of "allowlist entries".
EnvName = EnvRule

_NCCL_PLUGIN = ("NCCL loads the shared library it names into every process that uses NCCL, past the checks "
                "(only 'none', which turns the plugin off, is allowed)")

# One rule per variable or prefix, as data: the rows share a shape by design (duplicates lists
# runs of them), each rule is its own.
ENVIRONMENT_RULES: tuple[EnvRule, ...] = (
    # Python
    EnvRule("PYTHONPATH", SEARCH_PATH, "where Python finds modules: entries in your home or the shared roots"),
    EnvRule("PYTHONUNBUFFERED", KNOB, "Python's output unbuffered"),
    EnvRule("PYTHONHASHSEED", KNOB, "Python's hash seed"),
    EnvRule("PYTHONDONTWRITEBYTECODE", KNOB, "no .pyc files"),
    EnvRule("PYTHONFAULTHANDLER", KNOB, "tracebacks on crashes"),
    EnvRule("PYTHONIOENCODING", KNOB, "Python's text encoding"),
    EnvRule("PYTHONUTF8", KNOB, "Python's UTF-8 mode"),
    EnvRule("PYTHON*", REFUSED, _STARTS),
    # Hydra: one by one
    EnvRule("HYDRA_FULL_ERROR", KNOB, "Hydra's full tracebacks"),
    EnvRule("HYDRA_*", REFUSED, "Hydra reads it past the checks (HYDRA_MAIN_MODULE picks the primary config)"),
    EnvRule("FB_*", REFUSED, "Hydra's plugins read it past the checks"),
    # threads, tokenizers
    EnvRule("TOKENIZERS_PARALLELISM", KNOB, "Hugging Face tokenizers' threads"),
    EnvRule("OMP_NUM_THREADS", KNOB, "CPU threads"),
    EnvRule("MKL_NUM_THREADS", KNOB, "CPU threads"),
    # Hugging Face
    EnvRule("HF_HOME", PATH, "Hugging Face cache folder", shared_cache=True),
    EnvRule("HF_HUB_CACHE", PATH, "Hugging Face hub cache folder", shared_cache=True),
    EnvRule("HF_DATASETS_CACHE", PATH, "Hugging Face datasets cache folder", shared_cache=True),
    EnvRule("TRANSFORMERS_CACHE", PATH, "transformers cache folder (old name)", shared_cache=True),
    EnvRule("HF_*", KNOB, "other Hugging Face settings (HF_HUB_OFFLINE, HF_ENDPOINT, HF_TOKEN ...)"),
    EnvRule("TRANSFORMERS_OFFLINE", KNOB, "transformers offline mode"),
    # tracking
    EnvRule("TENSORBOARD_DIR", PATH, "verl's TensorBoard folder (unset: tensorboard_log in the raylet's folder)",
            job_default="{job}/tensorboard_log", actors=True),
    EnvRule("WANDB_DIR", PATH, "Weights & Biases run folder", actors=True),
    EnvRule("WANDB_CACHE_DIR", PATH, "Weights & Biases cache folder", actors=True),
    EnvRule("WANDB_CONFIG_DIR", PATH, "Weights & Biases settings folder", actors=True),
    EnvRule("WANDB_DATA_DIR", PATH, "Weights & Biases staging folder", actors=True),
    EnvRule("WANDB_ARTIFACT_DIR", PATH, "Weights & Biases artifacts folder", actors=True),
    EnvRule("WANDB_*", KNOB, "Weights & Biases settings (WANDB_API_KEY, WANDB_PROJECT, WANDB_MODE ...)", actors=True),
    EnvRule("MLFLOW_TRACKING_URI", URL, "MLflow's tracking store (unset: verl's sqlite:////tmp/mlruns.db, one per node)",
            job_default="sqlite:///{job}/mlruns.db", actors=True),
    EnvRule("MLFLOW_REGISTRY_URI", URL, "MLflow's model registry", actors=True),
    EnvRule("MLFLOW_*", KNOB, "MLflow settings (MLFLOW_EXPERIMENT_NAME, MLFLOW_RUN_ID, MLFLOW_TRACKING_TOKEN ...)", actors=True),
    EnvRule("SWANLAB_LOG_DIR", PATH, "SwanLab's log folder (unset: swanlog in the raylet's folder)", job_default="{job}/swanlog", actors=True),
    EnvRule("SWANLAB_*", KNOB, "SwanLab settings", actors=True),
    # vLLM
    EnvRule("VLLM_ATTENTION_BACKEND", KNOB, "vLLM's attention kernel"),
    EnvRule("VLLM_USE_V1", KNOB, "vLLM's engine version"),
    EnvRule("VLLM_LOGGING_LEVEL", KNOB, "vLLM's log level"),
    EnvRule("VLLM_ALLOW_LONG_MAX_MODEL_LEN", KNOB, "vLLM's context length check"),
    EnvRule("VLLM_ALLREDUCE_USE_SYMM_MEM", KNOB, "vLLM's all-reduce kernel"),
    # NCCL: tuning knobs, but the files it reads or writes, and the plugins it loads
    EnvRule("NCCL_DEBUG_FILE", PATH, "NCCL's debug log file"),
    EnvRule("NCCL_TOPO_FILE", PATH, "the topology file NCCL reads"),
    EnvRule("NCCL_TOPO_DUMP_FILE", PATH, "the file NCCL writes its topology to"),
    EnvRule("NCCL_GRAPH_FILE", PATH, "the graph file NCCL reads"),
    EnvRule("NCCL_GRAPH_DUMP_FILE", PATH, "the file NCCL writes its graph to"),
    EnvRule("NCCL_CONF_FILE", REFUSED, "NCCL reads more settings from that file past the checks (its plugins among them): "
            "set the NCCL_* variables themselves"),
    EnvRule("NCCL_*_PLUGIN", REFUSED, _NCCL_PLUGIN, allowed_values=("none",)),
    EnvRule("NCCL_*_PLUGIN_*", REFUSED, _NCCL_PLUGIN, allowed_values=("none",)),
    EnvRule("NCCL_*", KNOB, "NCCL's tuning (NCCL_DEBUG, NCCL_IB_DISABLE, NCCL_NVLS_ENABLE, NCCL_SOCKET_IFNAME ...)"),
    # CUDA and PyTorch
    EnvRule("CUDA_DEVICE_MAX_CONNECTIONS", KNOB, "CUDA work queues (Megatron)"),
    EnvRule("CUDA_LAUNCH_BLOCKING", KNOB, "synchronous CUDA launches (debugging)"),
    EnvRule("PYTORCH_CUDA_ALLOC_CONF", KNOB, "PyTorch's CUDA allocator"),
    EnvRule("TORCH_NCCL_AVOID_RECORD_STREAMS", KNOB, "PyTorch's NCCL streams"),
    # verl
    EnvRule("VERL_LOGGING_LEVEL", KNOB, "verl's log level"),
    EnvRule("VERL_PPO_LOGGING_LEVEL", KNOB, "verl's PPO log level"),
    EnvRule("VERL_SFT_LOGGING_LEVEL", KNOB, "verl's SFT trainer log level (Argus sets INFO: its total steps show in status.progress)"),
    # the best-known readers of the rest (the general rule: not in this table)
    EnvRule("LD_*", REFUSED, _STARTS),
    EnvRule("GCONV_PATH", REFUSED, _STARTS),
    EnvRule("GLIBC_TUNABLES", REFUSED, _STARTS),
    EnvRule("PET_*", REFUSED, "torchrun reads its options from it, past the checks: give torchrun's options on its command line"),
    EnvRule("TORCHELASTIC_*", REFUSED, "torchrun reads its settings from it, past the checks: give torchrun's options on its command line"),
    EnvRule("RAY_*", REFUSED, "Ray reads it past the checks (the job's runtime env, the cluster address, hooks)"),
)

# The old name: the rules a command may set (every role but refused).
ENVIRONMENT_ALLOWLIST: tuple[EnvRule, ...] = tuple(r for r in ENVIRONMENT_RULES if r.role != REFUSED)

# Names bash reads while it runs the rest of the command (refused even for a variable that
# is not exported): they change which program runs or how bash reads the words.
SHELL_NAMES: dict[str, str] = {
    **dict.fromkeys(("PATH", "ENV", "BASH_ENV", "SHELLOPTS", "BASHOPTS", "CDPATH", "GLOBIGNORE", "PROMPT_COMMAND",
                     "PS1", "PS2", "PS3", "PS4", "POSIXLY_CORRECT", "FUNCNEST", "TMOUT", "SHELL", "INPUTRC", "HISTFILE",
                     "OPTIND", "OPTARG", "OPTERR", "RANDOM", "SRANDOM", "SECONDS", "LINENO", "EPOCHSECONDS",
                     "EPOCHREALTIME", "UID", "EUID", "PPID", "PWD", "OLDPWD", "USER", "LOGNAME", "MAIL", "MAILPATH",
                     "MAILCHECK", "COLUMNS", "LINES"), "it changes which program runs or how bash or Python start"),
    "HOME": "Argus expands $HOME to your home before anything runs",
    "IFS": "it changes how bash splits the words of the command",
    "LANG": "it changes how bash reads the rest of the command; for Python's text encoding set PYTHONUTF8=1",
    "LANGUAGE": "it changes how bash reads the rest of the command; for Python's text encoding set PYTHONUTF8=1",
}
_SHELL_PREFIXES = (("BASH", "it changes which program runs or how bash or Python start"),
                   ("LC_", "it changes how bash reads the rest of the command; for Python's text encoding set PYTHONUTF8=1"))


_NOT_LISTED = ("it is not on the list of environment variables a command may set (Ray, Hydra, torchrun and the "
               "dynamic linker read others past the checks; see docs/security.md); a variable the command only uses "
               "in its own words needs no export: Argus substitutes it where it is used")


@functools.lru_cache(maxsize=4096)  # a hostile command repeats one name thousands of times
def env_rule(name: str) -> EnvRule | None:
    """The first rule of the table that matches ``name``, or None."""
    for rule in ENVIRONMENT_RULES:
        if rule.matches(name):
            return rule
    return None


def allowed_entry(name: str) -> EnvRule | None:
    """The rule that lets a command export ``name`` (any role but refused), or None."""
    rule = env_rule(name)
    return rule if rule is not None and rule.role != REFUSED else None


def shell_name_reason(name: str) -> str | None:
    """Why ``name`` may not be assigned at all (bash reads it), or None."""
    if name in SHELL_NAMES:
        return SHELL_NAMES[name]
    for prefix, reason in _SHELL_PREFIXES:
        if name.startswith(prefix):
            return reason
    return None


def environment_reason(name: str, value: str | None = None) -> str | None:
    """Why ``name`` (with ``value``, when known) may not be put into the job's environment,
    or None when it may."""
    reason = shell_name_reason(name)
    if reason is not None:
        return reason
    rule = env_rule(name)
    if rule is None:
        return _NOT_LISTED
    if rule.role != REFUSED:
        return None
    if rule.allowed_values and (value is None or value in rule.allowed_values):
        return None  # the value is checked where it is known (value_problem)
    return rule.why


def secret_reason(name: str) -> str | None:
    """Why ``name`` may not take its value from a Secret (``spec.env``), or None. The same
    table decides, with one rule more: only a ``knob`` may (a setting or a credential:
    WANDB_API_KEY, MLFLOW_TRACKING_TOKEN, HF_TOKEN). A path, a URL or PYTHONPATH is checked
    by its value, and a Secret's value is never read by the checks: write those in the command."""
    reason = environment_reason(name)
    if reason is not None:
        return reason
    rule = env_rule(name)
    if rule is not None and rule.role == REFUSED:
        return rule.why  # a plugin rule's one allowed value is a value the checks must see
    if rule is not None and rule.role != KNOB:
        role = {PATH: "path", URL: "URL", SEARCH_PATH: "search path"}.get(rule.role, rule.role)
        return (f"it is a {role} that the checks read by its value, and a Secret's value is never shown to them: "
                "set it in the command, where it is checked")
    return None


def value_problem(name: str, value: str) -> str | None:
    """What is wrong with ``value`` for a refused rule that allows some values, or None."""
    rule = env_rule(name)
    if rule is not None and rule.role == REFUSED and rule.allowed_values and value not in rule.allowed_values:
        return rule.why
    return None


def env_path_roots(entry: EnvRule, policy: PathPolicy) -> tuple[str, ...]:
    """Where the file or folder a ``path`` variable names may be."""
    cache = policy.config.hf_cache() if entry.shared_cache else None
    return (policy.home, cache) if cache else (policy.home,)


_URL_SERVERS = ("http://", "https://")
_URL_FILES = ("file://", "sqlite:///")


def url_path(value: str) -> tuple[str, str] | None:
    """A ``url`` value's (scheme prefix, path) when it names a local file, else None (a server)."""
    for prefix in _URL_FILES:
        if value.startswith(prefix):
            return prefix, value[len(prefix):]
    return None


def env_value_rule(name: str, value: str, policy: PathPolicy, job_dir: str | None) -> tuple[str | None, str]:
    """Check ``value`` of ``name`` by its role: (the problem or None, the value to run). A
    relative ``path`` (or ``file:`` URL path) becomes absolute under ``job_dir``."""
    rule = env_rule(name)
    if rule is None or rule.role not in (PATH, URL):
        problem = value_problem(name, value)
        return problem, value
    prefix, path = "", value
    if rule.role == URL:
        if value.startswith(_URL_SERVERS) or value == "databricks":
            return None, value
        local = url_path(value)
        if local is None:
            if "://" in value or value.startswith("sqlite:"):
                return (f"{name} must be an http(s):// server, or file:// or sqlite:/// with a path in your home"), value
            local = ("", value)  # a plain path is a file store
        prefix, path = local
    if not path:
        return f"{name} must name a file or folder", value
    if path.startswith("~") or ".." in path.split("/"):
        return f"{name} must be a path in your home written out (no '~', no '..')", value
    if not path.startswith("/"):
        if job_dir is None:
            return None, value
        path = posixpath.join(job_dir, path)
    roots = env_path_roots(rule, policy)
    normal = posixpath.normpath(path)
    if not any(normal.startswith(r.rstrip("/") + "/") for r in roots):
        return f"{name} must be under {' or '.join(r + '/' for r in roots)}", value
    return None, prefix + path


def job_outputs(job_dir: str, exported: dict[str, str]) -> dict[str, str]:
    """What the job's runtime env sets for verl's trackers: for the outputs verl writes
    outside the job by default (``job_default``) the command's own checked value when it
    exports one, else a place in the job folder; and every other exported variable of an
    ``actors`` rule (WANDB_PROJECT, MLFLOW_EXPERIMENT_NAME ...) as the command set it. The
    runtime env is what verl's Ray actors see; the command's exports reach only the
    driver's shell."""
    outputs = {r.pattern: exported.get(r.pattern) or r.job_default.format(job=job_dir)
               for r in ENVIRONMENT_RULES if r.job_default is not None}
    forwarded = {n: v for n, v in exported.items() if (rule := env_rule(n)) is not None and rule.actors and rule.role != REFUSED}
    return {**forwarded, **outputs}


def allowlist_markdown() -> str:
    """The table of rules as the Markdown docs/security.md shows."""
    shown = {KNOB: "knob", PATH: "path in your home", URL: "URL", SEARCH_PATH: "search path", REFUSED: "refused"}
    rows = ["| Name | Role | What it is for |", "|---|---|---|"]
    for e in ENVIRONMENT_RULES:
        role = shown[e.role]
        if e.shared_cache:
            role += " or the shared Hugging Face cache"
        if e.allowed_values:
            role += f" (but {', '.join(repr(v) for v in e.allowed_values)})"
        if e.job_default:
            role += f"; unset: `{e.job_default.replace('{job}', '<job folder>')}`"
        if e.actors:
            role += "; into the runtime env (verl's actors)"
        rows.append(f"| `{e.pattern}` | {role} | {e.why} |")
    return "\n".join(rows)
