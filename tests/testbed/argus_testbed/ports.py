"""Free loopback TCP ports for the testbed's processes.

Ports are probed by binding on 127.0.0.1 and then released, so there is a small window in
which another process could take one; ports handed out by this process are remembered so two
picks in one test run never collide with each other, and a start that loses the race anyway
(``lost_port_race``) is retried by the testbed on fresh ports.
"""

from __future__ import annotations

import os
import random
import socket
import threading

_lock = threading.Lock()
_handed_out: set[int] = set()

# Ranges handed out by free_port_range() sit below the kernel's ephemeral range (usually
# 32768-60999), so that outgoing connections of unrelated processes can't grab them.
_RANGE_LOW, _RANGE_HIGH = 20000, 32000


def _bindable(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    # Some processes (Ray's) listen on 0.0.0.0: check that too.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 (and 0.0.0.0) right now and not handed out before."""
    with _lock:
        for _ in range(100):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port not in _handed_out and _bindable(port):
                _handed_out.add(port)
                return port
    raise RuntimeError("could not find a free TCP port")


def free_ports(n: int) -> list[int]:
    return [free_port() for _ in range(n)]


def _worker_slice() -> tuple[int, int]:
    """This process's share of the range: pytest-xdist workers (PYTEST_XDIST_WORKER gw0, gw1,
    ...) each pick from their own slice, so two workers never race for one range."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    if not worker.startswith("gw") or not worker[2:].isdigit() or count <= 1:
        return _RANGE_LOW, _RANGE_HIGH
    width = (_RANGE_HIGH - _RANGE_LOW) // count
    low = _RANGE_LOW + int(worker[2:]) % count * width
    return low, low + width


def free_port_range(size: int) -> tuple[int, int]:
    """An inclusive range (low, high) of `size` consecutive free ports below the ephemeral range."""
    range_low, range_high = _worker_slice()
    with _lock:
        for _ in range(200):
            low = random.randrange(range_low, range_high - size)
            ports = range(low, low + size)
            if any(p in _handed_out for p in ports):
                continue
            if all(_bindable(p) for p in ports):
                _handed_out.update(ports)
                return low, low + size - 1
    raise RuntimeError(f"could not find {size} consecutive free TCP ports")


# What a server prints when a port it was given is already taken.
_IN_USE = ("address already in use", "Address already in use", "failed to bind", "Failed to bind", "bind: address")
START_ATTEMPTS = 3


def lost_port_race(log_text: str) -> bool:
    """Whether a failed start was another process taking one of our ports first."""
    return any(marker in log_text for marker in _IN_USE)
