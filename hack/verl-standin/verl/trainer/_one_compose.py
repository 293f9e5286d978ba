"""One composition a run instead of two (the stand-in's cost, not its behaviour).

``@hydra.main`` (Hydra 1.3) composes the whole config twice: once in ``Hydra.get_mode``,
only to read ``hydra.mode``, then again for the run. Where no override names ``hydra.mode``
that first composition can only say what Hydra's own default says (None: ``_run_app`` then
appends ``hydra.mode=RUN`` and runs), because verl's config trees never set it (the 0.6.1
and 0.9.1 trees' only ``hydra:`` sections set a ``searchpath``); a failed composition also
gives None there (``get_mode`` swallows it), and the run's composition then reports it.
So, without that override, the answer is given without composing; with it, Hydra's own
``get_mode`` runs. The run's composition, its refusals, run folder and ``.hydra`` output
stay Hydra's. It was a third of a stand-in run's CPU (1.9-2.3 -> 1.1-1.6 s a run), and the
stand-in runs for every task of the integration tests."""

from __future__ import annotations

from typing import Any

from hydra._internal.hydra import Hydra

_composing_get_mode = Hydra.get_mode


def _get_mode(self: Hydra, config_name: str | None, overrides: list[str]) -> Any:
    if any("hydra.mode" in override for override in overrides):
        return _composing_get_mode(self, config_name, overrides)
    return None


Hydra.get_mode = _get_mode  # type: ignore[method-assign]
