"""A TCP relay on loopback that can be frozen: while frozen it accepts connections and keeps
the open ones, but moves no byte either way, and closes nothing, which is what a half-open
connection (a dropped NAT entry, a hung load balancer) looks like to both ends. Thawed, it
relays again. Used to show that the operator's task watch notices such a connection (its
read timeout) and that liveness fails while the API server cannot be heard."""

from __future__ import annotations

import select
import socket
import socketserver
import threading


class FreezableProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self._flowing = threading.Event()
        self._flowing.set()
        self._closing = threading.Event()
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._relay(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="freezable-proxy", daemon=True).start()

    def freeze(self) -> None:
        self._flowing.clear()

    def thaw(self) -> None:
        self._flowing.set()

    def _relay(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()
            return
        try:
            while not self._closing.is_set():
                if not self._flowing.is_set():
                    self._flowing.wait(0.2)  # hold both ends open, move nothing
                    continue
                readable, _, _ = select.select([client, upstream], [], [], 0.2)
                for src in readable:
                    data = src.recv(65536)
                    if not data:
                        return
                    (upstream if src is client else client).sendall(data)
        except OSError:
            return
        finally:
            client.close()
            upstream.close()

    def stop(self) -> None:
        self._closing.set()
        self._flowing.set()
        self._server.shutdown()
        self._server.server_close()
