"""Argus: run verl training tasks, declared as ArgusTask objects in Kubernetes, on a shared Ray cluster.

Packages:
- ``argus.core``: the pure logic, in the order a task meets it: spec models and rules,
  macro expansion, command checks and path policy, the resolved submission plan, the
  queue's admission decision, the lifecycle state machine. No I/O, no kopf/kubernetes/ray.
- ``argus.adapters``: the Kubernetes and Ray clients, used by the operator and the CLI.
- ``argus.controller``: the operator (kopf hosts it): task cache, reconcile loop, status
  writer, admission webhook, leader election, metrics.
- ``argus.cli`` / ``argus.clusterctl``, ``argus.logsctl``, ``argus.onboardctl``: the ``argus`` /
  ``kubectl argus`` command line;
  ``argus.platform``: the platform flags both share with the operator.
"""

__version__ = "0.1.0"
