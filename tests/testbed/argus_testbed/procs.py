"""Child processes of the testbed: each in its own process group, logging to a file, stopped
with SIGTERM then SIGKILL, and registered with atexit so nothing outlives the test run.

Stopping kills the whole process group and also every descendant found under /proc before
the kill (Ray starts job drivers in their own sessions, so a process group is not enough).
It never kills anything by name. If the test run itself is killed (so atexit never runs), a
small shell watchdog per process SIGKILLs its process group at once.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

_live: set[ManagedProcess] = set()  # strong refs: an unreferenced process still gets stopped
_live_lock = threading.Lock()


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) < 2:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def descendants(pid: int) -> list[int]:
    """Every process below `pid` right now (Linux /proc)."""
    if not os.path.isdir("/proc"):
        return []
    children = _children_map()
    out: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def _signal_all(pgids: set[int], pids: Sequence[int], sig: int) -> None:
    for pgid in pgids:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[-1].split()[0]
        return state not in (b"Z", b"X")
    except OSError:
        return False


def _start_watchdog(pgid: int) -> subprocess.Popen[bytes] | None:
    """A tiny shell that SIGKILLs process group `pgid` once this Python process is gone, for
    when the test run itself is killed and atexit never runs. It blocks reading a pipe whose
    only writer is this process (never written to; close-on-exec: no program started later
    holds it): the read ends when the kernel closes it, however this process dies. No CPU
    while it waits (a `kill -0` loop forks a `sleep` a second: 0.1% of a core per watchdog,
    and a testbed has four and more)."""
    script = f"read -r _; kill -KILL -{pgid} 2>/dev/null"
    try:
        return subprocess.Popen(
            ["/bin/sh", "-c", script],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return None


def _stop_watchdog(watchdog: subprocess.Popen[bytes] | None) -> None:
    if watchdog is None:
        return
    try:
        os.killpg(watchdog.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        watchdog.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    if watchdog.stdin is not None:
        watchdog.stdin.close()


class ManagedProcess:
    """One long-running child process started in a new session (so a new process group)."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = [str(a) for a in argv]
        self.log_path = Path(log_path)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.popen: subprocess.Popen[bytes] | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None

    def start(self) -> ManagedProcess:
        if self.running:
            raise RuntimeError(f"{self.name} is already running")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== {time.strftime('%H:%M:%S')} starting {self.name}: {' '.join(self.argv)}\n".encode())
            log.flush()
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
        self._watchdog = _start_watchdog(self.popen.pid)
        with _live_lock:
            _live.add(self)
        return self

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def returncode(self) -> int | None:
        return self.popen.poll() if self.popen else None

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the process group (and descendants in other groups), SIGKILL after `grace` s."""
        if self.popen is None:
            return
        popen, self.popen = self.popen, None
        _stop_watchdog(self._watchdog)
        self._watchdog = None
        pid = popen.pid
        kids = descendants(pid)
        pgids = {pid}  # the session leader's group
        for k in kids:
            g = _pgid(k)
            if g is not None and g != os.getpgrp():
                pgids.add(g)
        _signal_all(pgids, kids, signal.SIGTERM)
        if popen.poll() is None:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if popen.poll() is not None and not any(_alive(k) for k in kids):
                break
            time.sleep(0.05)
        # Whatever is left (including anything spawned meanwhile) gets SIGKILL.
        kids = sorted(set(kids) | set(descendants(pid)))
        _signal_all(pgids, [pid, *kids], signal.SIGKILL)
        try:
            popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        with _live_lock:
            _live.discard(self)

    def log_tail(self, n: int = 50) -> str:
        return tail(self.log_path, n)


def tail(path: Path, n: int = 50) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 256 * 1024))
            data = f.read().decode(errors="replace")
    except OSError as e:
        return f"<no log at {path}: {e}>"
    return "\n".join(data.splitlines()[-n:])


@atexit.register
def _stop_all() -> None:
    with _live_lock:
        procs = list(_live)
    for p in procs:
        try:
            p.stop(grace=3.0)
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass
