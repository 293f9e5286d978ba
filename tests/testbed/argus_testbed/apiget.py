"""One object read straight from the testbed's API server, for the tests' polling loops.

``wait_phase`` and its kin poll a task several times a second on every test worker; a
``kubectl get -o json`` per poll is a kubectl start (about 50 ms of CPU here, the API
server's part 7 ms), which on the 2-core test machine was a fifth of an operator module's
CPU. This reads the same object (the JSON ``kubectl get -o json`` prints) as admin over a
kept-alive HTTPS connection, one per thread and API server. A failed read raises
KubectlError as the kubectl call did; a connection the server closed (a restart, an idle
timeout) is opened again once before a read counts as failed. A cluster the testbed did not
start (ExternalCluster: no local admin certificate) is read with kubectl.
"""

from __future__ import annotations

import http.client
import json
import threading
from typing import Any

from .controlplane import ControlPlane, KubeCluster, KubectlError

_local = threading.local()


def get_object(cluster: KubeCluster, path: str, *kubectl_args: str) -> dict[str, Any]:
    """GET ``path`` (e.g. /apis/argus.io/v1alpha1/namespaces/NS/argustasks/NAME) as admin;
    ``kubectl_args`` name the same object for ``kubectl get`` where there is no direct read."""
    if not isinstance(cluster, ControlPlane):
        out: dict[str, Any] = json.loads(cluster.kubectl("get", *kubectl_args, "-o", "json").stdout)
        return out
    conns: dict[str, http.client.HTTPSConnection] = _local.__dict__.setdefault("conns", {})
    for reused in (cluster.server in conns, False):
        conn = conns.get(cluster.server)
        if conn is None:
            conn = conns[cluster.server] = http.client.HTTPSConnection("127.0.0.1", cluster.port, timeout=60,
                                                                       context=cluster._ssl_context())
        try:
            conn.request("GET", path, headers={"Accept": "application/json"})
            resp = conn.getresponse()
            body = resp.read().decode(errors="replace")
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            del conns[cluster.server]
            if reused:
                continue  # closed by the server since the last read: once more, on a new connection
            raise KubectlError(1, ["GET", path], "", f"Unable to connect to the server: {exc!r}") from exc
        if resp.status != 200:
            raise KubectlError(1, ["GET", path], "", _server_error(resp.status, body))
        got: dict[str, Any] = json.loads(body)
        return got
    raise AssertionError("unreachable")


def _server_error(status: int, body: str) -> str:
    """The API server's Status as kubectl words it: ``Error from server (NotFound): ...``."""
    try:
        doc = json.loads(body)
        return f"Error from server ({doc.get('reason') or status}): {doc.get('message') or body}"
    except ValueError:
        return f"Error from server ({status}): {body[:500]}"
