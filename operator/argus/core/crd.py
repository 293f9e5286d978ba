"""The ArgusTask CustomResourceDefinition, generated from the pydantic models: as
controller-gen does from Go types, so the schema kubectl and the API server enforce can
never drift from what the operator parses. ``hack/update-crds.sh`` writes it to crds/ and
the chart; a test fails when the committed files are stale.

The generated CRD carries the hash of its own ``spec`` (``SCHEMA_HASH_ANNOTATION``). Helm
never upgrades a chart's ``crds/``, so a cluster can serve an older schema than the
operator was built with, and the API server then drops the status fields the old schema
lacks without a word: the operator compares the served CRD's annotation with its own at
start (``compare_served``; ``controller.crdcheck`` reads and reports). The CRD also keeps
Helm's keep policy, so that no Helm operation deletes it, and with it every user's task.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from .conditions import ConditionType
from .rules import KIND_RULES, change_rules_cel
from .spec import (
    API_VERSION,
    CATEGORIES,
    GROUP,
    KIND,
    PLURAL,
    SHORT_NAMES,
    SINGULAR,
    VERSION,
    ArgusTaskSpec,
    ArgusTaskStatus,
)

CRD_NAME = f"{PLURAL}.{GROUP}"
SCHEMA_HASH_ANNOTATION = f"{GROUP}/schema-hash"
KEEP_POLICY = {"helm.sh/resource-policy": "keep"}
APPLY_HINT = ("apply this release's CRD with `kubectl apply --server-side -f crds/` (the chart's crds/ folder, or "
              "`helm show crds <chart> --version <version> | kubectl apply --server-side -f -`), or with `argus crd | "
              "kubectl apply --server-side -f -` from the CLI of the operator's version (docs/deploy.md, \"Upgrading\")")


def schema_hash(crd_spec: dict[str, Any]) -> str:
    """The hash of a CRD's ``spec`` as generated (keys sorted, no whitespace), cut to 16 hex
    digits: enough to tell two schemas apart, short enough for a log line."""
    canonical = json.dumps(crd_spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class CrdUnreadable(Exception):
    """The served CRD could not be read (the API server's refusal, in one line)."""


@dataclass(frozen=True)
class CrdVerdict:
    """A served CRD (ArgusTask's or ArgusCluster's) against the one this operator was built with."""

    built: str                 # this operator's schema hash
    served: str | None         # the served CRD's annotation; None when it has none
    found: bool = True         # False: the API server serves no such CRD at all
    kind: str = KIND
    name: str = CRD_NAME

    @property
    def current(self) -> bool:
        return self.found and self.served == self.built

    def message(self) -> str:
        if self.current:
            return f"the served {self.kind} CRD ({self.name}) is the one this operator was built with (schema hash {self.built})"
        if not self.found:
            return (f"the API server serves no {self.kind} CRD ({self.name}); this operator was built with schema hash "
                    f"{self.built}: {APPLY_HINT}")
        if self.served is None:
            what = f"it has no {SCHEMA_HASH_ANNOTATION} annotation (it predates the check)"
        else:
            what = f"its schema hash is {self.served}"
        return (f"the served {self.kind} CRD ({self.name}) is stale: {what}, this operator was built with {self.built}; "
                f"the API server drops the fields the old schema lacks. Helm never upgrades crds/: {APPLY_HINT}")


def compare_served(annotations: dict[str, str] | None, built: str, *, kind: str = KIND, name: str = CRD_NAME) -> CrdVerdict:
    """``annotations``: the served CRD's metadata.annotations, None when there is no CRD."""
    if annotations is None:
        return CrdVerdict(built=built, served=None, found=False, kind=kind, name=name)
    return CrdVerdict(built=built, served=annotations.get(SCHEMA_HASH_ANNOTATION) or None, kind=kind, name=name)


@dataclass(frozen=True)
class BuiltCrd:
    """One CRD as this operator generates it: what the CRD check compares the served one with."""

    kind: str
    name: str
    schema_hash: str


def built_crds() -> list[BuiltCrd]:
    """Both CRDs this code generates (ArgusTask's, ArgusCluster's), with their schema hashes."""
    return [BuiltCrd(c["spec"]["names"]["kind"], c["metadata"]["name"], c["metadata"]["annotations"][SCHEMA_HASH_ANNOTATION])
            for c in (argustask_crd(), arguscluster_crd())]


def built_schema_hash() -> str:
    """The schema hash of the CRD this code generates (what the operator was built with)."""
    return schema_hash(_crd_spec())


def _openapi(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Turn one pydantic JSON-schema node into a structural OpenAPI v3 node."""
    description = schema.get("description")
    if "$ref" in schema:
        node = _openapi(defs[schema["$ref"].split("/")[-1]], defs)
    elif "allOf" in schema and len(schema["allOf"]) == 1:
        node = _openapi(schema["allOf"][0], defs)
    elif "anyOf" in schema:
        # Optional[X] is X that may be left out; structural schemas have no null type.
        options = [o for o in schema["anyOf"] if o.get("type") != "null"]
        if len(options) != 1:
            raise ValueError(f"cannot express a union in a structural schema: {schema}")
        node = _openapi(options[0], defs)
    else:
        node = {}
        kind = schema.get("type")
        if kind == "object":
            node["type"] = "object"
            if isinstance(schema.get("additionalProperties"), dict):  # a map (dict[str, X])
                node["additionalProperties"] = _openapi(schema["additionalProperties"], defs)
            else:
                props = schema.get("properties", {})
                node["properties"] = {name: _openapi(sub, defs) for name, sub in props.items()}
            if schema.get("required"):
                node["required"] = list(schema["required"])
        elif kind == "array":
            node["type"] = "array"
            node["items"] = _openapi(schema["items"], defs)
        elif kind in ("string", "integer", "number", "boolean"):
            node["type"] = kind
        elif "enum" in schema:
            node["type"] = "string"
        else:
            raise ValueError(f"unsupported schema node: {schema}")
        for key in ("enum", "pattern", "minLength", "maxLength", "minimum", "maximum", "format"):
            if key in schema:
                node[key] = schema[key]
        for key, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if key in schema:  # JSON Schema's number form -> OpenAPI 3.0's boolean form
                node[bound] = schema[key]
                node[key] = True
    if "default" in schema and schema["default"] is not None:
        node["default"] = schema["default"]
    if description:
        node["description"] = " ".join(description.split())
    return node


def _model_schema(model: type) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation")  # type: ignore[attr-defined]
    return _openapi(raw, raw.get("$defs", {}))


def _status_schema(model: type) -> dict[str, Any]:
    """A status subresource's schema: the operator's own record, conditions a map by type."""
    status = _model_schema(model)
    status["description"] = "Written by the Argus operator only."
    conditions = status["properties"]["conditions"]
    conditions["x-kubernetes-list-type"] = "map"
    conditions["x-kubernetes-list-map-keys"] = ["type"]
    return status


def _object_schema(kind: str, description: str, spec: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    """The whole object's schema around its spec and status."""
    return {
        "type": "object",
        "description": description,
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string", "description": f"APIVersion of this object: {API_VERSION}."},
            "kind": {"type": "string", "description": f"Kind of this object: {kind}."},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }


def argustask_crd() -> dict[str, Any]:
    spec = _crd_spec()
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME, "annotations": {SCHEMA_HASH_ANNOTATION: schema_hash(spec), **KEEP_POLICY}},
        "spec": spec,
    }


def _crd_spec() -> dict[str, Any]:
    spec = _model_schema(ArgusTaskSpec)
    spec["description"] = "What to train. Immutable after creation, except spec.cancel (false -> true), spec.suspend and spec.ttlSecondsAfterFinished."
    spec_rules, field_rules = change_rules_cel(spec["properties"], spec.get("required", []))
    spec["x-kubernetes-validations"] = [r.cel() for r in KIND_RULES] + spec_rules
    for field, rules in field_rules.items():
        spec["properties"][field] = {**spec["properties"][field], "x-kubernetes-validations": rules}
    status = _status_schema(ArgusTaskStatus)
    status["properties"]["warnings"]["x-kubernetes-list-type"] = "atomic"
    # kopf keeps its handler progress here unless told otherwise; give it room so the API
    # server does not prune it.
    status["properties"]["kopf"] = {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "description": "Bookkeeping of the kopf framework the operator is built on.",
    }
    schema = _object_schema(KIND, f"{KIND} is one verl training run (PPO, GRPO or SFT) that Argus queues and runs on the shared Ray cluster.",
                            spec, status)
    columns = [
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Workload", "type": "string", "jsonPath": ".spec.workload"},
        {"name": "Kind", "type": "string", "jsonPath": ".spec.kind"},
        {"name": "Nodes", "type": "integer", "jsonPath": ".spec.nnodes"},
        {"name": "GPUs/node", "type": "integer", "jsonPath": ".spec.nGpusPerNode"},
        {"name": "Progress", "type": "string", "jsonPath": ".status.progress.summary"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {"name": "User", "type": "string", "jsonPath": ".status.user", "priority": 1},
        {"name": "Ray job", "type": "string", "jsonPath": ".status.rayJob.submissionId", "priority": 1},
        {"name": "Reason", "type": "string", "jsonPath": ".status.reason", "priority": 1},
        {"name": "Attempt", "type": "integer", "jsonPath": ".status.attempt", "priority": 1},
        {"name": "Cluster", "type": "string", "jsonPath": ".status.cluster", "priority": 1},
        {"name": "Run", "type": "string", "jsonPath": ".status.progress.runUrl", "priority": 1},
    ]
    return {
        "group": GROUP,
        "names": {"kind": KIND, "listKind": f"{KIND}List", "plural": PLURAL, "singular": SINGULAR,
                  "shortNames": SHORT_NAMES, "categories": CATEGORIES},
        "scope": "Namespaced",
        "versions": [{
            "name": VERSION,
            "served": True,
            "storage": True,
            "schema": {"openAPIV3Schema": schema},
            "subresources": {"status": {}},
            "additionalPrinterColumns": columns,
        }],
    }


def arguscluster_crd() -> dict[str, Any]:
    """The ArgusCluster CRD (cluster-scoped), from ``core.clusters``' models."""
    from .clusters import (  # noqa: PLC0415 - clusters imports spec; crd is imported by both
        ADDRESS_OR_REF_RULE,
        CLUSTER_KIND,
        CLUSTER_PLURAL,
        CLUSTER_SHORT_NAMES,
        CLUSTER_SINGULAR,
        SELECTOR_VALUES_RULE,
        ArgusClusterSpec,
        ArgusClusterStatus,
    )
    spec = _model_schema(ArgusClusterSpec)
    selector = spec["properties"]["namespaceSelector"]["properties"]["matchExpressions"]["items"]
    selector["x-kubernetes-validations"] = [{"rule": SELECTOR_VALUES_RULE[1], "message": SELECTOR_VALUES_RULE[0]}]
    spec["x-kubernetes-validations"] = [{"rule": ADDRESS_OR_REF_RULE[1], "message": ADDRESS_OR_REF_RULE[0]}]
    schema = _object_schema(CLUSTER_KIND, f"{CLUSTER_KIND} is one Ray cluster Argus places ArgusTasks on: its dashboard, who may use it, "
                            "how many tasks it runs.", spec, _status_schema(ArgusClusterStatus))
    reachable = f'.status.conditions[?(@.type=="{ConditionType.RayReachable}")]'
    # kubectl's columns, as data: the two CRDs' tables share a shape, not their rows (duplicates lists
    # them as a pair; each row is one column of one kind).
    columns = [
        {"name": "Address", "type": "string", "jsonPath": ".status.address"},
        {"name": "Reachable", "type": "string", "jsonPath": f"{reachable}.status"},
        {"name": "Ray", "type": "string", "jsonPath": ".status.rayVersion"},
        {"name": "Workers", "type": "integer", "jsonPath": ".status.workerNodes"},
        {"name": "GPUs", "type": "integer", "jsonPath": ".status.gpus"},
        {"name": "Free", "type": "integer", "jsonPath": ".status.freeGpus"},
        {"name": "Running", "type": "integer", "jsonPath": ".status.running"},
        {"name": "Queued", "type": "integer", "jsonPath": ".status.queued"},
        {"name": "Doctor", "type": "string", "jsonPath": ".status.doctor.verdict"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {"name": "Preference", "type": "integer", "jsonPath": ".spec.preference", "priority": 1},
        {"name": "Drain", "type": "boolean", "jsonPath": ".spec.drain", "priority": 1},
        {"name": "Reason", "type": "string", "jsonPath": f"{reachable}.reason", "priority": 1},
        {"name": "RayCluster", "type": "string", "jsonPath": ".spec.rayClusterRef.name", "priority": 1},
    ]
    crd_spec = {
        "group": GROUP,
        "names": {"kind": CLUSTER_KIND, "listKind": f"{CLUSTER_KIND}List", "plural": CLUSTER_PLURAL, "singular": CLUSTER_SINGULAR,
                  "shortNames": CLUSTER_SHORT_NAMES, "categories": CATEGORIES},
        "scope": "Cluster",
        "versions": [{
            "name": VERSION, "served": True, "storage": True,
            "schema": {"openAPIV3Schema": schema},
            "subresources": {"status": {}},
            "additionalPrinterColumns": columns,
        }],
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{CLUSTER_PLURAL}.{GROUP}", "annotations": {SCHEMA_HASH_ANNOTATION: schema_hash(crd_spec), **KEEP_POLICY}},
        "spec": crd_spec,
    }


assert API_VERSION == f"{GROUP}/{VERSION}"
