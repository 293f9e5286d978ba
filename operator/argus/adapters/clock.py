"""The machine's clock (``core.clock.Clock``). Made only by the composition roots (the
operator's ``Operator.build``, the CLI's commands) and handed to what reads the time."""

from __future__ import annotations

import datetime as dt
import time


class SystemClock:
    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)

    def monotonic(self) -> float:
        return time.monotonic()
