"""Which environment variables a command may set: an allowlist (issue 21, item 4).

The environment reaches more readers than the command line: Ray reads ``RAY_*`` (a
``RAY_JOB_CONFIG_JSON_ENV_VAR`` replaces the job's runtime env, ``RAY_ADDRESS=local``
starts a private Ray), Hydra reads ``HYDRA_*`` (``HYDRA_MAIN_MODULE`` picks the primary
config), torchrun reads ``PET_*``, the dynamic linker ``LD_*``. A list of refused names
never converges, so a name a command exports (``export NAME=...``, ``NAME=... python3 ...``)
must be on this list; every other name is refused with one line that names it.

``ENVIRONMENT_ALLOWLIST`` is the one place the list is declared; docs/security.md renders
it (a unit test keeps the page in step). Every value also gets the general path checks,
and ``PYTHONPATH`` entries must sit in the home or the shared roots; the names marked
``path`` hold a folder the job writes (a cache) and must be in the home (the Hugging Face
ones may also name the shared cache, ``--hf-home``).

A script variable that is not exported (``MODEL=...`` used in the overrides) never reaches
the environment, so any name may be used for it, except the names bash itself reads as
it runs the rest of the command (``SHELL_NAMES``).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..policy import PathPolicy


@dataclass(frozen=True)
class EnvName:
    """One allowlist entry: a name, or a prefix written ``NAME_*``; ``path``: the value is a
    folder the job writes, which must be in the home."""

    pattern: str
    why: str
    path: bool = False
    shared_cache: bool = False  # the folder may also be the shared Hugging Face cache (--hf-home)

    def matches(self, name: str) -> bool:
        return fnmatch.fnmatchcase(name, self.pattern)


ENVIRONMENT_ALLOWLIST: tuple[EnvName, ...] = (
    EnvName("PYTHONPATH", "where Python finds modules: entries in your home or the shared roots"),
    EnvName("PYTHONUNBUFFERED", "Python's output unbuffered"),
    EnvName("PYTHONHASHSEED", "Python's hash seed"),
    EnvName("PYTHONDONTWRITEBYTECODE", "no .pyc files"),
    EnvName("PYTHONFAULTHANDLER", "tracebacks on crashes"),
    EnvName("PYTHONIOENCODING", "Python's text encoding"),
    EnvName("PYTHONUTF8", "Python's UTF-8 mode"),
    EnvName("TOKENIZERS_PARALLELISM", "Hugging Face tokenizers' threads"),
    EnvName("OMP_NUM_THREADS", "CPU threads"),
    EnvName("MKL_NUM_THREADS", "CPU threads"),
    EnvName("HF_HOME", "Hugging Face cache folder", path=True, shared_cache=True),
    EnvName("HF_HUB_CACHE", "Hugging Face hub cache folder", path=True, shared_cache=True),
    EnvName("HF_DATASETS_CACHE", "Hugging Face datasets cache folder", path=True, shared_cache=True),
    EnvName("TRANSFORMERS_CACHE", "transformers cache folder (old name)", path=True, shared_cache=True),
    EnvName("HF_*", "other Hugging Face settings (HF_HUB_OFFLINE, HF_ENDPOINT, HF_TOKEN ...)"),
    EnvName("TRANSFORMERS_OFFLINE", "transformers offline mode"),
    EnvName("WANDB_DIR", "Weights & Biases run folder", path=True),
    EnvName("WANDB_*", "Weights & Biases settings (WANDB_API_KEY, WANDB_PROJECT, WANDB_MODE ...)"),
    EnvName("SWANLAB_*", "SwanLab settings"),
    EnvName("VLLM_ATTENTION_BACKEND", "vLLM's attention kernel"),
    EnvName("VLLM_USE_V1", "vLLM's engine version"),
    EnvName("VLLM_LOGGING_LEVEL", "vLLM's log level"),
    EnvName("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "vLLM's context length check"),
    EnvName("VLLM_ALLREDUCE_USE_SYMM_MEM", "vLLM's all-reduce kernel"),
    EnvName("NCCL_DEBUG", "NCCL's log level"),
    EnvName("NCCL_DEBUG_SUBSYS", "NCCL's log subsystems"),
    EnvName("NCCL_IB_DISABLE", "NCCL without InfiniBand"),
    EnvName("NCCL_P2P_DISABLE", "NCCL without peer-to-peer"),
    EnvName("NCCL_SOCKET_IFNAME", "NCCL's network interface"),
    EnvName("NCCL_TIMEOUT", "NCCL's timeout"),
    EnvName("CUDA_DEVICE_MAX_CONNECTIONS", "CUDA work queues (Megatron)"),
    EnvName("CUDA_LAUNCH_BLOCKING", "synchronous CUDA launches (debugging)"),
    EnvName("PYTORCH_CUDA_ALLOC_CONF", "PyTorch's CUDA allocator"),
    EnvName("TORCH_NCCL_AVOID_RECORD_STREAMS", "PyTorch's NCCL streams"),
    EnvName("VERL_LOGGING_LEVEL", "verl's log level"),
    EnvName("VERL_PPO_LOGGING_LEVEL", "verl's PPO log level"),
    EnvName("VERL_SFT_LOGGING_LEVEL", "verl's SFT trainer log level (Argus sets INFO: its total steps show in status.progress)"),
)

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


# Why the best-known readers' names are refused (the general rule: not on the allowlist).
_READERS: tuple[tuple[str, str], ...] = (
    ("LD_", "it changes which program runs or how bash or Python start"),
    ("PYTHON", "it changes which program runs or how bash or Python start"),
    ("GCONV_PATH", "it changes which program runs or how bash or Python start"),
    ("GLIBC_TUNABLES", "it changes which program runs or how bash or Python start"),
    ("PET_", "torchrun reads its options from it, past the checks: give torchrun's options on its command line"),
    ("TORCHELASTIC_", "torchrun reads its settings from it, past the checks: give torchrun's options on its command line"),
    ("RAY_", "Ray reads it past the checks (the job's runtime env, the cluster address, hooks)"),
    ("HYDRA_", "Hydra reads it past the checks (HYDRA_MAIN_MODULE picks the primary config)"),
    ("FB_", "Hydra's plugins read it past the checks"),
)


def allowed_entry(name: str) -> EnvName | None:
    """The allowlist entry that lets a command export ``name``, or None."""
    for entry in ENVIRONMENT_ALLOWLIST:
        if entry.matches(name):
            return entry
    return None


def shell_name_reason(name: str) -> str | None:
    """Why ``name`` may not be assigned at all (bash reads it), or None."""
    if name in SHELL_NAMES:
        return SHELL_NAMES[name]
    for prefix, reason in _SHELL_PREFIXES:
        if name.startswith(prefix):
            return reason
    return None


def environment_reason(name: str) -> str | None:
    """Why ``name`` may not be put into the job's environment, or None when it may."""
    reason = shell_name_reason(name)
    if reason is not None:
        return reason
    if allowed_entry(name) is not None:
        return None
    for prefix, why in _READERS:
        if name.startswith(prefix):
            return why
    return ("it is not on the list of environment variables a command may set (Ray, Hydra, torchrun and the "
            "dynamic linker read others past the checks; see docs/security.md); a variable the command only uses "
            "in its own words needs no export: Argus substitutes it where it is used")


def env_path_roots(entry: EnvName, policy: PathPolicy) -> tuple[str, ...]:
    """Where the folder an allowlisted ``path`` variable names may be."""
    cache = policy.config.hf_cache() if entry.shared_cache else None
    return (policy.home, cache) if cache else (policy.home,)


def allowlist_markdown() -> str:
    """The allowlist as the Markdown table docs/security.md shows."""
    rows = ["| Name | What it sets |", "|---|---|"]
    for e in ENVIRONMENT_ALLOWLIST:
        where = " (a folder in your home or the shared Hugging Face cache)" if e.shared_cache else " (a folder in your home)" if e.path else ""
        rows.append(f"| `{e.pattern}` | {e.why}{where} |")
    return "\n".join(rows)
