"""The ArgusTask spec's structural rules, declared once and rendered twice: as CEL for the
CRD (``crd.py``: the API server enforces them at ``kubectl apply``) and as Python (the
core's validation for ``argus validate`` and the operator, and the admission webhook's
UPDATE check), so the two can never say different things.

Two families:
- kind consistency (on create): what an advanced or a basic spec must and must not carry;
- change rules (on update): every spec field is fixed at creation except the ones declared
  mutable, and ``cancel`` only goes from false to true.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .problems import Problem
from .spec import BASIC_FIELDS, REQUIRED_BASIC_FIELDS

IMMUTABLE_HINT = ("an ArgusTask cannot be changed after creation (only spec.cancel may go from false to true, and spec.suspend and "
                  "spec.ttlSecondsAfterFinished may change); create a new task with a new name instead")
CANCEL_BACK = "spec.cancel cannot go back from true to false: a cancelled task stays cancelled"
DEFAULT_KIND = "basic"


@dataclass(frozen=True)
class KindRule:
    """When ``spec.kind`` is ``kind``, each of ``fields`` must be present (``required``) or
    absent (not ``required``). ``rule`` is the per-field wording ("is required when ...");
    ``group`` the wording of the one CEL message that covers all fields."""

    kind: str
    fields: tuple[str, ...]
    required: bool
    rule: str
    group: str

    def cel(self) -> dict[str, str]:
        if self.required:
            held = " && ".join(f"has(self.{f})" for f in self.fields)
            held = f"({held})" if len(self.fields) > 1 else held
        else:
            held = "!(" + " || ".join(f"has(self.{f})" for f in self.fields) + ")"
        if len(self.fields) == 1 and not self.required:
            held = f"!has(self.{self.fields[0]})"
        return {"rule": f"self.kind != '{self.kind}' || {held}", "message": self.group}

    def problems(self, spec: Mapping[str, Any]) -> list[Problem]:
        if spec.get("kind", DEFAULT_KIND) != self.kind:
            return []
        if self.required:
            return [Problem(f"spec.{f}", None, self.rule) for f in self.fields if f not in spec]
        return [Problem(f"spec.{f}", spec[f], self.rule) for f in self.fields if f in spec]


KIND_RULES: tuple[KindRule, ...] = (
    KindRule("advanced", ("command",), True, "is required when spec.kind is advanced",
             "spec.command is required when spec.kind is advanced"),
    KindRule("basic", ("command",), False,
             "is only allowed when spec.kind is advanced (a basic spec builds the command from its template fields)",
             "spec.command is only allowed when spec.kind is advanced (a basic spec builds the command from its template fields)"),
    KindRule("advanced", BASIC_FIELDS, False, "is a basic-spec field; an advanced spec gives the whole command in spec.command",
             f"basic-spec fields ({', '.join(BASIC_FIELDS)}) are not allowed when spec.kind is advanced"),
    KindRule("basic", REQUIRED_BASIC_FIELDS, True, "is required when spec.kind is basic",
             f"a basic spec needs {', '.join('spec.' + f for f in REQUIRED_BASIC_FIELDS)}"),
)

# Spec fields a user may change after creation. Everything else is fixed: a running task's
# command, resources or priority changing under it would make the status lie.
# cleanup may be set or moved later, as for a Job; suspend pauses and resumes (both ways)
MUTABLE_FIELDS = frozenset({"cancel", "suspend", "ttlSecondsAfterFinished"})
ONE_WAY_FIELDS = {"cancel": CANCEL_BACK}  # may go false -> true only


def kind_problems(spec: Mapping[str, Any]) -> list[Problem]:
    """The kind-consistency rules, one problem per offending field."""
    return [p for rule in KIND_RULES for p in rule.problems(spec)]


def immutable_message(field: str) -> str:
    return f"spec.{field} is immutable: {IMMUTABLE_HINT}"


def change_problems(old_spec: Any, new_spec: Any) -> list[str]:
    """What an update of the spec breaks, in the CRD's CEL wording (the webhook answers
    with these; the API server's CEL rules with the same)."""
    old = old_spec if isinstance(old_spec, Mapping) else {}
    new = new_spec if isinstance(new_spec, Mapping) else {}
    problems = []
    for field in [*new, *(f for f in old if f not in new)]:
        if field in MUTABLE_FIELDS:
            continue
        if (field in old) != (field in new) or old.get(field) != new.get(field):
            problems.append(immutable_message(field))
    for field, message in ONE_WAY_FIELDS.items():
        if old.get(field) is True and new.get(field) is not True:
            problems.append(message)
    return problems


def change_rules_cel(properties: Mapping[str, Any], required: Iterable[str]) -> tuple[list[dict[str, str]], dict[str, list[dict[str, str]]]]:
    """The change rules as CEL transition rules: (the spec's, each property's).

    The API server runs every rule of the object on every write, a status patch included, and
    each ``self.field`` a rule on the spec reads copies the schemas of all the spec's fields
    (apiextensions-apiserver 1.34): thirty rules that compared ``self.f`` with ``oldSelf.f`` cost
    a fifth of a status patch (issue 39). So a field's value is compared by a rule on the
    field itself (``self`` is the value: no lookup), run when the old and the new object both
    have it; only whether an optional field is there at all needs the spec (``has``). Same
    meaning, same messages, a third of the lookups."""
    required = set(required)
    spec_rules: list[dict[str, str]] = []
    field_rules: dict[str, list[dict[str, str]]] = {}
    for field, schema in properties.items():
        if field in MUTABLE_FIELDS:
            continue
        if not (field in required or "default" in schema):
            spec_rules.append({"rule": f"has(self.{field}) == has(oldSelf.{field})", "message": immutable_message(field)})
        field_rules[field] = [{"rule": "self == oldSelf", "message": immutable_message(field)}]
    for field, message in ONE_WAY_FIELDS.items():
        field_rules.setdefault(field, []).append({"rule": "!oldSelf || self", "message": message})
    return spec_rules, field_rules
