"""The ArgusCluster API (argus.io/v1alpha1, cluster-scoped): one Ray cluster Argus may place
tasks on. Like the ArgusTask models (``spec``), these pydantic models are the one source of
truth: ``crd.arguscluster_crd`` generates the CRD from them, and the operator parses the
objects with them (``parse_cluster``).

Without any ArgusCluster the operator drives the one cluster of ``--ray-address`` (the
*implicit* cluster, named ``IMPLICIT_CLUSTER``), as before. Once ArgusClusters exist, new
tasks are placed on them only; a task already on the implicit cluster stays followed there.

Why clusters, and what they isolate: every job on a Ray cluster runs as that cluster's
worker uid, so the users of one cluster can read each other's files through their own
Python. A separate Ray cluster with its own shared tree (``spec.root``) is the wall between
teams; ``spec.namespaceSelector`` says whose tasks may go there. Argus's checks keep a
command inside its user's paths; they cannot stop the user's own code.
"""

from __future__ import annotations

import posixpath
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Annotated, Any

from pydantic import Field, ValidationError, field_validator, model_validator

from .conditions import Condition, ConditionType, set_condition
from .config import PlatformConfig
from .doctor import Check, Row, snapshot_versions
from .doctor import Status as CheckStatus
from .spec import GROUP, _CamelModel, _or, _StatusModel
from .vocabulary import CLUSTER_REACHABILITY_REASONS, ClusterReason

CLUSTER_KIND = "ArgusCluster"
CLUSTER_PLURAL = "argusclusters"
CLUSTER_SINGULAR = "arguscluster"
CLUSTER_SHORT_NAMES = ["acluster"]
# Held on an ArgusCluster while tasks are active on it: deleting it waits for them (its
# status says which), so a running job is never left without an operator that follows it.
CLUSTER_FINALIZER = f"{GROUP}/tasks-on-cluster"
# On an ArgusTask: the cluster its current attempt is submitted to ("<attempt>:<cluster>"),
# written with the finalizer before the submission, so an operator that dies between
# the submission and the status write submits the attempt to the same cluster again (Ray
# then has the id: adopted), never a second job on another cluster.
PLACEMENT_ANNOTATION = f"{GROUP}/placement"
# The cluster of --ray-address, when no ArgusCluster exists (status.cluster stays empty).
IMPLICIT_CLUSTER = ""
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"


class SelectorOperator(str, Enum):
    In = "In"
    NotIn = "NotIn"
    Exists = "Exists"
    DoesNotExist = "DoesNotExist"


# The selector's one structural rule, declared once: rendered as CEL on the CRD and checked
# by ``LabelSelectorRequirement`` in Python (the same words).
SELECTOR_VALUES_RULE = ("values must be given for In and NotIn, and left out for Exists and DoesNotExist",
                        "self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0) : "
                        "(!has(self.values) || size(self.values) == 0)")


class LabelSelectorRequirement(_CamelModel):
    key: Annotated[str, Field(min_length=1, max_length=317)] = Field(description="The namespace label's key.")
    operator: SelectorOperator = Field(description="In, NotIn, Exists or DoesNotExist.")
    values: list[Annotated[str, Field(max_length=63)]] | None = Field(None, description="For In and NotIn: the label's values.")

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == SelectorOperator.Exists.value:
            return self.key in labels
        if self.operator == SelectorOperator.DoesNotExist.value:
            return self.key not in labels
        found = self.key in labels and labels[self.key] in (self.values or [])
        return found if self.operator == SelectorOperator.In.value else not found

    @model_validator(mode="after")
    def _values(self) -> LabelSelectorRequirement:
        needs = self.operator in (SelectorOperator.In.value, SelectorOperator.NotIn.value)
        if needs != bool(self.values):
            raise ValueError(SELECTOR_VALUES_RULE[0])
        return self


class LabelSelector(_CamelModel):
    """The metav1.LabelSelector shape: every term must hold; empty selects everything."""

    match_labels: dict[str, str] | None = Field(None, description="Labels the namespace must carry, with these values.")
    match_expressions: list[LabelSelectorRequirement] | None = Field(None, description="More terms the namespace's labels must meet.")

    def matches(self, labels: Mapping[str, str]) -> bool:
        return (all(labels.get(k) == v for k, v in (self.match_labels or {}).items())
                and all(e.matches(labels) for e in self.match_expressions or ()))


# The spec's rule on where Ray is, declared once: rendered as CEL on the CRD and checked by
# ``ArgusClusterSpec`` in Python (the same words).
ADDRESS_OR_REF_RULE = ("exactly one of address and rayClusterRef must be set", "has(self.address) != has(self.rayClusterRef)")

# KubeRay (ray.io/v1): a RayCluster's head Service is named in its status.head.serviceName, or
# else <cluster>-head-svc, and carries the dashboard (the Jobs API) on the port named
# "dashboard". The operator reaches it at this address (--kuberay-dashboard-url), by the
# Service's DNS name: it stays the same when KubeRay replaces the head pod.
KUBERAY_GROUP, KUBERAY_VERSION, KUBERAY_PLURAL = "ray.io", "v1", "rayclusters"
KUBERAY_DASHBOARD_PORT = "dashboard"
DEFAULT_KUBERAY_URL = "http://{service}.{namespace}.svc.cluster.local:{port}"
KUBERAY_URL_FIELDS = ("service", "namespace", "port", "clusterIP")


class RayClusterRef(_CamelModel):
    name: Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)] = Field(
        description="The RayCluster's name.")
    namespace: Annotated[str, Field(min_length=1, max_length=63, pattern=DNS_LABEL)] = Field(description="The RayCluster's namespace.")

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class SecretKeyRef(_CamelModel):
    name: Annotated[str, Field(min_length=1, max_length=253)] = Field(description="The Secret's name, in the operator's namespace.")
    key: Annotated[str, Field(min_length=1, max_length=253)] = Field("token", description="The key holding the token (default token).")


class ArgusClusterSpec(_CamelModel):
    """One Ray cluster tasks may be placed on."""

    address: Annotated[str, Field(pattern=r"^https?://[^\s/]+(/[^\s]*)?$", max_length=2048)] | None = Field(
        None, description="The Ray dashboard's address (the Jobs API), e.g. http://ray-a-head-svc.ray.svc:8265. Or rayClusterRef instead.")
    ray_cluster_ref: RayClusterRef | None = Field(
        None, description="Instead of address: a KubeRay RayCluster (ray.io/v1). The operator reads its head Service (status.head.serviceName, "
        "or <name>-head-svc) and that Service's port named dashboard, and follows them when they change.")
    token_secret: SecretKeyRef | None = Field(
        None, description="For a Ray cluster with token authentication (RAY_AUTH_MODE=token): the Secret in the operator's "
        "namespace holding its token. Read afresh after a refusal, so a rotated Secret counts.")
    worker_resource: Annotated[str, Field(min_length=1, max_length=253)] | None = Field(
        None, description="The Ray resource its worker nodes carry; jobs are pinned to it (default: the operator's --worker-resource).")
    max_running: int | None = Field(None, ge=1, le=100000, description="Tasks that may run here at once (the operator's --max-running still caps them all).")
    preference: int = Field(0, ge=-1000, le=1000, description="Placement order: a task goes to the cluster with the highest preference that can hold it now (ties: by name). Default 0.")
    namespace_selector: LabelSelector | None = Field(
        None, description="The namespaces whose tasks may run here (their labels; e.g. matchLabels: {argus.io/team: a}). Unset: every namespace.")
    root: Annotated[str, Field(pattern=r"^/", max_length=4096)] | None = Field(
        None, description="The shared tree's root as this cluster's jobs see it (default: the operator's --root).")
    verl_code_path: Annotated[str, Field(pattern=r"^/", max_length=4096)] | None = Field(
        None, description="The verl snapshot this cluster's jobs run (default: the operator's --verl-code-path).")
    drain: bool = Field(False, description="True: no new task is placed here; the tasks running here finish (a cluster being drained for an upgrade).")

    @field_validator("root", "verl_code_path")
    @classmethod
    def _normal(cls, value: str | None) -> str | None:
        return posixpath.normpath(value) if value else value

    @model_validator(mode="after")
    def _address_or_ref(self) -> ArgusClusterSpec:
        if (self.address is None) == (self.ray_cluster_ref is None):
            raise ValueError(ADDRESS_OR_REF_RULE[0])
        return self


class DoctorVerdict(str, Enum):
    Passed = "Passed"      # every check passed
    Warnings = "Warnings"  # none failed, some warned
    Failed = "Failed"      # a task would fail there (or Ray could not be read: the message says)


class ClusterDoctor(_CamelModel):
    """``argus doctor``'s last run on the cluster (the operator's, every --doctor-interval)."""

    checked_at: str = Field(json_schema_extra={"format": "date-time"}, description="When the checks ran.")
    verdict: DoctorVerdict = Field(description="Passed (every check), Warnings (none failed), Failed (a task would fail there, or Ray could not be read).")
    failed: int = Field(ge=0, description="Checks that failed.")
    warnings: int = Field(ge=0, description="Checks that warned.")
    message: Annotated[str, Field(max_length=2048)] = Field(description="The failures (else the warnings), each with its node; "
                                                                       "`argus doctor --cluster NAME` shows every check with its fix.")
    verl_versions: list[Annotated[str, Field(max_length=64)]] | None = Field(
        None, max_length=16, description="The verl versions the probes read in its verl snapshot (verl/version/version), each once; "
        "absent when no probe read one. Kept from the run before when a run reads none.")
    supported_verl: list[Annotated[str, Field(max_length=64)]] | None = Field(
        None, max_length=16, description="The verl releases Argus has a config tree for, and composes and templates tasks with: "
        "a task for this cluster is composed for the release its snapshot runs. A snapshot at another version (or at "
        "several) fails the doctor, and new tasks wait (reason VerlDrift) until a run finds one of these.")

    def verl_drift(self) -> tuple[str, ...]:
        """The versions its snapshot runs that Argus has no tree for, or all of them when it
        runs several (a task is composed for one); empty: none, or none known."""
        if not self.supported_verl:
            return ()
        found = self.verl_versions or []
        return tuple(found) if len(found) > 1 else tuple(v for v in found if v not in self.supported_verl)


class ArgusClusterStatus(_StatusModel):
    """Written by the operator (its leader), at most once per poll interval and only when it changed."""

    conditions: list[Condition] | None = Field(None, description=f"{ConditionType.RayReachable} (reason {_or(CLUSTER_REACHABILITY_REASONS)}), "
                                               f"{ConditionType.VerlDrift} (True: its verl snapshot runs a release Argus has no config "
                                               "tree for, and new tasks wait; set once argus doctor has read "
                                               f"the snapshot's version) and {ConditionType.Deleting}.")
    address: str | None = Field(None, description="The dashboard address the operator uses: spec.address, or the one read from "
                                "spec.rayClusterRef's head Service.")
    ray_version: str | None = Field(None, description="The Ray version its dashboard reports.")
    worker_nodes: int | None = Field(None, ge=0, description="Alive nodes carrying the worker resource.")
    gpus: int | None = Field(None, ge=0, description="GPUs of its worker nodes in all.")
    free_gpus: int | None = Field(None, ge=0, description="GPUs free on its worker nodes, as Ray reports them (less what Argus admitted that Ray does not show yet).")
    running: int | None = Field(None, ge=0, description="Argus tasks admitted to it and not ended.")
    queued: int | None = Field(None, ge=0, description="Queued tasks that may be placed on it.")
    doctor: ClusterDoctor | None = Field(None, description="argus doctor's last run on it (absent with --doctor-interval 0).")
    observed_generation: int | None = Field(None, description="The .metadata.generation the operator last read.")


@dataclass(frozen=True)
class ClusterConfig:
    """An ArgusCluster as the operator uses it (or the implicit cluster of --ray-address)."""

    name: str
    address: str  # "" for a rayClusterRef not resolved (yet): see ``controller.fleet``
    token_secret: SecretKeyRef | None = None
    ray_cluster_ref: RayClusterRef | None = None
    worker_resource: str | None = None
    max_running: int | None = None
    preference: int = 0
    namespace_selector: LabelSelector | None = None
    root: str | None = None
    verl_code_path: str | None = None
    drain: bool = False
    deleting: bool = False
    generation: int | None = None

    def admits(self, namespace_labels: Mapping[str, str] | None) -> bool:
        """Whether a task of a namespace with these labels may be placed here."""
        if self.namespace_selector is None:
            return True
        return namespace_labels is not None and self.namespace_selector.matches(namespace_labels)

    @property
    def accepting(self) -> bool:
        return not self.drain and not self.deleting

    def platform(self, base: PlatformConfig) -> PlatformConfig:
        """The platform configuration as this cluster's jobs see it: its shared tree's root,
        verl snapshot and worker resource where it names them, the operator's otherwise."""
        return replace(base, root=self.root or base.root, verl_code_path=self.verl_code_path or base.verl_code_path,
                       worker_resource=self.worker_resource or base.worker_resource)


class InvalidCluster(ValueError):
    """An ArgusCluster object the operator cannot use, said in one line."""


def parse_cluster(obj: Mapping[str, Any]) -> ClusterConfig:
    """An ArgusCluster object (as the API server returns it) as a ``ClusterConfig``."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") or ""
    try:
        spec = ArgusClusterSpec.model_validate(obj.get("spec") or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidCluster(f"ArgusCluster {name}: spec.{where}: {first['msg']}") from None
    return ClusterConfig(
        name=name, address=(spec.address or "").rstrip("/"), token_secret=spec.token_secret, ray_cluster_ref=spec.ray_cluster_ref, worker_resource=spec.worker_resource,
        max_running=spec.max_running, preference=spec.preference, namespace_selector=spec.namespace_selector,
        root=spec.root, verl_code_path=spec.verl_code_path, drain=spec.drain, deleting=bool(meta.get("deletionTimestamp")),
        generation=meta.get("generation"))


class UnresolvedRef(ValueError):
    """A rayClusterRef that names no usable head Service, said in one line."""


def check_kuberay_url(template: str) -> str:
    """``--kuberay-dashboard-url``: an http(s) URL whose only fields are ``KUBERAY_URL_FIELDS``
    (and ``{port}`` among them). Raises ValueError saying which rule it breaks."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise ValueError(f"--kuberay-dashboard-url {template!r}: {exc}") from None
    unknown = sorted(set(fields) - set(KUBERAY_URL_FIELDS))
    if unknown:
        raise ValueError(f"--kuberay-dashboard-url {template!r}: unknown field {{{unknown[0]}}} (known: "
                         + ", ".join(f"{{{f}}}" for f in KUBERAY_URL_FIELDS) + ")")
    if "port" not in fields or not re.match(r"^https?://", template):
        raise ValueError(f"--kuberay-dashboard-url {template!r}: must be an http:// or https:// URL with {{port}}")
    return template


def head_service_name(ref: RayClusterRef, raycluster: Mapping[str, Any]) -> str:
    """The RayCluster's head Service: the one its status names (KubeRay 1.1 and later), or the
    name KubeRay gives it."""
    named = ((raycluster.get("status") or {}).get("head") or {}).get("serviceName")
    return named if isinstance(named, str) and named else f"{ref.name}-head-svc"


def head_dashboard_address(ref: RayClusterRef, service_name: str, service: Mapping[str, Any] | None, template: str) -> str:
    """The dashboard address of a RayCluster's head Service (as the API server returned it;
    None: no such Service). Raises ``UnresolvedRef``."""
    where = f"spec.rayClusterRef: RayCluster {ref}"
    if service is None:
        raise UnresolvedRef(f"{where}: its head Service {ref.namespace}/{service_name} does not exist (KubeRay makes it with the head)")
    spec = service.get("spec") or {}
    port = next((p.get("port") for p in spec.get("ports") or () if p.get("name") == KUBERAY_DASHBOARD_PORT), None)
    if not isinstance(port, int):
        raise UnresolvedRef(f"{where}: its head Service {ref.namespace}/{service_name} has no port named {KUBERAY_DASHBOARD_PORT} "
                            "(KubeRay names the dashboard's port so; set the head's dashboard port, or use spec.address)")
    return template.format(service=service_name, namespace=ref.namespace, port=port,
                           clusterIP=spec.get("clusterIP") or "").rstrip("/")


def missing_raycluster(ref: RayClusterRef) -> UnresolvedRef:
    return UnresolvedRef(f"spec.rayClusterRef: RayCluster {ref} does not exist (KubeRay's ray.io/v1)")


def doctor_summary(rows: Sequence[Row], now: str, supported_verl: Sequence[str] = ()) -> ClusterDoctor:
    """``argus doctor``'s rows as the ArgusCluster status says them: the verdict, the counts,
    the failures (else the warnings) in one message, and the verl versions its snapshot runs
    next to the releases Argus composes with (``supported_verl``)."""
    failures = [r for r in rows if r.status is CheckStatus.fail]
    warnings = [r for r in rows if r.status is CheckStatus.warn]
    verdict = DoctorVerdict.Failed if failures else DoctorVerdict.Warnings if warnings else DoctorVerdict.Passed
    shown = failures or warnings
    message = "; ".join(f"{r.node} {r.check.value}: {r.detail}" for r in shown) if shown else \
        f"every check passed on {len({r.node for r in rows if r.check is Check.probe})} worker node(s)"
    if len(message) > 2000:
        message = message[:1997] + "..."
    return ClusterDoctor(checked_at=now, verdict=verdict, failed=len(failures), warnings=len(warnings), message=message,
                         verl_versions=list(snapshot_versions(rows)) or None, supported_verl=list(supported_verl) or None)


def preference_order(clusters: list[ClusterConfig]) -> list[ClusterConfig]:
    """Highest preference first, then by name."""
    return sorted(clusters, key=lambda c: (-c.preference, c.name))


def placement_annotation(attempt: int, cluster: str) -> str:
    return f"{attempt}:{cluster}"


_PLACEMENT = re.compile(r"^([1-9][0-9]*):([a-z0-9.-]*)$")


def placed_on(annotations: Mapping[str, str] | None, attempt: int) -> str | None:
    """The cluster the annotation says this attempt was submitted to (None: no such record)."""
    found = _PLACEMENT.match((annotations or {}).get(PLACEMENT_ANNOTATION, ""))
    if found is None or int(found.group(1)) != attempt:
        return None
    return found.group(2)


@dataclass(frozen=True)
class ClusterReport:
    """What the operator saw of one cluster in a pass, for its status (``cluster_status``)."""

    error: str | None             # why Ray could not be read (None: it answered)
    error_reason: ClusterReason   # RayUnreachable, RayAuthFailed or RayClusterRefUnresolved
    version: str | None
    worker_nodes: int | None      # None: not known (Ray could not be read)
    gpus: float | None
    free_gpus: float | None
    running: int
    queued: int
    deleting: bool = False
    holding: tuple[str, ...] = ()  # while deleting: the tasks (namespace/name) it waits for
    doctor: ClusterDoctor | None = None  # argus doctor's last run (None: none since the last status)


def cluster_status(previous: ArgusClusterStatus, report: ClusterReport, *, address: str, now: str,
                   generation: int | None) -> ArgusClusterStatus:
    """The ArgusCluster's status after a pass: conditions move only when they change (their
    lastTransitionTime with them); the figures of a cluster Ray could not be read for are
    the last known ones."""
    if report.error is None:
        conditions = set_condition(previous.conditions, ConditionType.RayReachable, True, ClusterReason.RayReachable, f"Ray answers at {address}",
                                   now=now, generation=generation)
    elif report.error_reason == ClusterReason.RayClusterRefUnresolved:  # no address to name: the error says what is missing
        conditions = set_condition(previous.conditions, ConditionType.RayReachable, False, report.error_reason, report.error,
                                   now=now, generation=generation)
    else:
        conditions = set_condition(previous.conditions, ConditionType.RayReachable, False, report.error_reason,
                                   f"Ray at {address} cannot be read: {report.error}", now=now, generation=generation)
    if report.deleting:
        held = ", ".join(report.holding[:10]) + (f" and {len(report.holding) - 10} more" if len(report.holding) > 10 else "")
        message = (f"waiting for the tasks on it to end before it goes: {held} (set spec.cancel on them to stop them now)"
                   if report.holding else "no task is on it: it goes now")
        conditions = set_condition(conditions, ConditionType.Deleting, True, ClusterReason.TasksOnCluster if report.holding else ClusterReason.NoTasks, message,
                                   now=now, generation=generation)
    conditions = _verl_condition(conditions, report.doctor or previous.doctor, now=now, generation=generation)
    known = report.worker_nodes is not None
    return previous.model_copy(update={
        "conditions": conditions,
        "address": address or None,
        "doctor": report.doctor or previous.doctor,
        "ray_version": report.version or previous.ray_version,
        "worker_nodes": report.worker_nodes if known else previous.worker_nodes,
        "gpus": int(report.gpus or 0) if known else previous.gpus,
        "free_gpus": int(report.free_gpus or 0) if known else previous.free_gpus,
        "running": report.running,
        "queued": report.queued,
        "observed_generation": generation,
    })


def _verl_condition(conditions: list[Condition], doctor: ClusterDoctor | None, *, now: str, generation: int | None) -> list[Condition]:
    """VerlDrift, once argus doctor has read the snapshot's version (until then it says nothing:
    nothing is known, and nothing is held back)."""
    if doctor is None or not doctor.supported_verl or not doctor.verl_versions:
        return conditions
    drift, releases = doctor.verl_drift(), " and ".join(doctor.supported_verl)
    if drift:
        return set_condition(conditions, ConditionType.VerlDrift, True, ClusterReason.VerlDrift,
                             f"its verl snapshot runs verl {' and '.join(drift)}, but Argus composes with verl {releases} only "
                             f"(one release per cluster): new tasks wait (reason {ClusterReason.VerlDrift}) until argus doctor finds "
                             "one of those there; running tasks are left alone", now=now, generation=generation)
    return set_condition(conditions, ConditionType.VerlDrift, False, ClusterReason.VerlMatches,
                         f"its verl snapshot runs verl {doctor.verl_versions[0]}, a release Argus composes with: "
                         "tasks for it are composed for that release", now=now, generation=generation)
