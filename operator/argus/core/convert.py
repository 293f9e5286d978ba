"""v3.x TaskSpec files (snake_case, no apiVersion, no ``kind`` meaning basic) into
ArgusTask manifests, so existing task files keep working."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic.alias_generators import to_camel

from .problems import Problem
from .spec import API_VERSION, KIND, ArgusTaskSpec

_SPEC_FIELDS = {f.alias or n for n, f in ArgusTaskSpec.model_fields.items()}
# v3.x spellings that are not simply the snake_case of the new name.
_RENAMED = {"type": "kind", "task_kind": "kind", "n_gpus": "nGpusPerNode", "gpus_per_node": "nGpusPerNode", "model": "modelId", "model_path": "modelId"}


class ConversionError(ValueError):
    def __init__(self, problems: list[Problem]):
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems


def convert_taskspec(old: Any, *, namespace: str, name: str, notes: list[Problem] | None = None) -> dict[str, Any]:
    """The ArgusTask manifest for a v3.x TaskSpec. Fields that Argus now sets itself are
    dropped, each with a line in ``notes``; fields it does not know raise ``ConversionError``."""
    if not isinstance(old, Mapping):
        raise ConversionError([Problem("document", old, "must be a v3.x TaskSpec mapping")])
    spec: dict[str, Any] = {}
    problems = []
    for key, value in old.items():
        if key in ("name", "namespace", "user", "user_id"):
            continue  # identity now comes from the object's metadata and namespace label
        if key == "submission_id":
            if notes is not None:
                notes.append(Problem(key, value, "dropped: Argus sets the Ray submission id itself "
                                     "(argus-<namespace>-<name>-<uid>, one job per task)"))
            continue
        new = _RENAMED.get(key) or (key if key in _SPEC_FIELDS else to_camel(key))
        if new not in _SPEC_FIELDS:
            problems.append(Problem(str(key), value, "is not a v3.x TaskSpec field that ArgusTask knows"))
            continue
        spec[new] = value
    if problems:
        raise ConversionError(problems)
    spec.setdefault("kind", "basic")
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name, "namespace": namespace}, "spec": spec}
