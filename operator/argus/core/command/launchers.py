"""Step 3 of the command checks: the entrypoint's program, options and module.

    spec.command -> check_text -> expand -> syntax.parse -> resolve -> **launchers** -> hydra -> checks -> emit

The resolved entrypoint words are read the way the program reads them:

* ``python3 [-u] [-B] -m MODULE ARGS``: CPython takes the word after ``-m`` as the module
  and hands everything after it to the module; ``-u`` and ``-B`` are the only interpreter
  options allowed (``-c``, ``-``, ``--``, a script path, ``-X``/``-W``/``-E``/``-I`` ... are refused).
* ``torchrun OPTIONS -m MODULE ARGS``: torchrun's argparse options, from
  ``TORCHRUN_OPTIONS`` (torch/distributed/run.py): flags take no value, value options take
  ``--name=value`` or ``--name value``; argparse would accept abbreviations
  (``--nproc_per=8``) and let a repeated option win, so both are refused; ``-m`` is a flag
  and the first word that is not an option is the module. ``--no-python``, ``--run-path``
  and ``--logs-specs`` (run something other than the module, or load a plugin) are refused.
* any other allowlisted program: ``PROGRAM -m MODULE ARGS`` exactly.

The module must match the allowlist entry of its program. The result, ``Launch``, keeps
the options in one canonical spelling (``--name=value``) for the emitted command.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import NamedTuple

from ..config import Entrypoint
from .program import Refusal, Word


@dataclass(frozen=True, slots=True)
class TorchrunOption:
    dest: str
    takes_value: bool
    refused: str = ""  # why Argus refuses it, when it does


def _table() -> dict[str, TorchrunOption]:
    """Every option string torchrun's parser defines, as it defines it."""
    table: dict[str, TorchrunOption] = {}

    def add(*names: str, value: bool = True, refused: str = "") -> None:
        dest = max(names, key=len).lstrip("-").replace("-", "_")
        for name in names:
            table[name] = TorchrunOption(dest, value, refused)

    add("--nnodes")
    add("--nproc-per-node", "--nproc_per_node")
    add("--rdzv-backend", "--rdzv_backend")
    add("--rdzv-endpoint", "--rdzv_endpoint")
    add("--rdzv-id", "--rdzv_id")
    add("--rdzv-conf", "--rdzv_conf")
    add("--standalone", value=False)
    add("--max-restarts", "--max_restarts")
    add("--monitor-interval", "--monitor_interval")
    add("--start-method", "--start_method")
    add("--event-log-handler", "--event_log_handler")
    add("--role")
    add("-m", "--module", value=False)
    add("--no-python", "--no_python", value=False, refused="it runs the script as a program, not Python")
    add("--run-path", "--run_path", value=False, refused="it runs a script file, not the module")
    add("--log-dir", "--log_dir")
    add("-r", "--redirects")
    add("-t", "--tee")
    add("--local-ranks-filter", "--local_ranks_filter")
    add("--node-rank", "--node_rank")
    add("--master-addr", "--master_addr")
    add("--master-port", "--master_port")
    add("--local-addr", "--local_addr")
    add("--logs-specs", "--logs_specs", refused="it loads a logging plugin by name")
    add("--numa-binding", "--numa_binding")
    add("--signals-to-handle", "--signals_to_handle")
    add("-h", "--help", value=False, refused="it prints the help and runs nothing")
    return table


TORCHRUN_OPTIONS = _table()
# The long spelling each short option is written out as in the emitted command.
_LONG = {"-m": "-m", "-r": "--redirects", "-t": "--tee"}
PYTHON_OPTIONS = ("-u", "-B")
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_PLAIN_INT = re.compile(r"0|[1-9][0-9]{0,5}")


@dataclass(frozen=True, slots=True)
class Option:
    spelling: str  # as written (long form for a short option)
    dest: str
    value: str | None


@dataclass(slots=True)
class Launch:
    """The entrypoint as its program reads it."""

    program: str
    kind: str  # "python", "torchrun" or "plain"
    options: list[Option]
    module: str
    args: list[Word]  # everything after the module: Hydra's arguments
    line: int
    entry: Entrypoint
    added_options: list[Option] = field(default_factory=list)

    def option(self, dest: str) -> Option | None:
        return next((o for o in self.options if o.dest == dest), None)

    def head(self) -> list[str]:
        """The program, its options and the module, in the emitted spelling."""
        words = [self.program]
        for o in [*self.options, *self.added_options]:
            if o.dest == "module":
                continue
            words.append(o.spelling if o.value is None else f"{o.spelling}={o.value}")
        return [*words, "-m", self.module]


def kind_of(program: str) -> str:
    base = posixpath.basename(program)
    if base == "torchrun":
        return "torchrun"
    if base.startswith("python"):
        return "python"
    return "plain"


def plain_int(value: str) -> int | None:
    """``value`` as torchrun's counts are written here: decimal digits only."""
    return int(value) if _PLAIN_INT.fullmatch(value) else None


def read_launch(argv: list[Word], entries: tuple[Entrypoint, ...], line: int) -> tuple[Launch | None, list[Refusal]]:
    """Read the resolved entrypoint words. ``argv[0]`` is an allowlisted program (the
    parser made sure)."""
    program = argv[0].literal or ""
    mine = [e for e in entries if e.program == program]
    kind = kind_of(program)
    globs = ", ".join(e.module_glob for e in mine)
    options: list[Option] = []
    n = len(argv)
    if kind == "python":
        k = _python_head(argv, program, globs, options)
    elif kind == "torchrun":
        k = _torchrun_head(argv, program, globs, options)
    elif n <= 1 or argv[1].literal != "-m":
        token = argv[1].shown() if n > 1 else program
        k = _Refused(token, f"{program} must be followed by -m MODULE", f"write {program} -m MODULE (allowed: {globs})")
    else:
        k = 2
    if isinstance(k, _Refused):
        return None, [Refusal(line, *k)]
    if k >= n:
        return None, [Refusal(line, program, f"{program} names no module", f"write {program} ... -m MODULE (allowed: {globs})")]
    module = argv[k].literal or argv[k].shown()
    entry = next((e for e in mine if e.allows(program, module)), None)
    if not _MODULE.fullmatch(module) or entry is None:
        return None, [Refusal(line, module, f"module {module} is not allowed for {program}", f"run an allowed module ({globs})")]
    return Launch(program, kind, options, module, list(argv[k + 1:]), line, entry), []


class _Refused(NamedTuple):
    """What ends the reading of an entrypoint: the token, the rule, the advice."""

    token: str
    rule: str
    advice: str


def _python_head(argv: list[Word], program: str, globs: str, options: list[Option]) -> int | _Refused:
    """``python3 [-u] [-B] -m``: the options into ``options``; where the module is."""
    k, n = 1, len(argv)
    while k < n and argv[k].literal in PYTHON_OPTIONS:
        opt = argv[k].literal
        assert opt is not None
        if any(o.spelling == opt for o in options):
            return _Refused(opt, f"{program} option {opt} is given twice", f"give {opt} once")
        options.append(Option(opt, opt.lstrip("-"), None))
        k += 1
    if k >= n or argv[k].literal != "-m":
        token = argv[k].shown() if k < n else program
        return _Refused(token, f"{program} takes only -u and -B before -m here",
                        f"run the module: {program} [-u] [-B] -m MODULE (allowed: {globs})")
    return k + 1


def _torchrun_head(argv: list[Word], program: str, globs: str, options: list[Option]) -> int | _Refused:
    """``torchrun OPTIONS -m``, as torchrun's argparse reads them (no abbreviations, each
    once): the options into ``options``; where the module is."""
    k, n = 1, len(argv)
    module_flag = False
    seen: dict[str, str] = {}
    while k < n:
        text = argv[k].literal
        if text is None or not text.startswith("-") or text == "-":
            break
        if text == "--":
            return _Refused("--", "torchrun's '--' is not allowed", "write torchrun OPTIONS -m MODULE ARGS")
        name, eq, value = text.partition("=") if text.startswith("--") else (text, "", "")
        torchrun_opt = TORCHRUN_OPTIONS.get(name)
        if torchrun_opt is None:
            full = sorted({n_ for n_ in TORCHRUN_OPTIONS if n_.startswith(name) and n_.startswith("--")}) if name.startswith("--") else []
            hint = f"write the full name ({' or '.join(full[:2])}); abbreviations are not read" if full else \
                "give only torchrun's own options (torch/distributed/run.py), each spelled out"
            return _Refused(text, f"{name} is not a torchrun option", hint)
        if torchrun_opt.refused:
            return _Refused(text, f"torchrun {name} is not allowed", f"{torchrun_opt.refused}; run -m MODULE")
        if torchrun_opt.dest in seen:
            return _Refused(text, f"torchrun's {torchrun_opt.dest} is given twice ({seen[torchrun_opt.dest]} and {name})",
                            "give each option once (torchrun would take the last)")
        seen[torchrun_opt.dest] = name
        k += 1
        if not torchrun_opt.takes_value:
            if eq:
                return _Refused(text, f"torchrun {name} takes no value", f"write {name} alone")
            if torchrun_opt.dest == "module":
                module_flag = True
            options.append(Option(_LONG.get(name, name), torchrun_opt.dest, None))
            continue
        if not eq:
            if k >= n or argv[k].literal is None or (argv[k].literal or "-").startswith("-"):
                return _Refused(name, f"torchrun {name} needs a value", f"write {name}=VALUE")
            value = argv[k].literal  # type: ignore[assignment]
            k += 1
        options.append(Option(_LONG.get(name, name), torchrun_opt.dest, value))
    if not module_flag:
        token = argv[k].shown() if k < n else program
        return _Refused(token, "torchrun runs a script here, not a module",
                        f"write torchrun [options] -m MODULE (allowed: {globs})")
    return k
