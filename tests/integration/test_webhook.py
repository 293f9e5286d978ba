"""Issue 5 on the real API server, which calls the operator's validating webhook over HTTPS
on loopback: bad tasks fail at ``kubectl apply`` (and ``--dry-run=server``) with our
message, weak problems print ``Warning:``, spec changes are refused in our words, the
failure policy decides what happens while the operator is down (and the operator's own
validation still rejects what slipped through), and renewed certificate files are picked up.

Each test's operator writes its own ValidatingWebhookConfiguration (a unique name, only
the test's namespaces selected) and the fixture deletes it afterwards, so the other tests'
operators (which run without the webhook) are never affected."""

from __future__ import annotations

import base64
import json
import os
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from argus_testbed import certs, harness
from argus_testbed.harness import EXAMPLES, OperatorProcess, advanced_task, apply_file, apply_text, get_task, ppo_command, wait_for, wait_phase
from argus_testbed.ports import free_port

pytestmark = pytest.mark.integration

DENIED = 'admission webhook "validate-argustask.argus.io" denied the request'
# A weak problem (the task runs): a reward file without its function's name. (A reward
# keyword without its '+' was the weak problem here until issue 21: Hydra's composition now
# refuses it at apply, in Hydra's words.)
WEAK = "custom_reward_function.path=$HOME/code/reward.py"
WEAK_MESSAGE = "is not set: verl will look for a function named compute_score in the reward file"
PROBE = "webhook-probe"


def hostile_probe(name: str = PROBE) -> str:
    return advanced_task(name, "echo python3 -m verl.trainer.main_ppo")


def exists(cp: Any, ns: str, name: str) -> bool:
    out = cp.kubectl("get", "argustask", name, "-n", ns, "--ignore-not-found", "-o", "name")
    return bool(out.stdout.strip())


def vwc(cp: Any, name: str) -> dict[str, Any] | None:
    out = cp.kubectl("get", "validatingwebhookconfiguration", name, "--ignore-not-found", "-o", "json").stdout
    return json.loads(out) if out.strip() else None


def ray_jobs_for(ray_cluster: Any, namespace: str) -> list:
    return harness.ray_jobs_for(ray_cluster.dashboard_url, namespace)


class Webhook:
    """An operator serving the webhook, and how to reach it."""

    def __init__(self, op: OperatorProcess, config_name: str, url: str, namespaces: list[str]):
        self.op, self.config_name, self.url, self.namespaces = op, config_name, url, namespaces

    def wait_ready(self, cp: Any, timeout: float = 60) -> None:
        """Until the API server calls our webhook: a server-side dry run of a bad task is denied."""
        def denied() -> bool:
            out = dry_run(cp, self.namespaces[0], hostile_probe())
            return out.returncode != 0 and DENIED in out.stderr
        wait_for(denied, timeout, f"webhook {self.config_name} to answer", interval=0.3,
                 on_timeout=lambda: f"config: {json.dumps(vwc(cp, self.config_name), indent=1)}\noperator log:\n{self.op.log_tail()}")

    def ssl_context(self, cp: Any) -> ssl.SSLContext:
        """Trusting exactly what the API server is told to trust (the configuration's caBundle)."""
        ca = base64.b64decode(vwc(cp, self.config_name)["webhooks"][0]["clientConfig"]["caBundle"]).decode()
        return ssl.create_default_context(cadata=ca)

    def review(self, cp: Any, request: dict[str, Any]) -> dict[str, Any]:
        """POST an AdmissionReview to the webhook as the API server would."""
        body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {"uid": str(uuid.uuid4()), "kind": {"group": "argus.io", "version": "v1alpha1", "kind": "ArgusTask"},
                            "resource": {"group": "argus.io", "version": "v1alpha1", "resource": "argustasks"},
                            "userInfo": {"username": "tester"}, **request}}
        req = urllib.request.Request(f"{self.url}/validate-argustask", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, context=self.ssl_context(cp), timeout=10) as resp:
            return json.loads(resp.read())["response"]


@pytest.fixture
def webhook(control_plane: Any, run_operator: Callable[..., OperatorProcess]) -> Iterator[Callable[..., Webhook]]:
    names: list[str] = []

    def start(namespaces: list[str], *, policy: str | None = None, extra_args: list[str] = (), ready: bool = True) -> Webhook:
        port = free_port()
        url = f"https://127.0.0.1:{port}"
        name = f"argus-test-{uuid.uuid4().hex[:8]}"
        names.append(name)
        args = ["--webhook", "--webhook-listen-host", "127.0.0.1", "--webhook-port", str(port), "--webhook-url", url,
                "--webhook-config-name", name, *extra_args]
        if policy:
            args += ["--webhook-failure-policy", policy]
        hook = Webhook(run_operator(namespaces, extra_args=args), name, url, namespaces)
        if ready:
            hook.wait_ready(control_plane)
        return hook

    yield start
    for name in names:
        control_plane.kubectl("delete", "validatingwebhookconfiguration", name, "--ignore-not-found", check=False)


def dry_run(cp: Any, ns: str, text: str) -> Any:
    return cp.kubectl("apply", "--dry-run=server", "-n", ns, "-f", "-", input=text, check=False)


def test_bad_tasks_are_refused_at_apply_with_every_problem(control_plane, user_namespace, webhook):
    ns = user_namespace("alice")
    bare = user_namespace(None, prefix="bare")
    hook = webhook([ns, bare])

    config = vwc(control_plane, hook.config_name)
    (entry,) = config["webhooks"]
    assert entry["sideEffects"] == "None" and entry["failurePolicy"] == "Ignore" and entry["timeoutSeconds"] == 10
    assert entry["clientConfig"]["url"] == f"{hook.url}/validate-argustask"
    assert entry["namespaceSelector"]["matchExpressions"][0]["values"] == sorted([ns, bare])
    assert entry["rules"][0]["operations"] == ["CREATE", "UPDATE"] and entry["matchConditions"]

    # The example the operator used to reject after the fact: now kubectl apply itself fails.
    hostile = control_plane.kubectl("apply", "-n", ns, "-f", str(EXAMPLES / "hostile-other-user.yaml"), check=False)
    assert hostile.returncode != 0 and DENIED in hostile.stderr, hostile.stderr
    assert "another user's home (bob)" in hostile.stderr
    assert not exists(control_plane, ns, "hostile-other-user")

    echo = apply_text(control_plane, ns, advanced_task("echo-only", "echo python3 -m verl.trainer.main_ppo"), check=False)
    assert echo.returncode != 0 and DENIED in echo.stderr and "does not run an allowed entrypoint" in echo.stderr
    assert not exists(control_plane, ns, "echo-only")

    # Every problem is listed, one per line, not just the first.
    two = advanced_task("two-problems", ppo_command(nnodes=2).replace("$HOME/datasets", "$HOME/../bob/datasets"))
    both = apply_text(control_plane, ns, two, check=False)
    assert both.returncode != 0 and DENIED in both.stderr
    assert "another user's home (bob)" in both.stderr and "trainer.nnodes" in both.stderr, both.stderr
    assert not exists(control_plane, ns, "two-problems")

    # A basic-spec field on an advanced spec (the CRD's CEL rule answers first; either way: refused, not created).
    mixed = json.loads(advanced_task("mixed", ppo_command()))
    mixed["spec"]["modelId"] = "Qwen/Qwen2.5-0.5B-Instruct"
    refused = apply_text(control_plane, ns, json.dumps(mixed), check=False)
    assert refused.returncode != 0 and "spec.kind is advanced" in refused.stderr, refused.stderr
    assert not exists(control_plane, ns, "mixed")

    # A namespace without the user label: refused with the onboarding hint.
    bare_apply = apply_text(control_plane, bare, advanced_task("not-onboarded", ppo_command()), check=False)
    assert bare_apply.returncode != 0 and DENIED in bare_apply.stderr
    assert f"namespace {bare} has no argus.io/user label" in bare_apply.stderr
    assert not exists(control_plane, bare, "not-onboarded")

    # A server-side dry run (what a GitOps pipeline runs before merging) gives the same answer.
    for path, needle in ((EXAMPLES / "hostile-other-user.yaml", "another user's home (bob)"),):
        out = control_plane.kubectl("apply", "--dry-run=server", "-n", ns, "-f", str(path), check=False)
        assert out.returncode != 0 and DENIED in out.stderr and needle in out.stderr
    out = dry_run(control_plane, ns, advanced_task("echo-only", "echo python3 -m verl.trainer.main_ppo"))
    assert out.returncode != 0 and echo.stderr.split(DENIED)[1] == out.stderr.split(DENIED)[1]

    # A good task goes through, and the operator queues it; generateName works too (the name
    # is made before validating admission).
    apply_file(control_plane, ns, EXAMPLES / "ppo-advanced.yaml")
    assert wait_phase(control_plane, ns, "ppo-advanced", ("Queued", "Submitted", "Running", "Succeeded"), op=hook.op)
    generated = json.loads(advanced_task("x", ppo_command()))
    generated["metadata"] = {"generateName": "gen-"}
    made = control_plane.kubectl("create", "-n", ns, "-f", "-", "-o", "name", input=json.dumps(generated))
    assert made.stdout.strip().startswith("argustask.argus.io/gen-")


def test_weak_problem_is_admitted_with_a_warning_and_dry_run_agrees(control_plane, user_namespace, webhook):
    ns = user_namespace("alice")
    hook = webhook([ns])
    task = advanced_task("weak", ppo_command(steps=3, extra=WEAK))

    dry = dry_run(control_plane, ns, task)
    assert dry.returncode == 0, dry.stderr
    assert "Warning: spec.command:" in dry.stderr and WEAK_MESSAGE in dry.stderr, dry.stderr
    assert "server dry run" in dry.stdout
    assert not exists(control_plane, ns, "weak")  # the dry run created nothing

    applied = apply_text(control_plane, ns, task)
    assert "Warning: spec.command:" in applied.stderr and WEAK_MESSAGE in applied.stderr, applied.stderr
    status = wait_phase(control_plane, ns, "weak", ("Queued", "Submitted", "Running", "Succeeded"), op=hook.op)["status"]
    assert any(WEAK_MESSAGE in w for w in status["warnings"])

    # Re-applying the same manifest changes nothing: no re-validation, no warning.
    again = apply_text(control_plane, ns, task)
    assert "unchanged" in again.stdout and "Warning" not in again.stderr


def test_a_missing_input_is_a_warning_at_apply_not_a_denial(control_plane, user_namespace, webhook, argus_root: Path):
    """Issue 36, item 5: a data file not in the shared tree (the operator mounts it here at
    --root) is one Warning line at kubectl apply; the task is created and waits for it."""
    ns = user_namespace("alice")
    hook = webhook([ns])
    data = f"later-{uuid.uuid4().hex[:8]}.parquet"
    command = ppo_command(steps=3).replace("data.train_files=$HOME/common/datasets/gsm8k/train.parquet", f"data.train_files=$HOME/datasets/{data}")
    applied = apply_text(control_plane, ns, advanced_task("later", command))
    assert "created" in applied.stdout, applied.stderr
    assert (f"Warning: data.train_files: {argus_root}/users/alice/datasets/{data} does not exist in the shared tree (the file verl "
            "reads at start): the task will wait in the queue (InputMissing) until it exists") in applied.stderr, applied.stderr
    wait_for(lambda: (get_task(control_plane, ns, "later").get("status") or {}).get("reason") == "InputMissing", 60,
             "the task to wait for its data", on_timeout=hook.op.log_tail)


def test_spec_changes_are_refused_in_our_words(control_plane, user_namespace, webhook):
    ns = user_namespace("alice")
    hook = webhook([ns])
    apply_text(control_plane, ns, advanced_task("fixed", ppo_command(steps=1000)))
    # Through kubectl: the CRD's CEL rule and the webhook say the same thing.
    changed = apply_text(control_plane, ns, advanced_task("fixed", ppo_command(steps=3)), check=False)
    assert changed.returncode != 0 and "spec.command is immutable: an ArgusTask cannot be changed after creation" in changed.stderr
    # Metadata changes and cancel false -> true go through (the operator's own writes do too).
    control_plane.kubectl("label", "argustask", "fixed", "-n", ns, "team=rl")
    control_plane.kubectl("patch", "argustask", "fixed", "-n", ns, "--type=merge", "-p", '{"spec":{"cancel":true}}')
    wait_phase(control_plane, ns, "fixed", "Stopped", timeout=60, op=hook.op)

    # The webhook's own answer (the API server runs CEL first, so ask it directly, over the
    # same TLS and with the same CA bundle the API server uses).
    task = get_task(control_plane, ns, "fixed")
    old = {k: task[k] for k in ("apiVersion", "kind", "metadata", "spec")}
    new = json.loads(json.dumps(old))
    new["spec"]["command"] = ppo_command(steps=3)
    new["spec"]["priority"] = 7
    answer = hook.review(control_plane, {"operation": "UPDATE", "namespace": ns, "name": "fixed", "object": new, "oldObject": old})
    assert answer["allowed"] is False and answer["status"]["code"] == 422
    assert answer["status"]["message"].splitlines() == [
        "spec.command is immutable: an ArgusTask cannot be changed after creation (only spec.cancel may go from false to true, and spec.suspend and spec.ttlSecondsAfterFinished may change); create a new task with a new name instead",
        "spec.priority is immutable: an ArgusTask cannot be changed after creation (only spec.cancel may go from false to true, and spec.suspend and spec.ttlSecondsAfterFinished may change); create a new task with a new name instead",
    ]
    back = json.loads(json.dumps(old))
    back["spec"]["cancel"] = False
    answer = hook.review(control_plane, {"operation": "UPDATE", "namespace": ns, "name": "fixed", "object": back, "oldObject": old})
    assert answer["allowed"] is False and answer["status"]["message"] == "spec.cancel cannot go back from true to false: a cancelled task stays cancelled"
    relabelled = json.loads(json.dumps(old))
    relabelled["metadata"].setdefault("labels", {})["x"] = "y"
    answer = hook.review(control_plane, {"operation": "UPDATE", "namespace": ns, "name": "fixed", "object": relabelled, "oldObject": old})
    assert answer["allowed"] is True and "warnings" not in answer
    # CREATE, dry run or not, answers the same.
    hostile = json.loads(hostile_probe("direct"))
    hostile["metadata"]["namespace"] = ns
    for dry in (False, True):
        answer = hook.review(control_plane, {"operation": "CREATE", "namespace": ns, "name": "direct", "object": hostile, "dryRun": dry})
        assert answer["allowed"] is False and "does not run an allowed entrypoint" in answer["status"]["message"]


def test_operator_down_with_failure_policy_ignore_the_backstop_rejects(control_plane, ray_cluster, user_namespace, webhook):
    ns = user_namespace("alice")
    hook = webhook([ns])  # Ignore is the default
    assert vwc(control_plane, hook.config_name)["webhooks"][0]["failurePolicy"] == "Ignore"
    hook.op.stop()
    # The configuration stays in place: the API server tries the webhook, fails, and admits.
    assert vwc(control_plane, hook.config_name)["webhooks"]
    apply_file(control_plane, ns, EXAMPLES / "hostile-other-user.yaml")
    assert exists(control_plane, ns, "hostile-other-user")
    # It failed open on a refused connection (no wait for the webhook timeout): the API
    # server's own log says so.
    if hasattr(control_plane, "log_dir"):
        apiserver_log = (control_plane.log_dir / "kube-apiserver.log").read_text(errors="replace")
        assert "failing open validate-argustask.argus.io" in apiserver_log and "connect: connection refused" in apiserver_log
    # Once the operator is back, its own validation rejects the task; it never reaches Ray.
    hook.op.restart()
    status = wait_phase(control_plane, ns, "hostile-other-user", ("Rejected", "Queued", "Succeeded"), op=hook.op)["status"]
    assert status["phase"] == "Rejected" and "another user's home (bob)" in status["message"]
    hook.wait_ready(control_plane)  # and the webhook is back (with a new self-made certificate)
    # The operator acts on later tasks (a positive sign it went on), and Ray never sees the
    # rejected one: its job list is read all along.
    apply_text(control_plane, ns, advanced_task("canary", ppo_command(steps=3)))

    def canary_done() -> bool:
        assert [j.submission_id for j in ray_jobs_for(ray_cluster, ns) if not j.submission_id.startswith(f"argus-{ns}-canary-")] == []
        return (get_task(control_plane, ns, "canary").get("status") or {}).get("phase") == "Succeeded"
    wait_for(canary_done, 120, "the canary task to succeed", on_timeout=hook.op.log_tail)


def test_operator_down_with_failure_policy_fail_refuses(control_plane, user_namespace, webhook):
    ns = user_namespace("alice")
    hook = webhook([ns], policy="Fail")
    assert vwc(control_plane, hook.config_name)["webhooks"][0]["failurePolicy"] == "Fail"
    apply_text(control_plane, ns, advanced_task("before", ppo_command(steps=1000)))
    hook.op.stop()
    refused = apply_file_checked(control_plane, ns, EXAMPLES / "ppo-advanced.yaml")
    assert refused.returncode != 0 and "failed calling webhook" in refused.stderr, refused.stderr
    assert not exists(control_plane, ns, "ppo-advanced")
    # A spec change (here: cancel) is refused too, but updates that leave the spec alone
    # (labels, an admin removing a finalizer) never call the webhook (matchConditions).
    cancel = control_plane.kubectl("patch", "argustask", "before", "-n", ns, "--type=merge", "-p", '{"spec":{"cancel":true}}', check=False)
    assert cancel.returncode != 0 and "failed calling webhook" in cancel.stderr
    control_plane.kubectl("label", "argustask", "before", "-n", ns, "team=rl")
    hook.op.restart()
    hook.wait_ready(control_plane)
    apply_file(control_plane, ns, EXAMPLES / "ppo-advanced.yaml")
    assert exists(control_plane, ns, "ppo-advanced")


def apply_file_checked(cp: Any, ns: str, path: Path) -> Any:
    return cp.kubectl("apply", "-n", ns, "-f", str(path), check=False)


def _mounted_secret(folder: Path, ca: certs.CertificateAuthority) -> None:
    """Write tls.crt/tls.key/ca.crt as the kubelet updates a Secret volume: into a new
    folder, then one atomic swap of the ``..data`` link (the files are links into it)."""
    version = folder / f"..{uuid.uuid4().hex[:8]}"
    version.mkdir(parents=True)
    ca.serving("argus-webhook", dns_names=["localhost"], ips=["127.0.0.1"]).write(version / "tls.crt", version / "tls.key")
    (version / "ca.crt").write_bytes(ca.pair.cert_pem)
    tmp = folder / "..data_tmp"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(version.name)
    os.replace(tmp, folder / "..data")
    for name in ("tls.crt", "tls.key", "ca.crt"):
        if not (folder / name).is_symlink():
            (folder / name).symlink_to(f"..data/{name}")


def test_certificate_files_from_a_secret_are_reloaded(control_plane, user_namespace, webhook, tmp_path):
    ns = user_namespace("alice")
    secret = tmp_path / "webhook-tls"
    first, second = certs.CertificateAuthority.create("first-ca"), certs.CertificateAuthority.create("second-ca")
    _mounted_secret(secret, first)
    hook = webhook([ns], extra_args=["--webhook-cert-file", str(secret / "tls.crt"), "--webhook-key-file", str(secret / "tls.key"),
                                     "--webhook-ca-file", str(secret / "ca.crt"), "--webhook-cert-reload", "0.5"])

    def ca_bundle() -> bytes:
        return base64.b64decode(vwc(control_plane, hook.config_name)["webhooks"][0]["clientConfig"]["caBundle"])

    assert ca_bundle() == first.pair.cert_pem
    # A careless renewal (a certificate that does not match the key, for a moment) does not
    # take the operator down: it retries until the files agree again.
    stray = certs.CertificateAuthority.create("stray").serving("x", dns_names=["localhost"], ips=["127.0.0.1"])
    good = (secret / "tls.crt").read_bytes()
    (secret / "..data" / "tls.crt").write_bytes(stray.cert_pem)
    wait_for(lambda: "cannot load the renewed webhook certificate" in hook.op.log_path.read_text(), 20,
             "the operator to notice the mismatched pair", on_timeout=lambda: hook.op.log_tail())
    assert hook.op.proc.poll() is None
    (secret / "..data" / "tls.crt").write_bytes(good)
    _mounted_secret(secret, second)  # cert-manager renewed the certificate (and its CA)
    wait_for(lambda: ca_bundle() == second.pair.cert_pem, 30, "the configuration's caBundle to follow the renewal",
             on_timeout=lambda: hook.op.log_tail())
    hook.wait_ready(control_plane)  # the API server trusts the new certificate
    # Served with the new certificate: the old CA no longer verifies it.
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(urllib.request.Request(f"{hook.url}/validate-argustask", data=b"{}", method="POST"),
                               context=ssl.create_default_context(cadata=first.pair.cert_pem.decode()), timeout=5)
