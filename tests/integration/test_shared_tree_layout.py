"""hack/lay-out-shared-tree.sh on a temp dir, as root (it sets owners): the tree the Ray
workers need (docs/ray-image.md, "The shared tree"), the verl snapshot of the release Argus
composes with, homes owned by the worker's uid; and ``argus onboard --shared-tree``'s home
the same as the script's. No processes beyond the script (verl comes from the cache
hack/fetch-verl.sh fills)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from argus.core.sharedtree import home_folders
from argus.onboardctl import make_home

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(os.geteuid() != 0, reason="sets owners: needs root")]

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "hack" / "lay-out-shared-tree.sh"
VERL = next(line.split()[0] for line in (REPO / "operator" / "argus" / "verl-releases.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#"))
UID, GID = 4321, 4322  # a worker uid that is not this process's


def lay_out(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


def owner_mode(path: Path | str) -> tuple[int, int, int]:
    st = os.lstat(path)
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)


def test_the_script_lays_out_the_tree_and_argus_onboard_makes_the_same_home(tmp_path: Path) -> None:
    root = tmp_path / "private"
    proc = lay_out(root, "--uid", str(UID), "--gid", str(GID), str(root), "alice", "bob")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(root)
    for shared in ("", "users", "datasets", "common", "common/datasets", "common/models", "common/code/verl"):
        assert owner_mode(root / shared) == (0, 0, 0o755), shared  # read-only to the worker
    assert owner_mode(root / "hf") == (UID, GID, 0o755)  # the worker downloads into the shared cache
    for user in ("alice", "bob"):
        for path in home_folders(str(root), user):
            assert owner_mode(path) == (UID, GID, 0o750), path
    # what argus doctor looks for (users/, datasets/, hf/; the snapshot and its version)
    repo = root / "common" / "code" / "verl" / "verl_repo"
    assert (repo / "verl" / "__init__.py").is_file()
    assert (repo / "verl" / "version" / "version").read_text().strip() == VERL
    assert (repo / "verl" / "trainer" / "main_ppo.py").is_file()
    assert owner_mode(repo / "verl" / "trainer" / "main_ppo.py")[:2] == (0, 0)
    # argus onboard --shared-tree: the same home
    assert make_home(str(root), "carol", UID, GID).startswith(f"home {root}/users/carol created")
    assert [owner_mode(p) for p in home_folders(str(root), "carol")] == [owner_mode(p) for p in home_folders(str(root), "alice")]
    # again: idempotent, a new user added, a broken mode fixed, the snapshot kept
    os.chmod(root / "users" / "alice" / "jobs", 0o700)
    again = lay_out(root, "--uid", str(UID), "--gid", str(GID), str(root), "alice", "dave")
    assert again.returncode == 0, again.stderr
    assert f"verl {VERL} at {repo} already" in again.stderr
    assert owner_mode(root / "users" / "alice" / "jobs") == (UID, GID, 0o750)
    assert owner_mode(root / "users" / "dave") == (UID, GID, 0o750)


def test_another_verl_snapshot_is_replaced_and_kept_aside(tmp_path: Path) -> None:
    root = tmp_path / "private"
    old = root / "common" / "code" / "verl" / "verl_repo" / "verl" / "version"
    old.mkdir(parents=True)
    (old / "version").write_text("0.6.1\n")
    proc = lay_out(root, str(root))
    assert proc.returncode == 0, proc.stderr
    repo = root / "common" / "code" / "verl" / "verl_repo"
    assert (repo / "verl" / "version" / "version").read_text().strip() == VERL
    assert (repo.parent / "verl_repo.old-0.6.1" / "verl" / "version" / "version").read_text().strip() == "0.6.1"


@pytest.mark.parametrize("args, message", [
    (["relative/path"], "ROOT must be an absolute path"),
    (["/tmp/x", "Not_A_User"], "user id Not_A_User: must match"),
    (["--uid", "ray", "/tmp/x"], "--uid and --gid are numbers"),
])
def test_mistakes_exit_2_and_change_nothing(args: list[str], message: str) -> None:
    proc = lay_out(Path("/nonexistent"), *args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not Path("/tmp/x").exists()
