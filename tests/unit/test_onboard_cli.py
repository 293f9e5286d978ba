"""``argus onboard`` without a cluster: user id checks (exit 2, one line) and ``--dry-run``,
which prints the objects and needs no kubeconfig at all. (Against a real API server:
tests/integration/test_chart.py.)"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from argus import cli

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nonexistent"))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_dry_run_prints_namespace_and_binding(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "onboard", "alice", "--dry-run")
    assert code == 0, err
    ns, binding = list(yaml.safe_load_all(out))
    assert ns == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "alice", "labels": {"argus.io/user": "alice"}}}
    assert binding["kind"] == "RoleBinding" and binding["metadata"]["name"] == "argus-edit-alice"
    assert binding["metadata"]["namespace"] == "alice"
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "argus-edit"}
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]


def test_dry_run_other_namespace(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "onboard", "a_b", "--namespace", "team-ab", "--dry-run")
    assert code == 0
    ns, binding = list(yaml.safe_load_all(out))
    assert ns["metadata"] == {"name": "team-ab", "labels": {"argus.io/user": "a_b"}}
    assert binding["metadata"]["namespace"] == "team-ab" and binding["subjects"][0]["name"] == "a_b"


@pytest.mark.parametrize("user", ["Alice", "bob!", "x-", "", "a" * 64])
def test_bad_user_exits_2_with_one_line(capsys: pytest.CaptureFixture[str], user: str) -> None:
    code, out, err = run(capsys, "onboard", user, "--dry-run")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("argus onboard: ") and "must match" in err


def test_user_that_is_no_namespace_name_needs_namespace(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "onboard", "a_b")
    assert code == 2 and "pass --namespace" in err and len(err.strip().splitlines()) == 1


def test_bad_namespace_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "onboard", "alice", "--namespace", "Not_Valid")
    assert code == 2 and "not a valid namespace name" in err


def test_no_cluster_is_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    code, _, err = run(capsys, "onboard", "alice", "--kubeconfig", "/nonexistent/kubeconfig")
    assert code == 1 and err.startswith("argus onboard: ") and len(err.strip().splitlines()) == 1


def test_logs_is_still_there(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["logs", "--help"])
    assert exc.value.code == 0
    assert "argus logs" in capsys.readouterr().out


def test_onboard_with_a_gpu_quota_annotates_the_namespace() -> None:
    from argus.onboardctl import onboard_objects
    ns, _ = onboard_objects("alice", "team-a", gpu_quota=8)
    assert ns["metadata"] == {"name": "team-a", "labels": {"argus.io/user": "alice"}, "annotations": {"argus.io/gpu-quota": "8"}}
    plain, _ = onboard_objects("alice", "team-a")
    assert "annotations" not in plain["metadata"]


def test_queue_rows_in_order_with_users_in_use_and_quota() -> None:
    from argus.clusterctl import queue_rows

    def task(name: str, phase: str, user: str, gpus: int, created: str = "2026-12-03T08:00:00Z") -> dict:
        return {"metadata": {"namespace": "ns", "name": name, "creationTimestamp": created},
                "spec": {"nnodes": 1, "nGpusPerNode": gpus, "priority": 0},
                "status": {"phase": phase, "user": user, "reason": "Queued", "message": "m"}}
    tasks = [task("second", "Queued", "bob", 2), task("first", "Queued", "alice", 8, "2026-12-03T08:00:01Z"), task("run", "Running", "alice", 4),
             task("done", "Succeeded", "bob", 4)]
    # The places come from the operator's queue view, not from the tasks' status.
    waiting, users = queue_rows(tasks, {"alice": 8}, {("ns", "first"): 1, ("ns", "second"): 2})
    assert [(r["position"], r["name"], r["user"], r["gpus"]) for r in waiting] == [(1, "first", "alice", 8), (2, "second", "bob", 2)]
    unplaced, _ = queue_rows(tasks, {"alice": 8})  # the view is not served: no places, oldest first
    assert [(r["position"], r["name"]) for r in unplaced] == [(None, "second"), (None, "first")]
    assert users == [{"user": "alice", "gpusInUse": 4, "queued": 1, "quota": 8}, {"user": "bob", "gpusInUse": 0, "queued": 1, "quota": None}]
    _, unknown = queue_rows(tasks, None)
    assert {u["quota"] for u in unknown} == {"?"}


def test_queue_rows_say_where_each_task_must_run_and_filter_by_cluster() -> None:
    from argus.clusterctl import queue_rows

    def task(name: str, spec: dict, annotations: dict | None = None, attempt: int = 1) -> dict:
        return {"metadata": {"namespace": "ns", "name": name, "creationTimestamp": "2026-12-05T08:00:00Z", "annotations": annotations or {}},
                "spec": {"nnodes": 1, "nGpusPerNode": 1, **spec},
                "status": {"phase": "Queued", "user": "alice", "attempt": attempt}}
    tasks = [task("anywhere", {}), task("pinned", {"cluster": "b"}), task("placed", {}, {"argus.io/placement": "2:a"}, attempt=2),
             task("stale", {}, {"argus.io/placement": "1:a"}, attempt=2)]  # the placement of an earlier attempt binds nothing
    waiting, _ = queue_rows(tasks, None)
    assert {r["name"]: r["cluster"] for r in waiting} == {"anywhere": "", "pinned": "b", "placed": "a", "stale": ""}
    on_a, _ = queue_rows(tasks, None, cluster="a")
    assert sorted(r["name"] for r in on_a) == ["anywhere", "placed", "stale"]


def test_argus_queue_shows_whose_gpus_a_waiting_task_takes_in_an_aligned_column(capsys: pytest.CaptureFixture[str]) -> None:
    import datetime as dt

    from argus.clusterctl import print_table, queue_rows, queue_table

    def task(name: str, status: dict) -> dict:
        return {"metadata": {"namespace": "ns", "name": name, "creationTimestamp": "2026-12-05T08:00:00Z"},
                "spec": {"nnodes": 1, "nGpusPerNode": 2}, "status": {"phase": "Queued", "user": "alice", **status}}
    tasks = [task("urgent", {"reason": "Queued", "message": "waiting for the GPUs of ns/low-a, ns/low-b, stopped for it (preemption)",
                             "preempts": ["ns/low-a", "ns/low-b"]}),
             task("low-c", {"reason": "Preempted", "message": "preempted at step 7: ns/x took attempt 1's GPUs\nwaiting for 2 GPU(s)"})]
    waiting, _ = queue_rows(tasks, None, {("ns", "urgent"): 1, ("ns", "low-c"): 2})
    assert [r["preempts"] for r in waiting] == [["ns/low-a", "ns/low-b"], []]
    print_table(queue_table(waiting, dt.datetime(2026, 12, 5, 8, 5, tzinfo=dt.UTC)))
    header, first, second = capsys.readouterr().out.splitlines()
    column = header.index("PREEMPTS")
    assert first[column:].startswith("ns/low-a,ns/low-b   Queued: waiting for the GPUs")
    assert second[column:].startswith("-                   Preempted: preempted at step 7")
    assert second.endswith("GPUs waiting for 2 GPU(s)")  # a two-line message stays on its row


def test_argus_describe_says_who_preempts_whom() -> None:
    from argus.taskctl import describe_lines
    base = {"metadata": {"namespace": "ns", "name": "t"}, "spec": {"nnodes": 1, "nGpusPerNode": 2}}
    victim = describe_lines({**base, "status": {"phase": "Running", "reason": "Preempting", "preemptedBy": "ns/urgent"}})
    assert "Preempted:   its job is being stopped for ns/urgent, which takes its GPUs" in victim
    urgent = describe_lines({**base, "status": {"phase": "Queued", "reason": "Queued", "preempts": ["ns/a", "ns/b"]}})
    assert "Preempts:    ns/a, ns/b (stopped for it; it waits for their GPUs)" in urgent
    assert not any(line.startswith(("Preempts", "Preempted")) for line in describe_lines({**base, "status": {"phase": "Queued"}}))


def test_sso_user_is_bound_by_its_kubernetes_name_and_runs_as_the_argus_id(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "onboard", "alice", "--k8s-user", "alice@corp.example", "--dry-run")
    assert code == 0, err
    ns, binding = list(yaml.safe_load_all(out))
    assert ns["metadata"] == {"name": "alice", "labels": {"argus.io/user": "alice"}}
    assert binding["metadata"] == {"name": "argus-edit-alice", "namespace": "alice", "labels": {"argus.io/user": "alice"}}
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice@corp.example"}]


def test_a_group_is_bound_as_a_group_alone_or_beside_users(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "onboard", "nlp", "--group", "ml-nlp@corp.example", "--dry-run")
    assert code == 0
    _, binding = list(yaml.safe_load_all(out))
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "ml-nlp@corp.example"}]
    code, out, _ = run(capsys, "onboard", "nlp", "--namespace", "team-nlp", "--k8s-user", "oidc:bob", "--group", "ml-nlp", "--dry-run")
    assert code == 0
    ns, binding = list(yaml.safe_load_all(out))
    assert ns["metadata"]["labels"] == {"argus.io/user": "nlp"}
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "oidc:bob"},
                                   {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "ml-nlp"}]


@pytest.mark.parametrize("flag,name", [("--k8s-user", ""), ("--group", " ml"), ("--k8s-user", "alice\n")])
def test_a_bad_kubernetes_name_exits_2_with_one_line(capsys: pytest.CaptureFixture[str], flag: str, name: str) -> None:
    code, out, err = run(capsys, "onboard", "alice", flag, name, "--dry-run")
    assert code == 2 and out == ""
    assert err == (f"argus onboard: {flag} {name!r}: must be the name as the API server's authenticator gives it: not empty, "
                   "no spaces around it, no control characters\n")


def test_an_sso_name_as_the_user_id_points_at_k8s_user(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "onboard", "alice@corp.example", "--dry-run")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "must match" in err and "the Kubernetes name is --k8s-user" in err


def test_help_explains_the_mapping(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["onboard", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--k8s-user NAME" in text and "--group NAME" in text and "Argus user id" in text and "alice@corp.example" in text
