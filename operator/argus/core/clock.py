"""What a clock is, for every component that reads the time: the composition root
(``host.operator.Operator.build``, the CLI's commands) makes one
(``adapters.clock.SystemClock``) and hands it down; tests hand a fake one
(tests/unit/fakes.py's ``FakeClock``). Nothing past the composition root reads the
machine's clock itself, so that every time-dependent decision can be driven by a test.
"""

from __future__ import annotations

import datetime as dt
from typing import Protocol


class Clock(Protocol):
    def now(self) -> dt.datetime:
        """The wall time, timezone-aware UTC: for timestamps written down and compared with
        others' (creation times, TTLs, Events)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never steps back: for durations, deadlines and rates."""
        ...
