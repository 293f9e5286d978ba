"""Argus: run verl training tasks, declared as ArgusTask objects in Kubernetes, on a shared Ray cluster.

Packages:
- ``argus.core``: the pure logic (spec models, macro expansion, path policy, resolved
  submission plan, queue admission, Ray-state mapping). No I/O, no kopf/kubernetes/ray imports.
- ``argus.controller``: the kopf operator and its Ray/Kubernetes adapters.
- ``argus.cli``: the ``argus`` / ``kubectl argus`` command line.
- ``argus.testbed``: a real local kube-apiserver + etcd and Ray cluster for tests and the demo.
"""

__version__ = "0.1.0"
