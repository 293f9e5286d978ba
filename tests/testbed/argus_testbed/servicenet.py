"""The part of a pod network the API server needs to call a webhook through its Service.

A real kube-apiserver calls a ``service:``-style webhook at the Service's ClusterIP, with TLS
server name ``<service>.<namespace>.svc``. Here nothing routes ClusterIPs (no kube-proxy, no
pods, and this machine may use loopback addresses only), so the control plane is started
with an egress selector (``--egress-selector-config-file``, the mechanism Konnectivity uses)
that sends its "cluster" traffic through this HTTP CONNECT proxy on a Unix socket (the
API server's TCP transport insists on client TLS; the UDS one is what Konnectivity's
sidecar setup uses). The proxy
plays kube-proxy and the endpoints controller: a ClusterIP:port is mapped to backends on
127.0.0.1 (the operator processes' webhook ports), and only backends whose readiness URL
answers 200 receive connections, as a Service only sends to ready pods. It never connects to
anything but the registered loopback backends; an unknown target gets 502, no ready backend
503 (the API server then applies the webhook's failure policy).

The aggregator (an APIService's ``service:``, e.g. logs.argus.io) dials through the same
"cluster" egress: no ``--enable-aggregator-routing`` is needed. Its availability check also
wants a ready EndpointSlice for the Service (no controller makes one here: the test creates
it, with an address that is never dialled).

The TLS handshake passes through untouched, so the API server checks the served certificate
against the configuration's caBundle and the Service's DNS name, exactly as in a cluster.
"""

from __future__ import annotations

import itertools
import logging
import select
import socket
import socketserver
import tempfile
import threading
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)


@dataclass
class Backend:
    port: int                    # on 127.0.0.1
    ready_url: str | None = None  # e.g. http://127.0.0.1:<health port>/readyz; None: always ready

    def ready(self) -> bool:
        if self.ready_url is None:
            return True
        try:
            with urllib.request.urlopen(self.ready_url, timeout=1) as r:
                return r.status == 200
        except OSError:
            return False


@dataclass
class _Route:
    backends: list[Backend] = field(default_factory=list)
    turn: itertools.count = field(default_factory=itertools.count)


class ServiceNetwork:
    """An HTTP CONNECT proxy from ClusterIP:port to ready loopback backends."""

    def __init__(self, socket_path: Path | None = None) -> None:
        self._routes: dict[str, _Route] = {}
        self._lock = threading.Lock()
        self.connections: list[tuple[str, int]] = []  # (target, backend port) of every tunnel opened
        network = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                network._handle(self.request)

        class Server(socketserver.ThreadingUnixStreamServer):
            daemon_threads = True

        # Unix socket paths are limited to about 100 bytes: a short folder of its own.
        self._dir = None if socket_path else tempfile.TemporaryDirectory(prefix="svcnet-")
        self.socket_path = Path(socket_path or Path(self._dir.name) / "proxy.sock")
        self._server = Server(str(self.socket_path), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="servicenet", daemon=True)
        self._thread.start()

    # ---- routes (what kube-proxy would program)

    def route(self, cluster_ip: str, port: int, backends: list[Backend]) -> None:
        with self._lock:
            self._routes[f"{cluster_ip}:{port}"] = _Route(list(backends))

    def unroute(self, cluster_ip: str, port: int) -> None:
        with self._lock:
            self._routes.pop(f"{cluster_ip}:{port}", None)

    def _pick(self, target: str) -> tuple[int, Backend | None]:
        with self._lock:
            route = self._routes.get(target)
        if route is None:
            return 502, None
        ready = [b for b in route.backends if b.ready()]
        if not ready:
            return 503, None
        return 200, ready[next(route.turn) % len(ready)]

    # ---- the proxy

    def _handle(self, client: socket.socket) -> None:
        client.settimeout(10)
        head = b""
        try:
            while b"\r\n\r\n" not in head and len(head) < 8192:
                chunk = client.recv(4096)
                if not chunk:
                    return
                head += chunk
        except OSError:
            return
        line = head.split(b"\r\n", 1)[0].decode(errors="replace").split()
        if len(line) < 2 or line[0] != "CONNECT":
            client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
            return
        target = line[1]
        status, backend = self._pick(target)
        if backend is None:
            client.sendall(f"HTTP/1.1 {status} {'Bad Gateway' if status == 502 else 'Service Unavailable'}\r\n\r\n".encode())
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", backend.port), timeout=5)
        except OSError:
            client.sendall(b"HTTP/1.1 503 Service Unavailable\r\n\r\n")
            return
        self.connections.append((target, backend.port))
        client.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        rest = head.split(b"\r\n\r\n", 1)[1]
        if rest:
            upstream.sendall(rest)
        self._pipe(client, upstream)

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        a.settimeout(None)
        b.settimeout(None)
        try:
            while True:
                readable, _, _ = select.select([a, b], [], [], 60)
                if not readable:
                    return  # idle for a minute: close
                for src in readable:
                    data = src.recv(65536)
                    if not data:
                        return
                    (b if src is a else a).sendall(data)
        except OSError:
            return
        finally:
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass

    def egress_config(self, path: Path) -> Path:
        """An EgressSelectorConfiguration sending the API server's "cluster" traffic here."""
        path.write_text(
            "apiVersion: apiserver.k8s.io/v1beta1\nkind: EgressSelectorConfiguration\negressSelections:\n"
            "- name: cluster\n  connection:\n    proxyProtocol: HTTPConnect\n    transport:\n"
            f"      uds:\n        udsName: {self.socket_path}\n"
        )
        return path

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._dir is not None:
            self._dir.cleanup()
