"""adapters.sharedtree.LocalSharedTree on a real folder (whether the files a task reads exist,
never through a link out of the tree), and argus validate's warnings against a local tree
at --root (issue 36, item 5)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from argus import cli
from argus.adapters.sharedtree import LocalSharedTree
from test_cli import ADVANCED, VERL_TREE

pytestmark = pytest.mark.unit


def tree_at(tmp_path: Path) -> Path:
    root = tmp_path / "private"
    (root / "users" / "alice" / "datasets").mkdir(parents=True)
    (root / "datasets" / "gsm8k").mkdir(parents=True)
    (root / "datasets" / "gsm8k" / "train.parquet").write_bytes(b"rows")
    return root


def test_exists_answers_for_each_path_in_the_tree(tmp_path: Path) -> None:
    root = tree_at(tmp_path)
    (tmp_path / "outside").write_text("secret")
    (root / "users" / "alice" / "datasets" / "link.parquet").symlink_to(tmp_path / "outside")
    (root / "users" / "alice" / "datasets" / "inside.parquet").symlink_to(root / "datasets" / "gsm8k" / "train.parquet")
    (root / "users" / "alice" / "datasets" / "gone.parquet").symlink_to(tmp_path / "no-such-file")
    tree = LocalSharedTree()
    assert tree.mounted(str(root)) and not tree.mounted(str(tmp_path / "nothing"))
    a = f"{root}/users/alice/datasets"
    paths = [f"{root}/datasets/gsm8k/train.parquet", f"{a}/missing.parquet", f"{a}/link.parquet", f"{a}/inside.parquet",
             f"{a}/gone.parquet", f"{root}/datasets/gsm8k/train.parquet/x", "/etc/passwd"]
    assert asyncio.run(tree.exists(str(root), paths)) == {
        paths[0]: True, paths[1]: False,
        paths[2]: None,   # a link out of the tree: neither followed nor answered
        paths[3]: True,   # a link inside it is what the job sees too
        paths[4]: None,   # a link out of the tree, to nothing: not answered either
        paths[5]: False,  # a file where a folder should be
        paths[6]: None,   # not in this tree
    }




def test_validate_warns_of_a_missing_input_in_the_tree_at_root_and_stays_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ARGUS_ROOT", "ARGUS_USER", "ARGUS_VERL_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ARGUS_VERL_CODE_PATH", VERL_TREE)
    root = tree_at(tmp_path)
    task = tmp_path / "task.yaml"
    task.write_text(ADVANCED)
    code = cli.main(["validate", "-f", str(task), "--user", "alice", "--root", str(root)])
    out = capsys.readouterr().out
    warnings = [line for line in out.splitlines() if "does not exist in the shared tree" in line]
    assert code == 0 and out.startswith("ppo-adv: valid\n"), out
    assert [w.split(": ", 2)[1] for w in warnings] == ["data.val_files"], out
    assert f"{root}/users/alice/datasets/gsm8k/test.parquet does not exist" in warnings[0]
    # The tree not mounted at --root: nothing is looked for.
    code = cli.main(["validate", "-f", str(task), "--user", "alice", "--root", str(tmp_path / "elsewhere")])
    assert code == 0 and "does not exist in the shared tree" not in capsys.readouterr().out
