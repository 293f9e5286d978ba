"""Cluster commands of the ``argus`` CLI: ``queue`` and ``doctor``, and what every cluster
command shares (the kubeconfig as kubectl uses it, ``adapters.kube``; one-line failures).
``queue`` reads the tasks and namespaces through the Kubernetes API; ``doctor`` talks to the
Ray dashboard (a probe job per worker node, ``controller.doctor``). ``logs`` is in
``logsctl``, ``onboard`` in ``onboardctl``; ``cli`` registers all of them."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from .core.clusters import DEFAULT_KUBERAY_URL
from .core.vocabulary import is_active, spec_gpus

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class ClusterError(Exception):
    """A clear, one-line failure (no such task, not submitted yet...)."""


def token_file_problem(path: str | None) -> str | None:
    """``--ray-token-file``, checked before anything is asked: a missing or empty file is a
    usage error said in one line (None: no file given, or it holds a token)."""
    if not path:
        return None
    from .adapters.ray import RayTokenError, read_token_file
    try:
        read_token_file(path)
    except RayTokenError as exc:
        return f"--ray-token-file: {exc}"
    return None


def load_kube(kubeconfig: str | None, context: str | None) -> Any:
    from kubernetes import client

    from .adapters.kube import KubeConfigError, load_kube_config
    try:
        load_kube_config(kubeconfig, context)
    except KubeConfigError as exc:
        raise ClusterError(str(exc)) from None
    return client


def current_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace kubectl would use without -n: the context's (``--context``'s, else the
    current context's), else ``default``."""
    from kubernetes import config
    try:
        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
    except Exception:  # noqa: BLE001 - no kubeconfig (in a pod): kubectl says default too
        return "default"
    chosen = next((c for c in contexts or [] if c.get("name") == context), None) if context else active
    return ((chosen or {}).get("context") or {}).get("namespace") or "default"


def unreachable(exc: BaseException) -> str | None:
    """One line for a Kubernetes API server that cannot be reached (the kubernetes client
    raises urllib3's connection errors as they are), None for any other error."""
    if "urllib3" not in sys.modules:
        return None
    import re

    from urllib3.exceptions import HTTPError, MaxRetryError
    if not isinstance(exc, HTTPError):
        return None
    reason: BaseException = exc.reason if isinstance(exc, MaxRetryError) and exc.reason is not None else exc
    text = str(reason)
    found = re.search(r"\[Errno -?\d+\] [^\"')]+", text)
    why = found.group(0) if found else (f"{type(reason).__name__}: {text}" if text else type(reason).__name__)
    try:
        from kubernetes import client
        host = client.Configuration.get_default_copy().host
    except Exception:  # noqa: BLE001
        host = "(unknown)"
    return (f"cannot reach the Kubernetes API server at {host} ({why[:200]}): check the kubeconfig's cluster and context "
            "(kubectl cluster-info)")


def namespace_user(namespace: str | None, kubeconfig: str | None, context: str | None) -> tuple[str, str]:
    """(the user a task in the namespace runs as, the namespace): its ``argus.io/user`` label,
    read through the API (-n, else the kubeconfig context's namespace)."""
    from .core.user import USER_LABEL
    ns = namespace or current_namespace(kubeconfig, context)
    client = load_kube(kubeconfig, context)
    from kubernetes.client.exceptions import ApiException

    from .adapters.kube import api_error
    try:
        found = client.CoreV1Api().read_namespace(ns, _request_timeout=15)
    except ApiException as exc:
        raise ClusterError(f"cannot read namespace {ns}'s {USER_LABEL} label: {api_error(exc)}") from None
    except Exception as exc:
        if (line := unreachable(exc)) is None:
            raise
        raise ClusterError(line) from None
    user = (found.metadata.labels or {}).get(USER_LABEL)
    if not user:
        raise ClusterError(f"namespace {ns} has no {USER_LABEL} label (not onboarded: argus onboard USER --namespace {ns})")
    return str(user), ns


def ray_missing() -> str | None:
    """Why Ray's client cannot be used here (None: it can): the commands that talk to a Ray
    dashboard themselves (doctor, logs --direct-ray) need the ``ray`` package."""
    try:
        import ray.job_submission  # noqa: F401
    except ImportError as exc:
        return (f"Ray's client is not installed here ({exc}): this command talks to the Ray cluster itself. "
                "Install it beside argus: pip install 'ray>=2.41' (the cluster's Ray version is best; docs/deploy.md, "
                "\"Installing the CLI\")")
    return None


# The log API (an aggregated API the operator serves): argus logs and argus describe read it.
LOG_API = "/apis/logs.argus.io/v1alpha1"


def log_request(client: Any, namespace: str, task: str, params: list[tuple[str, str]], accept: str) -> tuple[Any, str, str, Any]:
    """(api client, method, url, headers) of GET .../namespaces/NS/argustasks/NAME/log with
    the caller's kubeconfig (any authentication kubectl supports)."""
    import urllib.parse

    path = f"{LOG_API}/namespaces/{urllib.parse.quote(namespace)}/argustasks/{urllib.parse.quote(task)}/log"
    api = client.ApiClient()
    method, url, headers, _, _ = api.param_serialize("GET", path, query_params=params, header_params={"Accept": accept},
                                                     auth_settings=["BearerToken"])
    return api, method, url, headers


def get_task(name: str, namespace: str, kubeconfig: str | None, context: str | None) -> dict[str, Any]:
    client = load_kube(kubeconfig, context)
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
               places: dict[tuple[str, str], int] | None = None, cluster: str | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The waiting tasks in queue order, and per user: GPUs in use, quota, tasks queued.
    ``places``: each waiting task's place, from the operator's queue view (None: not served).
    Each waiting task's ``cluster``: the one it must run on (its spec.cluster, or the cluster
    its attempt was already submitted to), "" when any it may use will do; ``cluster`` set:
    only the waiting tasks that may run there."""
    from .core.clusters import placed_on
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
            spec = t.get("spec") or {}
            must = spec.get("cluster") or placed_on(meta.get("annotations"), status.get("attempt") or 1) or ""
            if cluster is not None and must not in ("", cluster):
                continue
            waiting.append({"position": (places or {}).get(key), "user": user, "namespace": meta.get("namespace"), "cluster": must,
                            "name": meta.get("name"), "gpus": spec_gpus(t.get("spec") or {}), "priority": (t.get("spec") or {}).get("priority", 0),
                            "waitingSince": meta.get("creationTimestamp"), "reason": status.get("reason"), "message": status.get("message"),
                            "preempts": list(status.get("preempts") or [])})
    waiting.sort(key=lambda r: (r["position"] is None, r["position"] or 0, r["waitingSince"] or ""))
    return waiting, sorted(users.values(), key=lambda r: r["user"])


def queue_table(waiting: list[dict[str, Any]], now: Any) -> list[tuple[str, ...]]:
    """``argus queue``'s table of waiting tasks. PREEMPTS: the running tasks stopped for this
    one (``status.preempts``), whose GPUs it waits for."""
    table: list[tuple[str, ...]] = [("POSITION", "USER", "NAMESPACE/NAME", "GPUS", "PRIORITY", "CLUSTER", "WAITING", "PREEMPTS", "REASON")]
    for r in waiting:
        reason = f"{r['reason']}: {r['message']}" if r["message"] else (r["reason"] or "")
        table.append((str(r["position"] or "-"), r["user"], f"{r['namespace']}/{r['name']}", str(r["gpus"]), str(r["priority"]),
                      r["cluster"] or "any", _age(r["waitingSince"], now), ",".join(r.get("preempts") or []) or "-",
                      " ".join(reason.splitlines())[:100]))  # one line: a table row
    return table


def cmd_queue(args: argparse.Namespace) -> int:
    import json

    from .adapters.clock import SystemClock
    from .core.spec import GROUP, PLURAL, VERSION
    from .core.user import GPU_QUOTA_ANNOTATION, USER_LABEL, quota_from_annotation, quotas_by_user
    try:
        client = load_kube(args.kubeconfig, args.context)
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
            scope = current_namespace(args.kubeconfig, args.context)
            note = f"(you may not list ArgusTasks in every namespace: showing namespace {scope} only)"
            tasks = custom.list_namespaced_custom_object(GROUP, VERSION, scope, PLURAL)["items"]
        try:
            found = client.CoreV1Api().list_namespace(label_selector=USER_LABEL).items
            quotas: dict[str, int | None] | None = quotas_by_user({
                n.metadata.name: (n.metadata.labels[USER_LABEL], quota_from_annotation((n.metadata.annotations or {}).get(GPU_QUOTA_ANNOTATION)),
                                  dict(n.metadata.labels))
                for n in found})
        except ApiException:
            quotas = None  # namespaces are not the caller's to read: quotas unknown
    except ClusterError as exc:
        print(f"argus queue: {exc}", file=sys.stderr)
        return EXIT_FAIL
    places, places_note = _places(custom, scope)
    waiting, users = queue_rows(tasks, quotas, places, args.cluster)
    if args.output == "json":
        print(json.dumps({"queue": waiting, "users": users}, indent=2))
        return EXIT_OK
    print_table(queue_table(waiting, SystemClock().now()))
    print()
    print_table([("USER", "GPUS IN USE", "QUOTA", "QUEUED")] +
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


def print_table(rows: Sequence[tuple[str, ...]]) -> None:
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
    if (problem := token_file_problem(args.ray_token_file)) is not None:
        print(f"{prog}: {problem}", file=sys.stderr)
        return EXIT_USAGE
    for flag, value in (("--start-timeout", args.start_timeout), ("--timeout", args.timeout)):
        if value <= 0:
            print(f"{prog}: {flag}: {value:g}: must be positive", file=sys.stderr)
            return EXIT_USAGE
    if (missing := ray_missing()) is not None:
        print(f"{prog}: {missing}", file=sys.stderr)
        return EXIT_USAGE
    from .adapters.clock import SystemClock
    from .adapters.ray import RayJobsClient
    from .controller.doctor import Doctor
    from .core.doctor import DoctorSettings
    logging.getLogger("argus.adapters.ray").addHandler(logging.NullHandler())  # a refusal is a row, not a log line
    address, token = args.ray_address, None
    if args.cluster:
        try:
            address, config, token = _argus_cluster(args, config)
        except ClusterError as exc:
            print(f"{prog}: {exc}", file=sys.stderr)
            return EXIT_FAIL
    settings = DoctorSettings(config, expected_verl=(args.expect_verl,) if args.expect_verl else (),
                              token_configured=bool(args.ray_token_file or token))
    clock = SystemClock()  # this command's composition root
    ray = RayJobsClient(address, monotonic=clock.monotonic, threads=8, token_file=args.ray_token_file or None,
                        token=(lambda: token) if token else None, token_where=f"the ArgusCluster {args.cluster}'s Secret")
    rows = asyncio.run(Doctor(ray, settings, address=address, start_timeout=args.start_timeout, run_timeout=args.timeout,
                              monotonic=clock.monotonic).run())
    return print_doctor(rows, args.output)


def _argus_cluster(args: argparse.Namespace, config: Any) -> tuple[str, Any, str | None]:
    """``--cluster``: the ArgusCluster's address, the platform as its jobs see it (its root,
    verl snapshot and worker resource), and its token (from its Secret in --secrets-namespace)."""
    from kubernetes.client.exceptions import ApiException

    from .adapters.kube import api_error, secret_key
    from .core.clusters import CLUSTER_PLURAL, InvalidCluster, parse_cluster
    from .core.spec import GROUP, VERSION
    client = load_kube(args.kubeconfig, args.context)
    try:
        cluster = parse_cluster(client.CustomObjectsApi().get_cluster_custom_object(GROUP, VERSION, CLUSTER_PLURAL, args.cluster))
    except ApiException as exc:
        raise ClusterError(f"--cluster {args.cluster}: {api_error(exc)}") from None
    except InvalidCluster as exc:
        raise ClusterError(str(exc)) from None
    if cluster.ray_cluster_ref is not None:
        cluster = replace(cluster, address=_raycluster_address(client, cluster.ray_cluster_ref, args.kuberay_dashboard_url))
    config = cluster.platform(config)
    token = None
    if cluster.token_secret is not None:
        ref = cluster.token_secret
        try:
            secret = client.CoreV1Api().read_namespaced_secret(ref.name, args.secrets_namespace)
        except ApiException as exc:
            raise ClusterError(f"the token of ArgusCluster {args.cluster} (Secret {args.secrets_namespace}/{ref.name}): {api_error(exc)}; "
                               "--secrets-namespace names the operator's namespace") from None
        token = secret_key(secret, ref.key)
        if not token:
            raise ClusterError(f"Secret {args.secrets_namespace}/{ref.name} has no key {ref.key} (the token of ArgusCluster {args.cluster})")
    return cluster.address, config, token


def _raycluster_address(client: Any, ref: Any, template: str) -> str:
    """An ArgusCluster's rayClusterRef, resolved as the operator does (``controller.fleet``):
    the RayCluster, its head Service, that Service's dashboard port."""
    from kubernetes.client.exceptions import ApiException

    from .adapters.kube import api_error
    from .core.clusters import (
        KUBERAY_GROUP,
        KUBERAY_PLURAL,
        KUBERAY_VERSION,
        UnresolvedRef,
        check_kuberay_url,
        head_dashboard_address,
        head_service_name,
        missing_raycluster,
    )
    try:
        check_kuberay_url(template)
    except ValueError as exc:
        raise ClusterError(str(exc)) from None

    def read(call: Callable[[], Any]) -> Any:
        try:
            return call()
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise ClusterError(f"spec.rayClusterRef {ref}: {api_error(exc)}") from None
    try:
        raycluster = read(lambda: client.CustomObjectsApi().get_namespaced_custom_object(
            KUBERAY_GROUP, KUBERAY_VERSION, ref.namespace, KUBERAY_PLURAL, ref.name))
        if raycluster is None:
            raise missing_raycluster(ref)
        name = head_service_name(ref, raycluster)
        found = read(lambda: client.CoreV1Api().read_namespaced_service(name, ref.namespace))
        service = client.ApiClient().sanitize_for_serialization(found) if found is not None else None
        return head_dashboard_address(ref, name, service, template)
    except UnresolvedRef as exc:
        raise ClusterError(str(exc)) from None


def print_doctor(rows: list[Any], output: str) -> int:
    import json

    from .core.doctor import failed, rows_json, rows_table, summary
    if output == "json":
        print(json.dumps(rows_json(rows), indent=2))
    else:
        print_table(rows_table(rows))
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
    p.add_argument("--cluster", help="check this ArgusCluster: its address, root, verl snapshot and worker resource, and its "
                                     "token from its Secret, read through the Kubernetes API (instead of --ray-address)")
    p.add_argument("--secrets-namespace", default=os.environ.get("POD_NAMESPACE") or "argus-system",
                   help="with --cluster: the operator's namespace, where the ArgusClusters' token Secrets are (default "
                        "$POD_NAMESPACE or argus-system)")
    p.add_argument("--kuberay-dashboard-url", default=os.environ.get("ARGUS_KUBERAY_DASHBOARD_URL") or DEFAULT_KUBERAY_URL,
                   help="with --cluster, for an ArgusCluster with spec.rayClusterRef: how its head Service's dashboard is reached "
                        "(fields {service}, {namespace}, {port}, {clusterIP}; default " + DEFAULT_KUBERAY_URL +
                        "; from outside the cluster, e.g. through kubectl port-forward: http://127.0.0.1:{port})")
    p.add_argument("--kubeconfig", help="with --cluster: the kubeconfig to read it with")
    p.add_argument("--context", help="with --cluster: the kubeconfig context")
    add_platform_flags(p)
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("queue", help="the tasks waiting in the queue, in order, and each user's GPUs in use and quota")
    p.add_argument("-n", "--namespace", help="only this namespace (default: every namespace you may list)")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    p.add_argument("--cluster", help="only the waiting tasks that may run on this ArgusCluster (those bound to it, and those "
                                     "that may go to any); the CLUSTER column says where each must run (any: wherever it may)")
    p.add_argument("--kubeconfig")
    p.add_argument("--context")
    p.set_defaults(func=cmd_queue)
