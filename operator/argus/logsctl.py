"""``argus logs``: a task's log through the aggregated API logs.argus.io, with the caller's
kubeconfig; the operator serves it (servers/logapi, docs/logs.md), never from the Ray
dashboard, unless an admin asks for that with ``--direct-ray``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from typing import Any

from .clusterctl import (
    EXIT_FAIL,
    EXIT_OK,
    EXIT_USAGE,
    ClusterError,
    current_namespace,
    get_task,
    load_kube,
    log_request,
    ray_missing,
    token_file_problem,
    unreachable,
)
from .core.logquery import AttemptLog, LogQuery, LogQueryError, attempt_log, forgotten_by_ray, removed_from_history, tail_text, where_the_file_is


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
    if (problem := token_file_problem(args.ray_token_file)) is not None:
        print(f"argus logs: {problem}", file=sys.stderr)
        return EXIT_USAGE
    namespace = args.namespace or current_namespace(args.kubeconfig, args.context)
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
        if (missing := ray_missing()) is not None:
            raise ClusterError(missing)
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


# What the API server answers for a path under a group nobody serves: Go's plain-text 404, or
# a metav1.Status with this message; the log API's own 404s name the task or the file.
NOT_SERVED_MESSAGES = ("404 page not found", "the server could not find the requested resource")


def not_served(where: str) -> str:
    """The one line for a cluster without the log API: what is missing, how an admin turns it
    on, and (``where``) the task's log file if its status names one."""
    return ("this cluster does not serve the log API logs.argus.io/v1alpha1: an admin turns it on with the Argus chart's "
            f"value logsApi.enabled=true (helm upgrade ... --set logsApi.enabled=true; docs/logs.md){where}")


def _api_message(status: int, body: bytes) -> str:
    """One line for a refused log request: the server's own message (a metav1.Status), else
    the body's first line."""
    import json
    try:
        doc = json.loads(body)
        message = str(doc.get("message") or "") if isinstance(doc, dict) else ""
    except ValueError:
        lines = body.decode(errors="replace").strip().splitlines()
        message = lines[0] if lines else ""
    if status == 503 and "logs.argus.io" not in message:
        message = f"the log API logs.argus.io is unavailable (the Argus operator's log server does not answer): {message}"
    return message or f"HTTP {status}"


def _log_file_hint(args: argparse.Namespace, namespace: str) -> str:
    """'; meanwhile the log is in the job folder: ...' when the task's status names its file."""
    try:
        task = get_task(args.task, namespace, args.kubeconfig, args.context)
        where = attempt_log(task.get("status") or {}, args.attempt)
    except (ClusterError, LogQueryError):
        return ""
    return f"; meanwhile the log is in the job folder: {where.user_path}" if where.user_path else ""


def _logs_via_api(args: argparse.Namespace, namespace: str) -> int:
    """GET .../namespaces/NS/argustasks/NAME/log through the API server, with the caller's
    kubeconfig (any authentication kubectl supports); the body is streamed as it comes."""
    import codecs

    prog = getattr(args, "prog", "argus")
    try:
        client = load_kube(args.kubeconfig, args.context)
    except ClusterError as exc:
        print(f"{prog} logs: {exc}", file=sys.stderr)
        return EXIT_FAIL
    query = LogQuery(follow=args.follow, tail_lines=args.tail, attempt=args.attempt, since_seconds=args.since)
    api, method, url, headers = log_request(client, namespace, args.task, list(query.params().items()),
                                            "text/plain, application/json")
    try:
        resp = api.call_api(method, url, header_params=headers, _request_timeout=None if args.follow else 120)
    except Exception as exc:  # noqa: BLE001 - urllib3's connection errors, said in one line
        print(f"{prog} logs: {unreachable(exc) or f'cannot reach the Kubernetes API server: {exc}'}", file=sys.stderr)
        return EXIT_FAIL
    raw = resp.response
    try:
        if resp.status >= 400:
            message = _api_message(resp.status, raw.data)
            if resp.status == 404 and message in NOT_SERVED_MESSAGES:
                message = not_served(_log_file_hint(args, namespace))
            print(f"{prog} logs: {message}", file=sys.stderr)
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


def register_logs_command(sub: Any) -> None:
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
