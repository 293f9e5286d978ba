"""Following each running job's log for verl's progress lines: ``core.progress``, read in the
background from one of two sources (``ProgressSource``, --progress-source), Ray's log
stream from the Jobs API (``stream``, one per running task, served by the Ray head), or the
attempt's log file in the job folder where the shared tree is mounted (``file``, polled every
FILE_POLL_SECONDS; costs Ray nothing); ``off`` follows nothing. The control loop takes
the progress when a status write for it is due (``progress_due``), at most once every
``interval`` seconds per task (the first one ``interval`` after it starts running), and
always with the job's last read.

A job also tells when it ends, and the followers say so at once (``on_end``): the job's exit
marker (``core.jobscript``) appears in its job folder as the command ends, and wherever the
operator has that cluster's shared tree mounted the exit markers of all its running jobs are
looked at together every EXIT_POLL_SECONDS, whatever the progress source (``off`` too): one
lstat a job, no Ray call. Without the tree, Ray's log stream closing is the sign (1-2 s after
the end in Ray 2.60, which looks at the log file and the job's status once a second). The
control loop then reads the job from Ray at once, and every 25 ms until Ray says it ended
too (``jobsync.JobSync.hurry``; Ray stays the judge of how it ended): the end shows, and the
freed GPUs are given out, without waiting for the job's next periodic read. By stream, the
job's whole log is read from Ray as its marker appears, for its last lines, meanwhile.

A stream that breaks (Ray unreachable, a head restart) is opened again while the task runs;
Ray's log stream starts from the beginning of the log, so the reader starts afresh too, as it
does after an operator restart. A file is read on from where the last read stopped.
"""

from __future__ import annotations

import asyncio
import codecs
import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from ..core.jobscript import exit_marker_for
from ..core.progress import ProgressReader, ProgressSource
from ..core.rayjobs import RayJobUnknown, RayRefused, RayUnreachable
from ..core.spec import TaskProgress
from ..core.vocabulary import Key
from .ports import LogFiles, RayJobs

log = logging.getLogger(__name__)
RECONNECT_SECONDS = 5.0


# A job that has ended still sends its last lines for a moment (Ray reads the driver's log
# about once a second): its follower stays this long at most to read them.
FINISHING_SECONDS = 10.0
# An ended job's log is read whole once for its last lines (``read_the_rest``) only while it
# is shorter than this (characters); a longer one waits for its stream's end.
WHOLE_LOG_LIMIT = 8 * 1024 * 1024
# A log file is read this often while its job runs, and this much at a time at most.
FILE_POLL_SECONDS = 1.0
# The exit markers of the jobs followed by file are looked for this often (one thread hop and
# one lstat per job): Ray's job supervisor looks at its process every 0.1 s.
EXIT_POLL_SECONDS = 0.05
FILE_CHUNK = 1024 * 1024


@dataclass
class _Follower:
    key: Key
    submission_id: str
    reader: ProgressReader
    log_file: str | None = None  # the attempt's log in the job folder, as the jobs (and a mounted tree) see it
    cluster: str = ""  # the cluster the job runs on (its Ray serves the stream)
    users_root: str | None = None  # by file: the users folder of that cluster's tree, mounted here (None: --root's)
    by_file: bool = False  # read from its log file (else from Ray's log stream)
    marked: bool = False  # its tree is mounted here: its exit marker tells its end
    task: asyncio.Task[None] | None = None
    written_at: float | None = None  # monotonic time of the last progress write
    finishing_since: float | None = None  # monotonic time the task stopped running
    chunks: int = field(default=0)
    ended: bool = False  # its log said the job ended (on_end was called)
    # By stream: the whole log, read from Ray as the exit marker appeared (the log is whole
    # then), for ``read_the_rest`` once Ray says the job ended.
    whole_log: asyncio.Task[str | None] | None = None

    def marker_seen(self, ray: RayJobs) -> None:
        """Its exit marker appeared: the command has ended and its log is whole. By stream,
        the log is read from Ray now, while the loop waits for Ray to say the job ended (its
        supervisor looks every 0.1 s), not after: the end and the last progress then go out
        in one status patch with no Ray call between the end's read and its write."""
        if (not self.by_file and self.task is not None and not self.task.done() and self.consumed <= WHOLE_LOG_LIMIT
                and self.whole_log is None):
            self.whole_log = asyncio.create_task(read_whole_log(ray, self.submission_id), name=f"argus whole log {self.submission_id}")

    def end(self, on_end: Callable[[Key], None] | None) -> None:
        """The log says the job ended: say it, once."""
        if not self.ended:
            self.ended = True
            if on_end is not None:
                on_end(self.key)
    consumed: int = 0  # characters of the log read so far (the stream starts at the log's beginning); bytes of a file
    decoder: codecs.IncrementalDecoder = field(default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="replace"))


class LogFollowers:
    def __init__(self, ray_of: Callable[[str], RayJobs], metrics: tuple[str, ...], interval: float,
                 now: Callable[[], dt.datetime], monotonic: Callable[[], float], *,
                 source: ProgressSource = ProgressSource.stream, files: LogFiles | None = None,
                 users_root_of: Callable[[str], str] | None = None, on_end: Callable[[Key], None] | None = None):
        if source == ProgressSource.file and files is None:
            raise ValueError("progress from log files needs the files")
        self.ray_of = ray_of  # a cluster's name -> its Ray
        # A cluster's name -> the users folder of its shared tree (its ArgusCluster's root, or
        # --root), read where the operator mounts it (``files``: the exit markers, and by file
        # the logs); by file, a cluster whose tree is not mounted here is followed through
        # Ray's log stream instead (said once).
        self.users_root_of = users_root_of
        self._unmounted: set[str] = set()
        self.source = source
        self.files = files
        self.file_poll_seconds = FILE_POLL_SECONDS
        self.metrics = metrics
        self.interval = interval
        self.now = now
        self.monotonic = monotonic
        self._followers: dict[Key, _Follower] = {}
        self.on_end = on_end  # told the task whose job's log says the job ended
        self._markers: asyncio.Task[None] | None = None  # looks for the exit markers of the jobs followed by file

    def __len__(self) -> int:
        return len(self._followers)

    def follow(self, running: dict[Key, tuple[str, str | None, str]]) -> None:
        """Follow these tasks' jobs (key -> submission id, the attempt's log file, the
        cluster it runs on). A task no longer among them is finishing: its stream is read to
        its end (``finished``). With ``off`` a job is followed only for its exit marker."""
        now = self.monotonic()
        for key, follower in list(self._followers.items()):
            sid = running.get(key, (None, None, ""))[0]
            if sid is None:
                follower.finishing_since = follower.finishing_since or now
            elif sid != follower.submission_id:
                self.drop(key)  # a new attempt
        for key, (sid, log_file, cluster) in running.items():
            if key not in self._followers:
                new = self._follower(key, sid, log_file, cluster, now)
                if new is not None:
                    self._followers[key] = new
        if (self._markers is None or self._markers.done()) and any(f.marked for f in self._followers.values()):
            assert self.files is not None
            self._markers = asyncio.create_task(watch_exit_markers(self.files, self._followers, self.on_end, self.ray_of),
                                                name="argus exit markers")

    def _follower(self, key: Key, sid: str, log_file: str | None, cluster: str, now: float) -> _Follower | None:
        """A new follower of a running job, reading its log from the progress source, or
        None when there is nothing to follow (by file without the file's name: a task
        submitted before the status named it; with ``off``, a job whose marker is not here)."""
        if self.source == ProgressSource.file and not log_file:
            return None
        # The first progress is written ``interval`` after the following starts, not at once:
        # a run shorter than that gets its progress with its end, in the same status patch
        # (one write fewer per task; issue 26).
        follower = _Follower(key, sid, ProgressReader(self.metrics), log_file=log_file, cluster=cluster, written_at=now)
        if self.files is not None and log_file:
            follower.users_root = self.users_root_of(cluster) if self.users_root_of is not None else None
            follower.marked = self._mounted(cluster, follower.users_root)
        if self.source == ProgressSource.off:
            return follower if follower.marked else None
        follower.by_file = self.source == ProgressSource.file and follower.marked
        read = self._read_file if follower.by_file else self._read
        follower.task = asyncio.create_task(read(follower), name=f"argus log {key[0]}/{key[1]}")
        return follower

    def _mounted(self, cluster: str, users_root: str | None) -> bool:
        assert self.files is not None
        if self.files.mounted(users_root):
            self._unmounted.discard(cluster)
            return True
        if self.source != ProgressSource.file:
            return False  # no tree here: the end shows by Ray's log stream or the job's reads
        if cluster not in self._unmounted:
            self._unmounted.add(cluster)
            log.warning("--progress-source file: the shared tree of cluster %s (%s) is not mounted here; its jobs' progress is read "
                        "from Ray's log stream instead (mount it at that path to read its files)", cluster or "--ray-address", users_root)
        return False

    def finished(self) -> list[Key]:
        """Tasks that stopped running whose log stream has ended (or waited long enough):
        take their last progress (``progress_due(final=True)``), then ``drop`` them."""
        now = self.monotonic()
        return [key for key, f in self._followers.items() if f.finishing_since is not None
                and (f.task is None or f.task.done() or now - f.finishing_since >= FINISHING_SECONDS)]

    async def read_the_rest(self, key: Key) -> None:
        """An ended job: read what its stream has not brought yet from the whole log (one
        read, made when its exit marker appeared if it did: ``_Follower.marker_seen``; the stream lags
        the log file by about a second) and stop the stream, so that
        ``progress_due(final=True)`` has the job's last lines now. Skipped for a log already
        longer than WHOLE_LOG_LIMIT (the stream's end brings the rest, one write later) and
        when Ray cannot say (the same)."""
        follower = self._followers.get(key)
        if follower is None or follower.task is None or follower.task.done():
            return
        if follower.by_file:
            await self._file_to_end(follower)
            return
        if follower.consumed > WHOLE_LOG_LIMIT:
            return
        text = await (follower.whole_log or read_whole_log(self.ray_of(follower.cluster), follower.submission_id))
        if text is None:
            return
        if follower.task.done() or self._followers.get(key) is not follower:
            return  # the stream ended (or the follower changed) meanwhile: it has the lines
        if len(text) > follower.consumed:
            follower.reader.feed(text[follower.consumed:], self.now())
            follower.consumed = len(text)
        follower.task.cancel()  # the stream would bring the same lines again

    def drop(self, key: Key) -> None:
        follower = self._followers.pop(key, None)
        if follower and follower.task:
            follower.task.cancel()
        if follower and follower.whole_log:
            follower.whole_log.cancel()

    def close(self) -> None:
        for key in list(self._followers):
            self.drop(key)
        if self._markers is not None:
            self._markers.cancel()


    async def _read(self, follower: _Follower) -> None:
        while True:
            try:
                async for chunk in self.ray_of(follower.cluster).tail_logs(follower.submission_id):
                    follower.chunks += 1
                    follower.consumed += len(chunk)
                    follower.reader.feed(chunk, self.now())
                follower.end(self.on_end)
                return  # the job ended: Ray closed the stream
            except asyncio.CancelledError:
                raise
            except (RayUnreachable, RayRefused, RayJobUnknown, OSError) as exc:
                log.debug("log stream of %s broke (%s); opening it again in %.0f s", follower.submission_id, exc, RECONNECT_SECONDS)
            except Exception:  # noqa: BLE001 - a parsing bug must not end the following
                log.exception("following the log of %s failed; opening it again", follower.submission_id)
            await asyncio.sleep(RECONNECT_SECONDS)
            follower.reader = ProgressReader(self.metrics)  # the stream starts from the beginning again
            follower.consumed = 0

    async def _read_file(self, follower: _Follower) -> None:
        """The attempt's log file, read on every FILE_POLL_SECONDS while the job runs (the
        job may not have made it yet). Ends only when cancelled: the job's end is Ray's to
        say, and ``read_the_rest`` reads the file to its end then."""
        while True:
            try:
                while await self._file_chunk(follower):
                    pass
            except asyncio.CancelledError:
                raise
            except OSError as exc:
                log.debug("log file of %s not readable yet (%s)", follower.submission_id, exc)
            await asyncio.sleep(self.file_poll_seconds)

    async def _file_chunk(self, follower: _Follower) -> bool:
        """Read and feed the next chunk of the log file; False at its end for now."""
        assert self.files is not None and follower.log_file is not None
        data = await self.files.read(follower.log_file, follower.consumed, FILE_CHUNK, follower.users_root)
        if not data:
            return False
        follower.chunks += 1
        follower.consumed += len(data)
        follower.reader.feed(follower.decoder.decode(data), self.now())
        return True

    async def _file_to_end(self, follower: _Follower) -> None:
        """An ended job's log file, read to its end at once; past WHOLE_LOG_LIMIT bytes in
        one go, the rest is read in the background as before (``finished`` waits for it)."""
        assert follower.task is not None
        follower.task.cancel()  # one reader at a time: the offset is the follower's
        read = 0
        try:
            while read <= WHOLE_LOG_LIMIT:
                before = follower.consumed
                if not await self._file_chunk(follower):
                    follower.reader.feed(follower.decoder.decode(b"", final=True), self.now())
                    return
                read += follower.consumed - before
        except OSError as exc:
            log.debug("reading the end of %s's log file failed (%s)", follower.submission_id, exc)
            return
        follower.task = asyncio.create_task(self._read_file(follower), name=f"argus log file {follower.submission_id}")

    def not_written(self, key: Key) -> None:
        """The progress ``progress_due`` gave was not written (an API error): give it again."""
        follower = self._followers.get(key)
        if follower is not None:
            follower.reader.changed = True
            follower.written_at = None

    def progress_due(self, key: Key, previous: TaskProgress | None, *, final: bool = False) -> TaskProgress | None:
        """The progress to write now, if any: something new, and either ``interval`` seconds
        since the last progress write or the job's end (``final``)."""
        follower = self._followers.get(key)
        if follower is None or not follower.reader.changed:
            return None
        now = self.monotonic()
        if not final and follower.written_at is not None and now - follower.written_at < self.interval:
            return None
        progress = follower.reader.progress(previous)
        if progress is None or progress == previous:
            return None
        follower.written_at = now
        return progress


def latest_steps(followers: LogFollowers, key: Key) -> tuple[int | None, int | None]:
    """The last step verl reported in a followed job's log and the step it resumed from, as
    read so far, written to the status yet or not: what a preemption would lose now."""
    follower = followers._followers.get(key)
    return (follower.reader.step, follower.reader.resumed_from) if follower is not None else (None, None)


async def read_whole_log(ray: RayJobs, submission_id: str) -> str | None:
    """A job's whole log from Ray; None when Ray cannot say."""
    try:
        return await ray.logs(submission_id)
    except (RayUnreachable, RayRefused, RayJobUnknown, OSError) as exc:
        log.debug("reading the end of %s's log failed (%s); its stream brings it", submission_id, exc)
        return None


async def watch_exit_markers(files: LogFiles, followers: dict[Key, _Follower], on_end: Callable[[Key], None] | None,
                             ray_of: Callable[[str], RayJobs]) -> None:
    """Look for the exit markers of the followed jobs whose tree is mounted here, all in one
    look, every EXIT_POLL_SECONDS while there are any."""
    while any(f.marked for f in followers.values()):
        waiting = {exit_marker_for(f.log_file): f for f in followers.values()
                   if f.marked and f.log_file and not f.ended and f.finishing_since is None}
        if waiting:
            try:
                found = await files.present([(marker, f.users_root) for marker, f in waiting.items()])
            except OSError as exc:
                log.debug("looking for exit markers failed (%s)", exc)
                found = set()
            for marker in found:
                waiting[marker].marker_seen(ray_of(waiting[marker].cluster))
                waiting[marker].end(on_end)
        await asyncio.sleep(EXIT_POLL_SECONDS)
