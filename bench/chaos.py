#!/usr/bin/env python3
"""Fault injection against the Argus operator on a real testbed, in one command (issue 7).

    .venv/bin/python bench/chaos.py          # writes docs/reliability.md

Starts its own kube-apiserver + etcd and Ray head + worker on loopback (argus_testbed), runs
the operator as a subprocess (``python -m argus``, a fresh one per scenario) and injects:

1. ``kill``: SIGKILL of the operator at random moments (seeded) during a run of --kill-tasks
   tasks, --kills times, restarting it each time. Checked: every task ends in the phase
   its kind implies (ok -> Succeeded, a failing trainer -> Failed, hostile -> Rejected,
   cancelled -> Stopped), no task is lost or left active, and Ray holds at most one job
   per task (none for the hostile ones).
2. ``head-restart``: the Ray head (and its worker) restarted while tasks run and others
   wait. Checked: the running ones become Failed/RayJobLost, the queued ones then run and
   succeed, and the new head's job list holds no job for a lost task (nothing resubmitted).
3. ``head-down``: the Ray head stopped for --outage-seconds (default 120) with
   --ray-grace 300. Checked: no task fails during the outage, RayReachable=False is shown
   on running and queued tasks, tasks created meanwhile queue, and after the head is back
   the queued ones run; the running ones become RayJobLost (the head is stateless: its
   restart lost their jobs; reported as such).
4. ``partition``: the dashboard unreachable for --outage-seconds while Ray keeps running
   (the operator reaches Ray through a TCP proxy that this script closes). Checked: as
   above, and here the running jobs survive, so every task ends Succeeded, one job each.
5. ``apiserver-restart``: kube-apiserver and etcd restarted while tasks run. Checked: the
   operator reconnects and every task Succeeds, one Ray job each.
6. ``hostile``: --hostile hostile tasks (cycled from tests/unit/test_core_validation_table.py's
   HOSTILE table) mixed with --good good ones, created together in random order. Checked:
   each hostile one is refused by the API server's schema or ends Rejected, every good
   one Succeeds, and no hostile task ever appears in Ray's job list.
7. ``preempt-restart``: SIGKILL of the operator at each stage of a preemption (issue 38),
   --preempt-rounds times, restarting it each time (``chaos_preempt``). Checked: every task
   Succeeds, each urgent task ran once, exactly one victim per round, which resumed as attempt
   2 from a checkpoint, and Ray's jobs per task are exactly those its attempts list names,
   none left running.

Each scenario is reported as: what was injected, how many times, what was checked, the
result. Exit status 0 when every check passed. ``--only`` rewrites only the scenarios it runs
in docs/reliability.md and keeps the others' sections as they were, each saying which run it
comes from.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from benchlib import (
    REPO,
    TERMINAL,
    OperatorProcess,
    TaskWatch,
    Testbed,
    jobs_by_task,
    load_module,
    loadavg,
    log,
    machine_info,
    parallel,
    ppo_command,
    ray_jobs,
    task_body,
)
from chaos_preempt import preempt_restart

SCENARIOS = ["kill", "head-restart", "head-down", "partition", "apiserver-restart", "hostile", "preempt-restart"]
STEP_SECONDS = 0.2  # the stand-in's sleep per training step on this script's Ray cluster


def condition(obj: dict[str, Any] | None, type_: str) -> str | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return c.get("status")
    return None


class Check:
    """One scenario's report: what was injected, how often, what was checked, the result."""

    def __init__(self, name: str, injected: str):
        self.name, self.injected = name, injected
        self.times = 0
        self.checks: list[tuple[str, bool, str]] = []
        self.facts: list[str] = []
        self.error: str | None = None
        self.seconds = 0.0

    def check(self, what: str, ok: bool, detail: str = "") -> bool:
        self.checks.append((what, bool(ok), detail))
        log(f"  [{'PASS' if ok else 'FAIL'}] {what}{': ' + detail if detail else ''}")
        return ok

    def fact(self, text: str) -> None:
        self.facts.append(text)
        log(f"  - {text}")

    @property
    def passed(self) -> bool:
        return self.error is None and all(ok for _, ok, _ in self.checks)


class TcpProxy:
    """A loopback TCP proxy in front of the Ray dashboard that can be cut: while blocked,
    open connections are dropped and new ones are refused (nothing listens)."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._server: socket.socket | None = None
        self.unblock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def unblock(self) -> None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(128)
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def block(self) -> None:
        server, self._server = self._server, None
        if server:
            try:
                server.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            server.close()
        with self._lock:
            conns, self._conns = self._conns, set()
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        with self._lock:
            self._conns.discard(src)
            self._conns.discard(dst)

    def close(self) -> None:
        self.block()


class Chaos:
    def __init__(self, args: argparse.Namespace, tb: Testbed, watch: TaskWatch):
        self.args, self.tb, self.watch = args, tb, watch
        self.rng = random.Random(args.seed)
        self.n_op = 0

    # -- helpers
    def operator(self, namespaces: list[str], **kwargs: Any) -> OperatorProcess:
        self.n_op += 1
        kwargs.setdefault("poll_interval", self.args.poll_interval)
        return self.tb.start_operator(f"operator-{self.n_op}-{namespaces[0]}", namespaces=namespaces, **kwargs)

    def create(self, ns: str, bodies: list[dict[str, Any]], workers: int = 8) -> None:
        parallel(lambda b: self.tb.kube.create(ns, b), bodies, workers=workers)

    def wait_terminal(self, ns: str, n: int, timeout: float) -> None:
        self.watch.wait(lambda: sum(1 for p in self.watch.phases(ns).values() if p in TERMINAL) >= n, timeout,
                        f"{n} tasks of {ns} to end")

    def jobs(self, ns: str, url: str | None = None) -> dict[str, list[Any]]:
        return jobs_by_task(ray_jobs(url or self.tb.ray.dashboard_url), ns)

    def short(self, steps: int | None = None) -> str:
        return ppo_command(steps=steps or self.args.short_steps)

    def long(self) -> str:
        return ppo_command(steps=1_000_000)

    # -- 1. SIGKILL the operator at random moments
    def kill(self, rep: Check) -> None:
        a = self.args
        ns = "chaos-kill"
        self.tb.kube.namespace(ns, "alice")
        expected: dict[str, str] = {}
        bodies = []
        n_fail, n_hostile, n_cancel = 2, 2, 2
        n_ok = a.kill_tasks - n_fail - n_hostile - n_cancel
        for i in range(n_ok):
            bodies.append(task_body(f"ok-{i:03d}", self.short()))
            expected[f"ok-{i:03d}"] = "Succeeded"
        for i in range(n_fail):  # a reward file that does not exist: the trainer exits 1 at start
            bodies.append(task_body(f"fail-{i}", self.short() + " custom_reward_function.path=$HOME/code/no_such_reward.py custom_reward_function.name=compute_score"))
            expected[f"fail-{i}"] = "Failed"
        for i in range(n_hostile):
            bodies.append(task_body(f"hostile-{i}", self.short() + " trainer.default_local_dir=$HOME/../bob/ckpt"))
            expected[f"hostile-{i}"] = "Rejected"
        for i in range(n_cancel):
            bodies.append(task_body(f"cancel-{i}", self.long()))
            expected[f"cancel-{i}"] = "Stopped"
        self.rng.shuffle(bodies)
        rep.fact(f"{a.kill_tasks} tasks: {n_ok} short ({a.short_steps} steps of {STEP_SECONDS} s) that must succeed, {n_fail} whose "
                 f"trainer exits 1 (Failed), {n_hostile} hostile (Rejected), {n_cancel} long ones cancelled mid-run (Stopped); "
                 f"--max-running {a.max_running}, --poll-interval {a.poll_interval:g}; kill delays uniform in [{a.kill_min:g}, {a.kill_max:g}] s "
                 f"after each (re)start, seed {a.seed}")
        self.create(ns, bodies)
        # Besides the SIGKILLs at random moments, the operator dies with this chance right after
        # Ray accepts each job and before its status is written (argus_testbed.faults): the
        # window where exactly-once is at stake; random kills alone hardly ever hit it.
        op = self.operator([ns], max_running=a.max_running, crash_after_submit=a.crash_after_submit)
        t0 = time.monotonic()
        at_kill = []
        crashes = 0
        for k in range(a.kills):
            until = time.monotonic() + self.rng.uniform(a.kill_min, a.kill_max)
            while time.monotonic() < until:
                if op.proc is not None and op.proc.poll() is not None:  # died at the fault point: start it again
                    crashes += 1
                    op.launch()
                time.sleep(0.1)
            phases = self.watch.phases(ns)
            counts = {p: sum(1 for v in phases.values() if (v or "new") == p) for p in ("new", "Queued", "Submitted", "Running")}
            counts["ended"] = sum(1 for v in phases.values() if v in TERMINAL)
            op.kill()
            rep.times += 1
            at_kill.append((round(time.monotonic() - t0, 1), counts))
            if k == a.kills // 3:  # cancel the long ones while the operator is down
                for name in expected:
                    if name.startswith("cancel-"):
                        self.tb.kube.patch_spec(ns, name, {"cancel": True})
            op.launch()
        op.restart(without_faults=True)  # the rest of the run without the fault point
        mid_run = sum(1 for _, c in at_kill if c["ended"] < a.kill_tasks)
        rep.fact(f"{crashes} crash(es) right after a submission (chance {a.crash_after_submit:g} per submission)")
        rep.fact(f"{a.kills} SIGKILLs over {time.monotonic() - t0:.0f} s, {mid_run} of them before every task had ended; "
                 "state at each kill (s since start: new/queued/submitted/running/ended): " +
                 "; ".join(f"{t}: {c['new']}/{c['Queued']}/{c['Submitted']}/{c['Running']}/{c['ended']}" for t, c in at_kill))
        self.wait_terminal(ns, a.kill_tasks, 600)
        rep.fact(f"all {a.kill_tasks} tasks ended {time.monotonic() - t0:.0f} s after the first start")
        time.sleep(2 * a.poll_interval)  # a few more ticks: nothing may change any more
        phases = self.watch.phases(ns)
        wrong = {n: (phases.get(n), e) for n, e in expected.items() if phases.get(n) != e}
        rep.check("every task ends in the phase its kind implies", not wrong, f"{len(expected) - len(wrong)}/{len(expected)} right" + (f"; wrong: {wrong}" if wrong else ""))
        lost = [n for n in expected if n not in phases]
        rep.check("no task lost (every object still there, none left active)", not lost and all(p in TERMINAL for p in phases.values()), f"missing: {lost}" if lost else "")
        jobs = self.jobs(ns)
        dups = {n: len(js) for n, js in jobs.items() if len(js) > 1}
        rep.check("zero duplicate Ray jobs (jobs per task, by submission id)", not dups, f"{sum(len(j) for j in jobs.values())} jobs for {len(jobs)} tasks" + (f"; duplicates: {dups}" if dups else ""))
        hostile_jobs = [n for n in jobs if n.startswith("hostile-")]
        rep.check("no Ray job for a hostile task", not hostile_jobs, str(hostile_jobs) if hostile_jobs else "")
        missing = [n for n, e in expected.items() if e in ("Succeeded", "Failed") and n not in jobs]
        rep.check("every task that ran has exactly its one Ray job", not missing, f"without a job: {missing}" if missing else "")
        # Each cancelled task: either its one Ray job is STOPPED, or it never reached Ray and says so.
        cancel_outcomes = {}
        for name in (n for n in expected if n.startswith("cancel-")):
            js = jobs.get(name, [])
            message = (self.watch.objects[(ns, name)].get("status") or {}).get("message", "")
            cancel_outcomes[name] = ([j.status.value for j in js] if js else "never reached Ray" if "never reached Ray" in message else "no job, status says otherwise")
        rep.check("each cancelled task's Ray job really stopped (or it never reached Ray, and says so)",
                  len(cancel_outcomes) == n_cancel and all(o in (["STOPPED"], "never reached Ray") for o in cancel_outcomes.values()),
                  str(cancel_outcomes))
        adopted = {e.involved_object.name for e in self.tb.kube.events(ns) if e.reason == "AdoptedExistingJob"}
        rep.check("tasks whose job reached Ray before their status said so were adopted, not submitted twice (the crash window was hit)",
                  bool(adopted) and crashes > 0,
                  f"{len(adopted)} adopted after {crashes} crash(es) at the fault point" + ("" if adopted else ": the window was never hit; raise --crash-after-submit"))
        op.stop()

    # -- 2. restart the Ray head mid-run
    def head_restart(self, rep: Check) -> None:
        a = self.args
        for r in range(a.head_restarts):
            ns = f"chaos-head-restart-{r}"
            self.tb.kube.namespace(ns, "alice")
            op = self.operator([ns], max_running=a.max_running)
            longs = [f"long-{i}" for i in range(a.max_running)]
            shorts = [f"queued-{i}" for i in range(a.queued)]
            self.create(ns, [task_body(n, self.long(), priority=10) for n in longs])
            self.watch.wait(lambda: all(self.watch.phase(ns, n) == "Running" for n in longs), 180, "the long tasks to run")  # noqa: B023 - waited for here
            self.create(ns, [task_body(n, self.short()) for n in shorts])
            self.watch.wait(lambda: all(self.watch.phase(ns, n) == "Queued" for n in shorts), 60, "the short tasks to queue")  # noqa: B023 - waited for here
            log(f"head-restart {r + 1}/{a.head_restarts}: {len(longs)} running, {len(shorts)} queued; restarting the Ray head")
            t = time.monotonic()
            self.tb.ray.restart_head()
            rep.times += 1
            rep.fact(f"restart {r + 1}: {len(longs)} tasks Running and {len(shorts)} Queued at the restart; the head was back in {time.monotonic() - t:.0f} s")
            self.wait_terminal(ns, len(longs) + len(shorts), 300)
            time.sleep(2 * a.poll_interval)
            st = {n: self.watch.objects[(ns, n)].get("status") or {} for n in longs + shorts}
            lost_ok = [n for n in longs if (st[n].get("phase"), st[n].get("reason")) == ("Failed", "RayJobLost")]
            rep.check(f"restart {r + 1}: running tasks -> Failed/RayJobLost", len(lost_ok) == len(longs),
                      f"{len(lost_ok)}/{len(longs)}" + ("" if len(lost_ok) == len(longs) else f"; got {[(st[n].get('phase'), st[n].get('reason')) for n in longs]}"))
            ran = [n for n in shorts if st[n].get("phase") == "Succeeded"]
            rep.check(f"restart {r + 1}: queued tasks run once the head is back and succeed", len(ran) == len(shorts), f"{len(ran)}/{len(shorts)}")
            jobs = self.jobs(ns)
            resubmitted = [n for n in longs if n in jobs]
            rep.check(f"restart {r + 1}: nothing resubmitted silently (no job for a lost task on the new head; one per queued task)",
                      not resubmitted and all(len(jobs.get(n, [])) == 1 for n in shorts),
                      f"new head's jobs: {sorted((n, len(j)) for n, j in jobs.items())}")
            msg = st[longs[0]].get("message", "")
            rep.check(f"restart {r + 1}: the lost tasks say why and that Argus does not resubmit", "does not resubmit" in msg, msg[:160])
            op.stop()

    # -- 3. the Ray head down for a while (stateless head: its jobs are gone when it returns)
    def head_down(self, rep: Check) -> None:
        self._outage(rep, ns="chaos-head-down", partition=False)

    # -- 4. the dashboard unreachable, Ray itself running on
    def partition(self, rep: Check) -> None:
        self._outage(rep, ns="chaos-partition", partition=True)

    def _outage(self, rep: Check, ns: str, partition: bool) -> None:
        a = self.args
        self.tb.kube.namespace(ns, "alice")
        proxy = TcpProxy(int(self.tb.ray.dashboard_url.rsplit(":", 1)[1])) if partition else None
        op = self.operator([ns], max_running=a.max_running, ray_address=proxy.url if proxy else None, extra_args=["--ray-grace", str(a.ray_grace)])
        runners = [f"running-{i}" for i in range(a.max_running)]
        waiting = [f"queued-{i}" for i in range(a.queued)]
        # During a partition the running jobs go on: they must outlast the outage, then end.
        run_cmd = ppo_command(steps=int((a.outage_seconds + 60) / STEP_SECONDS)) if partition else self.long()
        self.create(ns, [task_body(n, run_cmd, priority=10) for n in runners])
        self.watch.wait(lambda: all(self.watch.phase(ns, n) == "Running" for n in runners), 180, "the running tasks")
        self.create(ns, [task_body(n, self.short()) for n in waiting])
        self.watch.wait(lambda: all(self.watch.phase(ns, n) == "Queued" for n in waiting), 60, "the queued tasks")
        log(f"{rep.name}: {'cutting the dashboard off' if partition else 'stopping the Ray head'} for {a.outage_seconds:g} s")
        t0 = time.monotonic()
        if proxy:
            proxy.block()
        else:
            self.tb.ray.stop_head()
        rep.times += 1
        failed_during: set[str] = set()
        unreachable_at: dict[str, float] = {}
        created_during = [f"during-{i}" for i in range(2)]
        made = False
        try:
            while time.monotonic() - t0 < a.outage_seconds:
                now = time.monotonic() - t0
                with self.watch.cond:
                    objs = dict(self.watch.in_namespace(ns))
                for name, obj in objs.items():
                    if (obj.get("status") or {}).get("phase") == "Failed":
                        failed_during.add(name)
                    if condition(obj, "RayReachable") == "False" and name not in unreachable_at:
                        unreachable_at[name] = now
                if not made and now > 10:
                    self.create(ns, [task_body(n, self.short()) for n in created_during])
                    made = True
                time.sleep(1)
        finally:
            down = time.monotonic() - t0
            if proxy:
                proxy.unblock()
            else:
                self.tb.ray.start_head()
        rep.fact(f"{'dashboard cut off' if partition else 'Ray head down'} for {down:.0f} s (operator --ray-grace {a.ray_grace:g}); "
                 f"{len(runners)} tasks Running and {len(waiting)} Queued when it started; {len(created_during)} tasks created during it")
        rep.check("no task failed during the outage (before the grace period)", not failed_during, str(sorted(failed_during)) if failed_during else "")
        shown = [n for n in runners + waiting if n in unreachable_at]
        rep.check("RayReachable=False shown on every running and queued task", len(shown) == len(runners + waiting),
                  f"{len(shown)}/{len(runners + waiting)}; first after {min(unreachable_at.values()) if unreachable_at else float('nan'):.1f} s, "
                  f"last after {max(unreachable_at.values()) if unreachable_at else float('nan'):.1f} s")
        phases = self.watch.phases(ns)
        rep.check("tasks created during the outage were queued", all(phases.get(n) == "Queued" for n in created_during) or all(phases.get(n) in ("Queued", "Submitted", "Running", "Succeeded") for n in created_during),
                  str({n: phases.get(n) for n in created_during}))
        everyone = runners + waiting + created_during
        self.wait_terminal(ns, len(everyone), 300 + (a.outage_seconds + 60 if partition else 0))
        rep.fact(f"everything ended {time.monotonic() - t0 - down:.0f} s after the outage")
        time.sleep(2 * a.poll_interval)
        st = {n: self.watch.objects[(ns, n)].get("status") or {} for n in everyone}
        ok = [n for n in waiting + created_during if st[n].get("phase") == "Succeeded"]
        rep.check("the queued tasks (and those created during the outage) ran after it and succeeded", len(ok) == len(waiting + created_during), f"{len(ok)}/{len(waiting + created_during)}")
        jobs = self.jobs(ns)
        if partition:
            good = [n for n in runners if st[n].get("phase") == "Succeeded"]
            rep.check("the tasks running during the partition kept running and succeeded", len(good) == len(runners), f"{len(good)}/{len(runners)}: {[st[n].get('phase') for n in runners]}")
            rep.check("one Ray job per task (nothing resubmitted)", all(len(jobs.get(n, [])) == 1 for n in everyone), f"{sum(len(j) for j in jobs.values())} jobs for {len(everyone)} tasks")
        else:
            lost = [n for n in runners if (st[n].get("phase"), st[n].get("reason")) == ("Failed", "RayJobLost")]
            rep.check("the tasks running when the head stopped -> Failed/RayJobLost once it is back (the stateless head forgot their jobs; a plain Ray worker dies with its head)",
                      len(lost) == len(runners), f"{len(lost)}/{len(runners)}")
            rep.check("nothing resubmitted: the new head has no job for a lost task, one per queued task", not any(n in jobs for n in runners) and all(len(jobs.get(n, [])) == 1 for n in waiting + created_during),
                      f"new head's jobs: {sorted((n, len(j)) for n, j in jobs.items())}")
        reach = [n for n in everyone if condition(self.watch.objects[(ns, n)], "RayReachable") != "True" or st[n].get("rayUnreachableSince")]
        rep.check("after the outage every task shows RayReachable=True and no rayUnreachableSince (Ray answered again)", not reach,
                  f"still unreachable: {reach}" if reach else "")
        op.stop()
        if proxy:
            proxy.close()

    # -- 5. restart kube-apiserver and etcd mid-run
    def apiserver_restart(self, rep: Check) -> None:
        a = self.args
        for r in range(a.apiserver_restarts):
            ns = f"chaos-apiserver-{r}"
            self.tb.kube.namespace(ns, "alice")
            names = [f"t-{i:02d}" for i in range(a.api_tasks)]
            self.create(ns, [task_body(n, self.short(a.api_steps)) for n in names])
            op = self.operator([ns], max_running=a.max_running)
            self.watch.wait(lambda: sum(1 for p in self.watch.phases(ns).values() if p in ("Running", "Succeeded")) >= a.max_running, 180, "tasks to run")  # noqa: B023 - waited for here
            phases = self.watch.phases(ns)
            counts = {p: sum(1 for v in phases.values() if v == p) for p in ("Queued", "Submitted", "Running", "Succeeded")}
            log(f"apiserver-restart {r + 1}/{a.apiserver_restarts}: restarting kube-apiserver + etcd ({counts})")
            t = time.monotonic()
            self.tb.cp.restart(down_for=a.api_down)
            rep.times += 1
            rep.fact(f"restart {r + 1}: kube-apiserver + etcd down {a.api_down:g} s, back in {time.monotonic() - t:.0f} s; at the restart {counts}")
            self.wait_terminal(ns, len(names), 400)
            time.sleep(2 * a.poll_interval)
            phases = self.watch.phases(ns)
            ok = [n for n in names if phases.get(n) == "Succeeded"]
            rep.check(f"restart {r + 1}: the operator reconnected and every task Succeeded", len(ok) == len(names), f"{len(ok)}/{len(names)}" + ("" if len(ok) == len(names) else f": {phases}"))
            jobs = self.jobs(ns)
            rep.check(f"restart {r + 1}: one Ray job per task", all(len(jobs.get(n, [])) == 1 for n in names), f"{sum(len(j) for j in jobs.values())} jobs for {len(names)} tasks")
            rep.check(f"restart {r + 1}: the operator process survived (no crash)", op.proc is not None and op.proc.poll() is None)
            op.stop()
        rep.fact(f"the benchmark's own watch reconnected {self.watch.reconnects} time(s) across the restarts")

    # -- 6. a burst of hostile tasks mixed with good ones
    def hostile(self, rep: Check) -> None:
        a = self.args
        table = load_module(REPO / "tests" / "unit" / "test_core_validation_table.py")  # for its HOSTILE cases
        root = str(self.tb.root)
        assert root.endswith("private"), root  # the table's <R-3> trick needs it
        ns = "chaos-hostile"
        self.tb.kube.namespace(ns, "alice")
        # The table's user-id cases: the user comes from the namespace's argus.io/user label.
        # A label value Kubernetes accepts is used as is; one it refuses cannot exist, so that
        # case runs in a namespace without the label (not onboarded).
        user_ns: dict[str, str] = {}
        label_ok = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
        for case in table.HOSTILE:
            if case.user != "alice" and case.user not in user_ns:
                if len(case.user) <= 63 and label_ok.fullmatch(case.user):
                    name = f"chaos-user-{len(user_ns)}"
                    self.tb.kube.namespace(name, case.user)
                else:
                    name = "chaos-user-unlabelled"
                    self.tb.kube.namespace(name, None)
                user_ns[case.user] = name
        hostile = []
        for i in range(a.hostile):
            case = table.HOSTILE[i % len(table.HOSTILE)]
            doc = table.fill(table._fix_root_cuts(case.doc, root), root)
            name = f"h{i:03d}-" + re.sub(r"[^a-z0-9-]", "-", case.id.lower())[:50].strip("-")
            if isinstance(doc, dict):
                doc = json.loads(json.dumps(doc))
                meta = doc.setdefault("metadata", {}) if isinstance(doc.get("metadata", {}), dict) else {}
                if not case.id.startswith("bad-name"):
                    meta["name"] = name
                else:
                    name = str(meta.get("name"))
                doc["metadata"] = meta
            hostile.append((case, user_ns.get(case.user, ns), name, doc))
        good = [(None, ns, f"good-{i:03d}", task_body(f"good-{i:03d}", self.short())) for i in range(a.good)]
        everything = hostile + good
        self.rng.shuffle(everything)
        op = self.operator([ns, *sorted(set(user_ns.values()))], max_running=a.max_running)
        refused: dict[str, int] = {}
        stored: list[tuple[Any, str, str]] = []
        from kubernetes.client.exceptions import ApiException

        def create(item: tuple[Any, str, str, Any]) -> None:
            case, where, name, doc = item
            if not isinstance(doc, dict):
                refused["not an object (kubectl/the client cannot send it)"] = refused.get("not an object (kubectl/the client cannot send it)", 0) + 1
                return
            try:
                # fieldValidation=Strict, as kubectl sends it: an unknown field is refused rather than
                # silently pruned (pruned, the rest of that case is a good task, and runs).
                self.tb.kube.custom.create_namespaced_custom_object("argus.io", "v1alpha1", where, "argustasks", doc, field_validation="Strict")
                stored.append((case, where, name))
            except ApiException as exc:
                key = f"HTTP {exc.status} {exc.reason}"
                refused[key] = refused.get(key, 0) + 1
                if case is None:
                    raise
            except ValueError as exc:  # the client refuses a body it cannot send (e.g. no name)
                refused[f"client: {type(exc).__name__}"] = refused.get(f"client: {type(exc).__name__}", 0) + 1

        t0 = time.monotonic()
        seen_in_ray: set[str] = set()
        stop_polling = threading.Event()

        def poll_ray() -> None:  # "ever": look at Ray's job list throughout the run, not only at the end
            while not stop_polling.is_set():
                try:
                    for j in ray_jobs(self.tb.ray.dashboard_url):
                        seen_in_ray.add(f"{(j.metadata or {}).get('argus.io/namespace')}/{(j.metadata or {}).get('argus.io/name')}")
                except Exception:  # noqa: BLE001
                    pass
                stop_polling.wait(2)

        poller = threading.Thread(target=poll_ray, daemon=True)
        poller.start()
        parallel(create, everything, workers=8)
        rep.times += 1
        n_hostile_stored = sum(1 for c, _, _ in stored if c is not None)
        rep.fact(f"{a.hostile} hostile tasks ({len(table.HOSTILE)} distinct cases of the validation table, cycled) and {a.good} good ones, "
                 f"created in random order, 8 at a time, in {time.monotonic() - t0:.0f} s: {n_hostile_stored} hostile ones stored, "
                 f"{a.hostile - n_hostile_stored} refused before being stored ({', '.join(f'{v} {k}' for k, v in sorted(refused.items()))}): "
                 "the CRD's schema (types, enums, maxLength, required fields, CEL rules; unknown fields under fieldValidation=Strict, "
                 "which is what kubectl sends) already stops those")
        watched = [(w, n) for _, w, n in stored]
        self.watch.wait(lambda: all(self.watch.phase(w, n) in TERMINAL for w, n in watched), 600, "every stored task to end")
        time.sleep(2 * a.poll_interval)
        stop_polling.set()
        poller.join()
        rep.fact(f"all ended {time.monotonic() - t0:.0f} s after the first create")
        not_rejected = [(n, self.watch.phase(w, n)) for c, w, n in stored if c is not None and self.watch.phase(w, n) != "Rejected"]
        rep.check("every stored hostile task ends Rejected", not not_rejected, f"{n_hostile_stored - len(not_rejected)}/{n_hostile_stored}" + (f"; not: {not_rejected[:10]}" if not_rejected else ""))
        reasons: dict[str, int] = {}
        for c, w, n in stored:
            if c is not None:
                r = (self.watch.objects[(w, n)].get("status") or {}).get("reason", "?")
                reasons[r] = reasons.get(r, 0) + 1
        rep.fact(f"rejection reasons: {reasons}")
        good_ok = [n for c, w, n in stored if c is None and self.watch.phase(w, n) == "Succeeded"]
        rep.check("every good task Succeeded", len(good_ok) == a.good, f"{len(good_ok)}/{a.good}")
        hostile_keys = {f"{w}/{n}" for c, w, n in stored if c is not None} | {f"{w}/{n}" for c, w, n, _ in hostile}
        jobs_now = {f"{(j.metadata or {}).get('argus.io/namespace')}/{(j.metadata or {}).get('argus.io/name')}" for j in ray_jobs(self.tb.ray.dashboard_url)}
        leaked = sorted((seen_in_ray | jobs_now) & hostile_keys)
        rep.check("nothing hostile ever in Ray's job list (polled every 2 s during the run, and at the end)", not leaked, str(leaked[:10]) if leaked else "")
        jobs = self.jobs(ns)
        rep.check("one Ray job per good task", all(len(jobs.get(f"good-{i:03d}", [])) == 1 for i in range(a.good)), f"{sum(len(j) for j in jobs.values())} jobs")
        op.stop()


    # -- 7. SIGKILL the operator in the middle of a preemption
    def preempt_restart(self, rep: Check) -> None:
        preempt_restart(self, rep)


# --------------------------------------------------------------------------- report

def write_doc(path: Path, argv: list[str], machine: dict[str, Any], reports: list[Check], wall: float, args: argparse.Namespace) -> None:
    """The whole document from this run; or, when this run chose some scenarios only (--only,
    --skip) and the document exists, that document with only those scenarios rewritten (their
    summary rows and sections), each saying which run it comes from: the others' figures stay
    as their own run wrote them."""
    m = machine
    ran = {r.name for r in reports}
    if ran != set(SCENARIOS) and path.exists():
        run = (f"Run on its own: `.venv/bin/python bench/chaos.py {' '.join(argv)}` on {m['date']}, load average at start "
               f"{m['load_average_at_start']}; that run took {wall / 60:.1f} min.")
        path.write_text(merge_doc(path.read_text(), {r.name: (summary_row(r), section(r, run)) for r in reports}))
        return
    lines = [
        "# Reliability: fault injection",
        "",
        "Written by `bench/chaos.py` (see [bench/README.md](../bench/README.md)); everything below comes from one run of",
        "",
        f"    .venv/bin/python bench/chaos.py {' '.join(argv)}".rstrip(),
        "",
        f"against a real kube-apiserver {m.get('kube_apiserver')} + etcd and a real Ray {m['ray']} cluster (a head that runs no work",
        "and one worker) on loopback, with the operator as a subprocess (`python -m argus`, a fresh one per scenario, watching",
        "that scenario's namespaces). The trainer is the verl stand-in (`hack/verl-standin`) sleeping "
        f"{STEP_SECONDS:g} s per step. Whole run: {wall / 60:.1f} min.",
        "",
        f"Machine: {m['nproc']} CPUs ({m['cpu_model']}), {m['memory_gib']} GiB, Linux {m['kernel']}; Python {m['python']}, Ray {m['ray']},",
        f"kopf {m['kopf']}, kubernetes client {m['kubernetes']}; {m['date']}; load average at start {m['load_average_at_start']}.",
        "",
        "## Summary",
        "",
        "| Scenario | Injected | Times | Checks passed | Result |",
        "|---|---|---|---|---|",
    ]
    lines += [summary_row(r) for r in reports]
    lines.append("")
    issue = {"kills": 20, "kill_tasks": 50, "outage_seconds": 120, "hostile": 500, "good": 50}
    diff = {k: (getattr(args, k), v) for k, v in issue.items() if getattr(args, k) != v}
    lines.append("Sizes: " + ", ".join(f"{k.replace('_', ' ')} {getattr(args, k):g}" for k in issue) +
                 (" (the full sizes)." if not diff else "; differing from the full sizes: " + ", ".join(f"{k} {v} (full: {i})" for k, (v, i) in diff.items()) + "."))
    lines.append("")
    for r in reports:
        lines += section(r)
    path.write_text("\n".join(lines))


def summary_row(r: Check) -> str:
    n_ok = sum(1 for _, ok, _ in r.checks if ok)
    return f"| {r.name} | {r.injected} | {r.times} | {n_ok}/{len(r.checks)} | {'**PASS**' if r.passed else '**FAIL**'} |"


def section(r: Check, run: str | None = None) -> list[str]:
    """A scenario's section; ``run``: which run it comes from, when not the document's own."""
    lines = [f"## {r.name}", ""]
    if run:
        lines += [run, ""]
    lines += [f"**Injected:** {r.injected}. **How many times:** {r.times}. **Took:** {r.seconds:.0f} s.", ""]
    if r.facts:
        lines += [*[f"- {f}" for f in r.facts], ""]
    lines += ["| Checked | Result | Detail |", "|---|---|---|"]
    for what, ok, detail in r.checks:
        lines.append(f"| {what} | {'PASS' if ok else '**FAIL**'} | {detail.replace('|', '/') if detail else ''} |")
    if r.error:
        lines += ["", "The scenario stopped with an error:", "", "```", r.error.strip()[-3000:], "```"]
    lines.append("")
    return lines


def merge_doc(text: str, new: dict[str, tuple[str, list[str]]]) -> str:
    """``text`` (a document write_doc wrote) with the scenarios of ``new`` (name: summary row,
    section) put in, replacing their old row and section; the others stay as they were, and
    the scenarios keep SCENARIOS' order."""
    head, _, rest = text.partition("\n## Summary\n")
    head = head.replace("everything below comes from one run of", "everything below but the scenarios that say they ran on their own "
                        "comes from one run of")
    blocks = ("## Summary\n" + rest).split("\n## ")
    summary, sections = blocks[0], {b.split("\n", 1)[0].strip(): "## " + b for b in blocks[1:]}
    rows = {line.split("|")[1].strip(): line for line in summary.splitlines() if line.startswith("| ") and not line.startswith("| Scenario")}
    rows.update({name: row for name, (row, _) in new.items()})
    sections.update({name: "\n".join(lines) for name, (_, lines) in new.items()})
    order = [n for n in SCENARIOS if n in rows] + [n for n in rows if n not in SCENARIOS]
    table = ["| Scenario | Injected | Times | Checks passed | Result |", "|---|---|---|---|---|", *(rows[n] for n in order)]
    lines = summary.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("| Scenario"))
    last = max(i for i, line in enumerate(lines) if line.startswith("|"))
    summary = "\n".join(lines[:first] + table + lines[last + 1:])
    body = [sections[n].rstrip("\n") + "\n" for n in order if n in sections]
    return head + "\n" + summary.rstrip("\n") + "\n\n" + "\n".join(body)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", choices=SCENARIOS, help="run only these scenarios (repeatable)")
    parser.add_argument("--skip", action="append", default=[], choices=SCENARIOS)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--kills", type=int, default=20, help="SIGKILLs of the operator (default 20)")
    parser.add_argument("--kill-tasks", type=int, default=50, help="tasks in the kill run (default 50)")
    parser.add_argument("--kill-min", type=float, default=1.0, help="shortest delay from a (re)start to the next kill (s)")
    parser.add_argument("--kill-max", type=float, default=8.0, help="longest delay from a (re)start to the next kill (s)")
    parser.add_argument("--crash-after-submit", type=float, default=0.3,
                        help="chance that the operator dies right after each submission, before the status write (default 0.3)")
    parser.add_argument("--short-steps", type=int, default=10, help=f"steps of a short task ({STEP_SECONDS:g} s each)")
    parser.add_argument("--head-restarts", type=int, default=1)
    parser.add_argument("--queued", type=int, default=4, help="tasks waiting in the queue in the Ray scenarios")
    parser.add_argument("--outage-seconds", type=float, default=120, help="how long Ray is unreachable (default 120)")
    parser.add_argument("--ray-grace", type=float, default=300, help="operator --ray-grace in the outage scenarios (default 300)")
    parser.add_argument("--apiserver-restarts", type=int, default=1)
    parser.add_argument("--api-tasks", type=int, default=12)
    parser.add_argument("--api-steps", type=int, default=25)
    parser.add_argument("--api-down", type=float, default=10, help="seconds kube-apiserver and etcd stay down")
    parser.add_argument("--hostile", type=int, default=500)
    parser.add_argument("--good", type=int, default=50)
    parser.add_argument("--preempt-rounds", type=int, default=3, help="preemptions in the preempt-restart scenario, 4 kills each (default 3)")
    parser.add_argument("--preempt-kill-max", type=float, default=1.5,
                        help="longest delay from a stage of the preemption to the kill (s; uniform from 0, default 1.5)")
    parser.add_argument("--max-running", type=int, default=4)
    parser.add_argument("--poll-interval", type=float, default=2.0, help="operator --poll-interval (default 2, the operator's default)")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "reliability.md")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the work directory (every process's log)")
    argv = sys.argv[1:]
    args = parser.parse_args()
    chosen = [s for s in (args.only or SCENARIOS) if s not in args.skip]

    started = time.monotonic()
    machine = machine_info()
    work = args.work or Path(tempfile.mkdtemp(prefix="argus-chaos-"))
    work.mkdir(parents=True, exist_ok=True)
    reports: list[Check] = []
    injected = {
        "kill": "SIGKILL of the operator at a random moment, then a restart",
        "head-restart": "Ray head (and worker) restarted mid-run",
        "head-down": f"Ray head stopped for {args.outage_seconds:g} s (dashboard unreachable), --ray-grace {args.ray_grace:g}",
        "partition": f"Ray dashboard unreachable for {args.outage_seconds:g} s while Ray runs on (TCP proxy cut), --ray-grace {args.ray_grace:g}",
        "apiserver-restart": f"kube-apiserver + etcd stopped, {args.api_down:g} s down, restarted mid-run",
        "hostile": f"{args.hostile} hostile tasks mixed with {args.good} good ones",
        "preempt-restart": "SIGKILL of the operator at each stage of a preemption, then a restart",
    }
    tb = watch = None
    try:
        tb = Testbed(work)
        tb.start_ray("ray", {"VERL_STANDIN_STEP_SECONDS": str(STEP_SECONDS)}, worker_gpus=max(4, args.max_running))
        watch = TaskWatch(tb.kube).start()
        chaos = Chaos(args, tb, watch)
        for name in chosen:
            rep = Check(name, injected[name])
            reports.append(rep)
            log(f"=== {name}: {rep.injected} (load {loadavg()})")
            t0 = time.monotonic()
            try:
                getattr(chaos, name.replace("-", "_"))(rep)
            except Exception:  # noqa: BLE001 - report it and go on with the next scenario
                rep.error = traceback.format_exc()
                log(f"  ERROR: {rep.error}")
                for op in tb.operators:
                    try:
                        op.stop()
                    except Exception:  # noqa: BLE001
                        pass
                if tb.ray and not tb.ray.running:
                    tb.ray.start_head()
            rep.seconds = time.monotonic() - t0
            log(f"=== {name}: {'PASS' if rep.passed else 'FAIL'} in {rep.seconds:.0f} s")
    finally:
        if watch:
            watch.stop()
        if tb:
            tb.close()
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"work directory kept: {work}")
    wall = time.monotonic() - started
    print()
    for r in reports:
        n_ok = sum(1 for _, ok, _ in r.checks if ok)
        print(f"{r.name:18s} {r.times:3d}x  {n_ok}/{len(r.checks)} checks  {'PASS' if r.passed else 'FAIL'}  ({r.seconds:.0f} s)  {r.injected}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_doc(args.out, argv, machine, reports, wall, args)
    log(f"wrote {args.out} (whole run {wall / 60:.1f} min)")
    return 0 if reports and all(r.passed for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
