"""The smallest JSON merge patch (RFC 7386) that turns one document into another: how the
status writer sends only what changed, and nothing at all when nothing did."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch from ``old`` to ``new``: changed keys with their new values, nested
    objects diffed recursively, keys that ``new`` drops set to null. Lists are replaced
    whole (merge patches cannot edit them); ``{}`` when the two are equal."""
    patch: dict[str, Any] = {}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            sub = merge_patch(before, value)
            if sub:
                patch[key] = sub
        elif value is None:
            if before is not None:
                patch[key] = None
        elif before != value:
            patch[key] = _without_nulls(value)
    for key, before in old.items():
        if key not in new and before is not None:
            patch[key] = None
    return patch


def _without_nulls(value: Any) -> Any:
    """A new object put whole: its null members mean nothing to add (RFC 7386 drops them)."""
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


def apply_merge_patch(doc: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """RFC 7386 applied: what the API server makes of ``doc`` and ``patch``."""
    out = dict(doc)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping):
            before = out.get(key)
            out[key] = apply_merge_patch(before if isinstance(before, Mapping) else {}, value)
        else:
            out[key] = value
    return out
