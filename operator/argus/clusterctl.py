"""Cluster commands of the ``argus`` CLI: ``logs``, ``onboard``, ``queue`` and ``doctor``. The first three talk to the
Kubernetes API (kubeconfig as kubectl uses it, ``adapters.kube``). ``logs`` reads the task's
log through the aggregated API logs.argus.io (the operator serves it; docs/logs.md), never
from the Ray dashboard, unless an admin asks for that with ``--direct-ray``. ``doctor`` talks to the Ray
dashboard (a probe job per worker node, ``controller.doctor``)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

import yaml

from .core.logquery import AttemptLog, LogQuery, LogQueryError, attempt_log, forgotten_by_ray, removed_from_history, tail_text, where_the_file_is
from .core.vocabulary import is_active, spec_gpus

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class ClusterError(Exception):
    """A clear, one-line failure (no such task, not submitted yet...)."""


def _load_kube(kubeconfig: str | None, context: str | None) -> Any:
    from kubernetes import client

    from .adapters.kube import KubeConfigError, load_kube_config
    try:
        load_kube_config(kubeconfig, context)
    except KubeConfigError as exc:
        raise ClusterError(str(exc)) from None
    return client


def _current_namespace(kubeconfig: str | None, context: str | None) -> str:
    from kubernetes import config
    try:
        _, active = config.list_kube_config_contexts(config_file=kubeconfig)
        if context:
            return "default"
        return (active or {}).get("context", {}).get("namespace") or "default"
    except Exception:  # noqa: BLE001
        return "default"


def get_task(name: str, namespace: str, kubeconfig: str | None, context: str | None) -> dict[str, Any]:
    client = _load_kube(kubeconfig, context)
    from kubernetes.client.exceptions import ApiException

    from .core.spec import GROUP, PLURAL, VERSION
    try:
        return client.CustomObjectsApi().get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    except ApiException as exc:
        if exc.status == 404:
            raise ClusterError(f"no ArgusTask {name!r} in namespace {namespace!r}") from None
        if exc.status == 403:
            raise ClusterError(f"not allowed to read ArgusTask {name!r} in namespace {namespace!r}") from None
        raise ClusterError(f"cannot read ArgusTask {namespace}/{name}: {exc.reason}") from None


def _attempt_of(status: dict[str, Any], wanted: int | None) -> AttemptLog:
    """The log location of ``--attempt`` (default: the current one), as the log API finds it."""
    try:
        if wanted is not None and wanted < 0:
            raise LogQueryError(wanted)
        return attempt_log(status, wanted)
    except LogQueryError:
        raise ClusterError(f"--attempt {wanted}: the task has had {int(status.get('attempt') or 1)} attempt(s)") from None


def _from_file(where: AttemptLog, why: str, tail: int | None) -> None:
    """The log from the job folder, when this machine sees the shared tree; else where it is."""
    try:
        if where.job_path is None:
            raise OSError
        text = open(where.job_path, encoding="utf-8", errors="replace").read()
    except OSError:
        raise ClusterError(where_the_file_is(why, where)) from None
    print(f"argus logs: {why}; reading {where.user_path}", file=sys.stderr)
    _print_tail(text, tail)


def cmd_logs(args: argparse.Namespace) -> int:
    if args.ray_token_file:
        from .adapters.ray import RayTokenError, read_token_file
        try:
            read_token_file(args.ray_token_file)
        except RayTokenError as exc:
            print(f"argus logs: --ray-token-file: {exc}", file=sys.stderr)
            return EXIT_USAGE
    namespace = args.namespace or _current_namespace(args.kubeconfig, args.context)
    if args.direct_ray is None and not args.ray_address:
        return _logs_via_api(args, namespace)
    if args.direct_ray:
        args.ray_address = args.direct_ray
    try:
        task = get_task(args.task, namespace, args.kubeconfig, args.context)
        status = task.get("status") or {}
        where = _attempt_of(status, args.attempt)
        sid = where.submission_id
        address = args.ray_address or (status.get("rayJob") or {}).get("dashboardUrl")
        if not sid:
            phase = status.get("phase") or "new"
            why = f": {status.get('message')}" if phase == "Rejected" else ""
            raise ClusterError(f"ArgusTask {namespace}/{args.task} has not been submitted to Ray yet (phase {phase}){why}")
        if status.get("rayJobsRemoved"):
            _from_file(where, removed_from_history(sid), args.tail)
            return EXIT_OK
        if not address:
            raise ClusterError("the task's status names no Ray dashboard; pass --ray-address")
        from .adapters.clock import SystemClock
        from .adapters.ray import RayJobsClient
        from .core.rayjobs import RayAuthFailed, RayJobUnknown, RayRefused, RayUnreachable
        logging.getLogger("argus.adapters.ray").addHandler(logging.NullHandler())  # the failure is said below, once
        ray = RayJobsClient(address, monotonic=SystemClock().monotonic, threads=2, token_file=args.ray_token_file or None)
        try:
            if args.follow:
                asyncio.run(_follow(ray, sid, args.tail))
            else:
                _print_tail(asyncio.run(ray.logs(sid)), args.tail)
        except RayJobUnknown:
            _from_file(where, forgotten_by_ray(sid), args.tail)
        except RayAuthFailed as exc:
            if exc.status == 401:
                hint = "none was sent: pass --ray-token-file FILE (or set ARGUS_RAY_TOKEN_FILE)"
            elif args.ray_token_file:
                hint = f"it did not accept the token in {args.ray_token_file}: check that it is the cluster's token"
            else:
                hint = "it did not accept the token sent: check the cluster's token"
            also = f"; the log is also in the job folder: {where.user_path}" if where.job_path else ""
            raise ClusterError(f"the Ray dashboard at {address} requires a token ({str(exc).split(':')[0]}); {hint}{also}") from None
        except RayUnreachable as exc:
            raise ClusterError(f"cannot reach the Ray dashboard at {address}: {exc}") from None
        except RayRefused as exc:
            raise ClusterError(f"the Ray dashboard at {address} refused: {exc}") from None
    except ClusterError as exc:
        print(f"{getattr(args, 'prog', 'argus')} logs: {exc}", file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK


LOG_API = "/apis/logs.argus.io/v1alpha1"


def _api_message(status: int, body: bytes) -> str:
    """One line for a refused log request: the server's own message (a metav1.Status)."""
    import json
    try:
        doc = json.loads(body)
        message = str(doc.get("message") or "")
    except (ValueError, AttributeError):
        message = body.decode(errors="replace").strip().splitlines()[0] if body.strip() else ""
    if status == 404 and (not message or message == "the server could not find the requested resource"):
        return ("this cluster does not serve the log API logs.argus.io/v1alpha1 (the Argus chart's logsApi.enabled), "
                "or no such task; an admin may use --direct-ray")
    if status == 503 and "logs.argus.io" not in message:
        message = f"the log API logs.argus.io is unavailable (the Argus operator's log server does not answer): {message}"
    return message or f"HTTP {status}"


def _logs_via_api(args: argparse.Namespace, namespace: str) -> int:
    """GET .../namespaces/NS/argustasks/NAME/log through the API server, with the caller's
    kubeconfig (any authentication kubectl supports); the body is streamed as it comes."""
    import codecs
    import urllib.parse

    prog = getattr(args, "prog", "argus")
    try:
        client = _load_kube(args.kubeconfig, args.context)
    except ClusterError as exc:
        print(f"{prog} logs: {exc}", file=sys.stderr)
        return EXIT_FAIL
    query = LogQuery(follow=args.follow, tail_lines=args.tail, attempt=args.attempt, since_seconds=args.since)
    path = f"{LOG_API}/namespaces/{urllib.parse.quote(namespace)}/argustasks/{urllib.parse.quote(args.task)}/log"
    api = client.ApiClient()
    method, url, headers, _, _ = api.param_serialize(
        "GET", path, query_params=list(query.params().items()),
        header_params={"Accept": "text/plain, application/json"}, auth_settings=["BearerToken"])
    try:
        resp = api.call_api(method, url, header_params=headers, _request_timeout=None if args.follow else 120)
    except Exception as exc:  # noqa: BLE001 - urllib3's connection errors, said in one line
        print(f"{prog} logs: cannot reach the Kubernetes API server: {exc}", file=sys.stderr)
        return EXIT_FAIL
    raw = resp.response
    try:
        if resp.status >= 400:
            print(f"{prog} logs: {_api_message(resp.status, raw.data)}", file=sys.stderr)
            return EXIT_FAIL
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        read = getattr(raw, "read1", None) or raw.read
        while True:
            data = read(65536)
            if not data:
                break
            sys.stdout.write(decoder.decode(data))
            sys.stdout.flush()
        sys.stdout.write(decoder.decode(b"", final=True))
        sys.stdout.flush()
    except KeyboardInterrupt:
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - a broken stream, said in one line
        print(f"{prog} logs: the log stream broke: {exc}", file=sys.stderr)
        return EXIT_FAIL
    finally:
        raw.release_conn()
    return EXIT_OK


def _print_tail(text: str, tail: int | None) -> None:
    sys.stdout.write(tail_text(text, tail if tail is not None and tail >= 0 else None))
    sys.stdout.flush()


async def _follow(ray: Any, sid: str, tail: int | None) -> None:
    if tail is not None:
        # Ray's tail stream starts from the beginning; show only the last lines of that.
        _print_tail(await ray.logs(sid), tail)
        skip = len(await ray.logs(sid))
    else:
        skip = 0
    seen = 0
    async for chunk in ray.tail_logs(sid):
        if seen + len(chunk) <= skip:
            seen += len(chunk)
            continue
        sys.stdout.write(chunk[max(0, skip - seen):])
        sys.stdout.flush()
        seen += len(chunk)


# --------------------------------------------------------------------------- onboard

EDIT_ROLE = "argus-edit"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def onboard_objects(user: str, namespace: str, gpu_quota: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The namespace (labelled with its user, annotated with the user's GPU quota if given)
    and the RoleBinding of ``argus-edit`` to the user."""
    from .core.user import GPU_QUOTA_ANNOTATION, USER_LABEL
    ns: dict[str, Any] = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": {USER_LABEL: user}}}
    if gpu_quota is not None:
        ns["metadata"]["annotations"] = {GPU_QUOTA_ANNOTATION: str(gpu_quota)}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": f"{EDIT_ROLE}-{user}", "namespace": namespace, "labels": {USER_LABEL: user}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": EDIT_ROLE},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    return ns, binding


def _onboard_namespace(core: Any, want: dict[str, Any], user: str) -> str:
    from kubernetes.client.exceptions import ApiException

    from .core.user import USER_LABEL
    name = want["metadata"]["name"]
    try:
        current = core.read_namespace(name)
    except ApiException as exc:
        if exc.status != 404:
            raise
        core.create_namespace(want)
        return f"namespace/{name} created ({USER_LABEL}={user})"
    label = (current.metadata.labels or {}).get(USER_LABEL)
    annotations = want["metadata"].get("annotations") or {}
    stale = {k: v for k, v in annotations.items() if (current.metadata.annotations or {}).get(k) != v}
    if label == user:
        if not stale:
            return f"namespace/{name} unchanged"
        core.patch_namespace(name, {"metadata": {"annotations": stale}})
        return f"namespace/{name} annotated " + ", ".join(f"{k}={v}" for k, v in stale.items())
    if label:
        raise ClusterError(f"namespace {name} is already onboarded for user {label!r} ({USER_LABEL}={label}); "
                           f"not handing it to {user!r}: pick another --namespace")
    if current.status and current.status.phase == "Terminating":
        raise ClusterError(f"namespace {name} is being deleted")
    core.patch_namespace(name, {"metadata": {"labels": {USER_LABEL: user}, **({"annotations": stale} if stale else {})}})
    return f"namespace/{name} labelled {USER_LABEL}={user}"


def _onboard_binding(rbac: Any, want: dict[str, Any]) -> str:
    from kubernetes.client.exceptions import ApiException
    name, namespace = want["metadata"]["name"], want["metadata"]["namespace"]
    try:
        current = rbac.read_namespaced_role_binding(name, namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise
        rbac.create_namespaced_role_binding(namespace, want)
        return f"rolebinding/{name} created in {namespace} (ClusterRole {EDIT_ROLE} for User {want['subjects'][0]['name']})"
    subjects = [{"apiGroup": s.api_group, "kind": s.kind, "name": s.name} for s in current.subjects or []]
    ref = current.role_ref
    if (ref.api_group, ref.kind, ref.name) == ("rbac.authorization.k8s.io", "ClusterRole", EDIT_ROLE):
        if subjects == want["subjects"]:
            return f"rolebinding/{name} unchanged"
        rbac.patch_namespaced_role_binding(name, namespace, {"subjects": want["subjects"]})
        return f"rolebinding/{name} updated in {namespace}"
    # roleRef is immutable: replace the binding.
    rbac.delete_namespaced_role_binding(name, namespace)
    rbac.create_namespaced_role_binding(namespace, want)
    return f"rolebinding/{name} replaced in {namespace} (it referred to {ref.kind} {ref.name})"


def cmd_onboard(args: argparse.Namespace) -> int:
    from .core.user import InvalidUserId, check_user_id
    try:
        user = check_user_id(args.user)
    except InvalidUserId as exc:
        print(f"{getattr(args, 'prog', 'argus')} onboard: {exc}", file=sys.stderr)
        return EXIT_USAGE
    namespace = args.namespace or user
    if not _DNS_LABEL.fullmatch(namespace):
        hint = "" if args.namespace else " (the default is the user id): pass --namespace"
        print(f"{getattr(args, 'prog', 'argus')} onboard: namespace {namespace!r} is not a valid namespace name{hint}", file=sys.stderr)
        return EXIT_USAGE
    if args.gpu_quota is not None and args.gpu_quota < 0:
        print(f"argus onboard: --gpu-quota {args.gpu_quota}: must be 0 or more GPUs", file=sys.stderr)
        return EXIT_USAGE
    ns, binding = onboard_objects(user, namespace, args.gpu_quota)
    if args.dry_run:
        yaml.safe_dump_all([ns, binding], sys.stdout, sort_keys=False)
        return EXIT_OK
    try:
        client = _load_kube(args.kubeconfig, args.context)
        from kubernetes.client.exceptions import ApiException

        from .adapters.kube import api_error
        try:
            lines = [_onboard_namespace(client.CoreV1Api(), ns, user), _onboard_binding(client.RbacAuthorizationV1Api(), binding)]
        except ApiException as exc:
            if exc.status == 403:
                raise ClusterError(f"not allowed: {api_error(exc)} (onboarding needs rights to create namespaces and RoleBindings)") from None
            raise ClusterError(f"the API server refused: {api_error(exc)}") from None
        lines += _edit_role_warning(client)
    except ClusterError as exc:
        print(f"{getattr(args, 'prog', 'argus')} onboard: {exc}", file=sys.stderr)
        return EXIT_FAIL
    for line in lines:
        print(line)
    changed = any(not line.endswith("unchanged") for line in lines if not line.startswith("warning:"))
    print(f"{user} is onboarded in namespace {namespace}" + ("" if changed else ": nothing changed"))
    return EXIT_OK


def _edit_role_warning(client: Any) -> list[str]:
    """The binding grants nothing until the chart's argus-edit ClusterRole exists."""
    from kubernetes.client.exceptions import ApiException
    try:
        client.RbacAuthorizationV1Api().read_cluster_role(EDIT_ROLE)
    except ApiException as exc:
        if exc.status == 404:
            return [f"warning: ClusterRole {EDIT_ROLE} does not exist yet (it comes with the Helm chart); the binding grants nothing until it does"]
    return []


# --------------------------------------------------------------------------- queue

def _age(created: str | None, now: Any) -> str:
    from .core.times import parse_time
    t = parse_time(created)
    if t is None:
        return "?"
    seconds = int((now - t).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def queue_rows(tasks: list[dict[str, Any]], quotas: dict[str, int | None] | None,
               places: dict[tuple[str, str], int] | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The waiting tasks in queue order, and per user: GPUs in use, quota, tasks queued.
    ``places``: each waiting task's place, from the operator's queue view (None: not served)."""
    waiting: list[dict[str, Any]] = []
    users: dict[str, dict[str, Any]] = {}
    for t in tasks:
        status, meta = t.get("status") or {}, t.get("metadata") or {}
        user = status.get("user") or "?"
        row = users.setdefault(user, {"user": user, "gpusInUse": 0, "queued": 0,
                                      "quota": (quotas or {}).get(user) if quotas is not None else "?"})
        if is_active(status.get("phase")):
            row["gpusInUse"] += spec_gpus(t.get("spec") or {})
        elif status.get("phase") == "Queued":
            row["queued"] += 1
            key = (meta.get("namespace") or "", meta.get("name") or "")
            waiting.append({"position": (places or {}).get(key), "user": user, "namespace": meta.get("namespace"),
                            "name": meta.get("name"), "gpus": spec_gpus(t.get("spec") or {}), "priority": (t.get("spec") or {}).get("priority", 0),
                            "waitingSince": meta.get("creationTimestamp"), "reason": status.get("reason"), "message": status.get("message")})
    waiting.sort(key=lambda r: (r["position"] is None, r["position"] or 0, r["waitingSince"] or ""))
    return waiting, sorted(users.values(), key=lambda r: r["user"])


def cmd_queue(args: argparse.Namespace) -> int:
    import json

    from .adapters.clock import SystemClock
    from .core.spec import GROUP, PLURAL, VERSION
    from .core.user import GPU_QUOTA_ANNOTATION, USER_LABEL, quota_from_annotation, quotas_by_user
    try:
        client = _load_kube(args.kubeconfig, args.context)
        from kubernetes.client.exceptions import ApiException
        custom = client.CustomObjectsApi()
        scope = args.namespace
        note = ""
        try:
            if scope:
                tasks = custom.list_namespaced_custom_object(GROUP, VERSION, scope, PLURAL)["items"]
            else:
                tasks = custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
        except ApiException as exc:
            if exc.status != 403 or scope:
                raise ClusterError(f"cannot list ArgusTasks{f' in namespace {scope}' if scope else ''}: {exc.reason}") from None
            scope = _current_namespace(args.kubeconfig, args.context)
            note = f"(you may not list ArgusTasks in every namespace: showing namespace {scope} only)"
            tasks = custom.list_namespaced_custom_object(GROUP, VERSION, scope, PLURAL)["items"]
        try:
            found = client.CoreV1Api().list_namespace(label_selector=USER_LABEL).items
            quotas: dict[str, int | None] | None = quotas_by_user({
                n.metadata.name: (n.metadata.labels[USER_LABEL], quota_from_annotation((n.metadata.annotations or {}).get(GPU_QUOTA_ANNOTATION)))
                for n in found})
        except ApiException:
            quotas = None  # namespaces are not the caller's to read: quotas unknown
    except ClusterError as exc:
        print(f"argus queue: {exc}", file=sys.stderr)
        return EXIT_FAIL
    places, places_note = _places(custom, scope)
    waiting, users = queue_rows(tasks, quotas, places)
    if args.output == "json":
        print(json.dumps({"queue": waiting, "users": users}, indent=2))
        return EXIT_OK
    now = SystemClock().now()
    table = [("POSITION", "USER", "NAMESPACE/NAME", "GPUS", "PRIORITY", "WAITING", "REASON")]
    for r in waiting:
        reason = f"{r['reason']}: {r['message']}" if r["message"] else (r["reason"] or "")
        table.append((str(r["position"] or "-"), r["user"], f"{r['namespace']}/{r['name']}", str(r["gpus"]), str(r["priority"]),
                      _age(r["waitingSince"], now), reason[:100]))
    _print_table(table)
    print()
    _print_table([("USER", "GPUS IN USE", "QUOTA", "QUEUED")] +
                 [(u["user"], str(u["gpusInUse"]), "-" if u["quota"] is None else str(u["quota"]), str(u["queued"])) for u in users])
    for line in (note, places_note):
        if line:
            print(line, file=sys.stderr)
    return EXIT_OK


def _places(custom: Any, namespace: str | None) -> tuple[dict[tuple[str, str], int] | None, str]:
    """Each waiting task's place in the whole queue, from the operator's queue view
    (``pendingtasks`` in logs.argus.io: places are served on demand, not kept in the tasks'
    status; docs/queue.md), and a note when it cannot be read."""
    from kubernetes.client.exceptions import ApiException
    group, version, plural = "logs.argus.io", "v1alpha1", "pendingtasks"
    try:
        if namespace:
            found = custom.list_namespaced_custom_object(group, version, namespace, plural)
        else:
            found = custom.list_cluster_custom_object(group, version, plural)
    except ApiException as exc:
        if exc.status == 404:
            return None, ("(places in the queue are served by the operator's API logs.argus.io, which this cluster does not "
                          "serve: install the chart with logsApi.enabled=true; docs/logs.md)")
        return None, f"(cannot read the places in the queue: {exc.status} {exc.reason})"
    return {(i["metadata"]["namespace"], i["metadata"]["name"]): i["position"] for i in found.get("items") or []}, ""


def _print_table(rows: Sequence[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


# --------------------------------------------------------------------------- doctor

def cmd_doctor(args: argparse.Namespace) -> int:
    """Probe every worker node of the Ray cluster (docs/deploy.md, "Ray cluster requirements")."""
    prog = f"{getattr(args, 'prog', 'argus')} doctor"
    from .platform import UsageError, platform_config
    try:
        config = platform_config(args)
    except UsageError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.ray_token_file:
        from .adapters.ray import RayTokenError, read_token_file
        try:
            read_token_file(args.ray_token_file)
        except RayTokenError as exc:
            print(f"{prog}: --ray-token-file: {exc}", file=sys.stderr)
            return EXIT_USAGE
    for flag, value in (("--start-timeout", args.start_timeout), ("--timeout", args.timeout)):
        if value <= 0:
            print(f"{prog}: {flag}: {value:g}: must be positive", file=sys.stderr)
            return EXIT_USAGE
    from .adapters.clock import SystemClock
    from .adapters.ray import RayJobsClient
    from .controller.doctor import Doctor
    from .core.doctor import DoctorSettings
    logging.getLogger("argus.adapters.ray").addHandler(logging.NullHandler())  # a refusal is a row, not a log line
    settings = DoctorSettings(config, expected_verl=args.expect_verl or None,
                              token_configured=bool(args.ray_token_file))
    clock = SystemClock()  # this command's composition root
    ray = RayJobsClient(args.ray_address, monotonic=clock.monotonic, threads=8, token_file=args.ray_token_file or None)
    rows = asyncio.run(Doctor(ray, settings, address=args.ray_address, start_timeout=args.start_timeout, run_timeout=args.timeout,
                              monotonic=clock.monotonic).run())
    return print_doctor(rows, args.output)


def print_doctor(rows: list[Any], output: str) -> int:
    import json

    from .core.doctor import failed, rows_json, rows_table, summary
    if output == "json":
        print(json.dumps(rows_json(rows), indent=2))
    else:
        _print_table(rows_table(rows))
        counts = summary(rows)
        print(f"\n{counts['fail']} failed, {counts['warn']} warning(s), {counts['ok']} ok, {counts['skip']} not checked")
    return EXIT_FAIL if failed(rows) else EXIT_OK


def register_cluster_commands(sub: Any) -> None:
    from .platform import add_platform_flags
    p = sub.add_parser("doctor", help="check that every Ray worker node can run a task: a probe job per node through the task's own "
                                      "path (bash -lc, runtime env, worker resource); exit 1 when a check fails")
    p.add_argument("--ray-address", default=os.environ.get("ARGUS_RAY_ADDRESS", "http://127.0.0.1:8265"),
                   help="the Ray dashboard (env ARGUS_RAY_ADDRESS; the operator's --ray-address)")
    p.add_argument("--ray-token-file", default=os.environ.get("ARGUS_RAY_TOKEN_FILE") or None,
                   help="file holding the Ray cluster's token, when it requires one (env ARGUS_RAY_TOKEN_FILE)")
    p.add_argument("--expect-verl", default=os.environ.get("ARGUS_EXPECT_VERL") or None, metavar="VERSION",
                   help="the verl version the snapshot must be (its verl/version/version); default: shown, not compared")
    p.add_argument("--start-timeout", type=float, default=60.0, help="seconds a probe may wait to start (default 60)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds a probe may run (default 120)")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    add_platform_flags(p)
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("queue", help="the tasks waiting in the queue, in order, and each user's GPUs in use and quota")
    p.add_argument("-n", "--namespace", help="only this namespace (default: every namespace you may list)")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    p.add_argument("--kubeconfig")
    p.add_argument("--context")
    p.set_defaults(func=cmd_queue)

    p = sub.add_parser("logs", help="print or follow the log of an ArgusTask (through the Kubernetes API: logs.argus.io)")
    p.add_argument("task", help="ArgusTask name")
    p.add_argument("-n", "--namespace", help="namespace (default: the kubeconfig context's)")
    p.add_argument("-f", "--follow", action="store_true", help="follow the log until the job ends")
    p.add_argument("--tail", type=int, default=None, help="only the last N lines")
    p.add_argument("--attempt", type=int, default=None, help="the log of this attempt (default: the current one)")
    p.add_argument("--since", type=int, default=None, metavar="SECONDS",
                   help="only lines from the last SECONDS (see docs/logs.md for what is known of a line's time)")
    p.add_argument("--kubeconfig")
    p.add_argument("--context")
    admin = p.add_argument_group("admins: read from the Ray dashboard directly instead of the log API")
    admin.add_argument("--direct-ray", nargs="?", const="", default=None, metavar="ADDRESS",
                       help="read the Ray dashboard at ADDRESS (default: the one in the task's status); needs a route to it")
    admin.add_argument("--ray-address", help="with --direct-ray: the dashboard address (implies --direct-ray)")
    admin.add_argument("--ray-token-file", default=os.environ.get("ARGUS_RAY_TOKEN_FILE") or None,
                   help="file holding the Ray cluster's token, when it requires one (env ARGUS_RAY_TOKEN_FILE; without it, "
                        "Ray's own RAY_AUTH_MODE=token with RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH apply)")
    p.set_defaults(func=cmd_logs)

    p = sub.add_parser("onboard", help="let a user run tasks: label a namespace argus.io/user=USER and bind argus-edit there")
    p.add_argument("user", metavar="USER", help="user id (also the Kubernetes user name the RoleBinding names)")
    p.add_argument("-n", "--namespace", help="namespace to onboard (default: USER); created if missing")
    p.add_argument("--gpu-quota", type=int, default=None,
                   help="GPUs the user's running tasks may hold in all (namespace annotation argus.io/gpu-quota; "
                        "with several namespaces, the smallest counts)")
    p.add_argument("--dry-run", action="store_true", help="print the objects as YAML and change nothing")
    p.add_argument("--kubeconfig")
    p.add_argument("--context")
    p.set_defaults(func=cmd_onboard)
