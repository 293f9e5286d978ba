"""One user mistake, one line: the field or token, the value, the rule it breaks.

Every check in the core reports through ``Problem`` so the CLI, the operator's status
message and the admission webhook all print the same words.
"""

from __future__ import annotations

from dataclasses import dataclass

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
