"""Conditions (the metav1.Condition shape) as ArgusTasks and ArgusClusters carry them: their
types, declared once (as Kueue declares its Workload's), the ``Condition`` model and
``set_condition``, which every writer of a condition goes through.

    taskstate.conditions_for_phase / taskstate.ray_reachable (a task) and clusters.cluster_status (a cluster) -> **set_condition** -> status.conditions

A condition's type and status are API values: ``kubectl wait --for=condition=Finished`` and
users' alerts read them as the strings they are here. This module imports no other part of
Argus (``core.spec`` puts ``Condition`` into its status models).
"""

from __future__ import annotations

from enum import Enum, StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

MAX_CONDITION_MESSAGE = 32768


class ConditionType(StrEnum):
    """A condition's ``type``. A StrEnum, so that a type is its value wherever it is written."""

    # An ArgusTask's (taskstate.conditions_for_phase): Admitted, Running, Complete, Failed and
    # Finished follow its phase; Suspended once it was ever suspended.
    Admitted = "Admitted"
    Running = "Running"
    Complete = "Complete"
    Failed = "Failed"
    Finished = "Finished"  # true at every end (Succeeded, Failed, Rejected, Stopped), as Kueue's Workload has it
    Suspended = "Suspended"
    # Both an ArgusTask's and an ArgusCluster's: whether the Ray dashboard answers.
    RayReachable = "RayReachable"
    # An ArgusCluster's (clusters.cluster_status).
    Deleting = "Deleting"
    VerlDrift = "VerlDrift"  # its verl snapshot runs a verl release Argus has no config tree for


class ConditionStatus(str, Enum):
    true = "True"
    false = "False"
    unknown = "Unknown"


class Condition(BaseModel):
    """The metav1.Condition shape."""

    # As core.spec's status models (_StatusModel), restated: that module imports this one.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", use_enum_values=True)

    type: Annotated[str, Field(max_length=316, pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$")] = Field(description="Condition type: Admitted, Running, Complete, Failed, Finished (any end), Suspended, RayReachable.")
    status: ConditionStatus = Field(description="True, False or Unknown.")
    observed_generation: int | None = Field(None, ge=0, description="The .metadata.generation the condition was set for.")
    last_transition_time: str = Field(json_schema_extra={"format": "date-time"}, description="When the condition last changed status.")
    reason: Annotated[str, Field(max_length=1024, min_length=1, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")] = Field(description="A CamelCase word saying why.")
    message: Annotated[str, Field(max_length=MAX_CONDITION_MESSAGE)] = Field(description="Human-readable detail.")

    @property
    def true(self) -> bool:
        return self.status == ConditionStatus.true


def find_condition(conditions: list[Condition] | None, type_: ConditionType) -> Condition | None:
    """The condition of this type, if the status has one."""
    return next((c for c in conditions or () if c.type == type_), None)


def set_condition(conditions: list[Condition] | None, type_: ConditionType, status: bool, reason: str, message: str, *,
                  now: str, generation: int | None) -> list[Condition]:
    """Conditions with ``type_`` set; lastTransitionTime moves only when its status changes."""
    value = ConditionStatus.true if status else ConditionStatus.false
    message = message[:MAX_CONDITION_MESSAGE]
    out: list[Condition] = []
    found = False
    for c in conditions or []:
        if c.type == type_:
            found = True
            c = c.model_copy(update={
                "status": value, "reason": reason, "message": message,
                "last_transition_time": now if c.status != value else c.last_transition_time,
                "observed_generation": generation if generation is not None else c.observed_generation,
            })
        out.append(c)
    if not found:
        out.append(Condition(type=type_, status=value, reason=reason, message=message, last_transition_time=now,
                             observed_generation=generation))
    return out
