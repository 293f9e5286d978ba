"""The operator: thin adapters around the pure core.

``handlers`` (kopf) react to ArgusTask and Namespace events; ``reconciler`` runs the
queue and keeps Ray's view in ``.status``; ``ray_adapter`` turns the Ray Jobs API's
errors into domain outcomes; ``kube`` patches status and posts events.
"""
