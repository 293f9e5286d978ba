"""The advanced command as a checked program: parse, don't scan.

A task's command is read in a small language (the part of bash verl launch scripts use),
into a typed program; the checks run on the program; the command Ray runs is generated
from it. What was checked is, byte for byte, what runs.

    manifest -> plan.validate_spec
      spec.command -> policy.check_text     size, control and invisible characters
        -> expand                           $HOME macros (argus.core.expand)
        -> syntax.parse                     text -> tokens (lexer) -> Script (default deny: Refusals)
        -> resolve                          the script's own variables substituted
        -> launchers.read_launch            python3 / torchrun options, the module
        -> hydra.read_hydra_args            Hydra's own reading of the overrides
        -> checks.Checker                   path policy, counts, weak checks
        -> emit                             Script -> the bash text Ray runs
      -> plan.resolve_plan                  SubmissionPlan (command, entrypoint, ...)

``check_command`` runs the steps and reports through ``Findings``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..policy import Findings, PathPolicy, check_text
from ..spec import MAX_COMMAND_BYTES
from .checks import Checker, check_environment
from .emit import emit
from .hydra import Setting, read_hydra_args
from .launchers import Launch, read_launch
from .program import Assign, Export, Part, Refusal, Run, Script, Word
from .resolve import resolve
from .syntax import parse

# The generated command may be longer than what the user wrote ($HOME and variables
# grow), but not without bound: it is what Ray runs and what the status shows.
MAX_EMITTED_COMMAND_BYTES = 4 * MAX_COMMAND_BYTES


@dataclass
class CheckedCommand:
    """A command that passed the checks: the program, its entrypoint, and the text to run.

    ``options``: Hydra's --config-name/--config-path/--config-dir as (dest, value);
    ``environment``: what the command puts into the job's environment (exported variables
    and the entrypoint's prefixes), as resolved parts (a ``Var`` is the inherited value)."""

    script: Script
    launch: Launch
    settings: list[Setting]
    text: str
    options: list[tuple[str, str]] = field(default_factory=list)
    environment: dict[str, tuple[Part, ...]] = field(default_factory=dict)
    # The spec's counts the command leaves out, for the composition to add where the
    # config declares them (with a verl config tree only; else they are in ``text``).
    count_defaults: list[str] = field(default_factory=list)
    # Warnings on keys the command leaves out, for the composition to give where the config
    # declares the key: (key, value shown, rule).
    deferred: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def overrides(self) -> list[str]:
        """The overrides as Hydra receives them (a $(date ...) as a sample of its output)."""
        return [s.hydra_text or s.text for s in self.settings]

    def with_arguments(self, extra: list[str]) -> CheckedCommand:
        """The same command with ``extra`` Hydra arguments added to the entrypoint (Argus's
        own additions: each is announced by a warning where it is decided)."""
        if not extra:
            return self
        run = self.script.run
        assert run is not None
        words = tuple(Word((e,), True, run.line) for e in extra)
        final_run = Run(run.env, (*run.argv, *words), run.tee, run.line)
        script = Script(tuple(final_run if s is run else s for s in self.script.statements))
        return CheckedCommand(script, self.launch, self.settings, emit(script), self.options, self.environment, self.count_defaults,
                              self.deferred)

    def exports(self, name: str) -> bool:
        """Whether the command puts ``name`` in its entrypoint's environment itself
        (``export NAME=...``, ``export NAME`` or a ``NAME=...`` prefix of the entrypoint)."""
        for s in self.script.statements:
            if type(s) is Assign and s.export and s.name == name:
                return True
            if type(s) is Export and s.name == name:
                return True
            if type(s) is Run and any(a.name == name for a in s.env):
                return True
        return False

    @property
    def argv(self) -> list[str]:
        """The entrypoint's words as its program receives them (for a ``$(date ...)``,
        the text as written)."""
        run = self.script.run
        assert run is not None
        return [w.literal if w.literal is not None else w.shown() for w in run.argv]


def _report(field_: str, refusals: list[Refusal], findings: Findings) -> None:
    for r in refusals:
        findings.error(field_, r.token, r.text())


def check_command(
    field_: str,
    command: str,
    *,
    policy: PathPolicy,
    nnodes: int | None,
    gpus_per_node: int | None,
    findings: Findings,
    resolved_later: bool = False,
    job_dir: str | None = None,
) -> CheckedCommand | None:
    """Check a command whose $HOME macros are expanded; return it as it will run, or None
    when it is refused (the reasons are in ``findings``). ``resolved_later``: the command's
    configuration will be composed and resolved with verl's tree and checked then
    (``argus.core.verlconfig``), so an interpolation this text check cannot resolve is left
    to that check instead of refused. ``job_dir``: the task's job folder, where a relative
    path an environment variable names is put (None: left relative)."""
    if not check_text(field_, command, findings, max_bytes=MAX_EMITTED_COMMAND_BYTES, what="expanded, "):
        return None
    if not command.strip():
        findings.error(field_, command, "must not be empty")
        return None
    entries = policy.config.entrypoints
    errors_before = len(findings.errors)
    script, refusals, words_intact, entrypoint_seen = parse(command, {e.program for e in entries})
    _report(field_, refusals, findings)
    if not words_intact:
        return None  # later checks of a half-read word would mislead
    resolved, bindings, refusals = resolve(script)
    _report(field_, refusals, findings)
    checker = Checker(field_, policy, nnodes, gpus_per_node, findings, resolved_later=resolved_later, job_dir=job_dir)
    resolved = check_environment(checker, resolved)
    run = resolved.run
    if script.run is None:
        if entrypoint_seen:
            return None  # the entrypoint's own refusal says what is wrong
        allowed = ", ".join(f"'{e.program} [options] -m {e.module_glob}'" for e in entries)
        first = next((line.strip() for line in command.splitlines() if line.strip() and not line.strip().startswith("#")), command.strip())
        findings.error(field_, first, f"does not run an allowed entrypoint ({allowed}); one in a comment, an echo, "
                       "a quoted string or a heredoc does not count")
        return None
    if run is None:
        return None
    launch, refusals = read_launch(list(run.argv), entries, run.line)
    _report(field_, refusals, findings)
    if launch is None:
        return None
    args, refusals = read_hydra_args(launch.args, run.line)
    _report(field_, refusals, findings)
    added = checker.launch(launch, args)
    if len(findings.errors) > errors_before:
        return None
    head = [Word((w,), True, run.line) for w in launch.head()]
    final_run = Run(run.env, (*head, *launch.args, *added), run.tee, run.line)
    final = Script(tuple(final_run if s is run else s for s in resolved.statements))
    text = emit(final)
    if len(text) > MAX_EMITTED_COMMAND_BYTES:
        findings.error(field_, f"{len(text)} bytes", f"the generated command is larger than {MAX_EMITTED_COMMAND_BYTES // 1024} KiB")
        return None
    environment: dict[str, tuple[Part, ...]] = {}
    assigned: dict[str, tuple[Part, ...]] = {}
    for s in resolved.statements:
        if type(s) is Assign:
            assigned[s.name] = s.value.parts
            if s.export:
                environment[s.name] = s.value.parts
        elif type(s) is Export and s.name in bindings:
            environment[s.name] = assigned.get(s.name, bindings[s.name].parts)
    for a in run.env:
        environment[a.name] = a.value.parts
    return CheckedCommand(final, launch, args.settings, text, [(d, v) for d, _, v in args.options], environment,
                          checker.count_defaults, checker.deferred)
