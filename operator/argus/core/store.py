"""What a failed call to the Kubernetes API server is, as the core names it: ``StoreError``,
the API server's refusal (its HTTP status and reason, and its own one-line message, which
names the verb, the resource and the identity RBAC judged).

The adapters that call the kubernetes client (``adapters.kube``, ``adapters.secrets``) raise
it in place of the client's ``ApiException``, as ``adapters.ray`` maps Ray's errors onto
``core.rayjobs``; the controller's store protocols (``controller.ports``) and the controller
modules import it from here, so that the control loop never imports the kubernetes client.
A call that never reached the API server (the client's transport errors) is not translated:
the controller catches those as any exception, and ``store_message`` words them as before."""

from __future__ import annotations

NOT_FOUND = 404
FORBIDDEN = 403
CONFLICT = 409
INVALID = 422  # e.g. a JSON patch whose "test" failed: the object changed meanwhile


class StoreError(Exception):
    """The API server answered a call with an error status. ``message``: the API server's own
    line from its Status body, else "<status> <reason>" (the form kubectl falls back to)."""

    def __init__(self, status: int | None, reason: str, message: str | None = None) -> None:
        self.status = status
        self.reason = reason
        self.message = message if message is not None else f"{'?' if status is None else status} {reason}"
        super().__init__(self.message)

    @property
    def not_found(self) -> bool:
        return self.status == NOT_FOUND

    @property
    def forbidden(self) -> bool:
        return self.status == FORBIDDEN

    @property
    def changed_meanwhile(self) -> bool:
        """A write refused because the object is no longer as last seen (409, or 422 when a
        JSON patch's test failed): read it again and retry."""
        return self.status in (CONFLICT, INVALID)


def store_message(exc: BaseException) -> str:
    """One line for whatever a store call raised: the API server's message for a StoreError;
    otherwise (the server was not reached) its status and reason as far as it has them."""
    if isinstance(exc, StoreError):
        return exc.message
    return f"{getattr(exc, 'status', '?')} {getattr(exc, 'reason', exc)}"
