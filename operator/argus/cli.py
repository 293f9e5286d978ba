"""The ``argus`` command line, also ``kubectl argus``: the same entry point installed as the
kubectl plugin ``kubectl-argus``, which names itself ``kubectl argus`` in its usage.

Offline commands (validate, render, convert, crd) call the pure core only. Exit codes:
0 all valid, 1 a task is invalid, 2 a usage error (unreadable file, not YAML, bad flag).
User mistakes are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import uuid
from collections.abc import Sequence
from typing import Any, NoReturn

import yaml

from . import __version__
from .core.config import PlatformConfig
from .core.convert import ConversionError, convert_taskspec
from .core.crd import arguscluster_crd, argustask_crd
from .core.inputs import missing, warning_lines
from .core.plan import Verdict, validate_task
from .core.user import InvalidUserId, check_user_id
from .platform import UsageError, add_platform_flags, platform_config, verl_composer

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


def _read_documents(path: str) -> list[Any]:
    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"cannot read {path}: not UTF-8 text") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise UsageError(f"{path} is not valid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    if not docs:
        raise UsageError(f"{path} holds no YAML documents")
    return docs


def _user(args: argparse.Namespace) -> str:
    user = args.user if args.user is not None else os.environ.get("ARGUS_USER") or _namespace_user(args)
    try:
        return check_user_id(user)
    except InvalidUserId as exc:
        raise UsageError(f"--user: {exc}") from None


def _namespace_user(args: argparse.Namespace) -> str:
    """No --user and no $ARGUS_USER: who tasks in the namespace run as, its ``argus.io/user``
    label read from the cluster (never this machine's login, which is nobody's Argus user)."""
    if not hasattr(args, "kubeconfig"):
        raise UsageError("--user is required")
    from .clusterctl import ClusterError, namespace_user  # noqa: PLC0415
    try:
        user, namespace = namespace_user(args.namespace, args.kubeconfig, args.context)
    except ClusterError as exc:
        raise UsageError(f"--user is required here: {exc} (pass --user USER or set ARGUS_USER)") from None
    print(f"{args.prog} {args.command}: user {user}: the argus.io/user label of namespace {namespace}", file=sys.stderr)
    return user


MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")  # what kubectl apply -f DIR reads


def manifest_files(paths: Sequence[str], recursive: bool) -> list[str]:
    """The files ``-f`` names, as ``kubectl apply -f`` reads them: a file as is (``-`` is
    stdin), a directory's .yaml, .yml and .json files in name order, its subdirectories' too
    with ``-R``."""
    files: list[str] = []
    for path in paths:
        if path == "-" or not os.path.isdir(path):
            files.append(path)
            continue
        found: list[str] = []
        for folder, subdirs, names in os.walk(path):
            subdirs[:] = sorted(subdirs) if recursive else []
            found += [os.path.join(folder, n) for n in sorted(names) if n.endswith(MANIFEST_SUFFIXES)]
        if not found:
            more = "" if recursive else " (-R reads its subdirectories too)"
            raise UsageError(f"{path} holds no .yaml, .yml or .json files{more}")
        files += found
    return files


def _absent_inputs(v: Verdict, config: PlatformConfig) -> list[str]:
    """Warnings for the files the task reads that are not in the shared tree, when it is
    mounted here at --root (as the operator checks them before a task leaves the queue)."""
    from .adapters.sharedtree import LocalSharedTree  # noqa: PLC0415
    tree = LocalSharedTree()
    if not v.inputs or not tree.mounted(config.root):
        return []
    return warning_lines(missing(v.inputs, tree.look(config.root, [i.path for i in v.inputs]).get))


def cmd_validate(args: argparse.Namespace) -> int:
    config, user = platform_config(args), _user(args)
    files = manifest_files(args.filename, args.recursive)
    several = len(files) > 1 or any(p != "-" and os.path.isdir(p) for p in args.filename)
    composer = verl_composer(args, config, fetch=True)
    results: list[dict[str, Any]] = []  # one per document, or one per file that cannot be read as YAML
    for path in files:
        try:
            docs = _read_documents(path)
        except UsageError as exc:
            if not several:
                raise
            # In a folder, one broken file is one problem: the others are still checked.
            results.append({"file": path, "name": None, "valid": False, "errors": [str(exc)], "warnings": [],
                            "expandedCommand": None, "verl": None, "label": path})
            continue
        for i, doc in enumerate(docs):
            v = validate_task(doc, user, config, composer)
            label = v.name or f"document {i + 1}"
            results.append({"file": path, "name": v.name, "valid": v.valid, "errors": v.error_lines(),
                            "warnings": v.warning_lines() + _absent_inputs(v, config),
                            "expandedCommand": v.expanded_command, "verl": v.verl, "label": f"{path}: {label}" if several else label})
    if args.output == "json":
        print(json.dumps([{k: v for k, v in r.items() if k != "label"} for r in results], indent=2))
    else:
        for r in results:
            print(f"{r['label']}: {'valid' if r['valid'] else 'INVALID'}")
            for line in r["errors"]:
                print(f"  error: {line}")
            for line in r["warnings"]:
                print(f"  warning: {line}")
    return EXIT_OK if all(r["valid"] for r in results) else EXIT_INVALID


_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def _as_the_operator_sees_it(docs: list[Any], namespace: str | None, name: str | None, uid: str | None) -> list[Any]:
    """The documents with the identity the operator gives the task (its namespace, as
    ``kubectl apply -n`` sets it, and, once created, its uid): the plan's job folder,
    experiment name, checkpoint path and submission id all derive from it."""
    if namespace is not None and not _NAMESPACE.fullmatch(namespace):
        raise UsageError(f"--namespace: {namespace!r}: must be a namespace name (a DNS label: a-z, 0-9, '-', at most 63 characters)")
    if uid is not None:
        try:
            uuid.UUID(uid)
        except ValueError:
            raise UsageError(f"--uid: {uid!r}: must be the task's metadata.uid, a UUID "
                             "(kubectl get argustask NAME -o jsonpath='{.metadata.uid}')") from None
    if (name is not None or uid is not None) and len(docs) != 1:
        raise UsageError(f"--name and --uid name one task: the file holds {len(docs)} documents")
    out = []
    for doc in docs:
        if isinstance(doc, dict):
            meta = dict(doc.get("metadata") or {}) if isinstance(doc.get("metadata") or {}, dict) else {}
            if namespace is not None:
                if meta.get("namespace") not in (None, namespace):
                    raise UsageError(f"the document's metadata.namespace {meta['namespace']!r} is not --namespace {namespace!r} "
                                     "(kubectl apply -n refuses that too)")
                meta["namespace"] = namespace
            for key, value in (("name", name), ("uid", uid)):
                if value is not None:
                    meta[key] = value
            doc = {**doc, "metadata": meta}
        out.append(doc)
    return out


def cmd_render(args: argparse.Namespace) -> int:
    config, user = platform_config(args), _user(args)
    plans, invalid = [], False
    docs = _as_the_operator_sees_it(_read_documents(args.filename), args.namespace, args.name, args.uid)
    composer = verl_composer(args, config, fetch=True)
    for doc in docs:
        v = validate_task(doc, user, config, composer)
        if not v.valid:
            invalid = True
            for line in v.error_lines():
                print(f"{v.name or 'document'}: error: {line}", file=sys.stderr)
            continue
        assert v.plan is not None
        plans.append({"name": v.name, **({"namespace": v.namespace} if v.namespace else {}), **v.plan.model_dump(mode="json"),
                      "verl": v.verl})
    dump_yaml(plans, sys.stdout)
    return EXIT_INVALID if invalid else EXIT_OK


def cmd_convert(args: argparse.Namespace) -> int:
    docs = _read_documents(args.filename)
    if args.name is not None and len(docs) != 1:
        raise UsageError(f"--name names one task: {args.filename} holds {len(docs)} documents (each is named by its own name field)")
    manifests, failed = [], False
    for i, doc in enumerate(docs):
        label = f"document {i + 1}: " if len(docs) > 1 else ""
        notes: list = []
        try:
            manifests.append(convert_taskspec(doc, namespace=args.namespace, name=args.name, notes=notes))
        except ConversionError as exc:
            failed = True
            for p in exc.problems:
                print(f"{label}error: {p}", file=sys.stderr)
            continue
        for p in notes:
            print(f"{label}note: {p}", file=sys.stderr)
    if failed:
        return EXIT_INVALID
    dump_yaml(manifests, sys.stdout)
    return EXIT_OK


class _BlockDumper(yaml.SafeDumper):
    """YAML as people write it: a multi-line string (a command) as a ``|`` block."""


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_BlockDumper.add_representer(str, _str)


def dump_yaml(documents: list[Any], stream: Any) -> None:
    """The documents as YAML, ``---`` between them, multi-line strings as ``|`` blocks
    (pyyaml falls back to a quoted string where a block cannot hold the text exactly)."""
    yaml.dump_all(documents, stream, Dumper=_BlockDumper, sort_keys=False, default_flow_style=False, width=1000, allow_unicode=True)


def cmd_completion(args: argparse.Namespace) -> int:
    from .completion import command_tree, script  # noqa: PLC0415

    sys.stdout.write(script(args.shell, command_tree(build_parser())))
    return EXIT_OK


def cmd_crd(args: argparse.Namespace) -> int:
    kinds = [args.kind] if args.kind else list(CRD_SOURCES)
    sys.stdout.write("---\n".join(crd_yaml(k) for k in kinds))
    return EXIT_OK


# Each CRD, and the module whose pydantic models it is generated from.
CRD_SOURCES = {"ArgusTask": "operator/argus/core/spec.py", "ArgusCluster": "operator/argus/core/clusters.py"}


def crd_yaml(kind: str = "ArgusTask") -> str:
    header = (f"# Generated from the pydantic models in {CRD_SOURCES[kind]} by `argus crd`\n"
              "# (hack/update-crds.sh). Do not edit by hand.\n")
    return header + yaml.safe_dump(argustask_crd() if kind == "ArgusTask" else arguscluster_crd(), sort_keys=False, width=120)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def program_name(argv0: str | None = None) -> str:
    """``kubectl argus`` when run as the kubectl plugin (kubectl execs ``kubectl-argus``),
    else ``argus``."""
    name = os.path.basename(argv0 if argv0 is not None else sys.argv[0])
    return "kubectl argus" if name.startswith("kubectl-argus") else "argus"


def build_parser(prog: str = "argus") -> argparse.ArgumentParser:
    parser = _Parser(prog=prog, description="Argus: verl training tasks on the shared Ray cluster, as Kubernetes objects.")
    parser.add_argument("--version", action="version", version=f"{prog} {__version__}")
    parser.set_defaults(prog=prog)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("validate", help="check ArgusTask manifests offline, as the operator would")
    p.add_argument("-f", "--filename", required=True, action="append",
                   help="file with one or more ArgusTask documents, - for stdin, or a directory (its .yaml, .yml and .json "
                        "files, as kubectl apply -f reads it); repeatable")
    p.add_argument("-R", "--recursive", action="store_true", help="with a directory: its subdirectories' files too (as kubectl's -R)")
    p.add_argument("--user", help="user id the tasks run as (on the cluster: their namespace's argus.io/user label). Default: "
                                  "$ARGUS_USER, else that label of namespace -n (else the kubeconfig context's namespace), "
                                  "read through the Kubernetes API; without a reachable cluster --user is required")
    p.add_argument("-n", "--namespace", help="without --user: the namespace whose argus.io/user label names the user "
                                             "(default: the kubeconfig context's)")
    p.add_argument("--kubeconfig", help="without --user: the kubeconfig to read the namespace with")
    p.add_argument("--context", help="without --user: the kubeconfig context (its namespace is the default -n, as kubectl's)")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    add_platform_flags(p)
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("render", help="print the resolved submission plan (entrypoint, resources, runtime env, metadata)")
    p.add_argument("-f", "--filename", required=True)
    p.add_argument("--user", required=True)
    p.add_argument("-n", "--namespace", help="the namespace the task is (to be) created in: the job folder, experiment name and "
                                             "checkpoint path are then the operator's (default: the document's metadata.namespace)")
    p.add_argument("--name", help="the task's name (default: the document's metadata.name; one document only)")
    p.add_argument("--uid", help="the created task's metadata.uid: the job folder then carries its 8 characters and the plan "
                                 "names the Ray submission id, as the operator's do (one document only)")
    add_platform_flags(p)
    p.set_defaults(func=cmd_render)

    p = sub.add_parser("convert", help="turn v3.x TaskSpec documents into ArgusTask manifests (workload read from the command "
                                       "when missing, $COMMON rewritten as $HOME/common, command as a | block)")
    p.add_argument("-f", "--filename", required=True, help="file with one or more v3.x TaskSpec documents, or - for stdin")
    p.add_argument("-n", "--namespace", required=True, help="the namespace the tasks go to (labelled argus.io/user=<you>)")
    p.add_argument("--name", help="the task's name (one document only; default: each TaskSpec's own name field)")
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser("crd", help="print the CRDs (ArgusTask and ArgusCluster), or one of them")
    p.add_argument("--kind", choices=list(CRD_SOURCES), help="print this one only")
    p.set_defaults(func=cmd_crd)

    p = sub.add_parser("completion", help="print the shell completion script for bash, zsh or fish (argus and kubectl-argus), "
                                          "generated from these commands and flags",
                       description="Load it with: source <(argus completion bash), source <(argus completion zsh), or "
                                   "argus completion fish | source.")
    p.add_argument("shell", choices=("bash", "zsh", "fish"))
    p.set_defaults(func=cmd_completion)

    # The cluster commands (logs, cancel, suspend, resume, onboard) import the kubernetes and Ray clients only when
    # they run, so the offline commands above load nothing but the core.
    from .clusterctl import register_cluster_commands  # noqa: PLC0415
    from .logsctl import register_logs_command  # noqa: PLC0415
    from .onboardctl import register_onboard_command  # noqa: PLC0415
    from .taskctl import register_task_commands  # noqa: PLC0415
    register_cluster_commands(sub)
    register_logs_command(sub)
    register_task_commands(sub)
    register_onboard_command(sub)
    return parser


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    prog = prog or program_name()
    args = build_parser(prog).parse_args(argv)
    try:
        return int(args.func(args))
    except UsageError as exc:
        print(f"{prog} {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        # A cluster command whose API server cannot be reached, or that refuses a call the
        # command did not expect to fail: one line, never a traceback.
        line = _cluster_failure(exc)
        if line is None:
            raise
        print(f"{prog} {args.command}: {line}", file=sys.stderr)
        return EXIT_INVALID


def kubectl_complete(argv: list[str] | None = None) -> int:
    """The ``kubectl_complete-argus`` program: kubectl (>= 1.26) runs it for ``kubectl argus
    <TAB>`` with the words typed (``completion.candidates`` on this CLI's parser)."""
    from .completion import command_tree, kubectl_answer  # noqa: PLC0415

    sys.stdout.write(kubectl_answer(command_tree(build_parser()), list(sys.argv[1:] if argv is None else argv)))
    return 0


def _cluster_failure(exc: Exception) -> str | None:
    if "kubernetes" not in sys.modules and "urllib3" not in sys.modules:
        return None  # the offline commands load neither
    from .clusterctl import unreachable  # noqa: PLC0415
    if (line := unreachable(exc)) is not None:
        return line
    from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

    from .adapters.kube import api_error  # noqa: PLC0415
    if isinstance(exc, ApiException):
        return f"the Kubernetes API server refused: {api_error(exc)}"
    return None


if __name__ == "__main__":
    sys.exit(main())
