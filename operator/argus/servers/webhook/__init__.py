"""The validating admission webhook (docs/webhook.md): ``server`` (the check, on the same
``core.plan.validate_task`` the controller uses), ``context`` (what it reads of the operator,
handed in by the host), ``settings`` (its flags), ``tls`` (a self-made serving certificate
when neither cert-manager nor a Secret provides one)."""
