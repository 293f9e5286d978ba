"""The reference KubeRay cluster (deploy/kuberay/raycluster.yaml, issue 22) against KubeRay's
own RayCluster CRD at the pinned version (hack/kuberay-version.txt; hack/fetch-kuberay-crd.sh
fetches it from KubeRay's Go module through the Go module proxy and caches it): installed into
the testbed's real kube-apiserver, the manifest passes ``kubectl apply --dry-run=server``, so
every field is one that KubeRay's schema knows, with the right type. What it checks is the
manifest's shape, not a running cluster (no KubeRay controller, no GPU nodes here); the
requirements themselves are the ones docs/deploy.md lists and ``argus doctor`` checks."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from argus_testbed.harness import REPO

pytestmark = pytest.mark.integration

MANIFEST = REPO / "deploy" / "kuberay" / "raycluster.yaml"
VERSION = (REPO / "hack" / "kuberay-version.txt").read_text().strip()


@pytest.fixture(scope="module")
def rayclusters_crd(kuberay_crd: Path) -> Path:
    return kuberay_crd


def documents() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]


def dry_run(cp: Any, docs: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    # The Namespace is created for real first: a dry run does not make the namespaced objects' namespace.
    cp.kubectl("apply", "-f", "-", input=json.dumps(next(d for d in docs if d["kind"] == "Namespace")))
    text = yaml.safe_dump_all([d for d in docs if d["kind"] != "Namespace"])
    return cp.kubectl("apply", "--dry-run=server", "--validate=strict", "-o", "json", "-f", "-", input=text, check=False)


def test_the_reference_cluster_passes_kuberays_own_schema(control_plane: Any, rayclusters_crd: Path) -> None:
    crd = yaml.safe_load(rayclusters_crd.read_text())
    assert crd["metadata"]["name"] == "rayclusters.ray.io"
    proc = dry_run(control_plane, documents())
    assert proc.returncode == 0, proc.stderr
    accepted = json.loads(proc.stdout)
    kinds = sorted(i["kind"] for i in accepted.get("items", [accepted]))
    assert kinds == ["ConfigMap", "RayCluster"]
    assert "unknown field" not in proc.stderr


def test_what_the_reference_cluster_promises(control_plane: Any, rayclusters_crd: Path) -> None:
    """The requirements of docs/deploy.md, read from the manifest as KubeRay will."""
    cluster = next(d for d in documents() if d["kind"] == "RayCluster")
    spec = cluster["spec"]
    assert "gcsFaultToleranceOptions" not in spec  # stateless head
    head = spec["headGroupSpec"]["rayStartParams"]
    assert head["num-cpus"] == "0" and head["num-gpus"] == "0" and "resources" not in head and head["dashboard-host"] == "0.0.0.0"
    (gpu,) = spec["workerGroupSpecs"]
    container = gpu["template"]["spec"]["containers"][0]
    assert json.loads(json.loads(gpu["rayStartParams"]["resources"])) == {"worker_node": 8}
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert "/private" in mounts and mounts["/etc/profile.d/argus-path.sh"]["subPath"] == "argus-path.sh"
    assert {"name": "HF_HOME", "value": "/private/hf"} in container["env"]


def test_a_misspelt_field_is_refused(control_plane: Any, rayclusters_crd: Path) -> None:
    """The dry run is a real check: the same manifest with one field KubeRay does not have fails."""
    docs = documents()
    cluster = next(d for d in docs if d["kind"] == "RayCluster")
    cluster["spec"]["workerGroupSpecs"][0]["replica"] = 2  # not 'replicas'
    proc = control_plane.kubectl("apply", "--dry-run=server", "--validate=strict", "-f", "-",
                                 input=yaml.safe_dump_all([d for d in docs if d["kind"] != "Namespace"]), check=False)
    assert proc.returncode != 0 and 'unknown field "spec.workerGroupSpecs[0].replica"' in proc.stderr, proc.stderr
