"""Environment variables from Secrets (``spec.env[].valueFrom.secretKeyRef``, issue 36 item 6).

The core decides, the controller reads: which names may come from a Secret (the command's
environment rules, ``command.environment.secret_reason``: a knob only), that a name is set
once (not by the command and a Secret both, not over what Argus sets itself), and, given
what the controller read from the task's namespace, either every value or the one line that
says why the task waits (``Reason.SecretMissing``). Nothing here holds a value longer than
the call that gets it: the plan carries only ``<from secret NAME/KEY>`` (what ``argus
render`` and ``argus describe`` show), and the values ride beside it, hidden from every
dump and repr, to the Ray client (``SubmissionPlan.with_secrets``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .command.environment import secret_reason
from .policy import Findings
from .spec import ArgusTaskSpec


@dataclass(frozen=True)
class SecretEnv:
    """One variable from one key of one Secret in the task's namespace."""

    variable: str
    secret: str
    key: str
    optional: bool = False

    @property
    def shown(self) -> str:
        """What every reader sees in the value's place."""
        return shown(self.secret, self.key)


def shown(secret: str, key: str) -> str:
    return f"<from secret {secret}/{key}>"


class SecretUnreadable(str):
    """A Secret the operator could not read (the API server's answer, in one line)."""


# What the controller read of one Secret: its data (decoded), None (no such Secret), or why
# it could not be read.
SecretRead = Mapping[str, str] | SecretUnreadable | None


def secret_env(spec: ArgusTaskSpec | None) -> tuple[SecretEnv, ...]:
    if spec is None or not spec.env:
        return ()
    return tuple(SecretEnv(e.name, e.value_from.secret_key_ref.name, e.value_from.secret_key_ref.key,
                           e.value_from.secret_key_ref.optional) for e in spec.env)


def raw_secret_env(raw_spec: Mapping[str, Any]) -> tuple[SecretEnv, ...]:
    """``spec.env``'s references as the API stores them (a validated task's: the entries
    that do not read are left out, never an error)."""
    found = []
    entries = raw_spec.get("env")
    for entry in entries if isinstance(entries, list) else ():
        ref = (entry.get("valueFrom") or {}).get("secretKeyRef") if isinstance(entry, Mapping) else None
        if isinstance(ref, Mapping) and all(isinstance(x, str) for x in (entry.get("name"), ref.get("name"), ref.get("key"))):
            found.append(SecretEnv(str(entry["name"]), str(ref["name"]), str(ref["key"]), ref.get("optional") is True))
    return tuple(found)


def check_secret_env(spec: ArgusTaskSpec | None, *, exported: Iterable[str], argus_sets: Iterable[str], findings: Findings) -> None:
    """The names ``spec.env`` may set: by the environment rules, once each, not the
    command's own (``exported``) nor Argus's (``argus_sets``)."""
    command_sets, argus = set(exported), set(argus_sets)
    seen: set[str] = set()
    for i, ref in enumerate(secret_env(spec)):
        field = f"spec.env[{i}].name"
        reason = secret_reason(ref.variable)
        if reason is not None:
            findings.error(field, ref.variable, f"may not come from a Secret: {reason}")
        elif ref.variable in seen:
            findings.error(field, ref.variable, "is set twice in spec.env: one value per variable")
        elif ref.variable in command_sets:
            findings.error(field, ref.variable, "is also set by the command: one value per variable (remove one)")
        elif ref.variable in argus:
            findings.error(field, ref.variable, "is set by Argus in the job's environment: remove it from spec.env")
        seen.add(ref.variable)


def resolve_secret_env(refs: Iterable[SecretEnv], namespace: str, read: Mapping[str, SecretRead]) -> tuple[dict[str, str], str | None]:
    """The values (variable -> value) from what was read of each Secret, or why the task
    waits: one line naming the variable, the Secret and the key (never a value). A missing
    optional Secret or key leaves its variable unset."""
    values: dict[str, str] = {}
    problems: list[str] = []
    for ref in refs:
        data = read.get(ref.secret)
        where = f"Secret {namespace}/{ref.secret}"
        if isinstance(data, SecretUnreadable):
            problems.append(f"{ref.variable}: {where} cannot be read ({data})")
        elif data is None or ref.key not in data:
            if not ref.optional:
                missing = "does not exist" if data is None else f"has no key {ref.key}"
                problems.append(f"{ref.variable}: {where} {missing} (spec.env names key {ref.key})")
        else:
            values[ref.variable] = data[ref.key]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return {}, f"waiting for a Secret: {problems[0]}{more}; read again every 30 s while it waits, which holds no GPUs"
    return values, None
