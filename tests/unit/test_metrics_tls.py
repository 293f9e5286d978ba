"""/metrics over HTTPS (``--metrics-cert-file``/``--metrics-key-file``, chart ``metrics.tls``):
served with the given certificate (a client that trusts its CA reads the metrics; a plain
HTTP request gets no metrics), a renewed certificate served from the next connection on
without a restart, a client that connects and stalls holds up nobody else, and the two flags
only together."""

from __future__ import annotations

import datetime as dt
import os
import socket
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from argus.controller.metrics import Metrics
from argus.host.main import _metrics_tls, build_parser, main
from argus.servers.webhook.tls import self_signed_certificate
from fakes import FakeClock

pytestmark = pytest.mark.unit


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_pair(folder: Path) -> bytes:
    cert, key = self_signed_certificate(["argus-metrics.argus-system.svc", "127.0.0.1"], now=dt.datetime.now(dt.UTC))
    for name, data in (("tls.crt.new", cert), ("tls.key.new", key)):
        (folder / name).write_bytes(data)
    os.replace(folder / "tls.key.new", folder / "tls.key")
    os.replace(folder / "tls.crt.new", folder / "tls.crt")
    return cert


def fetch(port: int, ca: bytes) -> tuple[str, bytes]:
    ctx = ssl.create_default_context(cadata=ca.decode())
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", context=ctx, timeout=10) as resp:
        body = resp.read().decode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        served = tls.getpeercert(binary_form=True)
    return body, ssl.DER_cert_to_PEM_cert(served).encode()


def same_cert(a: bytes, b: bytes) -> bool:
    return ssl.PEM_cert_to_DER_cert(a.decode()) == ssl.PEM_cert_to_DER_cert(b.decode())


def test_metrics_over_https_with_the_given_certificate_reloaded_when_renewed(tmp_path: Path) -> None:
    first = write_pair(tmp_path)
    args = build_parser().parse_args(["--metrics-port", "1", "--metrics-cert-file", str(tmp_path / "tls.crt"),
                                      "--metrics-key-file", str(tmp_path / "tls.key")])
    port = free_port()
    Metrics(FakeClock()).serve(port, "127.0.0.1", _metrics_tls(args))
    body, served = fetch(port, first)
    assert "argus_build_info{" in body and same_cert(served, first)
    # Plain HTTP gets no metrics.
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    # A stalled client (connected, no handshake) does not block the next scrape.
    stalled = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        time.sleep(0.01)  # distinct mtimes for the renewal below on coarse file systems
        second = write_pair(tmp_path)  # a renewal, as the kubelet swaps a Secret's files
        body, served = fetch(port, second)
        assert "argus_leader" in body and same_cert(served, second) and not same_cert(second, first)
    finally:
        stalled.close()


def test_the_cert_and_key_flags_go_together(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--metrics-port", "9090", "--metrics-cert-file", "/etc/argus/metrics-tls/tls.crt"])
    assert exited.value.code == 2
    assert "--metrics-cert-file and --metrics-key-file go together" in capsys.readouterr().err
    assert _metrics_tls(build_parser().parse_args([])) is None  # plain HTTP by default
