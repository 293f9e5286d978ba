"""The generated ArgusTask CRD: the committed files are current, the schema is structural
and explained field by field, and the CEL rules say what they should (evaluated here by a
small translator, since the rules are plain boolean expressions)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from argus.cli import crd_yaml
from argus.core.crd import argustask_crd
from argus.core.rules import immutable_message
from argus.core.spec import BASIC_FIELDS

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "crds" / "argus.io_argustasks.yaml"
CHART_COPY = REPO / "charts" / "argus" / "crds" / "argus.io_argustasks.yaml"
STALE = "is stale: run hack/update-crds.sh (it regenerates crds/ and the chart copy from operator/argus/core/spec.py) and commit the result"


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    return argustask_crd()


@pytest.fixture(scope="module")
def version(crd: dict[str, Any]) -> dict[str, Any]:
    (v,) = crd["spec"]["versions"]
    return v


@pytest.fixture(scope="module")
def spec_schema(version: dict[str, Any]) -> dict[str, Any]:
    return version["schema"]["openAPIV3Schema"]["properties"]["spec"]


@pytest.fixture(scope="module")
def status_schema(version: dict[str, Any]) -> dict[str, Any]:
    return version["schema"]["openAPIV3Schema"]["properties"]["status"]


def test_committed_crd_is_current() -> None:
    assert COMMITTED.read_text() == crd_yaml(), f"{COMMITTED.relative_to(REPO)} {STALE}"


def test_chart_copy_is_current() -> None:
    assert CHART_COPY.read_text() == COMMITTED.read_text(), f"{CHART_COPY.relative_to(REPO)} {STALE}"


def test_committed_file_is_the_generated_object(crd: dict[str, Any]) -> None:
    assert yaml.safe_load(COMMITTED.read_text()) == crd


def test_names_and_scope(crd: dict[str, Any], version: dict[str, Any]) -> None:
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1" and crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == "argustasks.argus.io"
    spec = crd["spec"]
    assert spec["group"] == "argus.io" and spec["scope"] == "Namespaced"
    assert spec["names"] == {
        "kind": "ArgusTask", "listKind": "ArgusTaskList", "plural": "argustasks", "singular": "argustask",
        "shortNames": ["atask"], "categories": ["argus"],
    }
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}


def test_printer_columns(version: dict[str, Any]) -> None:
    columns = [(c["name"], c["jsonPath"], c.get("priority", 0)) for c in version["additionalPrinterColumns"]]
    assert columns == [
        ("Phase", ".status.phase", 0),
        ("Workload", ".spec.workload", 0),
        ("Kind", ".spec.kind", 0),
        ("Nodes", ".spec.nnodes", 0),
        ("GPUs/node", ".spec.nGpusPerNode", 0),
        ("Progress", ".status.progress.summary", 0),
        ("Age", ".metadata.creationTimestamp", 0),
        ("User", ".status.user", 1),
        ("Ray job", ".status.rayJob.submissionId", 1),
        ("Reason", ".status.reason", 1),
        ("Attempt", ".status.attempt", 1),
        ("Cluster", ".status.cluster", 1),
        ("Run", ".status.progress.runUrl", 1),
    ]
    types = {c["name"]: c["type"] for c in version["additionalPrinterColumns"]}
    assert types["Nodes"] == types["GPUs/node"] == "integer" and types["Age"] == "date"


def _walk(node: dict[str, Any], path: str):
    """Every property node under ``node`` (through objects and array items), with its path."""
    for name, sub in node.get("properties", {}).items():
        yield f"{path}.{name}", sub
        yield from _walk(sub, f"{path}.{name}")
    if "items" in node:
        yield from _walk(node["items"], f"{path}[]")


@pytest.mark.parametrize("part", ["spec", "status"])
def test_every_field_is_described(version: dict[str, Any], part: str) -> None:
    root = version["schema"]["openAPIV3Schema"]["properties"][part]
    assert root.get("description")
    missing = [path for path, node in _walk(root, part) if not node.get("description", "").strip()]
    assert not missing, f"fields without a description (kubectl explain shows nothing): {missing}"


def test_schema_is_structural(version: dict[str, Any]) -> None:
    schema = version["schema"]["openAPIV3Schema"]
    nodes = [("", schema), *_walk(schema, "")]
    for path, node in nodes:
        assert "type" in node, f"{path} has no type"
        for key in ("anyOf", "oneOf", "allOf", "$ref", "nullable", "title"):
            assert key not in node, f"{path} has {key}"
        if node["type"] == "array":
            assert "type" in node["items"]
        if "additionalProperties" in node:  # a map: a schema for its values, never beside properties
            assert isinstance(node["additionalProperties"], dict) and "type" in node["additionalProperties"], path
            assert "properties" not in node, path
        elif node["type"] == "object" and "properties" not in node:
            assert node.get("x-kubernetes-preserve-unknown-fields") or path == ".metadata", path


def test_spec_fields(spec_schema: dict[str, Any]) -> None:
    props = spec_schema["properties"]
    assert set(spec_schema["required"]) == {"workload", "nnodes", "nGpusPerNode"}
    assert props["kind"]["enum"] == ["basic", "advanced"] and props["kind"]["default"] == "basic"
    assert props["workload"]["enum"] == ["ppo", "grpo", "sft"]
    assert props["nnodes"]["type"] == "integer" and props["nnodes"]["minimum"] == 1
    assert props["nGpusPerNode"]["type"] == "integer" and props["nGpusPerNode"]["minimum"] == 1
    assert props["command"]["type"] == "string" and props["command"]["maxLength"] == 64 * 1024
    assert props["cancel"] == {**props["cancel"], "type": "boolean", "default": False}
    assert props["priority"]["default"] == 0
    assert props["activeDeadlineSeconds"]["type"] == "integer"
    assert set(BASIC_FIELDS) <= set(props)
    assert "user" not in props and "userId" not in props  # the user comes from the namespace


def test_status_fields(status_schema: dict[str, Any]) -> None:
    props = status_schema["properties"]
    assert {"phase", "reason", "message", "user", "warnings", "command", "rayJob", "conditions",
            "observedGeneration", "kopf"} <= set(props)
    assert props["phase"]["enum"] == ["Queued", "Submitted", "Running", "Suspended", "Succeeded", "Failed", "Stopped", "Rejected"]
    assert set(props["rayJob"]["properties"]) == {"submissionId", "status", "driverNodeId", "startTime", "endTime", "dashboardUrl"}
    condition = props["conditions"]["items"]
    assert set(condition["properties"]) == {"type", "status", "observedGeneration", "lastTransitionTime", "reason", "message"}
    assert set(condition["required"]) == {"type", "status", "lastTransitionTime", "reason", "message"}
    assert props["conditions"]["x-kubernetes-list-type"] == "map"
    assert props["kopf"]["x-kubernetes-preserve-unknown-fields"] is True


# --- CEL rules ----------------------------------------------------------------------------

def _python(rule: str) -> str:
    """Translate the subset of CEL the generator writes into a Python expression over the
    dicts ``new`` and ``old``."""
    expr = re.sub(r"has\((self|oldSelf)\.(\w+)\)", lambda m: f"({m.group(2)!r} in {'new' if m.group(1) == 'self' else 'old'})", rule)
    expr = re.sub(r"\b(self|oldSelf)\.(\w+)", lambda m: f"{'new' if m.group(1) == 'self' else 'old'}[{m.group(2)!r}]", expr)
    expr = expr.replace("&&", " and ").replace("||", " or ")
    expr = re.sub(r"!(?!=)", " not ", expr)
    return expr


def _defaults(spec: dict[str, Any]) -> dict[str, Any]:
    # as the API server defaults
    return {"kind": "basic", "cancel": False, "priority": 0, "restartPolicy": "Never", "backoffLimit": 3, "moveOnRetry": False, "preemptible": True, **spec}


def _failing(spec_schema: dict[str, Any], new: dict[str, Any], old: dict[str, Any] | None) -> list[str]:
    """The messages of the rules that fail, as the API server runs them: the spec's, and each
    field's own (``self`` the field's value) where the object has that field."""
    new, old_or_none = _defaults(new), _defaults(old) if old is not None else None
    scoped: list[tuple[dict[str, str], Any, Any]] = [(r, new, old_or_none) for r in spec_schema["x-kubernetes-validations"]]
    for field, prop in spec_schema["properties"].items():
        if field in new:
            scoped += [(r, new[field], (old_or_none or {}).get(field)) for r in prop.get("x-kubernetes-validations", [])]
    failed = []
    for r, value, old_value in scoped:
        if "oldSelf" in r["rule"] and old_value is None:
            continue  # transition rules run on update only, where the old object has the field too
        expr = re.sub(r"\boldSelf\b(?!\.)", "old", re.sub(r"\bself\b(?!\.)", "new", _python(r["rule"])))
        if not eval(expr, {}, {"new": value, "old": old_value}):  # noqa: S307
            failed.append(r.get("message", r["rule"]))
    return failed


ADVANCED = {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": 1, "command": "python3 -m verl.trainer.main_ppo"}
BASIC = {"workload": "grpo", "nnodes": 1, "nGpusPerNode": 2, "modelId": "Qwen/Qwen2.5-0.5B-Instruct",
         "trainFile": "$HOME/datasets/a.parquet", "valFile": "$HOME/datasets/b.parquet"}


def test_rules_have_messages(spec_schema: dict[str, Any]) -> None:
    for r in spec_schema["x-kubernetes-validations"]:
        assert r.get("message"), r


@pytest.mark.parametrize("spec", [ADVANCED, BASIC, {**BASIC, "cancel": True, "priority": 5}], ids=["advanced", "basic", "basic-cancelled"])
def test_unchanged_spec_passes_every_rule(spec_schema: dict[str, Any], spec: dict[str, Any]) -> None:
    assert _failing(spec_schema, spec, None) == []
    assert _failing(spec_schema, spec, dict(spec)) == []


def test_every_field_but_cancel_suspend_and_the_ttl_is_immutable(spec_schema: dict[str, Any]) -> None:
    rules = spec_schema["x-kubernetes-validations"]
    changed_values = {"kind": "basic", "workload": "sft", "command": "python3 -m verl.trainer.other", "cancel": True,
                      "overrides": ["trainer.total_epochs=2"], "preemptible": False,
                      "env": [{"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {"name": "other", "key": "k"}}}]}
    mutable = {"cancel", "suspend", "ttlSecondsAfterFinished"}  # cancel one-way; suspend both ways; the TTL may move, as on a Job
    for field in ("ttlSecondsAfterFinished", "suspend"):
        assert "x-kubernetes-validations" not in spec_schema["properties"][field]
        assert not [r for r in rules if f"oldSelf.{field}" in r["rule"]]
    for field, prop in spec_schema["properties"].items():
        if field in mutable:
            continue
        # The value compared by the field's own rule (no lookup in the spec: issue 39).
        assert prop["x-kubernetes-validations"] == [{"rule": "self == oldSelf", "message": immutable_message(field)}], field
        base = dict(ADVANCED if field in ("command",) else BASIC)
        value = changed_values[field] if field in changed_values else {"integer": 7, "number": 0.5, "string": "other-value", "boolean": True}[prop["type"]]
        if field == "kind":
            base, new = dict(ADVANCED), {**ADVANCED, "kind": "basic"}
        else:
            new = {**base, field: value}
        failed = _failing(spec_schema, new, base)
        assert any(m.startswith(f"spec.{field} is immutable") for m in failed), (field, failed)
        if prop.get("default") is None and field not in spec_schema["required"]:
            # adding or removing an optional field is a change too: the spec's rule sees it
            assert [r for r in rules if r["rule"] == f"has(self.{field}) == has(oldSelf.{field})"], field
            removed = {k: v for k, v in new.items() if k != field}
            assert any(m.startswith(f"spec.{field} is immutable") for m in _failing(spec_schema, removed, new)), field
            assert any(m.startswith(f"spec.{field} is immutable") for m in _failing(spec_schema, new, removed)), field


def test_the_spec_rules_read_only_whether_optional_fields_are_there(spec_schema: dict[str, Any]) -> None:
    """A status patch runs every rule of the object; a spec rule's ``self.f`` copies the schemas
    of all the spec's fields. The change rules on the spec only ask ``has``."""
    for r in spec_schema["x-kubernetes-validations"]:
        if "oldSelf" in r["rule"]:
            assert re.fullmatch(r"has\(self\.(\w+)\) == has\(oldSelf\.\1\)", r["rule"]), r


def test_cancel_is_one_way(spec_schema: dict[str, Any]) -> None:
    assert _failing(spec_schema, {**BASIC, "cancel": True}, {**BASIC, "cancel": False}) == []
    assert _failing(spec_schema, {**BASIC, "cancel": True}, BASIC) == []  # absent means false
    assert _failing(spec_schema, {**BASIC, "cancel": False}, {**BASIC, "cancel": True}) == [
        "spec.cancel cannot go back from true to false: a cancelled task stays cancelled"
    ]
    assert spec_schema["properties"]["cancel"]["x-kubernetes-validations"] == [
        {"rule": "!oldSelf || self", "message": "spec.cancel cannot go back from true to false: a cancelled task stays cancelled"}]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({k: v for k, v in ADVANCED.items() if k != "command"}, "spec.command is required when spec.kind is advanced"),
        ({**BASIC, "command": "python3 -m verl.trainer.main_ppo"}, "spec.command is only allowed when spec.kind is advanced"),
        ({**ADVANCED, "modelId": "Qwen/Qwen2.5-0.5B-Instruct"}, "basic-spec fields"),
        ({**ADVANCED, "totalEpochs": 2}, "basic-spec fields"),
        ({k: v for k, v in BASIC.items() if k != "valFile"}, "a basic spec needs spec.modelId, spec.trainFile, spec.valFile"),
    ],
    ids=["advanced-without-command", "basic-with-command", "advanced-with-modelId", "advanced-with-totalEpochs", "basic-without-valFile"],
)
def test_kind_field_consistency_rules(spec_schema: dict[str, Any], spec: dict[str, Any], message: str) -> None:
    failed = _failing(spec_schema, spec, None)
    assert any(message in m for m in failed), failed


# --- one source, two renderings -------------------------------------------------------------

_REQUIRED = {"workload": st.sampled_from(["ppo", "sft"]), "nnodes": st.integers(1, 2), "nGpusPerNode": st.just(1)}
_OPTIONAL = {"kind": st.sampled_from(["basic", "advanced"]), "command": st.sampled_from(["a", "b"]), "priority": st.integers(-1, 1),
             "cancel": st.booleans(), "modelId": st.sampled_from(["m", "n"]), "trainFile": st.just("t"), "valFile": st.just("v"),
             "totalEpochs": st.integers(1, 2)}
_specs = st.fixed_dictionaries(_REQUIRED, optional=_OPTIONAL)


@settings(max_examples=300, deadline=None)
@given(old=_specs, new=_specs)
def test_cel_and_python_renderings_of_the_rules_agree(spec_schema: dict[str, Any], old: dict[str, Any], new: dict[str, Any]) -> None:
    """core.rules renders each rule to CEL (the CRD) and to Python (validation, webhook):
    for any spec, and any update of it, both say the same."""
    from argus.core.rules import KIND_RULES, change_problems, kind_problems
    cel_create = _failing(spec_schema, new, None)
    python_create = kind_problems(_defaults(new))
    assert bool(cel_create) == bool(python_create), (new, cel_create, python_create)
    creation_messages = {r.group for r in KIND_RULES}
    cel_update = [m for m in _failing(spec_schema, new, old) if m not in creation_messages]
    assert sorted(cel_update) == sorted(change_problems(_defaults(old), _defaults(new))), (old, new)


# --- ArgusCluster -------------------------------------------------------------------------

def test_arguscluster_crd_is_committed_cluster_scoped_and_reports_itself() -> None:
    from argus.core.clusters import ADDRESS_OR_REF_RULE
    from argus.core.crd import arguscluster_crd
    crd = arguscluster_crd()
    committed = REPO / "crds" / "argus.io_argusclusters.yaml"
    assert committed.read_text() == crd_yaml("ArgusCluster"), f"{committed.relative_to(REPO)} {STALE}"
    assert (REPO / "charts" / "argus" / "crds" / "argus.io_argusclusters.yaml").read_text() == committed.read_text()
    spec = crd["spec"]
    assert (spec["scope"], spec["names"]["kind"], spec["names"]["shortNames"]) == ("Cluster", "ArgusCluster", ["acluster"])
    (version,) = spec["versions"]
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["Reachable"] == '.status.conditions[?(@.type=="RayReachable")].status'
    schema = version["schema"]["openAPIV3Schema"]
    assert "required" not in schema["properties"]["spec"]  # address or rayClusterRef: the CEL rule below
    assert schema["properties"]["spec"]["x-kubernetes-validations"] == [{"rule": ADDRESS_OR_REF_RULE[1], "message": ADDRESS_OR_REF_RULE[0]}]
    assert columns["Address"] == ".status.address" and columns["Doctor"] == ".status.doctor.verdict"
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


@pytest.mark.parametrize(("requirement", "holds"), [
    ({"key": "team", "operator": "In", "values": ["a"]}, True),
    ({"key": "team", "operator": "In"}, False),
    ({"key": "team", "operator": "Exists"}, True),
    ({"key": "team", "operator": "Exists", "values": ["a"]}, False),
])
def test_the_selector_rule_is_the_same_in_cel_and_in_python(requirement: dict[str, Any], holds: bool) -> None:
    """The one rule of namespaceSelector's terms: the CRD's CEL (evaluated by the subset
    translation above) and the model's check agree."""
    from pydantic import ValidationError

    from argus.core.clusters import SELECTOR_VALUES_RULE, LabelSelectorRequirement
    cel = SELECTOR_VALUES_RULE[1]
    expr = (cel.replace("self.operator in ['In', 'NotIn']", "new['operator'] in ['In', 'NotIn']")
               .replace("has(self.values)", "('values' in new)").replace("size(self.values)", "len(new['values'])")
               .replace("&&", " and ").replace("||", " or ").replace("!(", " not ("))
    cond, rest = expr.split(" ? ", 1)
    then, other = rest.split(" : ", 1)
    python = f"({then}) if ({cond}) else ({other})"
    assert eval(python, {}, {"new": requirement}) is holds  # noqa: S307
    try:
        LabelSelectorRequirement.model_validate(requirement)
        parsed = True
    except ValidationError as exc:
        assert SELECTOR_VALUES_RULE[0] in str(exc)
        parsed = False
    assert parsed is holds
