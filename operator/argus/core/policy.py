"""The path policy and the command checks: what a task may reference, read and write.

All checks work on the expanded text (after ``expand``), lexically normalised (``//``,
``/./`` and ``..`` collapsed), and report every problem at once as ``Problem`` lines.
Strong problems reject the task; weak ones are warnings.

The lexical checks are a guard that explains mistakes early; they cannot follow symlinks
or what a program does at run time, so the file system's own permissions stay the
boundary underneath (see docs/security.md).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

from .config import PlatformConfig
from .problems import Problem
from .shell import (
    Script,
    ShellSyntaxError,
    has_unresolved_expansion,
    module_run_by,
    parse_script,
    program_and_args,
    substitute,
)
from .spec import MAX_COMMAND_BYTES

DATA_KEYS = ("data.train_files", "data.val_files")
REWARD_PATH_KEY = "custom_reward_function.path"
REWARD_NAME_KEY = "custom_reward_function.name"
REWARD_KWARGS_PREFIX = "custom_reward_function.reward_kwargs."
RAY_ADDRESS_KEY = "ray_kwargs.ray_init.address"
# verl keys that name where a run writes (checkpoints, dumps).
OUTPUT_KEYS = (
    "trainer.default_local_dir",
    "trainer.default_hdfs_dir",
    "trainer.rollout_data_dir",
    "trainer.validation_data_dir",
)
# verl keys that name a model to load.
MODEL_KEYS = ("actor_rollout_ref.model.path", "critic.model.path", "model.partial_pretrain", "reward_model.model.path")
NNODES_KEY = "trainer.nnodes"
GPUS_KEY = "trainer.n_gpus_per_node"

HF_MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}(/[A-Za-z0-9][A-Za-z0-9_.\-]{0,95})?$")
_OVERRIDE = re.compile(r"^(\+{0,2})([A-Za-z_][A-Za-z0-9_.\-@/]*)=(.*)$", re.S)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_TILDE = re.compile(r"(?:^|(?<=[\s=:'\"(]))~([a-z_][a-z0-9_-]*)?(?=/|\s|$|[;|&)'\"])")
# Characters that end a path inside a word; '$' too, so '$X/...' yields '/...'.
_PATH_BREAK = "\\s'\"=,:;\\[\\](){}<>|&`$"
_PATH_RUN = re.compile(f"[^{_PATH_BREAK}]+")


@dataclass
class Findings:
    """Problems found so far, without repeats, in the order found."""

    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    def error(self, field_: str, value: object, rule: str) -> None:
        p = Problem(field_, value, rule)
        if p not in self.errors:
            self.errors.append(p)

    def warn(self, field_: str, value: object, rule: str) -> None:
        p = Problem(field_, value, rule)
        if p not in self.warnings:
            self.warnings.append(p)


def _under(path: str, root: str) -> bool:
    """Component-wise containment: /a/alice2 is not under /a/alice."""
    return path == root or path.startswith(root.rstrip("/") + "/")


class PathPolicy:
    """Where ``user`` may point: their home, and the shared read-only data and code."""

    def __init__(self, config: PlatformConfig, user: str):
        self.config = config
        self.user = user
        self.root = config.root
        self.home = config.home(user)
        self.users_root = config.users_root()
        self.shared_roots = tuple(config.shared(p) for p in ("datasets", "hf", "common"))
        self.data_roots = (posixpath.join(self.home, "datasets"), config.shared("datasets"), config.shared("common", "datasets"))
        self.model_roots = (posixpath.join(self.home, "models"), config.shared("hf"), config.shared("common", "models"))
        self.code_root = posixpath.join(self.home, "code")
        self.common_root = config.shared("common")

    def _root_of(self, path: str) -> str | None:
        for root in (self.home, *self.shared_roots):
            if _under(path, root):
                return root
        return None

    def check_absolute(self, field_: str, raw: str, findings: Findings) -> None:
        """One absolute path met anywhere in the task: may this user name it?"""
        path = posixpath.normpath(raw)
        if path.startswith("//"):
            path = "/" + path.lstrip("/")
        if "/../" in f"{raw}/" or raw.endswith("/.."):
            before = raw.split("/../", 1)[0] if "/../" in raw else raw[: -len("/..")]
            start = self._root_of(posixpath.normpath(before or "/"))
            if start is not None and not _under(path, start):
                findings.error(field_, raw, f"'..' climbs out of {start}")
                return
        if not _under(path, self.root):
            return
        if path in (self.root, self.users_root):
            findings.error(field_, raw, f"names {path} itself; only {self.home}/... and the shared {', '.join(self.shared_roots)} are allowed")
        elif _under(path, self.users_root):
            owner = path[len(self.users_root) + 1 :].split("/", 1)[0]
            if owner != self.user:
                findings.error(field_, raw, f"is in another user's home ({owner}); only {self.home}/... is yours")
        elif self._root_of(path) is None:
            findings.error(field_, raw, f"is outside the folders a task may use ({self.home}, {', '.join(self.shared_roots)})")

    def scan(self, field_: str, text: str, findings: Findings) -> None:
        """Every path-like piece of ``text``: isolation, '..' and variable user segments."""
        users_prefix = re.escape(self.users_root + "/")
        for m in re.finditer(users_prefix + r"(?=[$`*?\[{(])", text):
            findings.error(field_, text[m.start() : m.start() + 40].split()[0], "the user segment is built from a variable or pattern; write your own home ($HOME) out")
        for run in _PATH_RUN.findall(text):
            if run.startswith("../") or run == "..":
                findings.error(field_, run, "'..' climbs out of the job directory; use an absolute path under $HOME")
                continue
            slash = run.find("/")
            if slash >= 0:
                self.check_absolute(field_, run[slash:], findings)

    def check_under(self, field_: str, value: str, roots: tuple[str, ...], what: str, findings: Findings, suffix: str | None = None) -> None:
        """A path that must sit under one of ``roots`` (after normalisation)."""
        if not value.startswith("/"):
            findings.error(field_, value, f"{what} must be an absolute path under {' or '.join(r + '/' for r in roots)}")
            return
        path = posixpath.normpath(value)
        if not any(_under(path, r) and path != r for r in roots):
            findings.error(field_, value, f"{what} must be under {' or '.join(r + '/' for r in roots)}")
        elif suffix and not path.endswith(suffix):
            findings.error(field_, value, f"{what} must be a {suffix} file")

    def check_model(self, field_: str, value: str, findings: Findings) -> None:
        if value.startswith(("/", ".", "~")) or ".." in value:
            self.check_under(field_, value, self.model_roots, "a model path", findings)
        elif not HF_MODEL_ID.fullmatch(value):
            findings.error(field_, value, "must be a Hugging Face model id like Qwen/Qwen2.5-0.5B-Instruct, or an absolute model path")


def check_text(field_: str, text: str, findings: Findings) -> bool:
    """Size, control characters, '~'. Returns False when the text is unusable."""
    size = len(text.encode("utf-8"))
    if size > MAX_COMMAND_BYTES:
        findings.error(field_, f"{size} bytes", f"is larger than the {MAX_COMMAND_BYTES // 1024} KiB limit")
        return False
    bad = _CONTROL.search(text)
    if bad:
        findings.error(field_, f"\\x{ord(bad.group()):02x} at offset {bad.start()}", "control characters other than newline and tab are not allowed")
        return False
    for m in _TILDE.finditer(text):
        token = text[m.start() :].split()[0] if text[m.start() :].split() else "~"
        findings.error(field_, token, "'~' expands to the worker's home, not yours: use $HOME")
    return True


def hydra_list(value: str) -> list[str]:
    """``[a,'b']`` -> [a, b]; a plain value -> [value]."""
    value = value.strip()
    if value.startswith("[") and value.endswith("]"):
        items = [v.strip().strip("'\"").strip() for v in value[1:-1].split(",")]
        return [v for v in items if v]
    return [value.strip("'\"")]


@dataclass
class Override:
    plus: str  # "", "+" or "++"
    key: str
    value: str
    token: str


@dataclass
class CommandFacts:
    """What the checks learned about a command, for the plan and the template."""

    entrypoints: list[tuple[str, str]] = field(default_factory=list)  # (program, module)
    overrides: list[Override] = field(default_factory=list)


def _overrides(args: list[str]) -> list[Override]:
    found = []
    for word in args:
        m = _OVERRIDE.match(word)
        if m:
            found.append(Override(m.group(1), m.group(2), m.group(3), word))
    return found


def _torchrun_option(args: list[str], *names: str) -> str | None:
    for i, word in enumerate(args):
        if word == "-m":
            break
        for name in names:
            if word.startswith(name + "="):
                return word.split("=", 1)[1]
            if word == name and i + 1 < len(args):
                return args[i + 1]
    return None


def check_command(
    field_: str,
    command: str,
    *,
    policy: PathPolicy,
    nnodes: int | None,
    gpus_per_node: int | None,
    findings: Findings,
) -> CommandFacts:
    """The strong and weak checks of an (expanded) command line."""
    facts = CommandFacts()
    if not check_text(field_, command, findings):
        return facts
    if not command.strip():
        findings.error(field_, command, "must not be empty")
        return facts
    try:
        script: Script = parse_script(command)
    except ShellSyntaxError as exc:
        findings.error(field_, command.strip().splitlines()[0] if command.strip() else command, f"is not valid shell: {exc}")
        return facts

    # Isolation over everything the command says: the raw text, the unquoted words
    # (quotes can split a path: /private/users/'bob'), and heredoc bodies.
    policy.scan(field_, command, findings)
    for word in script.words:
        policy.scan(field_, word, findings)

    config = policy.config
    for cmd in script.commands:
        pa = program_and_args(cmd)
        if pa is None:
            continue
        program, args = pa
        run = module_run_by(args)
        if run is None:
            continue
        module, rest = run
        if not any(e.allows(program, module) for e in config.entrypoints):
            continue
        facts.entrypoints.append((program, module))
        facts.overrides.extend(_overrides(rest))
        if posixpath.basename(program) == "torchrun":
            for names, want, key in (
                (("--nnodes",), nnodes, "nnodes"),
                (("--nproc_per_node", "--nproc-per-node"), gpus_per_node, "nGpusPerNode"),
            ):
                got = _torchrun_option(args, *names)
                if got is not None and want is not None and got != str(want):
                    findings.error(field_, f"{names[0]}={got}", f"must equal spec.{key} ({want}); the queue counts GPUs from the spec")

    if not facts.entrypoints:
        allowed = ", ".join(f"'{e.program} [options] -m {e.module_glob}'" for e in config.entrypoints)
        findings.error(field_, command.strip().splitlines()[0][:80], f"does not run an allowed entrypoint ({allowed}); one in a comment, an echo, a quoted string or a heredoc does not count")

    _check_overrides(field_, facts, script, policy, nnodes, gpus_per_node, findings)
    return facts


def _resolved(field_: str, ov: Override, value: str, script: Script, findings: Findings) -> str | None:
    value, unknown = substitute(value, script.assignments)
    if unknown or has_unresolved_expansion(value):
        name = unknown[0] if unknown else value
        findings.error(field_, ov.token, f"is built from ${name}, which the check cannot resolve; write the path out (or assign it earlier in the command)")
        return None
    return value


def _check_overrides(
    field_: str, facts: CommandFacts, script: Script, policy: PathPolicy,
    nnodes: int | None, gpus_per_node: int | None, findings: Findings,
) -> None:
    keys = {ov.key for ov in facts.overrides}
    for ov in facts.overrides:
        if ov.key in DATA_KEYS:
            for item in hydra_list(ov.value):
                path = _resolved(field_, ov, item, script, findings)
                if path is not None:
                    policy.check_under(f"{field_} ({ov.key})", path, policy.data_roots, "a data file", findings)
        elif ov.key == REWARD_PATH_KEY:
            path = _resolved(field_, ov, ov.value.strip("'\""), script, findings)
            if path is not None:
                policy.check_under(f"{field_} ({ov.key})", path, (policy.code_root,), "the reward function file", findings, suffix=".py")
        elif ov.key in OUTPUT_KEYS:
            path = _resolved(field_, ov, ov.value.strip("'\""), script, findings)
            if path is not None and (path.startswith("/") or ov.key != "trainer.default_hdfs_dir"):
                if path.startswith("/"):
                    policy.check_under(f"{field_} ({ov.key})", path, (policy.home,), "an output folder", findings)
                elif path.startswith(".."):
                    findings.error(f"{field_} ({ov.key})", path, "an output folder must not climb out of the job directory")
        elif ov.key in MODEL_KEYS:
            value = _resolved(field_, ov, ov.value.strip("'\""), script, findings)
            if value is not None:
                policy.check_model(f"{field_} ({ov.key})", value, findings)
        elif ov.key in (NNODES_KEY, GPUS_KEY):
            want, spec_field = (nnodes, "nnodes") if ov.key == NNODES_KEY else (gpus_per_node, "nGpusPerNode")
            if want is not None and ov.value.strip("'\"") != str(want):
                findings.error(field_, ov.token, f"must equal spec.{spec_field} ({want}); the queue counts GPUs from the spec")
        elif ov.key.startswith(REWARD_KWARGS_PREFIX) and not ov.plus:
            findings.warn(field_, ov.token, f"verl does not declare custom_reward_function.reward_kwargs, so Hydra refuses this key: write '+{ov.token}'")

    runs_ppo = any(not posixpath.basename(p).startswith("torchrun") for p, _ in facts.entrypoints)
    if facts.entrypoints:
        for key in DATA_KEYS:
            if key not in keys:
                findings.warn(field_, f"{key}=", "is not set: verl falls back to its default data files, which are likely not yours")
        if runs_ppo and RAY_ADDRESS_KEY not in keys:
            findings.warn(field_, f"+{RAY_ADDRESS_KEY}=auto", "is not set: verl may start its own local Ray instead of joining the cluster")
        if REWARD_PATH_KEY in keys and REWARD_NAME_KEY not in keys:
            findings.warn(field_, f"{REWARD_NAME_KEY}=", "is not set: verl will look for a function named compute_score in the reward file")
