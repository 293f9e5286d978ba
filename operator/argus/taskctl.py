"""``argus cancel``, ``argus suspend``, ``argus resume``, ``argus rerun``, ``argus get`` and
``argus describe``: the researcher's verbs on ArgusTasks. ``rerun`` creates a new task from an
old one with ``--set`` changes (``core.rerun``). ``describe`` prints a readable view of the task (its
phase and why, progress, attempts, conditions) and the tail of its log when the log API
answers; ``get`` one line per task (phase, reason, progress, place in the queue, age), from
the same pieces. The others each set one spec field with a merge patch through the API server, with the
caller's kubeconfig, context and namespace as kubectl resolves them (-n, else the context's
namespace, else ``default``), and says in one line what follows. The operator does the rest
(docs/lifecycle.md): ``spec.cancel`` stops the task for good, ``spec.suspend`` stops its Ray
job and gives its GPUs back until it is resumed, and a resumed task's new attempt resumes
from the newest checkpoint in its job folder."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .clusterctl import EXIT_FAIL, EXIT_OK, ClusterError, current_namespace, get_task, load_kube, log_request, print_table
from .core.secretenv import shown
from .core.spec import GROUP, PLURAL, VERSION
from .core.vocabulary import is_ended, task_shape


def _patch(args: argparse.Namespace, namespace: str, spec: dict[str, Any]) -> None:
    client = load_kube(args.kubeconfig, args.context)
    from kubernetes.client.exceptions import ApiException

    from .adapters.kube import api_error
    try:
        client.CustomObjectsApi().patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, args.task, {"spec": spec})
    except ApiException as exc:
        if exc.status == 404:
            raise ClusterError(f"no ArgusTask {args.task!r} in namespace {namespace!r}") from None
        if exc.status == 403:
            raise ClusterError(f"not allowed to change ArgusTask {args.task!r} in namespace {namespace!r} "
                               "(patch on argustasks: the argus-edit role)") from None
        raise ClusterError(f"cannot change ArgusTask {namespace}/{args.task}: {api_error(exc)}") from None


def _verb(args: argparse.Namespace) -> str:
    """The one line the verb prints (and the patch it makes, when one is needed)."""
    namespace = args.namespace or current_namespace(args.kubeconfig, args.context)
    task = get_task(args.task, namespace, args.kubeconfig, args.context)
    spec, status = task.get("spec") or {}, task.get("status") or {}
    phase = status.get("phase") or "new"
    name = f"argustask {namespace}/{args.task}"
    if args.command == "cancel":
        if is_ended(phase):
            return f"{name} has already ended ({phase}): nothing to cancel"
        if spec.get("cancel") is not True:
            _patch(args, namespace, {"cancel": True})
        return f"{name} cancelled (spec.cancel): its Ray job is stopped, then it shows Stopped"
    if args.command == "suspend":
        if is_ended(phase):
            raise ClusterError(f"{name} has ended ({phase}): only a task that has not ended can be suspended")
        if spec.get("suspend") is not True:
            _patch(args, namespace, {"suspend": True})
        return (f"{name} suspended (spec.suspend): its Ray job is stopped and its GPUs go back to the queue; "
                f"resume it with: argus resume {args.task}")
    if spec.get("suspend") is not True:
        return f"{name} is not suspended: nothing to resume ({phase})"
    _patch(args, namespace, {"suspend": False})
    return f"{name} resumed: it is queued again, and a new attempt resumes from the newest checkpoint in its job folder"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def progress_text(status: dict[str, Any]) -> str | None:
    """step/total as the Progress column shows it (just the step before verl announced the
    total); None before the first step."""
    progress = status.get("progress") or {}
    if not progress:
        return None
    if progress.get("summary"):
        return str(progress["summary"])
    return str(progress.get("step", "-")) + (f"/{progress['totalSteps']}" if progress.get("totalSteps") else "")


def describe_lines(task: dict[str, Any]) -> list[str]:
    """A readable view of one task as the API returns it (no log)."""
    meta, spec, status = task.get("metadata") or {}, task.get("spec") or {}, task.get("status") or {}
    nnodes, per_node = task_shape(spec)
    phase = status.get("phase") or "(not validated yet)"
    why = f" ({status['reason']})" if status.get("reason") else ""
    lines = [f"Name:        {meta.get('namespace')}/{meta.get('name')}",
             f"Phase:       {phase}{why}",
             f"Message:     {(status.get('message') or '').splitlines()[0] if status.get('message') else '-'}",
             f"Task:        {spec.get('workload', '?')}, {spec.get('kind', 'basic')}, {nnodes} node(s) x {per_node} GPU(s), "
             f"priority {spec.get('priority', 0)}" + (", cancel" if spec.get("cancel") else "") + (", suspend" if spec.get("suspend") else ""),
             f"User:        {status.get('user') or '-'}" + (f"   Cluster: {status['cluster']}" if status.get("cluster") else "")]
    if status.get("preemptedBy"):
        lines.append(f"Preempted:   its job is being stopped for {status['preemptedBy']}, which takes its GPUs")
    if status.get("preempts"):
        lines.append(f"Preempts:    {', '.join(status['preempts'])} (stopped for it; it waits for their GPUs)")
    progress = status.get("progress") or {}
    if progress:
        resumed = f", resumed from step {progress['resumedFromStep']}" if progress.get("resumedFromStep") is not None else ""
        eta = f", eta {progress['eta']}" if progress.get("eta") else ""
        lines.append(f"Progress:    {progress_text(status)}{eta}{resumed}")
    if progress.get("runUrl"):
        lines.append(f"Run:         {progress['runUrl']}")
    if status.get("jobDir"):
        lines.append(f"Job folder:  {status['jobDir'].get('userPath')}")
    for i, entry in enumerate(e for e in spec.get("env") or [] if isinstance(e, dict)):
        ref = (entry.get("valueFrom") or {}).get("secretKeyRef") or {}
        optional = " (optional)" if ref.get("optional") else ""
        lines.append(f"{'Environment:' if i == 0 else '':<13}{entry.get('name')}={shown(str(ref.get('name')), str(ref.get('key')))}{optional}")
    attempts = status.get("attempts") or []
    if attempts:
        lines.append("Attempts:")
        rows = [["ATTEMPT", "RAY JOB", "STARTED", "ENDED", "OUTCOME", "LAST STEP"]]
        rows += [[str(a.get("attempt")), a.get("submissionId") or "-", a.get("startTime") or "-", a.get("endTime") or "-",
                  a.get("outcome") or "(running)", str(a["lastStep"]) if a.get("lastStep") is not None else "-"] for a in attempts]
        lines += _table(rows)
    conditions = status.get("conditions") or []
    if conditions:
        lines.append("Conditions:")
        lines += _table([["TYPE", "STATUS", "REASON", "SINCE"]] +
                        [[c.get("type", ""), c.get("status", ""), c.get("reason", ""), c.get("lastTransitionTime", "")] for c in conditions])
    return lines


def _log_tail(args: argparse.Namespace, namespace: str) -> str | None:
    """The last ``--tail`` lines of the current attempt's log through the log API, or None
    when it does not answer (not served, not submitted yet, unreachable)."""
    client = load_kube(args.kubeconfig, args.context)
    api, method, url, headers = log_request(client, namespace, args.task, [("tailLines", str(args.tail))], "text/plain")
    try:
        resp = api.call_api(method, url, header_params=headers, _request_timeout=30)
        body: bytes = resp.response.data
    except Exception:  # noqa: BLE001 - no log is no failure of describe
        return None
    return body.decode("utf-8", errors="replace") if resp.status < 400 else None


def cmd_describe(args: argparse.Namespace) -> int:
    try:
        namespace = args.namespace or current_namespace(args.kubeconfig, args.context)
        task = get_task(args.task, namespace, args.kubeconfig, args.context)
        print("\n".join(describe_lines(task)))
        if args.tail > 0 and (task.get("status") or {}).get("attempts"):
            log = _log_tail(args, namespace)
            print(f"Log (last {args.tail} lines):" if log is not None else
                  f"Log:         not served by the log API here (argus logs {args.task} says why)")
            if log:
                print("".join(f"  {line}" for line in log.splitlines(True)), end="" if log.endswith("\n") else "\n")
    except ClusterError as exc:
        print(f"{getattr(args, 'prog', 'argus')} describe: {exc}", file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK


def get_rows(tasks: list[dict[str, Any]], places: dict[tuple[str, str], int] | None, now: Any,
             all_namespaces: bool = False) -> list[tuple[str, ...]]:
    """``argus get``'s table: a header, then one row per task, as ``kubectl get`` shows
    them. PLACE: a waiting task's place in the whole queue (``-`` when it does not wait, ``?``
    when the places are not served)."""
    from .clusterctl import _age
    header = ("NAME", "PHASE", "REASON", "PROGRESS", "PLACE", "AGE")
    rows: list[tuple[str, ...]] = [(("NAMESPACE",) if all_namespaces else ()) + header]
    for task in tasks:
        meta, status = task.get("metadata") or {}, task.get("status") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        place = "-"
        if status.get("phase") == "Queued":
            place = "?" if places is None else str(places.get(key, "?"))
        row = (key[1], status.get("phase") or "New", status.get("reason") or "-", progress_text(status) or "-", place,
               _age(meta.get("creationTimestamp"), now))
        rows.append(((key[0],) if all_namespaces else ()) + row)
    return rows


def _list_tasks(args: argparse.Namespace, namespace: str | None) -> list[dict[str, Any]]:
    from kubernetes.client.exceptions import ApiException

    from .adapters.kube import api_error
    api = load_kube(args.kubeconfig, args.context).CustomObjectsApi()
    where = f" in namespace {namespace!r}" if namespace else " in every namespace"
    try:
        found = (api.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL) if namespace
                 else api.list_cluster_custom_object(GROUP, VERSION, PLURAL))
    except ApiException as exc:
        if exc.status == 403:
            raise ClusterError(f"not allowed to list ArgusTasks{where} (list on argustasks: the argus-view role)") from None
        raise ClusterError(f"cannot list ArgusTasks{where}: {api_error(exc)}") from None
    return sorted(found.get("items") or [], key=lambda t: ((t.get("metadata") or {}).get("namespace") or "",
                                                          (t.get("metadata") or {}).get("name") or ""))


def cmd_get(args: argparse.Namespace) -> int:
    from .adapters.clock import SystemClock
    from .clusterctl import _places
    prog = getattr(args, "prog", "argus")
    try:
        if args.task and args.all_namespaces:
            raise ClusterError("a task name and -A (--all-namespaces) do not go together: name its namespace with -n")
        namespace = None if args.all_namespaces else args.namespace or current_namespace(args.kubeconfig, args.context)
        if args.task:
            assert namespace is not None
            tasks = [get_task(args.task, namespace, args.kubeconfig, args.context)]
        else:
            tasks = _list_tasks(args, namespace)
        places, note = None, ""
        if any((t.get("status") or {}).get("phase") == "Queued" for t in tasks):
            places, note = _places(load_kube(args.kubeconfig, args.context).CustomObjectsApi(), namespace)
    except ClusterError as exc:
        print(f"{prog} get: {exc}", file=sys.stderr)
        return EXIT_FAIL
    if not tasks:
        print(f"No ArgusTasks found{f' in namespace {namespace}' if namespace else ''}.", file=sys.stderr)
        return EXIT_OK
    print_table(get_rows(tasks, places, SystemClock().now(), all_namespaces=args.all_namespaces))
    if note:
        print(note, file=sys.stderr)
    return EXIT_OK


def cmd_rerun(args: argparse.Namespace) -> int:
    from .core.rerun import RerunError, parse_sets, rerun_manifest, rerun_name
    prog = getattr(args, "prog", "argus")
    try:
        namespace = args.namespace or current_namespace(args.kubeconfig, args.context)
        sets = parse_sets(args.set or [])
        task = get_task(args.task, namespace, args.kubeconfig, args.context)
        api = load_kube(args.kubeconfig, args.context).CustomObjectsApi()
        taken = [t["metadata"]["name"] for t in api.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL).get("items", [])]
        manifest = rerun_manifest(task, args.name or rerun_name(args.task, taken), sets)
        if args.dry_run:
            import yaml
            print(yaml.safe_dump(manifest, sort_keys=False), end="")
            return EXIT_OK
        from kubernetes.client.exceptions import ApiException

        from .adapters.kube import api_error
        try:
            api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, manifest)
        except ApiException as exc:
            raise ClusterError(f"cannot create {manifest['metadata']['name']}: {api_error(exc)}") from None
    except (ClusterError, RerunError) as exc:
        print(f"{prog} rerun: {exc}", file=sys.stderr)
        return EXIT_FAIL
    changes = ", ".join(args.set or []) or "no changes"
    print(f"argustask {namespace}/{manifest['metadata']['name']} created from {args.task} ({changes})")
    return EXIT_OK


def cmd_task_verb(args: argparse.Namespace) -> int:
    try:
        print(_verb(args))
    except ClusterError as exc:
        print(f"{getattr(args, 'prog', 'argus')} {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK


VERBS = {
    "cancel": "stop an ArgusTask for good (sets spec.cancel; its Ray job is stopped, it ends Stopped)",
    "suspend": "pause an ArgusTask (sets spec.suspend): its Ray job is stopped and its GPUs go back to the queue",
    "resume": "resume a suspended ArgusTask: queued again, a new attempt resumes from the newest checkpoint",
}


def kubectl_flags(p: Any) -> None:
    """-n, --kubeconfig and --context, read as kubectl reads them (clusterctl.load_kube)."""
    p.add_argument("-n", "--namespace", help="namespace (default: the kubeconfig context's)")
    p.add_argument("--kubeconfig")
    p.add_argument("--context")


def register_task_commands(sub: Any) -> None:
    for verb, help_ in VERBS.items():
        p = sub.add_parser(verb, help=help_, description=help_ + ". -n, --context and --kubeconfig work as kubectl's.")
        p.add_argument("task", help="ArgusTask name")
        kubectl_flags(p)
        p.set_defaults(func=cmd_task_verb)
    p = sub.add_parser("rerun", help="create a new ArgusTask from an old one, with changes (--set key=value): "
                                     "named TASK-rerun-N", description="A spec field by its manifest name (learningRate=1e-6, "
                                     "nGpusPerNode=2) is set; any other key is a Hydra override for verl: a basic task gets it "
                                     "in spec.overrides, an advanced task's command has its value replaced (the command must "
                                     "already set that key). -n, --context and --kubeconfig work as kubectl's.")
    p.add_argument("task", help="the ArgusTask to run again")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="a change (repeat for more)")
    p.add_argument("--name", help="the new task's name (default: TASK-rerun-N, the first N not taken)")
    p.add_argument("--dry-run", action="store_true", help="print the new manifest (YAML), create nothing")
    kubectl_flags(p)
    p.set_defaults(func=cmd_rerun)
    p = sub.add_parser("get", help="ArgusTasks one line each, as kubectl get shows them: phase, reason, progress (step/total), "
                                   "place in the queue, age", description="One task (TASK) or every task of the namespace; "
                                   "-A: every namespace. The places in the queue come from the log API (logs.argus.io; ? when it "
                                   "is not served). -n, --context and --kubeconfig work as kubectl's.")
    p.add_argument("task", nargs="?", help="ArgusTask name (default: every task of the namespace)")
    kubectl_flags(p)
    p.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace (a NAMESPACE column)")
    p.set_defaults(func=cmd_get)
    p = sub.add_parser("describe", help="a readable view of one ArgusTask: phase and why, progress, attempts, conditions, "
                                        "and its log's tail (through the log API, when it answers)")
    p.add_argument("task", help="ArgusTask name")
    kubectl_flags(p)
    p.add_argument("--tail", type=int, default=10, help="log lines to show (default 10; 0: none)")
    p.set_defaults(func=cmd_describe)
