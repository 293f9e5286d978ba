"""The aggregated log API ``logs.argus.io/v1alpha1`` (docs/logs.md): ``server`` (the
endpoints, the caller's access checked against the Kubernetes API) and ``settings`` (its
flags)."""
