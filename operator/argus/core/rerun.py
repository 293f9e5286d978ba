"""``argus rerun TASK --set key=value``: a new ArgusTask from an old one, with changes. The
spec is immutable (a run is a record), so a changed hyper-parameter is a new task; this
makes it from the old one's manifest, as the API returns it, without its status.

``--set`` takes two kinds of keys:
- a spec field, by its name in the manifest (``learningRate=1e-6``, ``nGpusPerNode=2``,
  ``priority=5``): the value is read as a number, else as YAML (``null`` removes the field);
- anything else is a Hydra override for verl (``actor_rollout_ref.actor.optim.lr=1e-6``): a
  basic task gets it in ``spec.overrides`` (in place of one for the same key); an advanced
  task's ``spec.command`` must already set that key (``key=...`` or ``+key=...`` as a word of
  its own), and its value is replaced there. Anything the command does not set is refused:
  the command is yours, and Argus does not guess where a new word goes.

The new task's name is ``TASK-rerun-N`` (the first N not taken). It starts afresh: not
cancelled or suspended, in its own job folder (the name and UID make it), annotated
``argus.io/rerun-of``; the labels a GitOps tool tracks by are not copied (it is not in Git).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from .gitops import DEFAULT_TRACKING_LABEL
from .spec import ArgusTaskSpec

RERUN_OF = "argus.io/rerun-of"
MAX_NAME = 253
_SPEC_FIELDS = {f.alias or name for name, f in ArgusTaskSpec.model_fields.items()}
_FRESH = ("cancel", "suspend")  # a rerun starts afresh


class RerunError(ValueError):
    """A ``--set`` that cannot be applied, said in one line."""


def parse_sets(sets: Iterable[str]) -> list[tuple[str, str]]:
    out = []
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise RerunError(f"--set {item!r}: expected key=value")
        out.append((key.strip(), value))
    return out


def _hydra_key(word: str) -> str:
    return word.split("=", 1)[0].lstrip("+~")


def rerun_spec(spec: Mapping[str, Any], sets: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """The old ``spec`` with the ``--set`` changes made."""
    new = {k: copy.deepcopy(v) for k, v in spec.items() if k not in _FRESH}
    for key, value in sets:
        if key in _SPEC_FIELDS:
            if key in _FRESH:
                raise RerunError(f"--set {key}: a rerun starts afresh; argus {'cancel' if key == 'cancel' else 'suspend'} it afterwards")
            parsed = _value(value)
            if parsed is None:
                new.pop(key, None)
            else:
                new[key] = parsed
        elif new.get("kind", "basic") == "advanced":
            new["command"] = _in_command(str(new.get("command") or ""), key, value)
        else:
            kept = [o for o in new.get("overrides") or [] if _hydra_key(o) != _hydra_key(key)]
            new["overrides"] = [*kept, f"{key}={value}"]
    return new


def _value(text: str) -> Any:
    """A --set value: a number (1e-6 too, which YAML 1.1 reads as a string), else YAML."""
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            pass
    try:
        return yaml.safe_load(text) if text else text
    except yaml.YAMLError:
        return text


def _in_command(command: str, key: str, value: str) -> str:
    bare = _hydra_key(key)
    pattern = re.compile(r"(?<![^\s])(\+{0,2}" + re.escape(bare) + r")=(?:'[^']*'|\"[^\"]*\"|[^\s'\"])*(?![^\s])")
    found = pattern.findall(command)
    if len(found) != 1:
        why = "does not set" if not found else "sets more than once"
        raise RerunError(f"--set {key}: the advanced task's spec.command {why} {bare} as a word of its own (key=value); "
                         "--set replaces a value the command has. Edit the command instead (kubectl get argustask ... -o yaml)")
    if re.search(r"[\s'\"\\$`]", value):
        value = "'" + value.replace("'", "'\\''") + "'"
    return pattern.sub(lambda m: f"{m.group(1)}={value}", command)


def rerun_name(name: str, taken: Iterable[str]) -> str:
    """``NAME-rerun-N``, the first N not ``taken`` (a rerun of a rerun counts on from its root)."""
    root = re.sub(r"-rerun-\d+$", "", name)
    used = set(taken)
    n = 1
    while f"{root}-rerun-{n}" in used:
        n += 1
    new = f"{root}-rerun-{n}"
    if len(new) > MAX_NAME:
        raise RerunError(f"{new[:40]}...: the new name would be longer than {MAX_NAME} characters")
    return new


def rerun_manifest(task: Mapping[str, Any], name: str, sets: Iterable[tuple[str, str]],
                   tracking_label: str = DEFAULT_TRACKING_LABEL) -> dict[str, Any]:
    """The new task's manifest (no status, no server fields)."""
    meta = task.get("metadata") or {}
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != tracking_label and "argocd" not in k}
    return {"apiVersion": task.get("apiVersion", "argus.io/v1alpha1"), "kind": task.get("kind", "ArgusTask"),
            "metadata": {"name": name, "namespace": meta.get("namespace"), **({"labels": labels} if labels else {}),
                         "annotations": {RERUN_OF: str(meta.get("name"))}},
            "spec": rerun_spec(task.get("spec") or {}, sets)}
