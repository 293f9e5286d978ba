"""Real processes for integration tests: a Kubernetes control plane (etcd + kube-apiserver,
as envtest runs them) and a two-node Ray cluster, all on this machine's loopback.

    from argus_testbed import ControlPlane, RayCluster

The pytest fixtures that start them once per test session are in tests/conftest.py.
"""

from .controlplane import (
    ControlPlane,
    ExternalCluster,
    KubeCluster,
    KubectlError,
    NotSupportedHere,
    find_binaries,
    find_kubectl,
)
from .raycluster import RayCluster

__all__ = [
    "ControlPlane",
    "ExternalCluster",
    "KubeCluster",
    "KubectlError",
    "NotSupportedHere",
    "RayCluster",
    "find_binaries",
    "find_kubectl",
]
