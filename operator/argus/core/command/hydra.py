"""Step 4 of the command checks: the module's arguments read as Hydra reads them.

    spec.command -> check_text -> expand -> syntax.parse -> resolve -> launchers -> **hydra** -> checks -> emit

verl reads its command line with Hydra, so the arguments are read here with Hydra's own
override parser (``hydra.core.override_parser``): dict values, lists, quoting, whitespace,
``+``/``++``/``~`` and sweeps mean exactly what verl will see. Hydra's command-line options
(``--config-name``, ``--config-path``, ``--config-dir`` and the ones Argus refuses) are read
as Hydra's argparse defines them.

Hydra's ANTLR parser is slow in pure Python (a few hundred microseconds an override), and
a 64 KiB command holds a thousand overrides. An override whose text is trivially simple
(``key=value`` with a dotted key and a value of letters, digits and ``_ . / - + : % @``) is
read by ``fast_override`` instead; a property test pins its result to Hydra's on random
such texts. Everything else goes to Hydra (its results are cached: the webhook and the
operator validate the same task).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .program import Refusal, Word

# The sample a $(date +FORMAT) stands for while Hydra reads the value: the same
# characters class (letters and digits) as any real output.
_DATE_SAMPLE = {
    "Y": "2024", "m": "01", "d": "02", "H": "03", "M": "04", "S": "05", "y": "24", "j": "002", "s": "1704164645",
    "b": "Jan", "B": "January", "a": "Tue", "A": "Tuesday", "p": "AM", "u": "2", "w": "2", "U": "00", "V": "01",
    "G": "2024", "g": "24", "N": "000000000", "I": "03", "C": "20",
}

_INT_UNSIGNED = r"(?:0|[1-9](?:_?[0-9])*)"
_POINT_FLOAT = rf"(?:{_INT_UNSIGNED}\.|{_INT_UNSIGNED}?\.[0-9](?:_?[0-9])*)"
_FLOAT = re.compile(rf"[+-]?(?:(?:{_INT_UNSIGNED}|{_POINT_FLOAT})[eE][+-]?[0-9](?:_?[0-9])*|{_POINT_FLOAT}|[Ii][Nn][Ff]|[Nn][Aa][Nn])")
_INT = re.compile(rf"[+-]?{_INT_UNSIGNED}")
_BOOL = re.compile(r"[Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee]")
_NULL = re.compile(r"[Nn][Uu][Ll][Ll]")
_TYPED_STARTS = frozenset("0123456789+-.tTfFnNiI")
_PLAIN_VALUE = r"[A-Za-z0-9_./\-+:%@]+"
_QUOTED = r"'[^'\\$]*'|\"[^\"\\$]*\""
# A list item; a plain one neither starts nor ends with ':' (Hydra keeps the blanks
# next to a ':' inside a value).
_PLAIN_ITEM = r"[A-Za-z0-9_./\-+%@](?:[A-Za-z0-9_./\-+:%@]*[A-Za-z0-9_./\-+%@])?"
_ITEM = rf"(?:{_PLAIN_ITEM}|{_QUOTED})"
# (Hydra drops the blanks after '[', around ',' and before ']'.)
_FAST = re.compile(r"(\+{0,2})([A-Za-z_][A-Za-z0-9_\-]*(?:\.[A-Za-z_][A-Za-z0-9_\-]*)*)="
                   rf"({_PLAIN_VALUE}|{_QUOTED}|\[[ \t]*(?:{_ITEM}(?:[ \t]*,[ \t]*{_ITEM})*)?[ \t]*\])")
_LIST_ITEM = re.compile(_ITEM)

# Hydra's own command-line options (hydra/_internal/utils.py, get_args_parser).
_HYDRA_VALUE_OPTIONS = {"--config-path": "config_path", "-cp": "config_path", "--config-name": "config_name",
                        "-cn": "config_name", "--config-dir": "config_dir", "-cd": "config_dir"}
_HYDRA_REFUSED_OPTIONS = {
    "--multirun": "it runs one job per value of a sweep", "-m": "it runs one job per value of a sweep (--multirun)",
    "--cfg": "it prints the config and runs nothing", "-c": "it prints the config and runs nothing (--cfg)",
    "--help": "it prints the help and runs nothing", "-h": "it prints the help and runs nothing",
    "--hydra-help": "it prints the help and runs nothing", "--version": "it prints the version and runs nothing",
    "--info": "it prints information and runs nothing", "-i": "it prints information and runs nothing (--info)",
    "--resolve": "it only changes what --cfg prints", "--package": "it only changes what --cfg prints",
    "-p": "it only changes what --cfg prints", "--run": "it is the default", "-r": "it is the default (--run)",
    "--shell-completion": "it installs shell completion and runs nothing", "-sc": "it installs shell completion",
    "--experimental-rerun": "it reruns another job from its pickled config",
}


@dataclass(slots=True)
class Setting:
    """One override as Hydra reads it. (Not frozen: a frozen dataclass is built several
    times slower, and a 64 KiB command holds a thousand overrides.)"""

    op: str  # "" (change), "+" (add), "++" (force add) or "~" (delete)
    key: str  # Hydra's key_or_group: a dotted key, or a config group path with '/'
    package: str | None  # the @package of a group override
    value: Any  # None, bool, int, float, str, list or dict; a Hydra Sweep object for sweeps
    sweep: bool
    text: str  # the override as the user reads it ($(date ...) spelled out)
    has_date: bool = False
    line: int = 0
    hydra_text: str = ""  # the text Hydra's parser read (a $(date ...) as a sample of its output)


@dataclass(slots=True)
class HydraArgs:
    settings: list[Setting]
    options: list[tuple[str, str, str]]  # (dest, spelling, value) for --config-name/-path/-dir


def date_sample(fmt: str) -> str:
    return re.sub(r"%([A-Za-z])", lambda m: _DATE_SAMPLE.get(m.group(1), "0"), fmt)


class _NotFast(Exception):
    pass


# Longer digit strings are beyond int()'s default limit (4300 digits).
_MAX_NUMBER_CHARS = 4000
# Hydra's ANTLR parser takes about 13 us a character, and more with nesting: the text a
# command may send to it is bounded, and so is the nesting (real values nest 2 or 3 deep).
HYDRA_BUDGET_CHARS = 16 * 1024
MAX_NESTING = 16


def _primitive(raw: str) -> Any:
    """A quoted string, or an unquoted primitive without blanks or escapes, as Hydra types it."""
    first = raw[0]
    if first == "'" or first == '"':
        return raw[1:-1]
    if first not in _TYPED_STARTS:
        return raw  # no number, bool or null starts so
    # One token of a typed kind is typed; anything else is the text itself (Hydra's lexer
    # takes the longest token, and on a tie the rule it defines first: FLOAT, INT, BOOL, NULL).
    if len(raw) > _MAX_NUMBER_CHARS:
        raise _NotFast  # Python refuses to convert such numbers: let Hydra say so
    if _FLOAT.fullmatch(raw):
        return float(raw.replace("_", ""))
    if _INT.fullmatch(raw):
        return int(raw.replace("_", ""))
    if _BOOL.fullmatch(raw):
        return raw.lower() == "true"
    if _NULL.fullmatch(raw):
        return None
    return raw


def fast_override(text: str) -> tuple[str, str, Any] | None:
    """(op, key, value) as Hydra would read ``text``, for trivially simple overrides only
    (a dotted key; a value of plain characters, a quoted string without quotes, '$' or
    backslashes inside, or a list of those without blanks); None for anything else."""
    m = _FAST.fullmatch(text)
    if m is None:
        return None
    op, key, raw = m.groups()
    try:
        if raw[0] == "[":
            return op, key, [_primitive(item) for item in _LIST_ITEM.findall(raw, 1, len(raw) - 1)]
        return op, key, _primitive(raw)
    except _NotFast:
        return None


_parser: Any = None


def _hydra_parser() -> Any:
    global _parser
    if _parser is None:
        # Imported on first use: Hydra takes about 0.1 s to import, and most commands'
        # overrides never need it.
        from hydra.core.override_parser.overrides_parser import OverridesParser

        _parser = OverridesParser.create()
    return _parser


def warm_up() -> None:
    """Load Hydra's parser now (about 0.1 s), so that the first task that needs it (a
    webhook request, say) does not wait for it. The operator calls this at start."""
    _hydra_parser()


_OPS = {"CHANGE": "", "ADD": "+", "FORCE_ADD": "++", "DEL": "~"}


@lru_cache(maxsize=8192)
def hydra_override(text: str) -> tuple[str, str, str | None, Any, bool] | str:
    """(op, key, package, value, is sweep) as Hydra's parser reads ``text``, or Hydra's
    error message (its first line)."""
    try:
        o = _hydra_parser().parse_override(text)
    except Exception as exc:  # noqa: BLE001 - Hydra raises its own and ANTLR's exceptions
        lines = [x.strip() for x in str(exc).splitlines() if x.strip()]
        return lines[0] if lines else type(exc).__name__
    return _OPS[o.type.name], o.key_or_group, o.package, o.value(), o.is_sweep_override()


def _nesting(text: str) -> int:
    """The deepest nesting of brackets, braces and parentheses (quotes ignored: an upper bound)."""
    if "[" not in text and "{" not in text and "(" not in text:
        return 0
    depth = deepest = 0
    for c in text:
        if c in "[{(":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]})":
            depth -= 1
    return deepest


def _date_in_key(w: Word) -> bool:
    """True when a $(date ...) stands before the override's first '='."""
    for p in w.parts:
        if type(p) is not str:
            return True
        if "=" in p:
            return False
    return True


def read_hydra_args(args: list[Word], line: int) -> tuple[HydraArgs, list[Refusal]]:
    refusals: list[Refusal] = []
    settings: list[Setting] = []
    options: list[tuple[str, str, str]] = []
    budget = HYDRA_BUDGET_CHARS
    k = 0
    n = len(args)
    while k < n:
        w = args[k]
        k += 1
        literal = w.literal
        if literal is not None and literal[:1] not in ("-", ""):
            fast = fast_override(literal)  # the common case, in one step
            if fast is not None:
                settings.append(Setting(fast[0], fast[1], None, fast[2], False, literal, False, line, literal))
                continue
        has_date = literal is None
        if literal is None:
            shown = w.shown()
            text = "".join(p if isinstance(p, str) else date_sample(p.format) for p in w.parts)  # type: ignore[union-attr]  # a resolved word holds no Var
        else:
            shown = text = literal
        if text.startswith("-"):
            name, eq, value = text.partition("=") if text.startswith("--") else (text, "", "")
            if has_date:
                refusals.append(Refusal(line, shown, "$(date ...) in a Hydra option is not allowed", "write the value out"))
                continue
            if name in _HYDRA_VALUE_OPTIONS:
                if not eq:
                    if k >= n or (args[k].literal or "-").startswith("-"):
                        refusals.append(Refusal(line, text, f"{name} needs a value", f"write {name}=VALUE"))
                        continue
                    value = args[k].literal or ""
                    k += 1
                options.append((_HYDRA_VALUE_OPTIONS[name], name, value))
            elif name in _HYDRA_REFUSED_OPTIONS:
                refusals.append(Refusal(line, text, f"Hydra's {name} is not allowed", f"{_HYDRA_REFUSED_OPTIONS[name]}; remove it"))
            else:
                refusals.append(Refusal(line, text, f"{name} is not a Hydra override or option verl reads",
                                        "give overrides as key=value (Hydra's options: --config-name, --config-path, --config-dir)"))
            continue
        if has_date and _date_in_key(w):
            refusals.append(Refusal(line, shown, "$(date ...) in an override key is not allowed", "write the key out"))
            continue
        fast = fast_override(text)
        if fast is not None:
            op, key, value = fast
            settings.append(Setting(op, key, None, value, False, shown, has_date, line, text))
            continue
        if len(text) > budget:
            refusals.append(Refusal(line, shown, f"needs Hydra's own parser, and the overrides that do pass "
                                    f"{HYDRA_BUDGET_CHARS // 1024} KiB, more than the check reads",
                                    "write plain values and lists ([a,b]); keep dicts, interpolations and escapes short"))
            continue
        if _nesting(text) > MAX_NESTING:
            refusals.append(Refusal(line, shown, f"nests lists or dicts more than {MAX_NESTING} deep", "write a flatter value"))
            continue
        budget -= len(text)
        parsed = hydra_override(text)
        if isinstance(parsed, str):
            advice = ("quote a value with blanks or special characters inside the override (key='a b'); "
                      "see https://hydra.cc/docs/advanced/override_grammar/basic/")
            if not text:
                refusals.append(Refusal(line, "''", "an empty argument is not a Hydra override", "remove it"))
            else:
                refusals.append(Refusal(line, shown, f"is not a Hydra override verl can read ({parsed})", advice))
            continue
        op, key, package, value, sweep = parsed
        settings.append(Setting(op, key, package, value, sweep, shown, has_date, line, text))
    return HydraArgs(settings, options), refusals
