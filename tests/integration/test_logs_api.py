"""Issue 17: task logs through the Kubernetes API (the aggregated API logs.argus.io/v1alpha1).

Everything real: kube-apiserver with the aggregation-layer flags (front-proxy CA, proxy client
certificate) and RBAC, the chart installed with ``logsApi.enabled`` (APIService, Service,
certificate, the operator's auth-delegator and auth-reader bindings, the argus-view role), the
operator run here as the chart's ServiceAccount with the Deployment's flags and the Secret's
files, and a real Ray cluster. The API server reaches the APIService's Service through the
testbed's service network (servicenet.py: egress "cluster" -> ClusterIP -> the operator's
loopback port); the testbed plays the endpoints controller (an Endpoints object the
availability check wants; its address is never dialled).

- alice, bound to argus-view in namespace A, reads A's task log with ``argus logs`` (tail and
  live ``-f``) and is refused in namespace B (403); the CLI's every socket connection is
  recorded (an audit hook): it only ever reaches the API server, never the Ray dashboard.
- the operator itself refuses callers that are not the front proxy (401) and users the
  SubjectAccessReview denies (403), and more than the per-user followers (429).
- a deleted task's log is gone with it (404); a task whose job Ray forgot: from the file.
- each attempt's log is its own Ray job's (attempt=K); sinceSeconds on an ended task.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_chart import CHART, chart_flags, flag_value, helm, render, sa_kubeconfig, secret_files  # noqa: F401 - helm: a fixture

from argus.core.progress import verl_line, verl_lines
from argus_testbed import Backend, ControlPlane, KubeCluster, ServiceNetwork
from argus_testbed.harness import REPO, advanced_task, apply_text, forget_ray_job, get_task, ppo_command, wait_for, wait_phase
from argus_testbed.logsapi import API_SERVICE, api_service_available, ready_endpoint_slice

pytestmark = pytest.mark.integration
RELEASE = RELEASE_NS = "argus-logs"
MAX_FOLLOWERS = 3
VALUES = ["--set", "logsApi.enabled=true", "--set", "webhook.enabled=false", "--set", "leaderElection.enabled=false", "--set", "metrics.enabled=false",
          "--set", f"logsApi.maxFollowersPerUser={MAX_FOLLOWERS}", "--set-json", 'logsApi.sharedTree.volume={"emptyDir":{}}']

# Runs the CLI with an audit hook recording every socket connection it makes.
CLI_WITH_CONNECT_LOG = textwrap.dedent("""
    import json, os, sys
    seen = []
    def hook(event, args):
        if event == "socket.connect":
            seen.append(repr(args[1]))
    sys.addaudithook(hook)
    from argus.cli import main
    try:
        code = main(sys.argv[1:])
    finally:
        with open(os.environ["CONNECT_LOG"], "w") as f:
            json.dump({"connects": seen, "ray_imported": "ray" in sys.modules}, f)
    sys.exit(code)
""")


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory, service_network: ServiceNetwork) -> Iterator[KubeCluster]:
    """This module's own API server, with the aggregation layer, reaching Services through the
    service network."""
    cp = ControlPlane.start(tmp_path_factory.mktemp("logs-control-plane"), service_network=service_network)
    try:
        yield cp
    finally:
        cp.stop()


def namespace(cp: KubeCluster, prefix: str, user: str) -> str:
    ns = f"{prefix}-{uuid.uuid4().hex[:6]}"
    cp.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": ns, "labels": {"argus.io/user": user}}}))
    return ns


@pytest.fixture(scope="module")
def setup(helm: Any, control_plane: ControlPlane, service_network: ServiceNetwork, ray_cluster: Any, argus_root: Path,  # noqa: F811 - helm: the fixture imported above
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    cp = control_plane
    cp.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
    cp.wait_established("argustasks.argus.io")
    helm("upgrade", "--install", RELEASE, str(CHART), "--namespace", RELEASE_NS, "--create-namespace", *VALUES, cluster=True)
    objs = render(helm, *VALUES, release=RELEASE, namespace=RELEASE_NS)
    work = tmp_path_factory.mktemp("logs-api")
    tls = secret_files(cp, RELEASE_NS, f"{RELEASE}-logs-api-tls", work / "logs-api-tls")  # what the pod mounts
    flags = chart_flags(objs, logs_tls_dir=tls)
    svc = json.loads(cp.kubectl("get", "service", f"{RELEASE}-logs-api", "-n", RELEASE_NS, "-o", "json").stdout)
    ready_endpoint_slice(cp, RELEASE_NS, f"{RELEASE}-logs-api")
    ns_a, ns_b = namespace(cp, "logs-a", "alice"), namespace(cp, "logs-b", "bob")
    from argus_testbed.harness import STANDIN, OperatorProcess  # noqa: F401
    op = OperatorProcess.start(work / "operator", kubeconfig=sa_kubeconfig(cp, RELEASE, RELEASE_NS), ray_address=ray_cluster.dashboard_url,
                               root=argus_root, namespaces=[ns_a, ns_b], extra_args=[*flags, "--progress-interval", "1"], max_running=8)
    port = int(flag_value(flags, "--logs-api-port"))
    ready = f"http://127.0.0.1:{flag_value(flags, '--health-port')}/readyz"
    service_network.route(svc["spec"]["clusterIP"], 443, [Backend(port, ready)])
    # alice may view namespace A (argus-view), nothing in B.
    alice = cp.mint_user("alice")
    cp.kubectl("create", "rolebinding", "alice-view", "-n", ns_a, "--clusterrole=argus-view", "--user=alice")

    try:
        wait_for(lambda: api_service_available(cp), 90, "the APIService to be Available",
                 on_timeout=lambda: cp.kubectl("get", "apiservice", API_SERVICE, "-o", "yaml").stdout + op.log_tail(60))
        yield {"op": op, "ns_a": ns_a, "ns_b": ns_b, "alice": alice, "port": port, "work": work, "ray": ray_cluster}
    finally:
        op.stop()
        if op.proc is not None and any(w in op.log_path.read_text() for w in ("Traceback",)):
            print(op.log_tail(120))


def argus_logs(setup: dict[str, Any], ns: str, name: str, *extra: str, kubeconfig: Path | None = None,
               timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    record = setup["work"] / f"connects-{uuid.uuid4().hex[:6]}.json"
    env = {**os.environ, "CONNECT_LOG": str(record)}
    env.pop("KUBECONFIG", None)
    proc = subprocess.run([sys.executable, "-c", CLI_WITH_CONNECT_LOG, "logs", name, "-n", ns,
                           "--kubeconfig", str(kubeconfig or setup["alice"]), *extra],
                          capture_output=True, text=True, timeout=timeout, env=env)
    return proc, json.loads(record.read_text())


def only_the_api_server(cp: ControlPlane, record: dict[str, Any], ray: Any) -> None:
    dashboard_port = ray.dashboard_url.rsplit(":", 1)[1].strip("/")
    assert record["connects"], record
    assert all(f"{cp.port})" in c for c in record["connects"]), (record, cp.port)
    assert not any(f", {dashboard_port})" in c for c in record["connects"]), record
    assert record["ray_imported"] is False


def direct(setup: dict[str, Any], cp: ControlPlane, path: str, user: str | None, *, cert: str | None = "front-proxy-client",
           groups: tuple[str, ...] = ("system:authenticated",)) -> tuple[int, str]:
    """A request straight to the operator's log port, as the front proxy (or as someone else)."""
    ctx = ssl.create_default_context(cafile=str(setup["work"] / "logs-api-tls" / "ca.crt"))
    ctx.check_hostname = False
    if cert == "front-proxy-client":
        ctx.load_cert_chain(cp.cert_dir / "front-proxy-client.crt", cp.cert_dir / "front-proxy-client.key")
    elif cert == "admin":  # signed by the cluster CA, not the front-proxy CA
        ctx.load_cert_chain(cp.cert_dir / "admin.crt", cp.cert_dir / "admin.key")
    headers = {"X-Remote-User": user} if user else {}
    req = urllib.request.Request(f"https://127.0.0.1:{setup['port']}{path}", headers=headers)
    for g in groups:
        req.add_header("X-Remote-Group", g)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (ssl.SSLError, ConnectionError, urllib.error.URLError) as e:
        return 0, repr(e)


def log_path(ns: str, name: str) -> str:
    return f"/apis/logs.argus.io/v1alpha1/namespaces/{ns}/argustasks/{name}/log"


def test_a_viewer_reads_her_log_tail_and_live_and_is_refused_elsewhere(setup: dict[str, Any], control_plane: ControlPlane) -> None:
    cp, ns_a, ns_b, op = control_plane, setup["ns_a"], setup["ns_b"], setup["op"]
    apply_text(cp, ns_a, advanced_task("live", ppo_command(steps=300)))
    apply_text(cp, ns_b, advanced_task("other", ppo_command(steps=5)))
    wait_phase(cp, ns_a, "live", "Running", timeout=90, op=op)
    wait_for(lambda: (get_task(cp, ns_a, "live").get("status") or {}).get("progress", {}).get("step"), 60, "a first step")

    # Live: -f prints the lines as the job writes them, while the task still runs.
    env = {**os.environ, "CONNECT_LOG": str(setup["work"] / "follow-connects.json")}
    env.pop("KUBECONFIG", None)
    follower = subprocess.Popen([sys.executable, "-c", CLI_WITH_CONNECT_LOG, "logs", "live", "-n", ns_a, "-f", "--tail", "2",
                                 "--kubeconfig", str(setup["alice"])], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    watchdog = threading.Timer(150, follower.kill)  # a stream that never ends fails the test, not the run
    watchdog.start()
    try:
        first = [follower.stdout.readline() for _ in range(2)]  # the tail
        while not verl_line(line := follower.stdout.readline()).startswith("step:"):  # then live lines
            first.append(line)
        first.append(line)
        during = get_task(cp, ns_a, "live")["status"]
        assert during["phase"] == "Running" and during["progress"]["step"] < 300, during
        out = follower.stdout.read()  # to the end (the job's): through the same buffer as readline
        err = follower.stderr.read()
        follower.wait(timeout=30)
    finally:
        watchdog.cancel()
        follower.kill()
    assert follower.returncode == 0, err
    text = "".join(first) + out
    steps = [int(line.split()[0].split(":")[1]) for line in verl_lines(text) if line.startswith("step:")]
    (setup["work"] / "followed.txt").write_text(text)
    assert steps[-1] == 300 and steps == list(range(steps[0], 301)), (steps[:5], setup["work"] / "followed.txt")  # nothing lost, nothing twice
    only_the_api_server(cp, json.loads((setup["work"] / "follow-connects.json").read_text()), setup["ray"])

    # Tail, after the end.
    wait_phase(cp, ns_a, "live", "Succeeded", timeout=60, op=op)
    tail, record = argus_logs(setup, ns_a, "live", "--tail", "1")
    assert tail.returncode == 0 and tail.stdout.count("\n") == 1, (tail.stdout, tail.stderr)
    whole, record2 = argus_logs(setup, ns_a, "live")
    assert "step:300 " in whole.stdout and "Total training steps: 300" in whole.stdout, whole.stderr
    only_the_api_server(cp, record, setup["ray"])
    only_the_api_server(cp, record2, setup["ray"])

    # Namespace B: the API server's RBAC refuses (alice has no argustasks/log there).
    refused, record = argus_logs(setup, ns_b, "other")
    assert refused.returncode == 1 and "forbidden" in refused.stderr and "argustasks/log" in refused.stderr, refused.stderr
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    # A query mistake: one line naming parameter, value and rule.
    bad, _ = argus_logs(setup, ns_a, "live", "--tail", "-3")
    assert bad.returncode == 1 and bad.stderr == "argus logs: tailLines: '-3': must be a whole number from 0 to 1000000\n", bad.stderr
    future, _ = argus_logs(setup, ns_a, "live", "--attempt", "2")
    assert future.returncode == 1 and "attempt: '2': the task has had 1 attempt(s)" in future.stderr


def test_the_operator_believes_only_the_front_proxy_and_reviews_access(setup: dict[str, Any], control_plane: ControlPlane) -> None:
    cp, ns_a = control_plane, setup["ns_a"]
    apply_text(cp, ns_a, advanced_task("quick", ppo_command(steps=3)))
    wait_phase(cp, ns_a, "quick", "Succeeded", timeout=90, op=setup["op"])
    path = log_path(ns_a, "quick")
    assert direct(setup, cp, path, "alice")[0] == 200
    # Without the front proxy's certificate the user header means nothing.
    code, body = direct(setup, cp, path, "alice", cert=None)
    assert code == 401 and json.loads(body)["message"] == "no client certificate from the front proxy", body
    code, body = direct(setup, cp, path, "alice", cert="admin")  # another CA: refused at the handshake, or 401
    assert code in (0, 401), (code, body)
    # The front proxy, but a user the SubjectAccessReview denies (bob has no role in A).
    code, body = direct(setup, cp, path, "bob")
    assert code == 403 and 'User "bob" cannot get resource "argustasks/log"' in json.loads(body)["message"], body
    # Discovery, for the aggregator (and kubectl): the argustasks/log subresource.
    code, body = direct(setup, cp, "/apis/logs.argus.io/v1alpha1", None)
    assert code == 200 and json.loads(body)["resources"][0]["name"] == "argustasks/log"
    raw = cp.kubectl("get", "--raw", path + "?tailLines=1", kubeconfig=setup["alice"])
    assert verl_line(raw.stdout).startswith("step:") or raw.stdout.strip(), raw.stdout


def test_too_many_followers_get_429(setup: dict[str, Any], control_plane: ControlPlane) -> None:
    cp, ns_a = control_plane, setup["ns_a"]
    apply_text(cp, ns_a, advanced_task("long", ppo_command(steps=600)))
    wait_phase(cp, ns_a, "long", "Running", timeout=90, op=setup["op"])
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    argv = [sys.executable, "-m", "argus.cli", "logs", "long", "-n", ns_a, "-f", "--tail", "0", "--kubeconfig", str(setup["alice"])]
    followers = [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env) for _ in range(MAX_FOLLOWERS)]
    try:
        time.sleep(4)  # let them connect
        assert all(f.poll() is None for f in followers), [f.stderr.read() for f in followers if f.poll() is not None]
        extra, _ = argus_logs(setup, ns_a, "long", "-f")
        assert extra.returncode == 1 and "already follows 3 task logs" in extra.stderr, extra.stderr
        assert extra.stderr.count("\n") == 1
    finally:
        for f in followers:
            f.kill()
            f.wait()
    cp.kubectl("patch", "argustask", "long", "-n", ns_a, "--type=merge", "-p", '{"spec":{"cancel":true}}')
    # Freed: the operator notices the closed connections and takes the followers off.
    wait_for(lambda: argus_logs(setup, ns_a, "long", "--tail", "1")[0].returncode == 0, 30, "a read after the followers left")


def test_a_deleted_tasks_log_is_gone_and_a_forgotten_job_is_read_from_its_file(setup: dict[str, Any], control_plane: ControlPlane) -> None:
    cp, ns_a, op = control_plane, setup["ns_a"], setup["op"]
    apply_text(cp, ns_a, advanced_task("forgotten", ppo_command(steps=4)))
    apply_text(cp, ns_a, advanced_task("deleted", ppo_command(steps=4)))
    status = wait_phase(cp, ns_a, "forgotten", "Succeeded", timeout=90, op=op)["status"]
    wait_phase(cp, ns_a, "deleted", "Succeeded", timeout=90, op=op)
    before, _ = argus_logs(setup, ns_a, "deleted")
    assert before.returncode == 0 and "step:4 " in before.stdout
    cp.kubectl("delete", "argustask", "deleted", "-n", ns_a, "--timeout=60s")
    gone, _ = argus_logs(setup, ns_a, "deleted")
    assert gone.returncode == 1 and gone.stderr == 'argus logs: argustasks.argus.io "deleted" not found\n', gone.stderr

    # Ray forgets the job (its history trimmed): the log comes from the job folder.
    forget_ray_job(setup["ray"].dashboard_url, status["rayJob"]["submissionId"])
    from_file, record = argus_logs(setup, ns_a, "forgotten", "--tail", "1")
    assert from_file.returncode == 0, from_file.stderr
    text = Path(status["logFile"]["jobPath"]).read_text()
    assert from_file.stdout == text.splitlines(keepends=True)[-1]
    only_the_api_server(control_plane, record, setup["ray"])


def test_each_attempt_has_its_log_and_since_seconds_counts_from_the_end(setup: dict[str, Any], control_plane: ControlPlane) -> None:
    cp, ns_a, op = control_plane, setup["ns_a"], setup["op"]
    # A reward function its file does not hold: the trainer exits 1 at start. (A key Hydra
    # refuses no longer gets that far: Argus composes; a file that does not exist waits in the
    # queue: InputMissing.)
    failing = ppo_command(steps=3, extra="custom_reward_function.path=$HOME/code/reward.py custom_reward_function.name=no_such_function")
    body = json.loads(advanced_task("flaky", failing))
    body["spec"].update(restartPolicy="OnFailure", backoffLimit=1)
    apply_text(cp, ns_a, json.dumps(body))
    status = wait_phase(cp, ns_a, "flaky", ("Succeeded", "Failed"), timeout=120, op=op)["status"]
    assert status["attempt"] == 2, status
    job_dir = Path(status["jobDir"]["jobPath"])
    texts = {}
    for k in (1, 2):
        out, record = argus_logs(setup, ns_a, "flaky", "--attempt", str(k))
        assert out.returncode == 0, out.stderr
        # Ray's log of attempt K's own job (Ray names the job in its first lines), which holds
        # what went into attempt-K.log.
        sid = status["attempts"][k - 1]["submissionId"]
        assert f"Running entrypoint for job {sid}" in out.stdout, (k, out.stdout[:300])
        assert (job_dir / f"attempt-{k}.log").read_text().strip() in out.stdout
        texts[k] = out.stdout
        only_the_api_server(cp, record, setup["ray"])
    assert argus_logs(setup, ns_a, "flaky")[0].stdout == texts[2]
    time.sleep(3)  # the task ended more than 2 s ago: nothing of it is that recent
    assert argus_logs(setup, ns_a, "flaky", "--since", "2")[0].stdout == ""
    assert argus_logs(setup, ns_a, "flaky", "--since", "3600")[0].stdout == texts[2]


def test_latency_through_the_api_server(setup: dict[str, Any], control_plane: ControlPlane, capsys: pytest.CaptureFixture[str]) -> None:
    """A tail read and the first byte of a follow, as alice, through kube-apiserver, the
    aggregator and the service network (printed; bounded generously, this machine is shared)."""
    from kubernetes import client, config
    cp, ns_a = control_plane, setup["ns_a"]
    apply_text(cp, ns_a, advanced_task("timed", ppo_command(steps=400)))
    wait_phase(cp, ns_a, "timed", "Running", timeout=90, op=setup["op"])
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(setup["alice"]), client_configuration=cfg)
    api = client.ApiClient(cfg)

    def timed(query: list[tuple[str, str]]) -> float:
        method, url, headers, _, _ = api.param_serialize("GET", log_path(ns_a, "timed"), query_params=query, auth_settings=["BearerToken"])
        for _ in range(40):  # a follower that just hung up is noticed at the operator's next write
            t0 = time.perf_counter()
            resp = api.call_api(method, url, header_params=headers, _request_timeout=60)
            if resp.status != 429:
                break
            _ = resp.response.data  # the refusal's body read, so that its connection is reused
            time.sleep(0.5)
        assert resp.status == 200, resp.response.data
        first = resp.response.read1(65536)
        took = time.perf_counter() - t0
        assert first
        resp.response.release_conn() if not query or query[0][0] != "follow" else resp.response.close()
        return took

    tails = sorted(timed([("tailLines", "10")]) for _ in range(20))
    follows = sorted(timed([("follow", "true"), ("tailLines", "1")]) for _ in range(MAX_FOLLOWERS + 2))
    with capsys.disabled():
        print(f"\nthrough the API server: tail read p50 {tails[10] * 1000:.0f} ms, max {tails[-1] * 1000:.0f} ms (20); "
              f"follow first byte p50 {follows[2] * 1000:.0f} ms, max {follows[-1] * 1000:.0f} ms ({len(follows)})")
    assert tails[10] < 5 and follows[2] < 10
    cp.kubectl("patch", "argustask", "timed", "-n", ns_a, "--type=merge", "-p", '{"spec":{"cancel":true}}')


def test_the_queue_is_served_on_demand_to_whoever_may_list_it(setup: dict[str, Any], control_plane: ControlPlane) -> None:
    """Issue 26: the waiting tasks and their places through the aggregator (pendingtasks),
    never in the tasks' status; alice lists her namespace's (argus-view), not the whole
    queue; an admin lists the whole queue; ``argus queue`` shows the places."""
    cp, ns_a, ns_b, op = control_plane, setup["ns_a"], setup["ns_b"], setup["op"]
    too_big = ppo_command(nnodes=2, gpus=4)  # 8 GPUs on a 4-GPU cluster: Unschedulable, it waits
    names = [(ns_a, "wait-a1"), (ns_b, "wait-b1"), (ns_a, "wait-a2")]
    for ns, name in names:
        apply_text(cp, ns, advanced_task(name, too_big, nnodes=2, gpus=4))
        time.sleep(1.1)  # distinct creation seconds: fifo order is creation order
    try:
        for ns, name in names:
            wait_for(lambda ns=ns, name=name: (get_task(cp, ns, name).get("status") or {}).get("reason") == "Unschedulable", 60,
                     f"{name} to wait", on_timeout=op.log_tail)
            assert "queuePosition" not in get_task(cp, ns, name)["status"]
        whole = json.loads(cp.kubectl("get", "--raw", "/apis/logs.argus.io/v1alpha1/pendingtasks").stdout)
        mine = [(i["metadata"]["namespace"], i["metadata"]["name"], i["position"]) for i in whole["items"] if i["metadata"]["name"].startswith("wait-")]
        assert [(ns, name) for ns, name, _ in mine] == names and [p for *_, p in mine] == sorted(p for *_, p in mine), whole
        places = {(ns, name): p for ns, name, p in mine}
        alice = json.loads(cp.kubectl("get", "--raw", f"/apis/logs.argus.io/v1alpha1/namespaces/{ns_a}/pendingtasks",
                                      kubeconfig=setup["alice"]).stdout)
        assert [(i["metadata"]["name"], i["position"], i["reason"]) for i in alice["items"]] == [
            ("wait-a1", places[(ns_a, "wait-a1")], "Unschedulable"), ("wait-a2", places[(ns_a, "wait-a2")], "Unschedulable")]
        refused = cp.kubectl("get", "--raw", "/apis/logs.argus.io/v1alpha1/pendingtasks", kubeconfig=setup["alice"], check=False)
        assert refused.returncode != 0 and "forbidden" in refused.stderr.lower(), refused.stderr
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        out = subprocess.run([sys.executable, "-m", "argus.cli", "queue", "-n", ns_a, "-o", "json", "--kubeconfig", str(setup["alice"])],
                             capture_output=True, text=True, timeout=60, env=env)
        assert out.returncode == 0, out.stderr
        rows = [(r["name"], r["position"]) for r in json.loads(out.stdout)["queue"] if r["name"].startswith("wait-")]
        assert rows == [("wait-a1", places[(ns_a, "wait-a1")]), ("wait-a2", places[(ns_a, "wait-a2")])], out.stdout
    finally:
        for ns, name in names:
            cp.kubectl("delete", "argustask", name, "-n", ns, "--wait=false", check=False)
