"""The two HTTPS servers the operator runs beside its control loop, each on its own port:
``webhook`` (the validating admission webhook: a bad ArgusTask fails at ``kubectl apply``)
and ``logapi`` (the aggregated API ``logs.argus.io``: a task's log through the Kubernetes
API server, with the caller's identity). Neither knows the other (import-linter)."""
