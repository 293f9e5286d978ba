"""What Argus knows of Ray, as the core names it: the records Ray's job and node APIs give
(``RayJob``, ``RayNode``, ``PlacementGroup``), a job's state (``RayJobState``, parsed from
Ray's word by the adapter), and the errors a Ray call ends in, by what they mean for a task
(already exists -> adopt; unknown id -> lost; unreachable -> retry later; credentials refused
-> retry later, told apart; anything else -> refused).

The controller's ``RayJobs`` protocol (``controller.ports``), the adapter that talks to Ray
(``adapters.ray``, which maps Ray's client errors onto these) and the controller modules all
import them from here: the boundary does not depend on what it hides."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class RayJobState(StrEnum):
    """A Ray job's state, as Ray's Jobs API names it (``ray.job_submission.JobStatus``). A
    StrEnum: written into ``status.rayJob.status`` and messages as Ray's own word."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"

    @property
    def active(self) -> bool:
        """The job has not ended: it holds (or waits for) its resources."""
        return self in RAY_ACTIVE

    @classmethod
    def parse(cls, said: str) -> RayJobState | None:
        """Ray's word for a job's state, in any case; None for a state this Argus does not
        know (a newer Ray's), which the lifecycle treats as not yet running: neither active
        nor ended (``taskstate.phase_for_ray``)."""
        try:
            return cls(said.upper())
        except ValueError:
            return None


RAY_ACTIVE = (RayJobState.PENDING, RayJobState.RUNNING)


class RayUnreachable(Exception):
    """The dashboard did not answer; try again later."""


class RayAuthFailed(RayUnreachable):
    """The dashboard answered, but refused the credentials: HTTP 401 (the cluster requires a
    token and none was sent) or 403 (the token sent is not the cluster's). A kind of
    RayUnreachable, so that whatever waits out an outage waits this out too (never a task
    failed as refused); the lifecycle tells it apart (reason RayAuthFailed)."""

    def __init__(self, status: int | None):
        self.status = status
        super().__init__({
            401: "HTTP 401: the Ray cluster requires a token and none was sent",
            403: "HTTP 403: the Ray cluster did not accept the token that was sent",
        }.get(status or 0, "the Ray cluster refused the credentials"))


class RayJobUnknown(Exception):
    """Ray does not know this submission id (a restarted head forgets its jobs)."""


class RayJobExists(Exception):
    """Ray already has a job with this submission id: adopt it."""


class RayRefused(Exception):
    """Ray answered, but refused the request (a bug or a misconfiguration)."""


@dataclass(frozen=True)
class RayJob:
    submission_id: str
    status: RayJobState | None  # None: a state this Argus does not know; ``unknown_status`` has Ray's word for it
    message: str
    driver_node_id: str | None
    start_time_ms: int | None
    end_time_ms: int | None
    job_id: str | None = None  # Ray's own id of the driver (placement groups name their creator by it)
    metadata: dict[str, str] = field(default_factory=dict)  # as submitted (SubmissionPlan.metadata)
    unknown_status: str = ""

    @property
    def reported(self) -> str:
        """The job's state as Ray reported it (what the operator records and says)."""
        return self.status.value if self.status is not None else self.unknown_status

    @property
    def active(self) -> bool:
        return self.status is not None and self.status.active

    @property
    def ended(self) -> bool:
        return self.status is not None and not self.status.active


@dataclass(frozen=True)
class RayNode:
    """An alive Ray node: its resources, and the GPUs in use on it (by anyone; None when
    this Ray does not report use per node)."""

    node_id: str
    resources_total: dict[str, float] = field(default_factory=dict)
    is_head: bool = False
    gpus_used: float | None = None
    node_ip: str | None = None


@dataclass(frozen=True)
class PlacementGroup:
    """A created placement group: the job that made it, the GPUs of its bundles, and where
    they are: GPUs per node id (empty when Ray did not say)."""

    creator_job_id: str
    gpus: float
    nodes: tuple[tuple[str, float], ...] = ()
