"""Thin adapters to the outside: ``kube`` (the Kubernetes API: credentials, status and
finalizer writes, Events, namespace reads) and ``ray`` (Ray's Jobs API and node list).
The controller and the CLI both use them; they decide nothing."""
