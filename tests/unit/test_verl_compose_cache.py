"""The composer's caches follow the files (issue 39): a config file of the user's own edited
between two validations by the same composer (the operator's, the webhook's) is read again,
and so is one created in a folder of the search path."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from argus.adapters.verlcompose import HydraComposer
from argus.core.verlconfig import ComposeRequest, ConfigTree
from verltrees import verl_tree

pytestmark = pytest.mark.unit

JOB = "/private/users/alice/jobs/alice-t-12345678"


def _compose(c: HydraComposer, conf: Path, *overrides: str) -> Any:
    result = c.compose(ComposeRequest("verl.trainer.main_ppo", overrides, {}, JOB, config_name="mine", config_dir=str(conf)))
    assert result.error is None, result.error
    return result


def _write(path: Path, text: str) -> None:
    """Write, and move the mtime on (two writes within one clock tick keep the same mtime)."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    if path.stat().st_mtime_ns <= before:
        os.utime(path, ns=(before + 1_000_000, before + 1_000_000))


def test_an_edited_config_file_is_read_again(tmp_path: Path) -> None:
    c = HydraComposer(ConfigTree("0.9.1", verl_tree("0.9.1"), "release"))
    conf = tmp_path / "conf"
    conf.mkdir()
    _write(conf / "mine.yaml", "defaults:\n  - ppo_trainer\n  - _self_\ntrainer:\n  total_epochs: 3\n")
    assert _compose(c, conf).config["trainer"]["total_epochs"] == 3
    assert _compose(c, conf, "trainer.project_name=p").config["trainer"]["total_epochs"] == 3
    _write(conf / "mine.yaml", "defaults:\n  - ppo_trainer\n  - _self_\ntrainer:\n  total_epochs: 4\n")  # same size
    assert _compose(c, conf).config["trainer"]["total_epochs"] == 4
    assert _compose(c, conf, "trainer.project_name=p").config["trainer"]["total_epochs"] == 4


def test_a_file_created_in_a_config_folder_is_read(tmp_path: Path) -> None:
    c = HydraComposer(ConfigTree("0.9.1", verl_tree("0.9.1"), "release"))
    conf = tmp_path / "conf"
    (conf / "extra").mkdir(parents=True)
    _write(conf / "mine.yaml", "defaults:\n  - ppo_trainer\n  - optional extra: mine\n  - _self_\n")
    assert "extra" not in _compose(c, conf).config
    _write(conf / "extra" / "mine.yaml", "flag: 1\n")
    assert _compose(c, conf).config["extra"] == {"flag": 1}
    _write(conf / "extra" / "mine.yaml", "flag: 2\n")
    assert _compose(c, conf).config["extra"] == {"flag": 2}
