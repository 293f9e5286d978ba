#!/usr/bin/env python3
"""Checks that the fast tests can fail: each mutation below disables one behaviour the
operator promises (in a scratch copy of the repository), and the unit tests must then
fail. A mutation that leaves them green means a behaviour no fast test covers.

    .venv/bin/python hack/mutation-check.py        (.ci/run runs it)

Each mutation runs its module's own test files (FIRST), two mutations side by side in two
scratch copies; the whole unit suite runs only for a mutation those files miss (and then
unmutated too, once, so that a catch is the mutation's doing). The whole suite's green run
is hack/test.sh's, not repeated here.
"""

from __future__ import annotations

import concurrent.futures
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str
    old: str
    new: str

    @property
    def first(self) -> tuple[str, ...]:
        """The unit test files run first for this mutation (the rest of the suite follows
        only if they pass, so a caught mutation costs seconds, not the suite)."""
        return FIRST.get(self.path, ())


# The test files that hold each module's promises, by the module the mutation changes.
FIRST = {
    "operator/argus/adapters/ray.py": ("tests/unit/test_ray_adapter.py", "tests/unit/test_controller.py"),
    "operator/argus/core/lifecycle.py": ("tests/unit/test_core_lifecycle.py", "tests/unit/test_controller.py"),
    "operator/argus/controller/reconcile.py": ("tests/unit/test_controller.py",),
    "operator/argus/core/submission.py": ("tests/unit/test_core_plan.py", "tests/unit/test_controller.py"),
    "operator/argus/core/queue.py": ("tests/unit/test_core_queue.py", "tests/unit/test_controller.py"),
    "operator/argus/core/preemption.py": ("tests/unit/test_core_preemption.py", "tests/unit/test_controller_preemption.py"),
}


MUTATIONS = [
    Mutation("adopting a job Ray already has (resubmission after a crash)", "operator/argus/adapters/ray.py",
             "        except RayJobExists:\n            return False", "        except RayJobExists:\n            raise"),
    Mutation("telling an unknown job (lost) from an unreachable Ray", "operator/argus/adapters/ray.py",
             '    if "does not exist" in text or "status code 404" in text:\n        return RayJobUnknown(text)', "    pass"),
    Mutation("stopping the job on cancel or deadline", "operator/argus/core/lifecycle.py",
             "        actions.append(StopJob(sid))  # the next read sees it stopped", "        pass"),
    Mutation("asking Ray before closing a queued task that may have reached it (issue 18)", "operator/argus/core/lifecycle.py",
             "        return task.holds_finalizer  # submitted before the status said so, perhaps", "        return False"),
    Mutation("stopping the job when an ended task is deleted (issue 18)", "operator/argus/core/lifecycle.py",
             "    if task.deleting:\n        return task.holds_finalizer", "    if task.deleting:\n        return task.holds_finalizer and task.phase in ACTIVE_PHASES"),
    Mutation("the finalizer before the first submission", "operator/argus/controller/reconcile.py",
             "        with_finalizer = await self.writer.add_finalizer(draft.view, {PLACEMENT_ANNOTATION: placement} if placement else None)",
             "        with_finalizer = draft.view"),
    Mutation("failing a running task after the Ray grace period", "operator/argus/core/lifecycle.py",
             "    if elapsed >= settings.ray_grace_seconds:", "    if False:"),
    Mutation("a new attempt gets a submission id of its own (Ray never reuses one)", "operator/argus/core/submission.py",
             '    return base if attempt <= 1 else f"{base}-a{attempt}"', "    return base"),
    Mutation("GPUs that jobs outside Argus hold count as used", "operator/argus/core/queue.py",
             "        return max(0.0, self.total_gpus - self.used_gpus)", "        return self.total_gpus"),
    Mutation("a task needs its GPUs on distinct nodes, not just in total", "operator/argus/core/queue.py",
             "    fitting = sorted((f, i) for i, f in enumerate(free) if f >= per_node)",
             "    fitting = sorted((f, i) for i, f in enumerate(free) if f > 0)"),
    Mutation("preempting only tasks of strictly lower priority", "operator/argus/core/preemption.py",
             "    if victim.priority < task.priority:", "    if victim.priority <= task.priority:"),
    Mutation("choosing the victims that lose the fewest GPU-steps", "operator/argus/core/preemption.py",
             "    return (sum(1 for v in vs if not v.can_resume), sum(v.lost_steps * v.gpus for v in vs), len(vs),",
             "    return (sum(1 for v in vs if not v.can_resume), 0, len(vs),"),
    Mutation("a user's GPU quota", "operator/argus/core/queue.py",
             "        if quota is not None and held + task.gpus > quota:", "        if False:"),
    Mutation("telling refused credentials (HTTP 401/403) from an outage", "operator/argus/adapters/ray.py",
             "    if auth is not None:\n        return RayAuthFailed(auth or None)", "    pass"),
    Mutation("never failing a task for refused credentials (no grace counted)", "operator/argus/core/lifecycle.py",
             "    if seen.reason == Reason.RayAuthFailed:  # Ray answered: no outage, no grace counted (see the docstring)", "    if False:"),
]


def run_unit_tests(root: Path, selection: tuple[str, ...], show_failure: bool = False) -> bool:
    """True when the unit tests in ``selection`` pass (-x: a failure ends the run at once)."""
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "unit", "-x", "-p", "no:cacheprovider",
                             "--ignore=tests/unit/test_import_contract.py", *selection],
                            cwd=root, env=_test_env(root), capture_output=True, text=True, timeout=600)
    if result.returncode != 0 and show_failure:
        print(result.stdout[-3000:], file=sys.stderr)
    return result.returncode == 0


def _test_env(root: Path) -> dict[str, str]:
    """A small environment; HOME and the cache's location are kept, because the unit tests
    compose with the verl trees that hack/setup.sh cached there (hack/fetch-verl.sh)."""
    env = {"PYTHONPATH": str(root / "operator"), "PATH": "/usr/bin:/bin"}
    for name in ("HOME", "XDG_CACHE_HOME", "ARGUS_CACHE_DIR"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


class Checker:
    """Runs the mutations two at a time (``PARALLEL``), each in a scratch copy of its own.
    A mutation's own test files (``FIRST``) run first; only if they stay green does the whole
    unit suite run, and then the unmutated suite must pass first (once, when first needed),
    so that every catch is the mutation's doing: the unmutated ``FIRST`` files are checked
    the same way before any mutation runs."""

    PARALLEL = 2

    def __init__(self, scratches: list[Path]) -> None:
        self.free: queue.Queue[Path] = queue.Queue()
        for scratch in scratches:
            self.free.put(scratch)
        self.suite_lock = threading.Lock()
        self.suite_green: bool | None = None

    def whole_suite_green(self, root: Path, m: Mutation, original: str) -> bool:
        """The unmutated whole suite, once: in a copy of ``root`` with ``original`` put back."""
        with self.suite_lock:
            if self.suite_green is None:
                clean = root.parent / "clean"
                shutil.copytree(root, clean, symlinks=True)
                (clean / m.path).write_text(original)
                self.suite_green = run_unit_tests(clean, ("tests/unit",), show_failure=True)
            return self.suite_green

    def caught(self, m: Mutation) -> bool:
        root = self.free.get()
        path = root / m.path
        original = path.read_text()
        try:
            path.write_text(original.replace(m.old, m.new))
            if m.first and not run_unit_tests(root, m.first):
                return True
            if not run_unit_tests(root, ("tests/unit",)):
                if self.whole_suite_green(root, m, original):
                    return True
                raise SystemExit("mutation-check: the unit tests fail without any mutation; fix them first")
            return False
        finally:
            path.write_text(original)
            self.free.put(root)


def copy_repo(scratch: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        source = REPO / name
        if source.is_file():
            target = scratch / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)  # modes too: the tests run scripts


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="argus-mutations-") as tmp:
        scratches = [Path(tmp) / f"copy-{i}" for i in range(Checker.PARALLEL)]
        copy_repo(scratches[0])
        for m in MUTATIONS:
            if (scratches[0] / m.path).read_text().count(m.old) != 1:
                print(f"mutation-check: {m.path} no longer holds the code of mutation '{m.name}': update hack/mutation-check.py", file=sys.stderr)
                return 1
        first_files = tuple(sorted({f for m in MUTATIONS for f in m.first}))
        if not run_unit_tests(scratches[0], first_files, show_failure=True):
            print("mutation-check: the unit tests fail without any mutation; fix them first", file=sys.stderr)
            return 1
        for extra in scratches[1:]:
            shutil.copytree(scratches[0], extra, symlinks=True)
        checker = Checker(scratches)
        with concurrent.futures.ThreadPoolExecutor(Checker.PARALLEL) as pool:
            verdicts = list(pool.map(checker.caught, MUTATIONS))
    for m, caught in zip(MUTATIONS, verdicts, strict=True):
        print(f"{'caught  ' if caught else 'SURVIVED'}  {m.name}")
    survived = [m.name for m, caught in zip(MUTATIONS, verdicts, strict=True) if not caught]
    if survived:
        print(f"mutation-check: {len(survived)} mutation(s) survived the unit tests", file=sys.stderr)
        return 1
    print(f"mutation-check: all {len(MUTATIONS)} mutations caught by the unit tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
