"""``argus doctor``: what a Ray cluster must offer for a task to start; checked on every worker
node by a small probe job, and the verdict on what the probe reports.

Pure: this module builds the probe job (its entrypoint, resources, runtime env and
submission id) and judges the facts gathered (Ray's node list, the cluster's version, the
probe's report, the probe job's end); the Ray calls are made by ``controller.doctor``
through the Ray port. docs/deploy.md ("Ray cluster requirements") explains each check.

The probe runs through the very path a task's driver runs through: the configured
entrypoint shell (``bash -lc``, a login shell: the PATH a task sees), with a runtime env
built as a task's is (the verl snapshot first on ``PYTHONPATH``), and a share of the worker
resource. It is pinned to its node by Ray's ``ray.io/node-id`` label selector (the Jobs
API's ``entrypoint_label_selector``: Ray 2.60 has it, 2.41 refuses the field), or, on a
cluster whose Jobs API predates it, by the node's ``node:<ip>`` resource. It reserves no GPU and no CPU, and only ``PROBE_WORKER_SHARE`` of the worker
resource: it never takes a GPU a task needs, and it delays a task's driver only on a node
whose every driver slot but a thousandth is taken, for the second the probe lasts.

Probe jobs are named ``doctor-...``, never ``argus-...`` (the operator's tasks' submission
ids), and carry the metadata ``argus.io/probe: doctor`` and none of a task's
(``argus.io/namespace``, ``name``, ``uid``): nothing mistakes them for tasks.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from .config import PlatformConfig
from .rayversion import TESTED_RAY, TOKEN_AUTH_SINCE, has_token_auth, newer_than_tested, older_than_supported

PROBE_PREFIX = "doctor-"
PROBE_METADATA_KEY = "argus.io/probe"
PROBE_WORKER_SHARE = 0.001  # of the worker resource (a task's driver takes 1)
REPORT_MARKER = "ARGUS-DOCTOR-REPORT "
PATH_MARKER = "ARGUS-DOCTOR-PATH "
NODE_ID_LABEL = "ray.io/node-id"
MAX_HOMES = 200  # homes the probe writes a scratch folder in (the rest are listed, not written)
CLUSTER = "cluster"  # the node column of the rows about the whole cluster


class Status(str, Enum):
    ok = "ok"
    warn = "warn"   # worth knowing, does not stop a task
    fail = "fail"   # a task would fail (exit 1)
    skip = "skip"   # not checked (says why)


class Check(str, Enum):
    """The checks, in the order rows are shown."""

    ray_version = "ray-version"
    token = "token"
    workers = "workers"
    worker_resource = "worker-resource"
    probe = "probe"
    python3 = "python3"
    verl = "verl-snapshot"
    private = "private-tree"
    homes = "homes-writable"
    hf_home = "hf-home"
    gpus = "gpus"


PROBE_CHECKS = (Check.python3, Check.verl, Check.private, Check.homes, Check.hf_home, Check.gpus)


@dataclass(frozen=True)
class Row:
    node: str
    check: Check
    status: Status
    detail: str
    fix: str = ""
    found: str | None = None  # the verl-snapshot row: the version the probe read there (None: none read)

    def as_json(self) -> dict[str, str]:
        return {"node": self.node, "check": self.check.value, "status": self.status.value, "detail": self.detail, "fix": self.fix}


@dataclass(frozen=True)
class Node:
    """An alive Ray node as the doctor needs it."""

    node_id: str
    ip: str | None
    is_head: bool
    resources: Mapping[str, float] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.node_id[:12]}{f' ({self.ip})' if self.ip else ''}"


@dataclass(frozen=True)
class DoctorSettings:
    """What the checks compare against. ``expected_verl``: the verl releases Argus composes
    with, one of which the snapshot must run (empty: the snapshot's version is shown, not compared). The shared Hugging Face
    cache is the one jobs get (``PlatformConfig.hf_cache``, the ``--hf-home`` flag)."""

    config: PlatformConfig
    expected_verl: tuple[str, ...] = ()
    token_configured: bool = False

    def shared_hf(self) -> str:
        return self.config.hf_cache() or ""


@dataclass(frozen=True)
class ProbeJob:
    """One probe as the Jobs API is given it; ``fallback_resources`` pin it where the
    cluster's Jobs API has no label selector (``node:<ip>``)."""

    submission_id: str
    node_id: str
    entrypoint: str
    entrypoint_resources: dict[str, float]
    label_selector: dict[str, str]
    fallback_resources: dict[str, float] | None
    runtime_env: dict[str, Any]
    metadata: dict[str, str]


@dataclass(frozen=True)
class ProbeOutcome:
    """How a probe ended: ``status`` is Ray's (SUCCEEDED, FAILED, ...) or "NOT_STARTED"
    (still pending at the deadline, then stopped); ``log`` is what it printed; ``pinned_by``
    says how it was pinned ("label" or "ip")."""

    status: str
    message: str = ""
    log: str = ""
    pinned_by: str = "label"
    waited_seconds: float = 0.0


def is_probe(submission_id: str | None, metadata: Mapping[str, str] | None = None) -> bool:
    return bool(submission_id and submission_id.startswith(PROBE_PREFIX)) or bool(metadata and PROBE_METADATA_KEY in metadata)


def probe_id(node_id: str, nonce: str) -> str:
    """``doctor-<node id, 12>-<nonce>``: readable in ``ray job list``; Ray never reuses an id."""
    return f"{PROBE_PREFIX}{node_id[:12]}-{nonce}"


# The probe itself: run by the login shell's python3 (any Python 3.6+), one JSON line out.
PROBE_PROGRAM = r'''
import json, os, shutil, subprocess, sys
args = json.loads(sys.argv[1])
out = {"python": sys.executable, "python_version": "%d.%d.%d" % sys.version_info[:3],
       "uid": os.getuid(), "gid": os.getgid(), "path": os.environ.get("PATH", "")}
verl = args["verl"]
init = os.path.join(verl, "verl", "__init__.py")
vfile = os.path.join(verl, "verl", "version", "version")
version = None
try:
    with open(vfile) as f:
        version = f.read().strip() or None
except OSError:
    pass
out["verl"] = {"path": verl, "present": os.path.isfile(init), "version": version}
root = args["root"]
out["private"] = {"root": root, "is_dir": os.path.isdir(root), "is_mount": os.path.ismount(root),
                  "missing": [d for d in ("users", "datasets", "hf") if not os.path.isdir(os.path.join(root, d))]}
users = os.path.join(root, "users")
homes = {"count": 0, "checked": 0, "unwritable": []}
try:
    names = sorted(n for n in os.listdir(users) if os.path.isdir(os.path.join(users, n)))
except OSError:
    names = []
homes["count"] = len(names)
for name in names[:args["max_homes"]]:
    scratch = os.path.join(users, name, ".argus-doctor-" + args["id"])
    homes["checked"] += 1
    try:
        os.mkdir(scratch)
        os.rmdir(scratch)
    except OSError as exc:
        homes["unwritable"].append({"home": name, "error": exc.strerror or str(exc)})
out["homes"] = homes
hf = args["hf"]
out["hf"] = {"env": os.environ.get("HF_HOME"), "shared": hf,
             "is_dir": bool(hf) and os.path.isdir(hf), "writable": bool(hf) and os.access(hf, os.W_OK | os.X_OK)}
gpus = {"cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "nvidia_smi": None, "nvidia_smi_error": None}
smi = shutil.which("nvidia-smi")
if smi:
    try:
        listing = subprocess.run([smi, "-L"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=20)
        text = listing.stdout.decode(errors="replace")
        if listing.returncode == 0:
            gpus["nvidia_smi"] = sum(1 for line in text.splitlines() if line.startswith("GPU "))
        else:
            gpus["nvidia_smi_error"] = text.strip().splitlines()[-1][:200] if text.strip() else "exit %d" % listing.returncode
    except Exception as exc:
        gpus["nvidia_smi_error"] = str(exc)[:200]
out["gpus"] = gpus
print("ARGUS-DOCTOR-REPORT " + json.dumps(out), flush=True)
'''


def probe_script(settings: DoctorSettings, submission_id: str) -> str:
    """The shell text the entrypoint shell runs: without python3 on the login PATH it says
    so (and the PATH) with the shell's builtins alone; else the probe program runs."""
    config = settings.config
    args = json.dumps({"verl": config.verl_code(), "root": config.root, "hf": settings.shared_hf(),
                       "id": submission_id, "max_homes": MAX_HOMES}, sort_keys=True)
    return (f"if ! command -v python3 >/dev/null 2>&1; then\n"
            f"  printf '%s\\n' {shlex.quote(REPORT_MARKER + json.dumps({'python': None}))}\n"
            f"  printf '{PATH_MARKER}%s\\n' \"$PATH\"\n"
            f"  exit 0\nfi\n"
            f"exec python3 -c {shlex.quote(PROBE_PROGRAM)} {shlex.quote(args)}")


def probe_job(settings: DoctorSettings, node: Node, nonce: str) -> ProbeJob:
    config = settings.config
    sid = probe_id(node.node_id, nonce)
    share = {config.worker_resource: PROBE_WORKER_SHARE} if config.worker_resource in node.resources else {}
    return ProbeJob(
        submission_id=sid, node_id=node.node_id,
        entrypoint=f"{config.entrypoint_shell} {shlex.quote(probe_script(settings, sid))}",
        entrypoint_resources=share,
        label_selector={NODE_ID_LABEL: node.node_id},
        fallback_resources={**share, f"node:{node.ip}": PROBE_WORKER_SHARE} if node.ip else None,
        # As a task's: the verl snapshot first on PYTHONPATH (core.plan.resolve_plan).
        runtime_env={"env_vars": {"PYTHONPATH": config.verl_code(), "ARGUS_DOCTOR": "1",
                                  **({"HF_HOME": config.hf_cache()} if config.hf_cache() else {})}},
        metadata={PROBE_METADATA_KEY: "doctor", "argus.io/node": node.node_id},
    )


def parse_report(log: str) -> tuple[dict[str, Any] | None, str | None]:
    """The probe's report (the last marker line) and the PATH it printed without python3."""
    report, path = None, None
    for line in log.splitlines():
        if line.startswith(REPORT_MARKER):
            try:
                found = json.loads(line[len(REPORT_MARKER):])
            except ValueError:
                continue
            if isinstance(found, dict):
                report = found
        elif line.startswith(PATH_MARKER):
            path = line[len(PATH_MARKER):]
    return report, path


# ------------------------------------------------------------------------------ verdicts

def cluster_rows(settings: DoctorSettings, version: str | None, auth_error: str | None, nodes: Sequence[Node]) -> list[Row]:
    """The rows about the whole cluster: its Ray version, the token, its worker nodes."""
    rows: list[Row] = []
    oldest, newest = TESTED_RAY
    if auth_error is not None:
        fix = ("pass the cluster's token: --ray-token-file FILE (ARGUS_RAY_TOKEN_FILE)" if not settings.token_configured else
               "the token file does not hold this cluster's token: check the Secret the operator mounts")
        rows.append(Row(CLUSTER, Check.token, Status.fail, f"the Ray dashboard refused the credentials ({auth_error})", fix))
        return rows
    if version is None:
        rows.append(Row(CLUSTER, Check.ray_version, Status.skip, "the dashboard did not report its Ray version"))
    elif older_than_supported(version):
        rows.append(Row(CLUSTER, Check.ray_version, Status.fail, f"Ray {version}, older than the supported {oldest} to {newest}",
                        f"run Ray {oldest} or newer on the cluster (verl needs ray>={oldest} too)"))
    elif newer_than_tested(version):
        rows.append(Row(CLUSTER, Check.ray_version, Status.warn, f"Ray {version}, newer than the tested {oldest} to {newest}",
                        "it may work; the versions in the range are the ones CI runs"))
    else:
        rows.append(Row(CLUSTER, Check.ray_version, Status.ok, f"Ray {version} (supported: {oldest} to {newest})"))
    if settings.token_configured and version is not None and not has_token_auth(version):
        rows.append(Row(CLUSTER, Check.token, Status.warn, f"a token is configured, but Ray before {TOKEN_AUTH_SINCE} has no token "
                        "authentication: it is sent and ignored", "drop --ray-token-file, or run Ray 2.52 or newer with RAY_AUTH_MODE=token"))
    else:
        rows.append(Row(CLUSTER, Check.token, Status.ok, "the dashboard accepted the credentials" +
                        (" (the configured token)" if settings.token_configured else " (no token configured)")))
    resource = settings.config.worker_resource
    if not any(resource in n.resources and not n.is_head for n in nodes):
        rows.append(Row(CLUSTER, Check.workers, Status.fail, f"no alive node carries the worker resource {resource!r}: no task can start",
                        f"start the GPU workers with --resources='{{\"{resource}\": N}}' (N: drivers per node)"))
    else:
        count = sum(1 for n in nodes if resource in n.resources and not n.is_head)
        rows.append(Row(CLUSTER, Check.workers, Status.ok, f"{count} worker node(s) with {resource!r}, "
                        f"{sum(1 for n in nodes if not n.is_head)} non-head node(s) alive"))
    return rows


def nodes_to_probe(nodes: Sequence[Node]) -> list[Node]:
    """Every alive node that is not the head (the head runs no task's driver)."""
    return [n for n in nodes if not n.is_head]


def worker_resource_row(settings: DoctorSettings, node: Node) -> Row:
    resource = settings.config.worker_resource
    amount = node.resources.get(resource)
    if node.is_head:
        return Row(node.label, Check.worker_resource, Status.warn, f"the head carries {resource}={amount:g}: drivers may run on the head",
                   f"remove {resource!r} from the head's --resources")
    if amount is None:
        return Row(node.label, Check.worker_resource, Status.fail,
                   f"no {resource!r} resource: Argus never runs a driver here, its {node.resources.get('GPU', 0):g} GPU(s) sit idle",
                   f"start this node with --resources='{{\"{resource}\": N}}' (N: how many drivers it may run at once)")
    if amount < 1:
        return Row(node.label, Check.worker_resource, Status.fail, f"{resource}={amount:g}: a driver takes 1, none fits",
                   f"give the node {resource} >= 1 (the number of drivers it may run at once)")
    return Row(node.label, Check.worker_resource, Status.ok, f"{resource}={amount:g}: up to {int(amount)} driver(s) at once")


def probe_rows(settings: DoctorSettings, node: Node, outcome: ProbeOutcome) -> list[Row]:
    """The rows of one node's probe."""
    label = node.label
    pinned = "" if outcome.pinned_by == "label" else f" (pinned by node:{node.ip}: this Jobs API has no label selector)"
    if outcome.status == "NOT_STARTED":
        why = outcome.message or f"still pending after {outcome.waited_seconds:.0f} s"
        rows = [Row(label, Check.probe, Status.warn, f"the probe did not start: {why}{pinned}",
                    "its driver slots may all be taken (try again when tasks end), or the raylet is unhealthy (ray status)")]
        return rows + [Row(label, c, Status.skip, "not checked: the probe did not run") for c in PROBE_CHECKS]
    report, path = parse_report(outcome.log)
    if report is None:
        tail = " | ".join(outcome.log.strip().splitlines()[-3:])[:300]
        rows = [Row(label, Check.probe, Status.fail,
                    f"the probe job {outcome.status}: {outcome.message or 'no report'}{f'; its log ends: {tail}' if tail else ''}{pinned}",
                    f"read the job's log (ray job logs); the entrypoint shell is {settings.config.entrypoint_shell!r}")]
        return rows + [Row(label, c, Status.skip, "not checked: the probe gave no report") for c in PROBE_CHECKS]
    rows = [Row(label, Check.probe, Status.ok, f"ran through {settings.config.entrypoint_shell!r}{pinned}")]
    if report.get("python") is None:
        rows.append(Row(label, Check.python3, Status.fail, f"no python3 on the login shell's PATH ({path or '?'})",
                        "put the training Python on PATH for login shells (a file in /etc/profile.d/ that exports PATH)"))
        return rows + [Row(label, c, Status.skip, "not checked: needs python3") for c in PROBE_CHECKS if c is not Check.python3]
    uid = report.get("uid")
    rows.append(Row(label, Check.python3, Status.ok, f"{report.get('python')} (Python {report.get('python_version')}), uid {uid}"))
    rows.append(_verl_row(settings, label, report.get("verl") or {}))
    rows.append(_private_row(settings, label, report.get("private") or {}))
    rows.append(_homes_row(settings, label, report.get("homes") or {}, uid))
    rows.append(_hf_row(settings, label, report.get("hf") or {}, uid))
    rows.append(_gpus_row(label, report.get("gpus") or {}, node.resources.get("GPU", 0.0)))
    return rows


def _verl_row(settings: DoctorSettings, label: str, verl: Mapping[str, Any]) -> Row:
    path = verl.get("path") or settings.config.verl_code()
    if not verl.get("present"):
        return Row(label, Check.verl, Status.fail, f"no verl snapshot at {path} (no verl/__init__.py)",
                   f"put verl's source tree at {path} on the shared tree (or point --verl-code-path at it)")
    version, expected = verl.get("version"), settings.expected_verl
    found = version if isinstance(version, str) and version else None
    if not expected:
        return Row(label, Check.verl, Status.ok if version else Status.warn,
                   f"{path}: verl {version or '(no verl/version/version)'} (no expected version given: not compared)",
                   "" if version else "a snapshot of a verl release has verl/version/version", found=found)
    if version not in expected:
        releases = " or ".join(expected)
        return Row(label, Check.verl, Status.fail, f"{path}: verl {version or 'of unknown version'}, Argus composes with verl {releases}",
                   f"put verl {releases} at {path}, or give Argus the snapshot's config tree (--verl-config)", found=found)
    return Row(label, Check.verl, Status.ok, f"{path}: verl {version} (as expected)", found=found)


def snapshot_versions(rows: Sequence[Row]) -> tuple[str, ...]:
    """The verl versions the probes read in the cluster's snapshot, each once (sorted); empty
    when no probe read one (Ray unreachable, no probe started, no verl/version/version)."""
    return tuple(sorted({r.found for r in rows if r.check is Check.verl and r.found}))


def _private_row(settings: DoctorSettings, label: str, private: Mapping[str, Any]) -> Row:
    root = private.get("root") or settings.config.root
    if not private.get("is_dir"):
        return Row(label, Check.private, Status.fail, f"{root} does not exist on this node",
                   f"mount the shared tree at {root} on every worker (the same path everywhere)")
    missing = list(private.get("missing") or [])
    if missing:
        return Row(label, Check.private, Status.fail, f"{root} lacks {', '.join(m + '/' for m in missing)}",
                   f"is the right file system mounted at {root}? it holds users/, datasets/ and hf/")
    mount = "a mount point" if private.get("is_mount") else "not a mount point itself (a folder of a mounted file system?)"
    return Row(label, Check.private, Status.ok, f"{root} with users/, datasets/, hf/ ({mount})")


def _homes_row(settings: DoctorSettings, label: str, homes: Mapping[str, Any], uid: Any) -> Row:
    users = settings.config.users_root()
    count, checked = int(homes.get("count") or 0), int(homes.get("checked") or 0)
    bad = list(homes.get("unwritable") or [])
    if bad:
        names = ", ".join(f"{b.get('home')} ({b.get('error')})" for b in bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        return Row(label, Check.homes, Status.fail, f"{len(bad)} of {checked} home(s) not writable by uid {uid}: {names}",
                   f"let uid {uid} create folders in every home under {users} (owner, group or ACL; jobs mkdir their job folder there)")
    if count == 0:
        return Row(label, Check.homes, Status.warn, f"no homes under {users} yet", f"create the users' homes, writable by uid {uid}")
    more = f" (the first {checked} of {count} written)" if checked < count else ""
    return Row(label, Check.homes, Status.ok, f"uid {uid} created and removed a folder in {checked} home(s){more}")


def _hf_row(settings: DoctorSettings, label: str, hf: Mapping[str, Any], uid: Any) -> Row:
    shared = settings.shared_hf()
    env = hf.get("env")
    if not shared:
        return Row(label, Check.hf_home, Status.skip, f"no shared Hugging Face cache configured (the login shell's HF_HOME: {env or 'unset'})")
    if not hf.get("is_dir"):
        return Row(label, Check.hf_home, Status.fail, f"the shared Hugging Face cache {shared} does not exist",
                   f"create {shared} on the shared tree (every task downloads its models again without it)")
    if not hf.get("writable"):
        return Row(label, Check.hf_home, Status.warn, f"{shared} is not writable by uid {uid}: models not in it yet cannot be downloaded",
                   f"let uid {uid} write in {shared}, or fill it beforehand")
    note = "" if env in (None, shared) else f"; the login shell sets HF_HOME={env}"
    return Row(label, Check.hf_home, Status.ok, f"{shared} exists and is writable by uid {uid}{note}")


def _gpus_row(label: str, gpus: Mapping[str, Any], ray_gpus: float) -> Row:
    smi, cvd = gpus.get("nvidia_smi"), gpus.get("cuda_visible_devices")
    seen: int | None = None
    how = ""
    if isinstance(smi, int):
        seen, how = smi, "nvidia-smi lists"
    elif cvd not in (None, ""):
        seen, how = len([d for d in str(cvd).split(",") if d.strip()]), "CUDA_VISIBLE_DEVICES names"
    if seen is None:
        err = f" (nvidia-smi: {gpus.get('nvidia_smi_error')})" if gpus.get("nvidia_smi_error") else ""
        if ray_gpus:
            return Row(label, Check.gpus, Status.warn, f"Ray counts {ray_gpus:g} GPU(s); the node shows none: no nvidia-smi, no "
                       f"CUDA_VISIBLE_DEVICES{err}", "install the NVIDIA driver utilities in the worker image to have them compared")
        return Row(label, Check.gpus, Status.ok, f"no GPUs in Ray's count, none shown{err}")
    if seen != int(ray_gpus):
        return Row(label, Check.gpus, Status.fail, f"{how} {seen} GPU(s), Ray counts {ray_gpus:g}",
                   f"start the node with --num-gpus={seen} (or fix the device plugin / CUDA_VISIBLE_DEVICES)")
    return Row(label, Check.gpus, Status.ok, f"{how} {seen} GPU(s), as Ray counts")


def failed(rows: Sequence[Row]) -> bool:
    return any(r.status is Status.fail for r in rows)


def summary(rows: Sequence[Row]) -> dict[str, int]:
    counts = {s.value: 0 for s in Status}
    for r in rows:
        counts[r.status.value] += 1
    return counts


def rows_json(rows: Sequence[Row]) -> dict[str, Any]:
    return {"ok": not failed(rows), "summary": summary(rows), "checks": [r.as_json() for r in rows]}


def rows_table(rows: Sequence[Row]) -> list[tuple[str, str, str, str]]:
    """Rows for a table: NODE, CHECK, STATUS, DETAIL (a failure's fix on the next line)."""
    out = [("NODE", "CHECK", "STATUS", "DETAIL")]
    for r in rows:
        out.append((r.node, r.check.value, r.status.value.upper(), r.detail))
        if r.fix and r.status in (Status.fail, Status.warn):
            out.append(("", "", "", f"fix: {r.fix}"))
    return out

