"""The words a task is described in, declared once: its phases and the sets they fall into
(active: Ray has the job; ended), every reason the operator writes into a status, a
condition or an Event (an ArgusCluster's conditions' too, ``ClusterReason``), which reasons
each phase carries, a task's key, and how many GPUs a task takes. The lifecycle, the queue, the status writer, the metrics, the CLI, the CRD's
descriptions (``core.spec``) and the docs' tables (checked by tests/unit/test_vocabulary.py)
all read them from here.

The values are the API's: a reason or phase is written into the status and Events as the
string it is here, and must not change.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum, StrEnum
from typing import Any

Key = tuple[str, str]  # (namespace, name): one ArgusTask


class Phase(str, Enum):
    Queued = "Queued"
    Submitted = "Submitted"
    Running = "Running"
    Suspended = "Suspended"
    Succeeded = "Succeeded"
    Failed = "Failed"
    Stopped = "Stopped"
    Rejected = "Rejected"

    @property
    def active(self) -> bool:
        """Ray has the task's job (it holds its GPUs)."""
        return self in ACTIVE_PHASES

    @property
    def terminal(self) -> bool:
        """The task has ended; nothing moves it on."""
        return self in END_PHASES


ACTIVE_PHASES = (Phase.Submitted, Phase.Running)
END_PHASES = (Phase.Succeeded, Phase.Failed, Phase.Stopped, Phase.Rejected)


def _phase(value: str | Phase | None) -> Phase | None:
    try:
        return Phase(value) if value else None
    except ValueError:  # a phase written by hand, or by a newer operator
        return None


def is_active(phase: str | Phase | None) -> bool:
    """Whether a status phase (as the API stores it) is an active one."""
    found = _phase(phase)
    return found is not None and found.active


def is_ended(phase: str | Phase | None) -> bool:
    """Whether a status phase (as the API stores it) is an end."""
    found = _phase(phase)
    return found is not None and found.terminal


class Reason(StrEnum):
    """Why: ``status.reason``, a condition's reason, or an Event's. A StrEnum, so that a
    reason is its value wherever it is written (status, Event, metric label, f-string)."""

    # Queued
    Validated = "Validated"
    Queued = "Queued"
    Unschedulable = "Unschedulable"
    QuotaExceeded = "QuotaExceeded"
    NoCluster = "NoCluster"  # no Ray cluster it may use takes tasks (spec.cluster, namespaceSelector, drain)
    VerlDrift = "VerlDrift"  # the clusters it may use run a verl other than the one it is composed for (argus doctor)
    InputMissing = "InputMissing"  # a file or folder it reads is not in the shared tree (core.inputs)
    SecretMissing = "SecretMissing"  # a Secret (or key) spec.env names is not there (or cannot be read): checked again each pass
    Retrying = "Retrying"
    Resumed = "Resumed"  # spec.suspend went back to false: a new attempt waits
    Preempted = "Preempted"  # a higher-priority task took its GPUs: a new attempt waits (core.preempted)
    # Suspended (spec.suspend: its job stopped, its GPUs back to the queue; not an end)
    Suspended = "Suspended"
    # Rejected
    InvalidSpec = "InvalidSpec"
    NamespaceNotOnboarded = "NamespaceNotOnboarded"
    InvalidUser = "InvalidUser"
    # Submitted
    Admitted = "Admitted"
    AdoptedExistingJob = "AdoptedExistingJob"
    RayJobPending = "RayJobPending"
    Preempting = "Preempting"  # its job is being stopped for a higher-priority task (core.preempted)
    # Running and the ends
    RayJobRunning = "RayJobRunning"
    RayJobSucceeded = "RayJobSucceeded"
    RayJobFailed = "RayJobFailed"
    RayJobLost = "RayJobLost"
    RayJobStopped = "RayJobStopped"
    RaySubmitFailed = "RaySubmitFailed"
    DeadlineExceeded = "DeadlineExceeded"
    BackoffLimitExceeded = "BackoffLimitExceeded"
    Cancelled = "Cancelled"
    # Ray could not be asked: it did not answer, or refused the operator's credentials
    RayUnreachable = "RayUnreachable"
    RayAuthFailed = "RayAuthFailed"
    # the RayReachable condition's reason when Ray answers
    RayReachable = "RayReachable"
    # Events that are not phase changes
    WeakCheck = "WeakCheck"
    PlacementViolation = "PlacementViolation"
    FinalizerReleased = "FinalizerReleased"
    KeptForGitOps = "KeptForGitOps"  # an ended task's TTL ran out, but Argo CD tracks it (core.gitops)


class ClusterReason(StrEnum):
    """Why, on an ArgusCluster's conditions (``clusters.cluster_status``); the CRD's description
    and the Argo CD health check name them."""

    # RayReachable
    RayReachable = "RayReachable"
    RayUnreachable = "RayUnreachable"
    RayAuthFailed = "RayAuthFailed"
    RayClusterRefUnresolved = "RayClusterRefUnresolved"  # spec.rayClusterRef names no usable head Service
    # VerlDrift (argus doctor read the verl snapshot's version)
    VerlDrift = "VerlDrift"
    VerlMatches = "VerlMatches"
    # Deleting (the finalizer waits for the tasks on it)
    TasksOnCluster = "TasksOnCluster"
    NoTasks = "NoTasks"


# The RayReachable condition's reasons on an ArgusCluster: why Ray could not be read, or that it answers.
CLUSTER_REACHABILITY_REASONS = (ClusterReason.RayReachable, ClusterReason.RayUnreachable, ClusterReason.RayAuthFailed,
                                ClusterReason.RayClusterRefUnresolved)


# The reasons ``status.reason`` may carry in each phase (docs/lifecycle.md's table; the
# lifecycle's tests check every status it makes against it).
REASONS_BY_PHASE: dict[Phase, tuple[Reason, ...]] = {
    Phase.Queued: (Reason.Validated, Reason.Queued, Reason.Unschedulable, Reason.QuotaExceeded, Reason.NoCluster, Reason.VerlDrift,
                   Reason.InputMissing, Reason.SecretMissing, Reason.RayUnreachable,
                   Reason.RayAuthFailed, Reason.Retrying, Reason.Resumed, Reason.Preempted),
    Phase.Submitted: (Reason.Admitted, Reason.AdoptedExistingJob, Reason.RayJobPending, Reason.Preempting),
    Phase.Running: (Reason.RayJobRunning, Reason.Preempting),
    Phase.Suspended: (Reason.Suspended,),
    Phase.Succeeded: (Reason.RayJobSucceeded,),
    Phase.Failed: (Reason.RayJobFailed, Reason.RayJobLost, Reason.RayUnreachable, Reason.DeadlineExceeded, Reason.RaySubmitFailed,
                   Reason.BackoffLimitExceeded),
    Phase.Stopped: (Reason.Cancelled, Reason.RayJobStopped),
    Phase.Rejected: (Reason.InvalidSpec, Reason.NamespaceNotOnboarded, Reason.InvalidUser),
}
STATUS_REASONS = tuple(dict.fromkeys(r for reasons in REASONS_BY_PHASE.values() for r in reasons))
# Reasons only Events carry (a phase change's Event carries the status's reason).
EVENT_REASONS = (Reason.AdoptedExistingJob, Reason.WeakCheck, Reason.PlacementViolation, Reason.FinalizerReleased, Reason.KeptForGitOps)


# Phase changes made without an Event: (phase, reason). An admitted task is Submitted for
# the moment between Ray taking the job and its driver starting; the Event of the next phase
# (Running, or the end) says where it went from there, and the status shows Submitted (with
# the Ray job) while it lasts. Submitted for any other reason (a job adopted after a
# restart, Ray pending again after it ran) keeps its Event. An Event is an API write: a run
# that validates, runs and succeeds costs 6 (issue 26).
QUIET_PHASE_CHANGES = ((Phase.Submitted, Reason.Admitted),)
# A task's first status made without an Event when it is just what the spec asked for:
# validated and waiting in the queue (Queued, reason Validated or Queued: behind others),
# created cancelled (Stopped, Cancelled) or created suspended (Suspended). The status says
# it, and nobody has anything to do; as a Pod gets no Event while it waits for the scheduler,
# nor a Kueue Workload before its quota is reserved. A first status that asks something of
# someone (Rejected, or Queued for a missing input, a quota, an unreachable cluster) keeps
# its Event. A first start over 10,000 such tasks posted 10,000 of these (issue 39).
QUIET_FIRST_PHASES = ((Phase.Queued, Reason.Validated), (Phase.Queued, Reason.Queued), (Phase.Stopped, Reason.Cancelled),
                      (Phase.Suspended, Reason.Suspended))


def task_shape(spec: Mapping[str, Any]) -> tuple[int, int]:
    """(nnodes, nGpusPerNode) of a spec as the API stores it. A field left out, or not a
    positive integer (the CRD's schema allows neither), counts as its default, 1."""
    def count(field: str) -> int:
        value = spec.get(field)
        return value if type(value) is int and value >= 1 else 1
    return count("nnodes"), count("nGpusPerNode")


def task_gpus(nnodes: int, gpus_per_node: int) -> int:
    """The GPUs a task takes: ``gpus_per_node`` on each of ``nnodes`` nodes. The queue
    admits it, a user's quota counts it and the CLI shows it by this number."""
    return nnodes * gpus_per_node


def spec_gpus(spec: Mapping[str, Any]) -> int:
    """The GPUs of a task whose spec is as the API stores it."""
    return task_gpus(*task_shape(spec))


LOG_TASK_FIELD = "task"


def task_log(namespace: str, name: str) -> dict[str, str]:
    """``extra=`` for a log call about one task: a JSON log line (``--log-format json``)
    carries it as its ``task`` field, ``namespace/name``."""
    return {LOG_TASK_FIELD: f"{namespace}/{name}"}
