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
from .expand import LEFTOVER_HOME
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

# The expanded command may be longer than what the user wrote ($HOME grows), but not
# without bound: it is what Ray runs and what the status shows.
MAX_EXPANDED_COMMAND_BYTES = 4 * MAX_COMMAND_BYTES

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
_CHECKED_KEYS = frozenset((*DATA_KEYS, REWARD_PATH_KEY, *OUTPUT_KEYS, *MODEL_KEYS, NNODES_KEY, GPUS_KEY))
_KNOWN_KEYS = _CHECKED_KEYS | {RAY_ADDRESS_KEY, REWARD_NAME_KEY}

HF_MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}(/[A-Za-z0-9][A-Za-z0-9_.\-]{0,95})?$")
_OVERRIDE = re.compile(r"^(\+{0,2})([A-Za-z_][A-Za-z0-9_.\-@/]*)=(.*)$", re.S)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_TILDE = re.compile(r"(?:^|(?<=[\s=:'\"(]))~([a-z_][a-z0-9_-]*)?(?=/|\s|$|[;|&)'\"])")
# Characters that end a path inside a word; '$' too, so '$X/...' yields '/...'.
_PATH_BREAK = "\\s'\"=,:;\\[\\](){}<>|&`$"
_PATH_RUN = re.compile(f"[^{_PATH_BREAK}]+")
_PATH_BREAK_CHARS = frozenset(" \t\n\r\x0b\x0c'\"=,:;[](){}<>|&`$")
# Shell characters that make a path at run time: variables, command substitution, globs,
# brace expansion.
_DYNAMIC = "$`*?[{"
# An absolute path's literal start, up to the first dynamic character.
# (A '/' right after a name, '}', ')' or a glob continues a path; it does not start one.)
_DYNAMIC_PATH = re.compile(r"(?<![A-Za-z0-9_.\-})*?\]$])(/[^\s'\"=,:;()<>|&\\$`*?\[{]*)[$`*?\[{]")
_BRACES = re.compile(r"\{([^{}]*)\}")
_MAX_BRACE_WORDS = 64
_NON_BLANK = re.compile(r"\S*")


@dataclass
class Findings:
    """Problems found so far, without repeats, in the order found."""

    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    _seen: set[tuple[bool, str, str, str]] = field(default_factory=set, repr=False, compare=False)

    def _add(self, to: list[Problem], warning: bool, p: Problem) -> None:
        key = (warning, p.field, repr(p.value), p.rule)  # values may be unhashable (lists)
        if key not in self._seen:
            self._seen.add(key)
            to.append(p)

    def error(self, field_: str, value: object, rule: str) -> None:
        self._add(self.errors, False, Problem(field_, value, rule))

    def warn(self, field_: str, value: object, rule: str) -> None:
        self._add(self.warnings, True, Problem(field_, value, rule))


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
        self._home_slash = self.home + "/"
        self.users_root = config.users_root()
        self.shared_roots = tuple(config.shared(p) for p in ("datasets", "hf", "common"))
        self.data_roots = (posixpath.join(self.home, "datasets"), config.shared("datasets"), config.shared("common", "datasets"))
        self.model_roots = (posixpath.join(self.home, "models"), config.shared("hf"), config.shared("common", "models"))
        self.code_root = posixpath.join(self.home, "code")
        self.common_root = config.shared("common")
        self._plain_prefixes = (self._home_slash, *(r + "/" for r in self.shared_roots))

    def _root_of(self, path: str) -> str | None:
        for root in (self.home, *self.shared_roots):
            if _under(path, root):
                return root
        return None

    def _owner(self, path: str) -> str | None:
        """Whose home a normalised path is in, if any."""
        if not path.startswith(self.users_root + "/"):
            return None
        return path[len(self.users_root) + 1 :].split("/", 1)[0] or None

    def check_absolute(self, field_: str, raw: str, findings: Findings) -> None:
        """One absolute path met anywhere in the task: may this user name it?"""
        if raw.startswith(self._home_slash) and "/." not in raw and "//" not in raw:
            return  # in the user's own home, and nothing to normalise
        path = posixpath.normpath(raw)
        if path.startswith("//"):
            path = "/" + path.lstrip("/")
        if "/../" in f"{raw}/" or raw.endswith("/.."):
            before = raw.split("/../", 1)[0] if "/../" in raw else raw[: -len("/..")]
            start = self._root_of(posixpath.normpath(before or "/"))
            if start is not None and not _under(path, start):
                owner = self._owner(path)
                where = f" into another user's home ({owner}); only {self.home}/... is yours" if owner not in (None, self.user) else ""
                findings.error(field_, raw, f"'..' climbs out of {start}{where}")
                return
        if not _under(path, self.root):
            return
        if path in (self.root, self.users_root):
            findings.error(field_, raw, f"names {path} itself; only {self.home}/... and the shared {', '.join(self.shared_roots)} are allowed")
        elif _under(path, self.users_root):
            owner = self._owner(path)
            if owner != self.user:
                findings.error(field_, raw, f"is in another user's home ({owner}); only {self.home}/... is yours")
        elif self._root_of(path) is None:
            findings.error(field_, raw, f"is outside the folders a task may use ({self.home}, {', '.join(self.shared_roots)})")

    def scan(self, field_: str, text: str, findings: Findings) -> None:
        """Every path-like piece of ``text``: isolation, '..' and user segments built at run
        time (variables, command substitution, globs, braces)."""
        for m in LEFTOVER_HOME.finditer(text):
            token = _PATH_RUN.match(text, m.end())
            findings.error(field_, m.group() + (token.group() if token else ""), "$HOME must be followed by '/' or end the path: text glued to it names a folder beside your home (perhaps another user's)")
        if any(c in text for c in _DYNAMIC):
            self._scan_dynamic(field_, text, findings)
        if self._only_plain_allowed_paths(text):
            return
        root, home = self.root, self._home_slash
        for run in _PATH_RUN.findall(text):
            if "/." in run or "//" in run or ".." in run:
                pass
            elif root not in run or run.startswith(home):
                continue  # nothing to normalise, and outside the root or in the user's home
            if ".." in run and not run.startswith("/"):
                rel = posixpath.normpath(run)
                if rel == ".." or rel.startswith("../"):
                    findings.error(field_, run, "'..' climbs out of the job directory; use an absolute path under $HOME")
                    continue
            slash = run.find("/")
            if slash >= 0:
                self.check_absolute(field_, run[slash:], findings)

    def _only_plain_allowed_paths(self, text: str) -> bool:
        """True when nothing in ``text`` needs normalising and every mention of the root
        starts a path in the user's home or a shared folder: the common case, answered
        without looking at each path."""
        if ".." in text or "//" in text or "/." in text:
            return False
        root, allowed = self.root, self._plain_prefixes
        i = text.find(root)
        while i >= 0:
            if (i > 0 and text[i - 1] not in _PATH_BREAK_CHARS) or not text.startswith(allowed, i):
                return False
            i = text.find(root, i + len(root))
        return True

    def _scan_dynamic(self, field_: str, text: str, findings: Findings) -> None:
        """A path whose part up to and including the user segment is not literal text:
        ``/private/users/$U``, ``/priv*/users/bob``, ``/private/users/alice$X``."""
        users = self.users_root + "/"
        for m in _DYNAMIC_PATH.finditer(text):
            literal = m.group(1)
            norm = posixpath.normpath(literal)
            if norm.startswith("//"):
                norm = "/" + norm.lstrip("/")
            if literal.endswith(("/", "/.")) and norm != "/":
                norm += "/"
            incomplete_segment = norm.startswith(users) and "/" not in norm[len(users):]
            if users.startswith(norm) or incomplete_segment:
                end = m.start()
                while end < len(text) and not text[end].isspace():
                    end += 1
                findings.error(field_, text[m.start():end], "the user segment is built from a variable or pattern; write your own home ($HOME) out")

    def scan_word(self, field_: str, word: str, assignments: dict[str, str], findings: Findings, *, include_self: bool = True) -> None:
        """One shell word (quotes removed) as bash would build it: the script's own
        variables substituted and braces expanded, then scanned."""
        variants = {word}
        if "$" in word:
            value, unresolved = substitute(word, assignments)
            too_large = [name for name in unresolved if name in assignments]
            if too_large:
                findings.error(field_, word, f"is built from ${too_large[0]}, which grows past what the check reads; write the path out")
            variants.add(value)
        if "{" in word and "/" in word:  # braces can make a path only from a word with a '/'
            for w in list(variants):
                expanded = brace_expand(w)
                if expanded is None:
                    findings.error(field_, w, f"makes more than {_MAX_BRACE_WORDS} words by brace expansion, more than the check reads; write the paths out")
                else:
                    variants.update(expanded)
        if not include_self:
            variants.discard(word)
        for variant in variants:
            self.scan(field_, variant, findings)

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


def brace_expand(word: str, limit: int = _MAX_BRACE_WORDS) -> list[str] | None:
    """Bash brace expansion (``{a,b}`` groups, innermost first) of one word: the words it
    makes, or None when they would be more than ``limit`` (or nest too deep)."""
    words = [word]
    for _ in range(16):
        out: list[str] = []
        changed = False
        for w in words:
            m = next((m for m in _BRACES.finditer(w) if "," in m.group(1)), None)
            if m is None:
                out.append(w)
                continue
            changed = True
            out.extend(w[: m.start()] + alt + w[m.end() :] for alt in m.group(1).split(","))
            if len(out) > limit:
                return None
        words = out
        if not changed:
            return words
    return None


def check_text(field_: str, text: str, findings: Findings, *, max_bytes: int = MAX_COMMAND_BYTES, what: str = "") -> bool:
    """Size, control characters, '~'. Returns False when the text is unusable."""
    size = len(text) if len(text) * 4 <= max_bytes else len(text.encode("utf-8"))
    if size > max_bytes:
        findings.error(field_, f"{size} bytes", f"{what}is larger than the {max_bytes // 1024} KiB limit")
        return False
    # str.isprintable is quick and false for every control character (and for some
    # harmless Unicode, which the exact search then clears).
    bad = None if text.replace("\n", "").replace("\t", "").isprintable() else _CONTROL.search(text)
    if bad:
        findings.error(field_, f"\\x{ord(bad.group()):02x} at offset {bad.start()}", "control characters other than newline and tab are not allowed")
        return False
    for m in _TILDE.finditer(text) if "~" in text else ():
        token = _NON_BLANK.match(text, m.start()).group() or "~"  # type: ignore[union-attr]
        findings.error(field_, token, "'~' expands to the worker's home, not yours: use $HOME")
    return True


def hydra_list(value: str) -> list[str]:
    """``[a,'b']`` -> [a, b]; a plain value -> [value]."""
    value = value.strip()
    if value.startswith("[") and value.endswith("]"):
        items = [v.strip().strip("'\"").strip() for v in value[1:-1].split(",")]
        return [v for v in items if v]
    return [value.strip("'\"")]


@dataclass(slots=True)
class Override:
    plus: str  # "", "+" or "++"
    key: str
    value: str
    token: str


@dataclass
class CommandFacts:
    """What the checks learned about a command, for the plan and the template."""

    entrypoints: list[tuple[str, str]] = field(default_factory=list)  # (program, module)
    overrides: list[Override] = field(default_factory=list)  # the ones the checks know


def _overrides(args: list[str]) -> list[Override]:
    """The Hydra overrides among ``args`` that the checks look at (a 64 KiB command may
    hold thousands of others)."""
    found = []
    match = _OVERRIDE.match
    for word in args:
        eq = word.find("=")
        if eq <= 0:
            continue
        key = word[:eq].lstrip("+")
        if (key in _KNOWN_KEYS or key.startswith(REWARD_KWARGS_PREFIX)) and (m := match(word)):
            found.append(Override(*m.groups(), word))
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
    # The 64 KiB limit is on what the user wrote (checked before expansion); the expanded
    # text only gets a generous bound.
    if not check_text(field_, command, findings, max_bytes=MAX_EXPANDED_COMMAND_BYTES, what="expanded, "):
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
    # A word spelled in the source as it reads was seen by the scan of the raw text; one
    # built from quotes or escapes was not, nor what variables or braces make of a word.
    for word in set(script.words):
        if word in script.composed:
            policy.scan_word(field_, word, script.assignments, findings)
        elif "$" in word or "{" in word:
            policy.scan_word(field_, word, script.assignments, findings, include_self=False)

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
        what = f"${unknown[0]}" if unknown else "a shell or Hydra expansion"
        findings.error(field_, ov.token, f"is built from {what}, which the check cannot resolve; write the path out (or assign it earlier in the command)")
        return None
    return value


def _check_overrides(
    field_: str, facts: CommandFacts, script: Script, policy: PathPolicy,
    nnodes: int | None, gpus_per_node: int | None, findings: Findings,
) -> None:
    keys = {ov.key for ov in facts.overrides}
    for ov in facts.overrides:
        if ov.key not in _CHECKED_KEYS:
            if not ov.plus and ov.key.startswith(REWARD_KWARGS_PREFIX):
                findings.warn(field_, ov.token, f"verl does not declare custom_reward_function.reward_kwargs, so Hydra refuses this key: write '+{ov.token}'")
            continue
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

    runs_ppo = any(not posixpath.basename(p).startswith("torchrun") for p, _ in facts.entrypoints)
    if facts.entrypoints:
        for key in DATA_KEYS:
            if key not in keys:
                findings.warn(field_, f"{key}=", "is not set: verl falls back to its default data files, which are likely not yours")
        if runs_ppo and RAY_ADDRESS_KEY not in keys:
            findings.warn(field_, f"+{RAY_ADDRESS_KEY}=auto", "is not set: verl may start its own local Ray instead of joining the cluster")
        if REWARD_PATH_KEY in keys and REWARD_NAME_KEY not in keys:
            findings.warn(field_, f"{REWARD_NAME_KEY}=", "is not set: verl will look for a function named compute_score in the reward file")
