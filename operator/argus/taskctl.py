"""``argus cancel``, ``argus suspend`` and ``argus resume``: the researcher's verbs on one
ArgusTask. Each sets one spec field with a merge patch through the API server, with the
caller's kubeconfig, context and namespace as kubectl resolves them (-n, else the context's
namespace, else ``default``), and says in one line what follows. The operator does the rest
(docs/lifecycle.md): ``spec.cancel`` stops the task for good, ``spec.suspend`` stops its Ray
job and gives its GPUs back until it is resumed, and a resumed task's new attempt resumes
from the newest checkpoint in its job folder."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .clusterctl import EXIT_FAIL, EXIT_OK, ClusterError, current_namespace, get_task, load_kube
from .core.spec import GROUP, PLURAL, VERSION
from .core.vocabulary import is_ended


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


def register_task_commands(sub: Any) -> None:
    for verb, help_ in VERBS.items():
        p = sub.add_parser(verb, help=help_, description=help_ + ". -n, --context and --kubeconfig work as kubectl's.")
        p.add_argument("task", help="ArgusTask name")
        p.add_argument("-n", "--namespace", help="namespace (default: the kubeconfig context's)")
        p.add_argument("--kubeconfig")
        p.add_argument("--context")
        p.set_defaults(func=cmd_task_verb)
