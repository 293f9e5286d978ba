"""hack/layout.py: the README's Layout is made from the module docstrings and is current; every
module says what it is in a short opening clause; no docstring names code, a file, a CRD field
or a chart value that is not there."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack"))
import layout  # noqa: E402


def test_the_readme_layout_is_generated_from_the_docstrings_and_current() -> None:
    readme = (REPO / "README.md").read_text()
    assert layout.BEGIN in readme and layout.END in readme
    assert layout.with_layout(readme) == readme, "README.md's Layout is stale: run .venv/bin/python hack/layout.py"


def test_every_module_is_in_the_layout() -> None:
    table = layout.render()
    for name, path in layout.modules().items():
        shown = f"**`{path.parent.relative_to(REPO)}/`**" if path.name == "__init__.py" else f"`{path.name}`"
        assert shown in table, name


def test_no_module_docstring_is_missing_long_or_stale() -> None:
    assert layout.problems() == []


def test_the_summary_is_the_opening_clause_outside_brackets_and_code() -> None:
    assert layout.summary("The scheduler (``a: b``) decides. More.") == "The scheduler (``a: b``) decides"
    assert layout.summary("Intake: how a task enters the queue; and more.") == "Intake: how a task enters the queue"
    assert layout.summary("A long enough opening clause here: what follows.") == "A long enough opening clause here"
    assert layout.summary("One line\nwrapped.\n\nNext paragraph.") == "One line wrapped"


def test_a_renamed_or_missing_name_is_stale_and_a_present_one_is_not() -> None:
    refs = layout._References()
    module = "argus.controller.idle"

    def stale(doc: str) -> list[str]:
        return [token for token, _ in refs.stale(module, doc)]

    assert stale("``loop.ControlLoop.tick``, ``core.lifecycle.settled``, ``adapters.taskcache``") == []
    assert stale("``loop.Reconciler.tick``") == ["loop.Reconciler.tick"]           # a class renamed
    assert stale("``core.lifecycle.no_such_function``") == ["core.lifecycle.no_such_function"]
    assert stale("``controller.settled``") == ["controller.settled"]               # a module renamed
    assert stale("``settled.py``, ``loop.py``") == ["settled.py"]                  # a file named
    assert stale("``spec.command``, ``status.progress``") == []                    # the CRD's fields
    assert stale("``spec.nosuchfield``") == ["spec.nosuchfield"]
    assert stale("``uninstall.releaseFinalizers``") == []                          # a chart value
    assert stale("``python -m argus``, ``--log-format``, ``verl/trainer/main_ppo.py``") == []  # not names of argus
