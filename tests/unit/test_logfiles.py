"""adapters.logfiles.LocalLogFiles on real files: what --progress-source file reads, and what
it refuses to follow (a job runs as the Ray worker's uid and may put a link where its log
should be)."""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

import pytest

from argus.adapters.logfiles import LocalLogFiles
from argus.controller.settings import add_operator_flags, operator_config
from argus.core.config import PlatformConfig

pytestmark = pytest.mark.unit


def read(files: LocalLogFiles, path: Path | str, offset: int = 0, limit: int = 1 << 20) -> bytes:
    return asyncio.run(files.read(str(path), offset, limit))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    job = tmp_path / "users" / "alice" / "jobs" / "team-t-1234abcd"
    job.mkdir(parents=True)
    (job / "attempt-1.log").write_bytes("step:1 - a:1\nstep:2 - é\n".encode())
    return tmp_path


def test_a_log_is_read_from_an_offset_up_to_a_limit(tree: Path) -> None:
    files = LocalLogFiles(str(tree / "users"))
    log = tree / "users/alice/jobs/team-t-1234abcd/attempt-1.log"
    assert read(files, log) == "step:1 - a:1\nstep:2 - é\n".encode()
    assert read(files, log, offset=13, limit=7) == b"step:2 "
    assert read(files, log, offset=1000) == b""
    with pytest.raises(FileNotFoundError):
        read(files, log.with_name("attempt-2.log"))


def test_nothing_outside_the_users_folders_or_through_a_link_is_read(tree: Path) -> None:
    files = LocalLogFiles(str(tree / "users"))
    secret = tree / "secret"
    secret.write_text("step:9 - a:9\n")
    job = tree / "users/alice/jobs/team-t-1234abcd"
    (job / "attempt-2.log").symlink_to(secret)
    (tree / "users/alice/jobs/linked").symlink_to(tree)
    for path in (secret, job / "attempt-2.log", tree / "users/alice/jobs/linked/secret", f"{job}/../../../../secret", "users/x.log"):
        with pytest.raises(PermissionError):
            read(files, path)


def test_a_root_reached_through_a_link_is_still_read(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    mount = tmp_path_factory.mktemp("mnt") / "private"
    mount.symlink_to(tree)
    files = LocalLogFiles(str(mount / "users"))
    assert read(files, mount / "users/alice/jobs/team-t-1234abcd/attempt-1.log").startswith(b"step:1")


def test_a_fifo_in_place_of_the_log_does_not_block_the_reader(tree: Path) -> None:
    fifo = tree / "users/alice/jobs/team-t-1234abcd/attempt-3.log"
    os.mkfifo(fifo)
    with pytest.raises(OSError):
        read(LocalLogFiles(str(tree / "users")), fifo)


def test_the_log_apis_whole_file_read_has_the_same_refusals(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """read_text (the log API, for logs Ray forgot): the whole file, under whichever of the
    operator's users folders holds it; a link where the log should be (a job pointing it at
    the operator's service account token, say) and a path under no users folder are refused."""
    other = tmp_path_factory.mktemp("private-b")
    (other / "users/alice/jobs/team-u-1").mkdir(parents=True)
    (other / "users/alice/jobs/team-u-1/attempt-1.log").write_bytes(b"x" * (3 << 20) + "é\n".encode())
    files = LocalLogFiles(str(tree / "users"))
    roots = [str(tree / "users"), str(other / "users")]
    assert files.read_text(str(tree / "users/alice/jobs/team-t-1234abcd/attempt-1.log"), roots) == "step:1 - a:1\nstep:2 - é\n"
    assert files.read_text(str(other / "users/alice/jobs/team-u-1/attempt-1.log"), roots).endswith("xé\n")  # past one chunk
    token = tree / "token"
    token.write_text("secret")
    (tree / "users/alice/jobs/team-t-1234abcd/attempt-2.log").symlink_to(token)
    for path in (tree / "users/alice/jobs/team-t-1234abcd/attempt-2.log", token):
        with pytest.raises(PermissionError):
            files.read_text(str(path), roots)
    with pytest.raises(PermissionError, match="not under a users folder"):
        files.read_text(str(other / "users/alice/jobs/team-u-1/attempt-1.log"), roots[:1])


def settings(*argv: str, root: Path) -> None:
    parser = argparse.ArgumentParser()
    add_operator_flags(parser)
    operator_config(parser.parse_args(list(argv)), PlatformConfig(root=str(root)))


def test_progress_from_files_needs_the_tree_mounted(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    settings("--progress-source", "file", root=tree)
    empty = tmp_path_factory.mktemp("empty")
    with pytest.raises(ValueError, match=r"^--progress-source file: .*/users is not a folder here: mount the shared tree"):
        settings("--progress-source", "file", root=empty)
    with pytest.raises(SystemExit):
        settings("--progress-source", "files", root=tree)


def test_exit_markers_are_seen_only_as_files_inside_the_users_folders(tree: Path) -> None:
    """The exit markers' look (``present``): the same refusals as a read. A link where a
    marker should be, or a folder, does not count as the job's end."""
    files = LocalLogFiles(str(tree / "users"))
    job = tree / "users/alice/jobs/team-t-1234abcd"
    (job / "attempt-1.exit").write_text("0\n")
    (job / "attempt-2.exit").symlink_to(job / "attempt-1.exit")
    (job / "attempt-3.exit").mkdir()
    outside = tree / "attempt-9.exit"
    outside.write_text("0\n")
    elsewhere = tree / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "attempt-1.exit").write_text("0\n")
    linked_job = tree / "users/alice/jobs/team-linked-1234abcd"
    linked_job.symlink_to(elsewhere)  # a job folder that is a link: its files are elsewhere
    asked = ([(str(job / f"attempt-{n}.exit"), None) for n in (1, 2, 3, 4)]
             + [(str(outside), None), ("relative.exit", None), (str(linked_job / "attempt-1.exit"), None)])
    assert asyncio.run(files.present(asked)) == {str(job / "attempt-1.exit")}
    other = tree / "other-users"
    (other / "bob").mkdir(parents=True)
    (other / "bob" / "attempt-1.exit").write_text("1\n")
    assert asyncio.run(files.present([(str(other / "bob" / "attempt-1.exit"), str(other))])) == {str(other / "bob" / "attempt-1.exit")}
