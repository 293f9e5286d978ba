"""Fan-out of one log stream to many readers, bounded: the pure bookkeeping behind the log
API's followers (servers/logapi/server.py owns the Ray stream and the asyncio wake-ups).

- One ``Broadcast`` per followed Ray job: the job's log arrives once (Ray's stream), each
  reader gets it from its own start offset.
- Offsets are characters from the log's beginning. Ray's log stream always starts from the
  beginning, so after a reconnect the part already published is recognised and skipped
  (``restart``), and a reader that printed a snapshot of the log up to offset L joins at L.
- Backpressure: each reader holds at most ``reader_limit`` characters not yet taken. A reader
  that falls further behind loses its backlog and the new chunk, and the next ``take``
  starts with one marker line saying how much it skipped; nothing waits for it and nothing
  grows. The broadcast keeps only the last ``recent_limit`` characters, so that a reader
  joining from an offset just behind the stream (its snapshot of the log was read a moment
  before) misses nothing.
- ``FollowerLimit``: how many streams each user may follow at once.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


def skip_marker(chars: int) -> str:
    return f"[argus: {chars} characters of the log skipped here: this reader fell behind]\n"


@dataclass
class Reader:
    start: int                      # the first log offset this reader wants
    limit: int                      # most characters it may hold untaken
    pending: deque[str] = field(default_factory=deque)
    pending_chars: int = 0
    skipped: int = 0                # characters dropped since its last take
    closed: bool = False            # the stream ended: nothing more will come

    def take(self) -> list[str]:
        """What arrived since the last take, a skip marker first if some was dropped."""
        out = list(self.pending)
        if self.skipped:
            out.insert(0, skip_marker(self.skipped))
            self.skipped = 0
        self.pending.clear()
        self.pending_chars = 0
        return out

    @property
    def has_data(self) -> bool:
        return bool(self.pending) or self.skipped > 0

    def _offer(self, chunk: str) -> None:
        if self.pending_chars + len(chunk) > self.limit:
            self.skipped += self.pending_chars + len(chunk)
            self.pending.clear()
            self.pending_chars = 0
            return
        self.pending.append(chunk)
        self.pending_chars += len(chunk)


class Broadcast:
    def __init__(self, reader_limit: int = 256 * 1024, recent_limit: int = 64 * 1024) -> None:
        self.reader_limit = reader_limit
        self.recent_limit = recent_limit
        self.recent: deque[tuple[int, str]] = deque()  # (offset, chunk): the stream's last characters
        self.recent_chars = 0
        self.readers: list[Reader] = []
        self.offset = 0          # characters of the log published so far
        self._replay = 0         # after a restart: characters of the log to skip again
        self.closed = False

    def join(self, start: int | None = None) -> Reader:
        """A new reader from log offset ``start`` (default: from now on). A start behind the
        stream gets what the recent characters still hold, and a skip marker for the rest."""
        begin = self.offset if start is None else start
        reader = Reader(begin, self.reader_limit, closed=self.closed)
        if begin < self.offset:
            kept = self.recent[0][0] if self.recent else self.offset
            if begin < kept:
                reader.skipped = kept - begin
            for offset, chunk in self.recent:
                if offset + len(chunk) > begin:
                    reader._offer(chunk[max(0, begin - offset):])
        self.readers.append(reader)
        return reader

    def leave(self, reader: Reader) -> None:
        if reader in self.readers:
            self.readers.remove(reader)

    def restart(self) -> None:
        """The source starts again from the log's beginning (a reconnect)."""
        self._replay = self.offset
        self.offset = 0
        self.recent.clear()
        self.recent_chars = 0

    def publish(self, chunk: str) -> None:
        if self._replay:
            if len(chunk) <= self._replay - self.offset:
                self.offset += len(chunk)
                if self.offset >= self._replay:
                    self._replay = 0
                return
            cut = self._replay - self.offset
            self.offset = self._replay
            self._replay = 0
            chunk = chunk[cut:]
        begin = self.offset
        self.offset += len(chunk)
        self.recent.append((begin, chunk))
        self.recent_chars += len(chunk)
        while self.recent_chars - len(self.recent[0][1]) >= self.recent_limit:
            self.recent_chars -= len(self.recent.popleft()[1])
        for reader in self.readers:
            if self.offset <= reader.start:
                continue
            reader._offer(chunk[max(0, reader.start - begin):])

    def close(self) -> None:
        self.closed = True
        for reader in self.readers:
            reader.closed = True


class FollowerLimit:
    """At most ``per_user`` concurrent followers per user (0: no limit)."""

    def __init__(self, per_user: int) -> None:
        self.per_user = per_user
        self.active: dict[str, int] = {}

    def acquire(self, user: str) -> bool:
        n = self.active.get(user, 0)
        if self.per_user and n >= self.per_user:
            return False
        self.active[user] = n + 1
        return True

    def release(self, user: str) -> None:
        n = self.active.get(user, 0) - 1
        if n > 0:
            self.active[user] = n
        else:
            self.active.pop(user, None)
