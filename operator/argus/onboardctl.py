"""``argus onboard``: let a user run tasks. The namespace is labelled with the user's Argus
id (``argus.io/user``: whom the tasks run as, and the home on the shared tree) and ``argus-edit``
is bound there to the Kubernetes subject that user logs in as (docs/deploy.md, "Onboarding users")."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

import yaml

from .clusterctl import EXIT_FAIL, EXIT_OK, EXIT_USAGE, ClusterError, load_kube
from .core.sharedtree import DEFAULT_WORKER_GID, DEFAULT_WORKER_UID

EDIT_ROLE = "argus-edit"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


RBAC_GROUP = "rbac.authorization.k8s.io"


class OnboardUsage(ValueError):
    """A mistake in the command line: one line, exit 2."""


def subject_name(flag: str, name: str) -> str:
    """A Kubernetes user or group name as the authenticator gives it (an SSO e-mail, an OIDC
    group, ``oidc:alice``): any text but empty, padded or with control characters."""
    if not name or name != name.strip() or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise OnboardUsage(f"{flag} {name!r}: must be the name as the API server's authenticator gives it: not empty, "
                           "no spaces around it, no control characters")
    return name


def onboard_subjects(user: str, k8s_users: list[str] | None = None, groups: list[str] | None = None) -> list[dict[str, str]]:
    """Whom the RoleBinding names: each ``--k8s-user`` as a User and each ``--group`` as a
    Group; with neither, the Argus user id as the Kubernetes user name (as before)."""
    subjects = [{"apiGroup": RBAC_GROUP, "kind": "User", "name": subject_name("--k8s-user", n)} for n in k8s_users or ()]
    subjects += [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": subject_name("--group", n)} for n in groups or ()]
    return subjects or [{"apiGroup": RBAC_GROUP, "kind": "User", "name": user}]


def onboard_objects(user: str, namespace: str, gpu_quota: int | None = None,
                    subjects: list[dict[str, str]] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The namespace (labelled with its Argus user id, annotated with the user's GPU quota if
    given) and the RoleBinding of ``argus-edit`` to the Kubernetes subjects (default: the User
    named like the user id)."""
    from .core.user import GPU_QUOTA_ANNOTATION, USER_LABEL
    ns: dict[str, Any] = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": {USER_LABEL: user}}}
    if gpu_quota is not None:
        ns["metadata"]["annotations"] = {GPU_QUOTA_ANNOTATION: str(gpu_quota)}
    binding = {
        "apiVersion": f"{RBAC_GROUP}/v1", "kind": "RoleBinding",
        "metadata": {"name": f"{EDIT_ROLE}-{user}", "namespace": namespace, "labels": {USER_LABEL: user}},
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": EDIT_ROLE},
        "subjects": subjects or onboard_subjects(user),
    }
    return ns, binding


def describe_subjects(subjects: list[dict[str, str]]) -> str:
    return ", ".join(f"{s['kind']} {s['name']}" for s in subjects)


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
        return f"rolebinding/{name} created in {namespace} (ClusterRole {EDIT_ROLE} for {describe_subjects(want['subjects'])})"
    subjects = [{"apiGroup": s.api_group, "kind": s.kind, "name": s.name} for s in current.subjects or []]
    ref = current.role_ref
    if (ref.api_group, ref.kind, ref.name) == ("rbac.authorization.k8s.io", "ClusterRole", EDIT_ROLE):
        if subjects == want["subjects"]:
            return f"rolebinding/{name} unchanged"
        rbac.patch_namespaced_role_binding(name, namespace, {"subjects": want["subjects"]})
        return f"rolebinding/{name} updated in {namespace} (now for {describe_subjects(want['subjects'])})"
    # roleRef is immutable: replace the binding.
    rbac.delete_namespaced_role_binding(name, namespace)
    rbac.create_namespaced_role_binding(namespace, want)
    return f"rolebinding/{name} replaced in {namespace} (it referred to {ref.kind} {ref.name})"


def onboard_request(args: argparse.Namespace) -> tuple[str, str, list[dict[str, str]]]:
    """(Argus user id, namespace, RoleBinding subjects) from the command line; OnboardUsage
    names the first mistake."""
    from .core.user import InvalidUserId, check_user_id
    try:
        user = check_user_id(args.user)
    except InvalidUserId as exc:
        raise OnboardUsage(f"{exc} (the Argus user id names the home on the shared tree; the Kubernetes name is --k8s-user)") from None
    namespace = args.namespace or user
    if not _DNS_LABEL.fullmatch(namespace):
        hint = "" if args.namespace else " (the default is the user id): pass --namespace"
        raise OnboardUsage(f"namespace {namespace!r} is not a valid namespace name{hint}")
    if args.gpu_quota is not None and args.gpu_quota < 0:
        raise OnboardUsage(f"--gpu-quota {args.gpu_quota}: must be 0 or more GPUs")
    return user, namespace, onboard_subjects(user, args.k8s_users, args.groups)


def cmd_onboard(args: argparse.Namespace) -> int:
    prog = f"{getattr(args, 'prog', 'argus')} onboard"
    try:
        user, namespace, subjects = onboard_request(args)
    except OnboardUsage as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    ns, binding = onboard_objects(user, namespace, args.gpu_quota, subjects)
    if args.dry_run:
        yaml.safe_dump_all([ns, binding], sys.stdout, sort_keys=False)
        return EXIT_OK
    try:
        client = load_kube(args.kubeconfig, args.context)
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
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_FAIL
    for line in lines:
        print(line)
    changed = any(not line.endswith("unchanged") for line in lines if not line.startswith("warning:"))
    try:
        home, home_changed = _onboard_home(args, user)
    except OSError as exc:
        print(f"{prog}: the home on the shared tree: {exc}", file=sys.stderr)
        return EXIT_FAIL
    print(home)
    changed = changed or home_changed
    print(f"{user} is onboarded in namespace {namespace} for {describe_subjects(subjects)}" + ("" if changed else ": nothing changed"))
    return EXIT_OK


def make_home(tree: str, user: str, uid: int, gid: int) -> str:
    """Creates the user's home on the shared tree mounted at ``tree`` (argus.core.sharedtree),
    owned by the Ray worker's uid: the folders missing are made, and every one of them is given
    that owner and mode. One line saying what it did."""
    import os

    from .core.sharedtree import HOME_MODE, home_folders
    if not os.path.isdir(os.path.join(tree, "users")):
        raise OSError(f"{tree}/users is not a folder: is the shared tree mounted at {tree}? (hack/lay-out-shared-tree.sh lays it out)")
    created, fixed = 0, 0
    for path in home_folders(tree, user):
        if not os.path.isdir(path):
            os.mkdir(path, HOME_MODE)
            created += 1
        st = os.lstat(path)
        if (st.st_uid, st.st_gid) != (uid, gid):
            os.lchown(path, uid, gid)
            fixed += 1
        if st.st_mode & 0o7777 != HOME_MODE:
            os.chmod(path, HOME_MODE)
            fixed += 1
    home = home_folders(tree, user)[0]
    what = f"uid {uid}, gid {gid}, mode {HOME_MODE:04o}"
    if created:
        return f"home {home} created ({what})"
    if fixed:
        return f"home {home}: owner and mode set ({what})"
    return f"home {home} unchanged"


def _onboard_home(args: argparse.Namespace, user: str) -> tuple[str, bool]:
    """(the line to print, whether the home changed)."""
    from .core.sharedtree import home_command
    if args.shared_tree:
        line = make_home(args.shared_tree, user, args.worker_uid, args.worker_gid)
        return line, not line.endswith("unchanged")
    return (f"home: not made here (no --shared-tree); where the shared tree is mounted, run: "
            f"{home_command(args.root, user, args.worker_uid, args.worker_gid)}"), False


def _edit_role_warning(client: Any) -> list[str]:
    """The binding grants nothing until the chart's argus-edit ClusterRole exists."""
    from kubernetes.client.exceptions import ApiException
    try:
        client.RbacAuthorizationV1Api().read_cluster_role(EDIT_ROLE)
    except ApiException as exc:
        if exc.status == 404:
            return [f"warning: ClusterRole {EDIT_ROLE} does not exist yet (it comes with the Helm chart); the binding grants nothing until it does"]
    return []


def register_onboard_command(sub: Any) -> None:
    p = sub.add_parser(
        "onboard", help="let a user run tasks: label a namespace argus.io/user=USER and bind argus-edit there",
        description="USER is the Argus user id: tasks in the namespace run as USER and use the home "
                    "<root>/users/USER on the shared tree. The RoleBinding argus-edit-USER names whom Kubernetes "
                    "lets in: by default the Kubernetes user named USER; with SSO, name the identity the API server "
                    "sees with --k8s-user (alice@corp.example) and/or --group (every member then runs tasks as USER).")
    p.add_argument("user", metavar="USER", help="Argus user id (^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$): whom tasks run as, "
                                                "and the home on the shared tree")
    p.add_argument("-n", "--namespace", help="namespace to onboard (default: USER); created if missing")
    p.add_argument("--k8s-user", action="append", dest="k8s_users", metavar="NAME",
                   help="the Kubernetes user name the RoleBinding names, as the API server's authenticator gives it "
                        "(e.g. alice@corp.example); repeatable; default: USER unless --group is given")
    p.add_argument("--group", action="append", dest="groups", metavar="NAME",
                   help="a Kubernetes group the RoleBinding names (e.g. an SSO group): all its members may run tasks here, "
                        "as USER; repeatable")
    p.add_argument("--gpu-quota", type=int, default=None,
                   help="GPUs the user's running tasks may hold in all (namespace annotation argus.io/gpu-quota; "
                        "with several namespaces, the smallest counts)")
    p.add_argument("--shared-tree", metavar="PATH",
                   help="where the shared tree is mounted on this machine: create the home PATH/users/USER with its "
                        "folders, owned by --worker-uid (needs the rights to chown: root); without it, print the command "
                        "that does (docs/ray-image.md, 'The shared tree')")
    p.add_argument("--root", default="/private", help="the shared tree's path on the Ray workers, for the printed command "
                                                       "(default /private, the operator's --root)")
    p.add_argument("--worker-uid", type=int, default=DEFAULT_WORKER_UID,
                   help=f"the uid the Ray worker runs jobs as, who owns the home (default {DEFAULT_WORKER_UID}: the Ray images' user)")
    p.add_argument("--worker-gid", type=int, default=DEFAULT_WORKER_GID,
                   help=f"the home's group (default {DEFAULT_WORKER_GID}: the Ray images' group users)")
    p.add_argument("--dry-run", action="store_true", help="print the objects as YAML and change nothing")
    p.add_argument("--kubeconfig")
    p.add_argument("--context")
    p.set_defaults(func=cmd_onboard)
