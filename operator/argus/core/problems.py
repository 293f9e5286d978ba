"""One user mistake, one line: the field or token, the value, the rule it breaks.

Every check in the core reports through ``Problem`` so the CLI, the operator's status
message and the admission webhook all print the same words.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

_MAX_VALUE_CHARS = 120


def shorten(value: object) -> str:
    """A value as it appears in a message: repr'd, one line, at most ~120 characters."""
    text = repr(value)
    if len(text) > _MAX_VALUE_CHARS:
        text = text[: _MAX_VALUE_CHARS - 5] + "...'" if text.startswith("'") else text[: _MAX_VALUE_CHARS - 3] + "..."
    return text


@dataclass(frozen=True)
class Problem:
    """A refusal (or, for warnings, an advice) about one field or token."""

    field: str
    value: object
    rule: str

    def __str__(self) -> str:
        # One line, whatever user text a rule quotes.
        rule = self.rule.replace("\n", "\\n").replace("\r", "\\r") if "\n" in self.rule or "\r" in self.rule else self.rule
        return f"{self.field}: {shorten(self.value)}: {rule}"


# A hostile command can produce thousands of problems; .status.message, an Event and an
# admission response each show the first ones and say how many more there are.
MAX_MESSAGE_LINES = 100


def cap_lines(lines: list[str], limit: int = MAX_MESSAGE_LINES) -> list[str]:
    """At most ``limit`` lines, the last one saying how many were left out."""
    if len(lines) <= limit:
        return list(lines)
    return lines[:limit] + [f"... and {len(lines) - limit} more problems (argus validate shows them all)"]


def pydantic_problems(exc: ValidationError) -> list[Problem]:
    """A spec's pydantic validation errors as problems, one per field, in the CRD's words."""
    problems = []
    for err in exc.errors():
        loc = "spec." + ".".join(str(p) for p in err["loc"]) if err["loc"] else "spec"
        kind = err["type"]
        if kind == "string_too_long" and err["loc"] == ("command",):
            continue  # check_text reports the size, in bytes
        if kind == "extra_forbidden":
            problems.append(Problem(loc, err["input"], "is not a field of an ArgusTask spec (see: kubectl explain argustask.spec)"))
        elif kind == "missing":
            problems.append(Problem(loc, None, "is required"))
        else:
            problems.append(Problem(loc, err["input"], err["msg"][0].lower() + err["msg"][1:]))
    return problems
