"""The log API's TLS: its serving certificate, re-read when the files change; and the front
proxy's CA that client certificates must chain to (servers/logapi/server.py uses it). The
metrics server's HTTPS (``--metrics-cert-file``) uses the same reloading context, without
client certificates.

The certificate and key are mounted from a Secret (chart-made, cert-manager's, or the
admin's own; docs/logs.md). A renewal replaces the files (the kubelet swaps the Secret's
``..data`` link), and the aggregator verifies new connections against the APIService's
``caBundle``: a pod that kept the certificate it loaded at start would be refused after a
renewal. So every new connection checks the files (two ``stat`` calls; they are read only
when their size, inode or modification time changed, and loaded only when their bytes did)
and is served with the newest pair that loads. The swap happens in the handshake's SNI
callback, which OpenSSL calls for every ClientHello (with or without a server name): the
listening socket is never restarted. A pair caught half-written (a new certificate with the
old key) fails to load; the previous pair is served until the next change.
"""

from __future__ import annotations

import logging
import os
import ssl

log = logging.getLogger(__name__)


def _signature(path: str) -> tuple[int, int, int]:
    st = os.stat(path)  # follows the Secret volume's links to the current file
    return st.st_ino, st.st_size, st.st_mtime_ns


class ReloadingServerContext:
    """The server's SSLContext, swapped for a fresh one when the certificate files change.

    ``context`` is what the listening site is given; ``current`` is the context the latest
    handshake was served with (the first one until a change)."""

    def __init__(self, cert_file: str, key_file: str, client_ca_pem: str | None, what: str = "log API") -> None:
        """``client_ca_pem``: the CA client certificates may chain to (checked per request by
        the log API); None: no client certificates are asked for (the metrics server).
        ``what``: the server, as its log lines name it."""
        self.what = what
        self.cert_file = cert_file
        self.key_file = key_file
        self.client_ca_pem = client_ca_pem
        self._seen = (_signature(cert_file), _signature(key_file))
        self._loaded = self._read()
        self.context = self._build(*self._loaded)  # the first load fails loudly: the server does not start
        self.context.sni_callback = self._on_hello
        self.current = self.context
        self.reloads = 0

    def _read(self) -> tuple[bytes, bytes]:
        with open(self.cert_file, "rb") as c, open(self.key_file, "rb") as k:
            return c.read(), k.read()

    def _build(self, cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        # load_cert_chain reads files only: the bytes just read are the ones loaded, so a
        # rename between the read and the load cannot pair another certificate with this key.
        ctx.load_cert_chain(self.cert_file, self.key_file)
        if (cert_pem, key_pem) != self._read():
            raise ssl.SSLError("the certificate files changed while they were loaded")
        if self.client_ca_pem is not None:
            # Optional at the handshake, so that a caller without a certificate gets a clear 401
            # instead of a broken connection; checked on every request (server.LogApi).
            ctx.verify_mode = ssl.CERT_OPTIONAL
            ctx.load_verify_locations(cadata=self.client_ca_pem)
        return ctx

    def refresh(self) -> ssl.SSLContext:
        """The context for a new connection: a new one when the files changed and load."""
        try:
            seen = (_signature(self.cert_file), _signature(self.key_file))
        except OSError as exc:
            log.warning("%s: cannot stat its certificate files (%s); serving the certificate loaded before", self.what, exc)
            return self.current
        if seen == self._seen:
            return self.current
        try:
            pem = self._read()
            if pem != self._loaded:
                self.current = self._build(*pem)
                self._loaded = pem
                self.reloads += 1
                log.info("%s: serving the renewed certificate from %s", self.what, self.cert_file)
        except (OSError, ValueError, ssl.SSLError) as exc:
            # Half-written, or a certificate without its key yet: the next connection tries again.
            log.warning("%s: cannot load the changed certificate %s (%s); serving the one loaded before", self.what, self.cert_file, exc)
            return self.current
        self._seen = seen
        return self.current

    def _on_hello(self, ssl_object: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, context: ssl.SSLContext) -> None:
        try:
            ssl_object.context = self.refresh()
        except Exception as exc:  # noqa: BLE001 - a handshake must not fail on the reload itself
            log.warning("%s: certificate reload failed: %r", self.what, exc)
