"""The refill path (``controller.logfollow`` -> ``jobsync.JobSync.hurry`` -> ``loop``): a job
that says it ended (its exit marker where the tree is mounted, else its stream's end from Ray) is read at once,
not at its next periodic read, and in that one tick its end is written (one status patch) and
the freed slot's next task is admitted and submitted. Over the in-memory fakes; the gap is
measured against real Ray by bench/run.py."""

from __future__ import annotations

import asyncio

import pytest

from argus.controller.loop import ENDING_TICK_FLOOR
from argus.core.polling import ENDING_READ_SECONDS, ENDING_READS_FOR
from argus.core.progress import ProgressSource
from argus.core.spec import Phase
from test_controller import World, crash_after_submit, log_reads_from_ray, spec, status_patches

pytestmark = pytest.mark.unit


def old_running_job(world: World) -> tuple[tuple[str, str], tuple[str, str], str]:
    """Two tasks, one slot: the first runs long enough to be read only every poll interval,
    the second waits."""
    first = world.cluster.create("first", spec())
    second = world.cluster.create("second", spec())
    world.tick()
    sid = world.sid(first)
    world.ray.run(sid)
    for _ in range(40):  # two minutes of running: read every poll interval (2 s) now
        world.tick(3.0)
    assert world.phase(first) == Phase.Running.value and world.phase(second) == Phase.Queued.value
    world.tick(0.5)  # just read: its next periodic read is 2 s away
    return first, second, sid


def due_in(world: World, key: tuple[str, str]) -> float:
    view = world.control_loop.view(key)
    assert view is not None
    return world.control_loop.jobs.due_in(view, world.clock.now(), 1)


def let_background_run(world: World, seconds: float = 0.2) -> None:
    """Real time for the followers (the fake clock stands still)."""
    world.loop.run_until_complete(asyncio.sleep(seconds))


def tick_until_submitted(world: World, key: tuple[str, str]) -> asyncio.Task[None]:
    """Start a tick and let it run (real time, a second at most) until ``key``'s job is in
    Ray; the tick may still be going."""
    tick = world.loop.create_task(world.control_loop.tick())
    for _ in range(500):
        world.loop.run_until_complete(asyncio.sleep(0.002))
        if world.sid(key) in world.ray.jobs:
            break
    return tick


def ended_and_refilled_in_one_tick(world: World, first: tuple[str, str], second: tuple[str, str], sid: str) -> None:
    """The job ended and its end was signalled: the loop reads it in the very next tick
    (not in ~2 s), writes its end once and submits the next task in that tick."""
    reads_before = sum(1 for op, s in world.ray.calls if op == "status" and s == sid)
    assert due_in(world, first) <= 0  # due now, not in ~2 s
    assert world.control_loop.next_wait() == pytest.approx(ENDING_TICK_FLOOR)  # the loop's shortest wait, while a job ends
    assert world.control_loop.wake.is_set()
    world.tick()  # the fake clock does not move: this is the very next tick
    assert world.phase(first) == Phase.Succeeded.value
    assert world.phase(second) == Phase.Submitted.value  # the freed slot refilled in that same tick
    assert sum(1 for op, s in world.ray.calls if op == "status" and s == sid) == reads_before + 1  # one read
    ends = [p for p in status_patches(world, first) if p.get("phase")]
    assert [p["phase"] for p in ends][-1] == Phase.Succeeded.value
    assert sum(1 for p in ends if p["phase"] == Phase.Succeeded.value) == 1  # one write of the end


@pytest.mark.parametrize("source", list(ProgressSource))
def test_a_job_whose_exit_marker_appears_is_read_and_refilled_in_one_tick(source: ProgressSource) -> None:
    """Wherever the tree is mounted, the exit marker tells the end, whatever the progress
    source: Ray's stream here still holds a last line (as Ray 2.60 closes a stream 1-2 s late)."""
    world = World(max_running=1, progress_source=source)
    first, second, sid = old_running_job(world)
    assert due_in(world, first) > 1.0
    world.ray.log_lag = 3600.0
    world.ray.say(sid, "the last line, which Ray's stream brings later\n")
    world.ray.finish(sid)
    let_background_run(world)  # the exit marker is seen
    ended_and_refilled_in_one_tick(world, first, second, sid)
    world.control_loop.logs.close()


def test_without_the_tree_the_stream_s_end_tells_the_end() -> None:
    world = World(max_running=1, progress_source=ProgressSource.stream)
    world.files.mounted = lambda users_root: False  # type: ignore[method-assign]
    first, second, sid = old_running_job(world)
    world.ray.finish(sid)
    let_background_run(world)
    assert world.files.looks == 0  # no marker looked for
    ended_and_refilled_in_one_tick(world, first, second, sid)


@pytest.mark.parametrize("source", [ProgressSource.stream, ProgressSource.off])
def test_without_the_tree_or_a_closed_stream_the_end_waits_for_its_periodic_read(source: ProgressSource) -> None:
    """The can-fail side of the two above: with neither sign, the job is not hurried."""
    world = World(max_running=1, progress_source=source)
    world.files.mounted = lambda users_root: False  # type: ignore[method-assign]
    first, _, sid = old_running_job(world)
    world.ray.log_lag = 3600.0
    world.ray.say(sid, "a line Ray's stream brings later\n")
    world.ray.finish(sid)
    let_background_run(world)
    assert due_in(world, first) > 1.0 and not world.control_loop.wake.is_set()
    world.control_loop.logs.close()


def test_an_exit_marker_seen_before_ray_says_the_job_ended_is_read_again_soon() -> None:
    """The marker appears a few milliseconds before Ray's job supervisor notices the exit:
    the first read may still say RUNNING; the next comes ENDING_READ_SECONDS later, not at
    the next poll interval."""
    world = World(max_running=1, progress_source=ProgressSource.file)
    first, second, sid = old_running_job(world)
    world.control_loop.jobs.hurry(first)  # as the marker watcher does, before Ray's status moved
    world.tick()
    assert world.phase(first) == Phase.Running.value
    assert 0 < due_in(world, first) <= ENDING_READ_SECONDS + 1e-9
    assert world.control_loop.next_wait() <= ENDING_READ_SECONDS + 1e-9  # the loop wakes for it, not 50 ms later
    world.ray.finish(sid)
    world.tick(ENDING_READ_SECONDS)
    assert world.phase(first) == Phase.Succeeded.value and world.phase(second) == Phase.Submitted.value


def test_the_hurry_runs_out_so_a_wrong_signal_costs_a_few_reads() -> None:
    world = World(max_running=1, progress_source=ProgressSource.file)
    first, _, sid = old_running_job(world)
    world.control_loop.jobs.hurry(first)
    reads = 0
    for _ in range(int(5 / ENDING_READ_SECONDS)):  # five seconds, a tick at each due read
        before = sum(1 for op, s in world.ray.calls if op == "status" and s == sid)
        world.tick(ENDING_READ_SECONDS)
        reads += sum(1 for op, s in world.ray.calls if op == "status" and s == sid) - before
    assert world.phase(first) == Phase.Running.value
    hurried = ENDING_READS_FOR / ENDING_READ_SECONDS  # 40; then every poll interval (2 s)
    assert hurried * 0.75 <= reads <= hurried + 5, reads
    assert due_in(world, first) > 1.0
    assert world.control_loop.next_wait() > 1.0  # and the loop sleeps again


def test_exit_markers_of_all_jobs_are_looked_at_together() -> None:
    world = World(max_running=3, progress_source=ProgressSource.file)
    keys = [world.cluster.create(f"t{i}", spec()) for i in range(3)]
    world.tick()
    for key in keys:
        world.ray.run(world.sid(key))
    world.tick(0.2)
    world.files.looks = 0
    let_background_run(world, 0.26)
    assert 2 <= world.files.looks <= 8  # every 0.05 s, one look for the three jobs
    world.ray.finish(world.sid(keys[1]))
    let_background_run(world)
    world.tick()
    assert [world.phase(k) for k in keys] == ["Running", "Succeeded", "Running"]
    world.control_loop.logs.close()


def test_by_stream_the_whole_log_is_read_as_the_marker_appears_and_once() -> None:
    """The exit marker means the command ended and its log is whole: the log is read from
    Ray then, while the loop waits for Ray's supervisor to notice the exit, and that one read
    gives the end's status patch its last progress (no Ray call between the end's read and
    its write)."""
    world = World(max_running=1, progress_source=ProgressSource.stream)
    first, second, sid = old_running_job(world)
    world.ray.log_lag = 3600.0  # the stream would bring the last lines much later
    world.ray.say(sid, "Total training steps: 7\nstep:7 - a:1\nFinal validation metrics: {}\n")
    logs_before = log_reads_from_ray(world, sid)
    world.ray.exit(sid)  # the marker is written; Ray still says RUNNING
    let_background_run(world)
    assert log_reads_from_ray(world, sid) == logs_before + 1  # the whole log, read at the marker
    world.tick()
    assert world.phase(first) == Phase.Running.value  # Ray's supervisor has not noticed yet
    world.ray.finish(sid)
    world.tick(ENDING_READ_SECONDS)
    assert world.phase(first) == Phase.Succeeded.value and world.phase(second) == Phase.Submitted.value
    end = [p for p in status_patches(world, first) if p.get("phase") == Phase.Succeeded.value]
    assert len(end) == 1 and end[0]["progress"]["step"] == 7, end  # the end and the last line in one patch
    assert log_reads_from_ray(world, sid) == logs_before + 1  # not read again
    world.close()


def test_a_marker_never_read_before_the_end_reads_the_log_at_the_end() -> None:
    """The can-fail side: without the marker (no tree here), the whole log is read when
    Ray says the job ended, as before."""
    world = World(max_running=1, progress_source=ProgressSource.stream)
    world.files.mounted = lambda users_root: False  # type: ignore[method-assign]
    first, _, sid = old_running_job(world)
    world.ray.log_lag = 3600.0
    world.ray.say(sid, "Total training steps: 7\nstep:7 - a:1\n")
    logs_before = log_reads_from_ray(world, sid)
    world.ray.exit(sid)
    let_background_run(world)
    assert log_reads_from_ray(world, sid) == logs_before  # no marker looked for: nothing read yet
    world.ray.finish(sid)
    world.tick(2.0)
    assert world.phase(first) == Phase.Succeeded.value
    assert world.cluster.status(first)["progress"]["step"] == 7
    assert log_reads_from_ray(world, sid) == logs_before + 1
    world.close()


def test_a_jobs_end_is_written_while_its_slot_is_refilled() -> None:
    """Ray said the job ended: the queue pass gives its slot out while its end's status patch
    is still on its way (the API server is slow here), and the end is written once."""
    world = World(max_running=1, progress_source=ProgressSource.file)
    first, second, sid = old_running_job(world)
    world.cluster.held_status_patches.add(first[1])
    world.ray.finish(sid)
    let_background_run(world)  # the exit marker is seen
    tick = tick_until_submitted(world, second)
    assert world.sid(second) in world.ray.jobs  # submitted to Ray ...
    assert first[1] in world.cluster.status_patches_waiting and world.phase(first) == Phase.Running.value  # ... before the end was written
    assert not tick.done()  # the tick waits for that write before it ends
    world.cluster.held_status_patches.clear()
    world.loop.run_until_complete(tick)
    assert world.phase(first) == Phase.Succeeded.value and world.phase(second) == Phase.Submitted.value
    assert sum(1 for p in status_patches(world, first) if p.get("phase") == Phase.Succeeded.value) == 1
    world.close()


def test_an_end_whose_patch_fails_is_shown_no_more_and_written_again() -> None:
    """The can-fail side: the end was shown before its patch went out; the patch fails, so
    the task is Running in the views again, and the next read writes its end."""
    world = World(max_running=1, progress_source=ProgressSource.file)
    first, second, sid = old_running_job(world)
    world.ray.finish(sid)
    let_background_run(world)
    world.cluster.failing_status_patches = 1
    world.tick()
    assert world.cluster.failing_status_patches == 0  # the fault was hit
    view = world.control_loop.view(first)
    assert view is not None and view.phase == Phase.Running.value  # not shown as ended any more
    world.tick(ENDING_READ_SECONDS)
    assert world.phase(first) == Phase.Succeeded.value and world.phase(second) == Phase.Submitted.value
    world.close()


def test_a_slow_read_of_another_running_job_does_not_hold_the_refill_back() -> None:
    """Two jobs run, one slot frees: the ending job's read decides its end and the queue pass
    refills the slot while a read of the other running job is still waiting on Ray. That read
    finds its job ended too, after the queue pass: the loop ticks again at once and gives
    that slot out as well."""
    world = World(max_running=2, progress_source=ProgressSource.file)
    first = world.cluster.create("first", spec())
    other = world.cluster.create("other", spec())
    world.tick()
    second = world.cluster.create("second", spec())
    third = world.cluster.create("third", spec())
    world.tick()
    for key in (first, other):
        world.ray.run(world.sid(key))
    for _ in range(40):  # both read every poll interval now, at the same ticks
        world.tick(3.0)
    assert world.phase(second) == Phase.Queued.value
    world.ray.held_reads.add(world.sid(other))
    world.clock.advance(3.0)  # the other's periodic read is due too
    world.ray.finish(world.sid(first))
    let_background_run(world)  # the exit marker is seen
    tick = tick_until_submitted(world, second)
    assert world.sid(other) in world.ray.reads_waiting  # the other job's read had begun (and waits) ...
    assert world.sid(second) in world.ray.jobs  # ... when the freed slot's task was submitted
    assert not tick.done()  # the tick waits for that read before it ends
    world.ray.finish(world.sid(other))  # Ray answers the held read: ended
    world.control_loop.wake.clear()
    world.ray.held_reads.clear()
    world.loop.run_until_complete(tick)
    assert world.phase(first) == Phase.Succeeded.value and world.phase(second) == Phase.Submitted.value
    assert world.phase(other) == Phase.Succeeded.value and world.phase(third) == Phase.Queued.value
    assert world.control_loop.wake.is_set()  # a slot freed after the queue pass: the next tick at once
    world.tick()  # the fake clock does not move
    assert world.phase(third) == Phase.Submitted.value
    world.close()


def test_the_queue_pass_waits_for_a_read_that_may_find_a_queued_task_running() -> None:
    """The can-fail side: in the tick that reads an ending job, a queued task holding the
    finalizer may have reached Ray (a crash after its submission). The queue pass waits for
    its read too: Ray runs its job, so it is adopted and takes the freed slot, and the tasks
    queued before it are not submitted beside it."""
    world = World(max_running=2, progress_source=ProgressSource.file)
    ending, blocker = world.cluster.create("ending", spec()), world.cluster.create("blocker", spec())
    world.tick()
    queued = [world.cluster.create("queued-1", spec()), world.cluster.create("queued-2", spec())]
    for key in (ending, blocker):
        world.ray.run(world.sid(key))
    world.settle()
    submits = world.ray.count("submit")
    orphan = world.cluster.create("orphan", spec())
    sid = crash_after_submit(world, orphan)
    world.ray.held_reads.add(sid)
    world.ray.finish(world.sid(ending))
    let_background_run(world)  # the exit marker is seen
    tick = world.loop.create_task(world.control_loop.tick())
    world.loop.run_until_complete(asyncio.sleep(0.1))
    assert sid in world.ray.reads_waiting and not tick.done()
    assert world.ray.count("submit") == submits  # nothing admitted while the orphan's read waits
    world.ray.held_reads.clear()
    world.loop.run_until_complete(tick)
    world.settle()
    assert world.phase(ending) == Phase.Succeeded.value and world.phase(orphan) == Phase.Running.value
    assert [world.phase(k) for k in queued] == [Phase.Queued.value] * 2 and world.ray.count("submit") == submits
    world.close()


def metadata_writes(world: World, key: tuple[str, str]) -> list[list[str]]:
    return [after for name, after in world.cluster.writes.metadata if name == key[1]]


def ray_calls(world: World, sid: str) -> list[str]:
    return [op for op, s in world.ray.calls if s == sid]


def armed_while_the_job_ends(world: World) -> tuple[tuple[str, str], tuple[str, str], str]:
    """The first job's exit marker is seen before Ray says it ended: in that tick the task
    next in line for its slot gets the finalizer, and stays queued."""
    first, second, sid = old_running_job(world)
    world.control_loop.jobs.hurry(first)  # as the marker watcher does, before Ray's status moved
    world.tick()
    assert world.phase(first) == Phase.Running.value and world.phase(second) == Phase.Queued.value
    assert metadata_writes(world, second) == [["argus.io/stop-ray-job"]]
    assert ray_calls(world, world.sid(second)) == []  # not submitted, and Ray not asked about it
    return first, second, sid


def test_the_next_task_holds_the_finalizer_before_the_slot_frees_so_its_start_is_the_submission_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The finalizer patch and the start's validation are off the refill's path: done for
    the next task while the ending job's end is awaited from Ray, not after."""
    import argus.controller.scheduler as scheduler
    validated: list[str | None] = []
    real = scheduler.validate_spec

    def counted(*args: object, **kwargs: object) -> object:
        validated.append(kwargs.get("name"))  # type: ignore[arg-type]
        return real(*args, **kwargs)  # type: ignore[arg-type]
    monkeypatch.setattr(scheduler, "validate_spec", counted)
    world = World(max_running=1, progress_source=ProgressSource.file)
    first, second, sid = armed_while_the_job_ends(world)
    assert validated.count(second[1]) == 1  # validated for its start, ahead
    for _ in range(3):  # Ray still says RUNNING: the armed task is not read, nor armed again
        world.tick(ENDING_READ_SECONDS)
    assert ray_calls(world, world.sid(second)) == [] and len(metadata_writes(world, second)) == 1
    world.ray.finish(sid)
    world.tick(ENDING_READ_SECONDS)
    assert world.phase(first) == Phase.Succeeded.value and world.phase(second) == Phase.Submitted.value
    assert ray_calls(world, world.sid(second)) == ["submit"]  # no read before it: Ray had no such job
    assert len(metadata_writes(world, second)) == 1  # no second finalizer patch
    assert validated.count(second[1]) == 1  # nor a second validation
    world.settle()
    assert ray_calls(world, world.sid(second))[:2] == ["submit", "status"]  # read as any submitted job from then on
    world.close()


def test_an_armed_task_cancelled_or_deleted_is_read_once_and_let_go() -> None:
    """The can-fail side: a cancel or a deletion asks for the task's job to be stopped, so
    the armed task is read from Ray after all (none there), stops as never run, and its
    finalizer goes with the object."""
    world = World(max_running=1, progress_source=ProgressSource.file)
    first, second, _ = armed_while_the_job_ends(world)
    world.cluster.cancel(second)
    world.tick()
    assert world.phase(second) == Phase.Stopped.value and world.cluster.status(second)["reason"] == "Cancelled"
    assert ray_calls(world, world.sid(second)) == ["status"]  # the read that found no job; nothing submitted
    world.cluster.delete(second)
    world.settle()
    assert second not in world.cluster.objects and world.phase(first) == Phase.Running.value
    world.close()


def test_a_process_that_did_not_arm_the_task_reads_ray_for_it() -> None:
    """Only the process that put the finalizer on knows no job was submitted: after a
    leadership change (or a restart) the queued task holding it is read, as one that may
    have reached Ray before a crash, and stays queued when Ray has no job."""
    world = World(max_running=1, progress_source=ProgressSource.file)
    _, second, _ = armed_while_the_job_ends(world)
    world.control_loop.jobs.forget_all()  # another replica led for a while
    world.tick()
    assert ray_calls(world, world.sid(second)) == ["status"] and world.phase(second) == Phase.Queued.value
    world.close()
