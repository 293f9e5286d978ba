"""The log API's serving certificate is re-read when its files change (servers/logapi/tls.py):
the real server (LogApi.start, on loopback) serves certificate A, the files are replaced as
the kubelet replaces a Secret's, and the next connection is served certificate B without a
restart; a pair caught half-written keeps the previous certificate until the files are whole."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import ssl
from pathlib import Path

import pytest

from argus.servers.logapi.server import LogApi
from argus.servers.logapi.settings import LogApiSettings
from argus.servers.webhook.tls import self_signed_certificate
from fakes import FakeClock

pytestmark = pytest.mark.unit

NOW = dt.datetime(2026, 12, 3, 8, 0, 0, tzinfo=dt.UTC)


def pair(name: str) -> tuple[bytes, bytes]:
    return self_signed_certificate([name, "127.0.0.1"], now=NOW)


def replace(path: Path, data: bytes) -> None:
    """Written aside, then renamed over the old file: a new inode, as the kubelet's swap gives."""
    aside = path.with_name(path.name + ".new")
    aside.write_bytes(data)
    os.replace(aside, path)


async def served_certificate(port: int, server_name: str | None) -> bytes:
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname=server_hostname(server_name))
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()
    return ssl.DER_cert_to_PEM_cert(der).encode()


def server_hostname(name: str | None) -> str:
    # "" sends no server name (SNI) at all: the callback must swap the certificate then too.
    return name or ""


def same(served: bytes, pem: bytes) -> bool:
    return ssl.PEM_cert_to_DER_cert(served.decode()) == ssl.PEM_cert_to_DER_cert(pem.decode())


@pytest.mark.parametrize("server_name", ["logs.argus.test", None])
def test_a_renewed_certificate_is_served_to_the_next_connection_without_a_restart(tmp_path: Path, server_name: str | None) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    ca = tmp_path / "front-proxy-ca.crt"
    a_cert, a_key = pair("a.logs.argus.test")
    b_cert, b_key = pair("b.logs.argus.test")
    cert.write_bytes(a_cert)
    key.write_bytes(a_key)
    ca.write_bytes(pair("front-proxy-ca")[0])

    async def run() -> None:
        settings = LogApiSettings(host="127.0.0.1", port=0, cert_file=str(cert), key_file=str(key), client_ca_file=str(ca))
        api = LogApi(settings, None, lambda key: None, None, None, clock=FakeClock())  # type: ignore[arg-type]
        await api.start()
        try:
            assert api._runner is not None
            port = api._runner.addresses[0][1]
            assert same(await served_certificate(port, server_name), a_cert)
            assert same(await served_certificate(port, server_name), a_cert)  # unchanged files: nothing re-read
            assert api.tls is not None and api.tls.reloads == 0

            replace(cert, b_cert)  # the new certificate is there, its key not yet: the old pair is kept
            assert same(await served_certificate(port, server_name), a_cert)
            replace(key, b_key)
            assert same(await served_certificate(port, server_name), b_cert)
            assert api.tls.reloads == 1

            cert.write_bytes(a_cert)  # rewritten in place (same inode): the change is still seen
            key.write_bytes(a_key)
            os.utime(cert, ns=(os.stat(cert).st_atime_ns, os.stat(cert).st_mtime_ns + 1_000_000))
            assert same(await served_certificate(port, server_name), a_cert)
            assert api.tls.reloads == 2 and api.listening
        finally:
            await api.stop()

    asyncio.run(run())


def test_files_touched_but_unchanged_are_not_reloaded(tmp_path: Path) -> None:
    from argus.servers.logapi.tls import ReloadingServerContext
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    a_cert, a_key = pair("a.logs.argus.test")
    cert.write_bytes(a_cert)
    key.write_bytes(a_key)
    tls = ReloadingServerContext(str(cert), str(key), pair("front-proxy-ca")[0].decode())
    first = tls.refresh()
    replace(cert, a_cert)
    assert tls.refresh() is first and tls.reloads == 0
    cert.unlink()  # a Secret being swapped: the file is briefly missing
    assert tls.refresh() is first
