"""The validating admission webhook: a bad ArgusTask fails at ``kubectl apply`` time.

Served from the operator process by kopf (``--webhook``; docs/webhook.md):

- ``validate_argustask`` (handler id ``validate-argustask``, which is also the URL path):
  CREATE runs ``validate_task`` for the user of the namespace label ``argus.io/user``,
  exactly as the controller does for a new task; errors deny the request with every
  problem listed, weak-check warnings become admission warnings (kubectl prints
  ``Warning: ...``), and so does each file the task reads that is not in the shared tree
  (where the operator mounts it): the task will wait for it (``InputMissing``), not be refused. UPDATE refuses any spec change but the mutable fields (``spec.cancel`` false -> true,
  ``spec.suspend``, ``spec.ttlSecondsAfterFinished``) in the CRD's CEL wording, and re-validates nothing (metadata, finalizers, cancel).
  No side effects, so ``kubectl apply --dry-run=server`` gets the same answer.
- ``ArgusWebhookServer``: kopf's HTTPS server, with its self-signed certificate made by
  ``tls`` (``cryptography``) instead of kopf's oscrypto-based helper, or certificate files
  (a mounted Secret, e.g. from cert-manager) re-read every ``--webhook-cert-reload``
  seconds. It reports the client config the API server must use: the ``--webhook-url``, or
  the ``--webhook-service`` (kopf itself only emits URLs).
- ``manage_configuration``: keeps the ValidatingWebhookConfiguration in line with the
  server (caBundle after a certificate renewal) and the flags: failure policy, timeout,
  ``sideEffects: None``, and a namespaceSelector for the namespaces this operator watches.
  kopf's own managed mode cannot set the last two, rewrites the whole list, and removes
  the webhook when the operator stops (then the failure policy would never apply), so the
  operator writes the object itself and leaves it in place on exit.

The handlers read the operator only through the ``WebhookContext`` the host puts in kopf's
memo (``context``: the clock, the review histogram, the platform and the composer, the
namespace's user and the input warnings).

The controller's own validation of new tasks stays the backstop: a task admitted while the webhook
was unreachable (failure policy Ignore) is still Rejected and never reaches Ray.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import AsyncIterator, Collection, Mapping
from typing import Any

import kopf
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ...core.clock import Clock
from ...core.plan import validate_task
from ...core.problems import cap_lines
from ...core.rules import change_problems
from ...core.spec import GROUP, PLURAL, VERSION
from ...core.store import StoreError
from ...core.vocabulary import task_log
from . import tls
from .context import WebhookContext, WebhookMemo
from .settings import WebhookSettings

log = logging.getLogger(__name__)

WEBHOOK_ID = "validate-argustask"          # DNS-safe: it is the URL path and part of the webhook's name
WEBHOOK_NAME = f"{WEBHOOK_ID}.argus.io"    # .webhooks[].name: kubectl says 'admission webhook "<this>" denied the request'
MANAGED_BY = "argus-operator"
RESYNC_SECONDS = 300.0                     # re-assert the configuration now and then (someone may edit or delete it)
INVALID = 422                              # as the API server answers for a schema or CEL violation
FORBIDDEN = 403                            # the namespace may not run tasks at all
MATCH_CONDITION = "request.operation == 'CREATE' || object.spec != oldObject.spec"


def register(registry: kopf.OperatorRegistry, settings: WebhookSettings) -> None:
    """Register the webhook's handlers on the operator's kopf registry (``--webhook``)."""
    logging.getLogger("kopf.objects").addFilter(_quiet_outcomes)
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)  # one line per admission request: -v only
    kopf.on.startup(id="start-webhook", registry=registry)(start_webhook)
    kopf.on.cleanup(id="stop-webhook", registry=registry)(stop_webhook)
    kopf.on.validate(
        GROUP, VERSION, PLURAL, id=WEBHOOK_ID, operations=["CREATE", "UPDATE"], registry=registry,
        persistent=True, side_effects=False, ignore_failures=settings.failure_policy == "Ignore",
    )(validate_argustask)


# --------------------------------------------------------------------------- the handler

async def validate_argustask(*, body: kopf.Body, namespace: str | None, name: str | None, dryrun: bool, warnings: list[str],
                             memo: WebhookMemo, operation: str | None = None, old: kopf.Body | None = None,
                             new: kopf.Body | None = None, **_: Any) -> None:
    context = memo.webhook
    started = context.clock.monotonic()
    result = "allowed"
    try:
        await _review(operation, body, old, new, namespace, name, dryrun, warnings, context)
    except kopf.AdmissionError as exc:
        result = "error" if (exc.code or 0) >= 500 else "denied"
        raise
    except BaseException:
        result = "error"
        raise
    finally:
        context.reviews.labels(operation or "", result).observe(context.clock.monotonic() - started)


async def _review(operation: str | None, body: kopf.Body, old: kopf.Body | None, new: kopf.Body | None,
                  namespace: str | None, name: str | None, dryrun: bool, warnings: list[str], context: WebhookContext) -> None:
    what = f"{operation} {namespace}/{name}{' (dry run)' if dryrun else ''}"
    if operation == "UPDATE":
        problems = change_problems(old.get("spec") if old is not None else None, new.get("spec") if new is not None else None)
        if problems:
            log.info("denied %s: %s", what, problems[0], extra=task_log(namespace or "", name or ""))
            raise kopf.AdmissionError("\n".join(problems), code=INVALID)
        return  # metadata/finalizers, or cancel: nothing to re-validate
    try:
        user, _reason, message = await context.user_of_namespace(namespace or "")
    except StoreError as exc:
        raise kopf.AdmissionError(f"cannot read namespace {namespace} to find its user: {exc.message}", code=500) from exc
    if user is None:
        log.info("denied %s: %s", what, message, extra=task_log(namespace or "", name or ""))
        raise kopf.AdmissionError(message, code=FORBIDDEN)
    composer = context.composer_for(body) if context.composer_for is not None else context.composer
    verdict = validate_task(body, user, context.platform, composer)
    if not verdict.valid:
        lines = verdict.error_lines()
        log.info("denied %s for user %s: %d problem(s), first: %s", what, user, len(lines), lines[0], extra=task_log(namespace or "", name or ""))
        raise kopf.AdmissionError("\n".join(cap_lines(lines)), code=INVALID)
    warnings.extend(verdict.warning_lines())
    # A file the task reads that is not in the shared tree yet is a warning, not a denial:
    # under GitOps the data may be uploaded after the task is applied; the task waits for it.
    warnings.extend(await context.input_warnings(verdict.inputs))


def _quiet_outcomes(record: logging.LogRecord) -> bool:
    """kopf logs every admission outcome (a refusal at ERROR): a user's bad task is not an
    operator error, and our own INFO line says what was denied and why."""
    msg = str(record.msg)
    return not (msg.startswith(f"Webhook {WEBHOOK_ID!r} succeeded") or msg.startswith(f"Webhook {WEBHOOK_ID!r} failed permanently"))


# --------------------------------------------------------------------------- the server

class ArgusWebhookServer(kopf.WebhookServer):
    """kopf's HTTPS webhook server with a ``cryptography``-made certificate, reporting the
    client config of the URL or Service the API server must call."""

    def __init__(self, settings: WebhookSettings, clock: Clock) -> None:
        super().__init__(
            addr=settings.listen_host or None, port=settings.port, path=settings.path or None,
            certfile=settings.cert_file, pkeyfile=settings.key_file, cafile=settings.ca_file,
            extra_sans=settings.hostnames(), file_check_interval=settings.cert_reload_seconds,
        )
        self.settings = settings
        self.clock = clock
        self.client_config: dict[str, Any] | None = None
        self.changed = asyncio.Event()
        self.listening = False  # readiness (/readyz): kopf yields the client config once the site listens

    def build_certificate(self, hostnames: Collection[str], password: str | None = None) -> tuple[bytes, bytes]:  # type: ignore[override]
        # kopf's is a staticmethod; this one stamps the certificate with the operator's clock.
        return tls.self_signed_certificate(hostnames, password, now=self.clock.now())

    async def __call__(self, fn: Any) -> AsyncIterator[Any]:
        served = False
        while True:
            try:
                async for kopf_config in super().__call__(fn):
                    served = True
                    config = client_config(self.settings, kopf_config.get("caBundle"))
                    if self.settings.manage_config:
                        log.info("admission webhook serving on %s:%s; the API server calls %s", self.settings.listen_host, self.settings.port,
                                 config.get("url") or "service {namespace}/{name}:{port}".format(**config["service"]))
                    else:
                        log.info("admission webhook serving on %s:%s (its configuration is managed elsewhere, e.g. by the Helm chart)",
                                 self.settings.listen_host, self.settings.port)
                    self.client_config = config
                    self.listening = True
                    self.changed.set()
                    yield config
            except (ssl.SSLError, OSError, ValueError) as exc:
                # A renewal caught half-written (a new certificate with the old key): try again
                # shortly rather than take the operator down. At the first start, fail loudly.
                if not served:
                    raise
                log.warning("cannot load the renewed webhook certificate (%s); retrying in 2 s", exc)
                await asyncio.sleep(2)


def client_config(settings: WebhookSettings, ca_bundle: str | None) -> dict[str, Any]:
    """The base client config (kopf-style: the handler id is appended to the URL/path)."""
    config: dict[str, Any]
    if settings.service:
        config = {"service": {"name": settings.service, "namespace": settings.service_namespace, "port": settings.service_port}}
        if settings.path:
            config["service"]["path"] = settings.path
    else:
        url = settings.url or f"https://{settings.hostnames()[0]}:{settings.port}"
        config = {"url": url}
    if ca_bundle:
        config["caBundle"] = ca_bundle
    return config


def _with_handler_path(config: Mapping[str, Any], handler_id: str) -> dict[str, Any]:
    out = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in config.items()}
    if "url" in out:
        out["url"] = f"{str(out['url']).rstrip('/')}/{handler_id}"
    if "service" in out:
        out["service"]["path"] = f"{out['service'].get('path', '').rstrip('/')}/{handler_id}"
    return out


# --------------------------------------------------------------------------- the configuration

def build_configuration(settings: WebhookSettings, config: Mapping[str, Any], namespaces: Collection[str]) -> dict[str, Any]:
    """The ValidatingWebhookConfiguration. Only the namespaces this operator watches (all
    when it watches all): a namespace outside them belongs to another operator, or none."""
    selector: dict[str, Any] = (
        {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(namespaces)}]}
        if namespaces else {}
    )
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": settings.config_name, "labels": {"app.kubernetes.io/managed-by": MANAGED_BY}},
        "webhooks": [{
            "name": WEBHOOK_NAME,
            "clientConfig": _with_handler_path(config, WEBHOOK_ID),
            "rules": [{"apiGroups": [GROUP], "apiVersions": [VERSION], "resources": [PLURAL],
                       "operations": ["CREATE", "UPDATE"], "scope": "Namespaced"}],
            "namespaceSelector": selector,
            "failurePolicy": settings.failure_policy,
            "sideEffects": "None",
            "timeoutSeconds": settings.timeout_seconds,
            "admissionReviewVersions": ["v1"],
            "matchPolicy": "Equivalent",
            # Updates that leave the spec alone (finalizers, labels, kopf's annotations) never
            # reach the webhook: no latency, and no refusal while it is down (failurePolicy Fail).
            "matchConditions": [{"name": "create-or-spec-change", "expression": MATCH_CONDITION}],
        }],
    }


def _covers(actual: Any, desired: Any) -> bool:
    """Whether ``actual`` already holds everything in ``desired`` (the server adds defaults)."""
    if isinstance(desired, Mapping):
        if not desired and not actual:
            return True  # {} and absent select the same
        return isinstance(actual, Mapping) and all(_covers(actual.get(k), v) for k, v in desired.items())
    if isinstance(desired, list):
        return isinstance(actual, list) and len(actual) == len(desired) and all(map(_covers, actual, desired))
    return bool(actual == desired)


def apply_configuration(api: client.AdmissionregistrationV1Api, body: dict[str, Any]) -> str:
    """Create the configuration, or replace it when it differs. Returns what was done."""
    name = body["metadata"]["name"]
    for _ in range(5):
        try:
            current = api.read_validating_webhook_configuration(name)
        except ApiException as exc:
            if exc.status != 404:
                raise
            try:
                api.create_validating_webhook_configuration(body)  # type: ignore[arg-type]  # the client sends a plain dict as it is
                return "created"
            except ApiException as exc2:
                if exc2.status == 409:
                    continue
                raise
        existing = api.api_client.sanitize_for_serialization(current)
        if _covers(existing.get("webhooks"), body["webhooks"]) and _covers(existing.get("metadata"), body["metadata"]):
            return "unchanged"
        replacement = {**body, "metadata": {**existing["metadata"], **body["metadata"],
                                            "labels": {**(existing["metadata"].get("labels") or {}), **body["metadata"]["labels"]}}}
        try:
            api.replace_validating_webhook_configuration(name, replacement)  # type: ignore[arg-type]  # a plain dict, as above
            return "updated"
        except ApiException as exc:
            if exc.status != 409:
                raise
    raise RuntimeError(f"ValidatingWebhookConfiguration {name}: conflicting writers; will retry")


async def manage_configuration(server: ArgusWebhookServer, settings: WebhookSettings, namespaces: Collection[str]) -> None:
    """Write the configuration whenever the server reports a (new) client config, and
    re-assert it every few minutes. It is left in place when the operator stops."""
    api = client.AdmissionregistrationV1Api()
    while True:
        try:
            await asyncio.wait_for(server.changed.wait(), timeout=RESYNC_SECONDS)
        except TimeoutError:
            pass
        server.changed.clear()
        if server.client_config is None:
            continue
        body = build_configuration(settings, server.client_config, namespaces)
        try:
            outcome = await asyncio.to_thread(apply_configuration, api, body)
        except Exception as exc:  # noqa: BLE001 - API errors, network errors: retry soon
            log.warning("could not write ValidatingWebhookConfiguration %s (retrying in 5 s): %s", settings.config_name, exc)
            await asyncio.sleep(5)
            server.changed.set()
            continue
        if outcome != "unchanged":
            log.info("ValidatingWebhookConfiguration %s %s (failurePolicy %s)", settings.config_name, outcome, settings.failure_policy)


# --------------------------------------------------------------------------- startup / cleanup

async def start_webhook(settings: kopf.OperatorSettings, memo: WebhookMemo, **_: Any) -> None:
    context = memo.webhook
    webhook = context.settings
    if context.replicated and not webhook.cert_file:
        log.warning("several replicas with self-made webhook certificates: each writes its own caBundle and the API "
                    "server trusts only one of them; give all replicas one certificate (--webhook-cert-file, e.g. from cert-manager)")
    server = ArgusWebhookServer(webhook, context.clock)
    context.server = server
    settings.admission.server = server
    settings.admission.managed = None  # see the module docstring: the operator writes it itself
    if webhook.manage_config:
        context.configuration_manager = asyncio.create_task(
            manage_configuration(server, webhook, context.namespaces), name="argus webhook configuration")


async def stop_webhook(memo: WebhookMemo, **_: Any) -> None:
    manager = memo.webhook.configuration_manager
    if manager:
        manager.cancel()
