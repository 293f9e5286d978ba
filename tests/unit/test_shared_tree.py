"""A user's home on the shared tree (argus.core.sharedtree): the command an admin runs, and
``argus onboard --shared-tree``'s making of it (here with this process's own uid and gid; the
script and another uid, as root: tests/integration/test_shared_tree_layout.py)."""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path

import pytest

from argus.core.sharedtree import DEFAULT_WORKER_GID, DEFAULT_WORKER_UID, HOME_FOLDERS, HOME_MODE, home_command, home_folders
from argus.onboardctl import _onboard_home, make_home

pytestmark = pytest.mark.unit


def test_the_home_and_its_folders() -> None:
    assert home_folders("/private", "alice") == ["/private/users/alice"] + [f"/private/users/alice/{s}" for s in HOME_FOLDERS]
    assert HOME_FOLDERS == ("datasets", "models", "code", "jobs", "checkpoints")


def test_the_command_the_admin_runs() -> None:
    assert (DEFAULT_WORKER_UID, DEFAULT_WORKER_GID, HOME_MODE) == (1000, 100, 0o750)  # the Ray images' user ray, group users
    assert home_command("/private", "alice") == (
        "install -d -o 1000 -g 100 -m 0750 /private/users/alice /private/users/alice/datasets /private/users/alice/models "
        "/private/users/alice/code /private/users/alice/jobs /private/users/alice/checkpoints")
    assert home_command("/mnt/my tree", "bob", 2000, 2000).startswith("install -d -o 2000 -g 2000 -m 0750 '/mnt/my tree/users/bob' ")


def test_the_script_makes_the_same_home() -> None:
    script = (Path(__file__).resolve().parents[2] / "hack" / "lay-out-shared-tree.sh").read_text()
    assert f'install -d -o "$uid" -g "$gid" -m {HOME_MODE:04o} "$home" ' + " ".join(f'"$home/{s}"' for s in HOME_FOLDERS) in script
    assert f"uid={DEFAULT_WORKER_UID} gid={DEFAULT_WORKER_GID}" in script


def test_make_home_creates_then_changes_nothing_then_fixes_modes(tmp_path: Path) -> None:
    (tmp_path / "users").mkdir()
    uid, gid = os.getuid(), os.getgid()
    old = os.umask(0o077)
    try:
        assert make_home(str(tmp_path), "alice", uid, gid) == f"home {tmp_path}/users/alice created (uid {uid}, gid {gid}, mode 0750)"
    finally:
        os.umask(old)
    for path in home_folders(str(tmp_path), "alice"):
        st = os.stat(path)
        assert stat.S_IMODE(st.st_mode) == 0o750 and (st.st_uid, st.st_gid) == (uid, gid), path
    assert make_home(str(tmp_path), "alice", uid, gid) == f"home {tmp_path}/users/alice unchanged"
    os.chmod(tmp_path / "users" / "alice" / "jobs", 0o700)
    assert make_home(str(tmp_path), "alice", uid, gid).endswith(f": owner and mode set (uid {uid}, gid {gid}, mode 0750)")
    assert stat.S_IMODE(os.stat(tmp_path / "users" / "alice" / "jobs").st_mode) == 0o750


def test_make_home_refuses_a_tree_without_users(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="users is not a folder: is the shared tree mounted at"):
        make_home(str(tmp_path), "alice", os.getuid(), os.getgid())
    assert not (tmp_path / "users").exists()


def test_onboard_without_the_tree_says_what_the_admin_runs() -> None:
    args = argparse.Namespace(shared_tree=None, root="/data/private", worker_uid=1000, worker_gid=100)
    line, changed = _onboard_home(args, "alice")
    assert not changed
    assert line == "home: not made here (no --shared-tree); where the shared tree is mounted, run: " + home_command("/data/private", "alice")


def test_onboard_with_the_tree_makes_the_home(tmp_path: Path) -> None:
    (tmp_path / "users").mkdir()
    args = argparse.Namespace(shared_tree=str(tmp_path), root="/private", worker_uid=os.getuid(), worker_gid=os.getgid())
    line, changed = _onboard_home(args, "bob")
    assert changed and line.startswith(f"home {tmp_path}/users/bob created")
    assert _onboard_home(args, "bob") == (f"home {tmp_path}/users/bob unchanged", False)
