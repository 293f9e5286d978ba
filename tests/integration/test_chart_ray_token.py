"""The chart's Ray token setting (issue 15): ``operator.rayToken`` names a Secret and key,
which the pod mounts read-only as a file passed to ``--ray-token-file``; nothing of it
without a Secret name; a malformed name fails the schema. The token itself is never in the
chart: only the Secret's name is. Rendered with helm, flags parsed by the operator's own
parser, the Deployment dry-run applied on the API server."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest
import yaml

from argus_testbed import find_binaries
from argus_testbed.harness import REPO

pytestmark = pytest.mark.integration

CHART = REPO / "charts" / "argus"
NS = "argus-token-system"
KUBE_VERSION = "1.34.4"  # what `helm template` is told (it assumes 1.20 otherwise; the chart needs >= 1.28)


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    proc = subprocess.run([str(find_binaries() / "helm"), *args], capture_output=True, text=True, env=env, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def deployment(*values: str) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(helm("template", "argus", str(CHART), "--namespace", NS, "--kube-version", KUBE_VERSION, *values).stdout) if d]
    (found,) = [d for d in docs if d["kind"] == "Deployment"]
    return found


def operator_args(dep: dict[str, Any]) -> Any:
    from argus.host.main import build_parser
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    args, unknown = build_parser().parse_known_args(container["args"])
    assert not unknown, unknown
    return args


def test_no_secret_name_no_token() -> None:
    dep = deployment()
    assert operator_args(dep).ray_token_file is None
    assert "ray-token" not in yaml.safe_dump(dep)


@pytest.mark.parametrize("values,key", [(["--set", "operator.rayToken.secretName=ray-auth"], "auth_token"),
                                        (["--set", "operator.rayToken.secretName=ray-auth", "--set", "operator.rayToken.key=token.txt"], "token.txt")])
def test_the_secret_is_mounted_read_only_and_named_by_the_flag(values: list[str], key: str, control_plane: Any) -> None:
    dep = deployment(*values)
    assert operator_args(dep).ray_token_file == "/etc/argus/ray-token/token"
    pod = dep["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert {"name": "ray-token", "mountPath": "/etc/argus/ray-token", "readOnly": True} in container["volumeMounts"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "ray-token"]
    assert volume == {"name": "ray-token", "secret": {"secretName": "ray-auth", "defaultMode": 0o440, "items": [{"key": key, "path": "token"}]}}
    # Not as an environment variable (visible in the pod spec's consumers and /proc), only a file.
    assert "ray-auth" not in yaml.safe_dump(container.get("env") or [])
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}))
    out = control_plane.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(dep))
    assert "(server dry run)" in out.stdout


@pytest.mark.parametrize("values,message", [
    (["--set", "operator.rayToken.secretName=Ray_Auth"], "/operator/rayToken/secretName"),
    (["--set", "operator.rayToken.key=a/b"], "/operator/rayToken/key"),
    (["--set", "operator.rayToken.token=abc"], "additional properties 'token' not allowed"),
])
def test_a_malformed_token_setting_fails_the_schema(values: list[str], message: str) -> None:
    out = helm("template", "argus", str(CHART), "--namespace", NS, "--kube-version", KUBE_VERSION, *values, check=False)
    assert out.returncode != 0 and message in out.stderr, out.stderr
