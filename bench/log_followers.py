"""The log API under load (issue 17): the operator's memory (RSS) and CPU with 50 followers on
10 running tasks, against the real testbed (kube-apiserver + etcd, a Ray head + worker, the
operator as a subprocess with --logs-api; the trainer is the verl stand-in).

The followers call the operator's log port as the API server's front proxy would (the
front-proxy client certificate, X-Remote-User / X-Remote-Group), so the figures are the
operator's alone (no API-server proxying in between); every request still costs the
operator its SubjectAccessReview. Phases, each measured over --window seconds:

1. 10 tasks running, nobody following (the baseline: the controller and its progress streams);
2. 50 followers (5 per task, users u0..u9 each following one task 5 times, the default
   per-user limit), reading as fast as they can;
3. the same 50, of which 10 stop reading (a stalled client): the backpressure bound.

Also: time to the first byte of a followed log and of a tail read, the Ray streams the operator
holds (one shared per followed job), bytes each follower received, and the skip markers.

    .venv/bin/python bench/log_followers.py [--tasks 10] [--followers 50] [--window 30] [--out docs/benchmarks-logs.json]
"""

from __future__ import annotations

import argparse
import json
import socket
import ssl
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from argus_testbed.ports import free_port  # noqa: E402
from benchlib import Testbed, cpu_seconds, log, machine_info, memory, ppo_command, summary, task_body  # noqa: E402


class Follower(threading.Thread):
    def __init__(self, port: int, ctx: ssl.SSLContext, path: str, user: str, stall: threading.Event | None = None):
        super().__init__(daemon=True)
        self.port, self.ctx, self.path, self.user, self.stall = port, ctx, path, user, stall
        self.bytes = 0
        self.first_byte: float | None = None
        self.status: str = ""
        self.markers = 0
        self.stop = threading.Event()

    def run(self) -> None:
        t0 = time.monotonic()
        raw = socket.create_connection(("127.0.0.1", self.port))
        # A small receive buffer, so that a stalled reader really stalls the sender.
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        sock = self.ctx.wrap_socket(raw, server_hostname="localhost")
        sock.sendall((f"GET {self.path}?follow=true&tailLines=10 HTTP/1.1\r\nHost: x\r\nX-Remote-User: {self.user}\r\n"
                      "X-Remote-Group: bench\r\nX-Remote-Group: system:authenticated\r\n\r\n").encode())
        sock.settimeout(1.0)
        head = b""
        while not self.stop.is_set():
            if self.stall is not None and self.stall.is_set():
                time.sleep(0.2)
                continue
            try:
                data = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if not data:
                break
            if self.first_byte is None:
                self.first_byte = time.monotonic() - t0
                head = data
                self.status = head.split(b"\r\n", 1)[0].decode(errors="replace")
            self.bytes += len(data)
            self.markers += data.count(b"[argus: ")
        sock.close()


def ray_connections(pid: int, dashboard_url: str) -> int:
    """The operator's open TCP connections to the Ray dashboard (its log streams and calls)."""
    import subprocess
    port = dashboard_url.rstrip("/").rsplit(":", 1)[1]
    out = subprocess.run(["ss", "-tnpH", "state", "established", f"( dport = :{port} )"], capture_output=True, text=True).stdout
    return sum(1 for line in out.splitlines() if f"pid={pid}," in line)


def sample(pid: int, window: float) -> dict[str, float]:
    c0, t0 = cpu_seconds(pid), time.monotonic()
    rss = []
    while time.monotonic() - t0 < window:
        rss.append(memory(pid)["rss_mib"])
        time.sleep(1)
    cpu = (cpu_seconds(pid) - c0) / (time.monotonic() - t0)
    return {"cpu_percent": round(cpu * 100, 1), "rss_mib_mean": round(sum(rss) / len(rss), 1), "rss_mib_max": max(rss),
            "peak_rss_mib": memory(pid)["peak_rss_mib"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--followers", type=int, default=50)
    parser.add_argument("--window", type=float, default=30.0)
    parser.add_argument("--steps", type=int, default=4000, help="training steps of each task (0.05 s each)")
    parser.add_argument("--step-seconds", type=float, default=0.05, help="seconds per training step (the log's pace)")
    parser.add_argument("--reader-buffer", type=int, default=None, help="--logs-api-reader-buffer of the operator (default its own)")
    parser.add_argument("--out", type=Path, default=None, help="write the figures here as JSON")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="argus-bench-logs-"))
    users = tuple(f"u{i}" for i in range(args.tasks))
    tb = Testbed(work, users=("alice", *users))
    report: dict[str, Any] = {"machine": machine_info(), "tasks": args.tasks, "followers": args.followers, "window_s": args.window,
                              "step_seconds": args.step_seconds, "reader_buffer": args.reader_buffer or "default (262144)"}
    try:
        tb.start_ray("ray", {"VERL_STANDIN_STEP_SECONDS": str(args.step_seconds)}, worker_gpus=args.tasks)
        cp = tb.cp
        # Who may read: group "bench" gets argustasks/log everywhere (the reviews say yes).
        cp.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "bench-log-reader"},
            "rules": [{"apiGroups": ["logs.argus.io"], "resources": ["argustasks/log"], "verbs": ["get"]}]}))
        cp.kubectl("create", "clusterrolebinding", "bench-log-reader", "--clusterrole=bench-log-reader", "--group=bench")
        # The operator's serving certificate (any; the followers do not check it).
        from argus.adapters.clock import SystemClock
        from argus.servers.webhook.tls import self_signed_certificate
        crt, key = self_signed_certificate(["localhost", "127.0.0.1"], now=SystemClock().now())
        (work / "logs.crt").write_bytes(crt)
        (work / "logs.key").write_bytes(key)
        port = free_port()
        namespaces = [f"bench-logs-{i}" for i in range(args.tasks)]
        for i, ns in enumerate(namespaces):
            tb.kube.namespace(ns, user=users[i])
        op = tb.start_operator("operator", namespaces=namespaces, max_running=args.tasks, extra_args=[
            "--logs-api", f"--logs-api-port={port}", "--logs-api-host=127.0.0.1", f"--logs-api-cert-file={work / 'logs.crt'}",
            f"--logs-api-key-file={work / 'logs.key'}", "--progress-interval", "5",
            *([f"--logs-api-reader-buffer={args.reader_buffer}"] if args.reader_buffer else [])])
        assert op.proc
        pid = op.proc.pid
        for ns in namespaces:
            tb.kube.create(ns, task_body("train", ppo_command(steps=args.steps)))
        deadline = time.monotonic() + 180
        while sum((tb.kube.get(ns, "train").get("status") or {}).get("phase") == "Running" for ns in namespaces) < args.tasks:
            if time.monotonic() > deadline:
                raise TimeoutError("the tasks did not all run")
            time.sleep(1)
        log(f"{args.tasks} tasks running")
        time.sleep(5)
        report["idle"] = sample(pid, args.window)
        report["idle"]["ray_connections"] = ray_connections(pid, tb.ray.dashboard_url)
        log(f"idle: {report['idle']}")

        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.load_cert_chain(cp.cert_dir / "front-proxy-client.crt", cp.cert_dir / "front-proxy-client.key")
        # Tail reads: time to the answer (authentication, review, Ray read), one at a time.
        tails = []
        for i, ns in enumerate(namespaces):
            f = Follower(port, ctx, f"/apis/logs.argus.io/v1alpha1/namespaces/{ns}/argustasks/train/log", users[i])
            t0 = time.monotonic()
            import urllib.request
            req = urllib.request.Request(f"https://127.0.0.1:{port}{f.path}?tailLines=10",
                                         headers={"X-Remote-User": users[i], "X-Remote-Group": "bench"})
            with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
                r.read()
            tails.append(time.monotonic() - t0)
        report["tail_read_seconds"] = summary(tails)

        stall = threading.Event()
        followers: list[Follower] = []
        for k in range(args.followers):
            i = k % args.tasks
            f = Follower(port, ctx, f"/apis/logs.argus.io/v1alpha1/namespaces/{namespaces[i]}/argustasks/train/log", users[i],
                         stall=stall if k < args.tasks else None)  # the first one on each task may stall later
            f.start()
            followers.append(f)
        time.sleep(5)
        report["follow_first_byte_seconds"] = summary([f.first_byte for f in followers if f.first_byte is not None])
        report["follow_status"] = sorted({f.status for f in followers})
        b0 = sum(f.bytes for f in followers)
        report["following"] = sample(pid, args.window)
        report["following"]["ray_connections"] = ray_connections(pid, tb.ray.dashboard_url)
        report["following"]["bytes_per_follower_per_s"] = round((sum(f.bytes for f in followers) - b0) / len(followers) / args.window)
        log(f"following: {report['following']}")
        stall.set()
        report["ten_stalled"] = sample(pid, args.window)
        stall.clear()
        time.sleep(3)
        report["ten_stalled"]["skip_markers_seen"] = sum(f.markers for f in followers)
        log(f"ten stalled: {report['ten_stalled']}")
        # One more follower for a user already at the limit: 429.
        extra = Follower(port, ctx, followers[0].path, users[0])
        extra.start()
        time.sleep(3)
        report["over_limit_status"] = extra.status
        for f in [*followers, extra]:
            f.stop.set()
        for f in followers:
            f.join(timeout=5)
        time.sleep(3)
        report["after"] = {"rss_mib": memory(pid)["rss_mib"]}
        op_log = op.log_path.read_text(errors="replace")
        report["operator_errors"] = sum(1 for line in op_log.splitlines() if " ERROR " in line or "Traceback" in line)
    finally:
        tb.close()
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
