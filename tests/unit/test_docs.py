"""The docs against what they document: every chart value the README, docs/, the chart's
README and NOTES.txt name is one the chart's schema accepts (a renamed or misspelt value,
such as ``operator.crdCheckInterval`` for ``operator.crdCheckIntervalSeconds``, fails here),
and every ``argus ...`` line they show parses with the CLI's own parser (a subcommand or flag
that does not exist fails here). Nothing is run and no cluster is contacted; the documented
settings are rendered with helm by tests/integration/test_docs_chart_values.py."""

from __future__ import annotations

import argparse
import re
from typing import Any

import pytest

from argus import cli
from docs_lines import chart_values, cli_lines, cli_mentions, operator_mentions, schema_has

pytestmark = pytest.mark.unit


def test_the_docs_document_values_and_commands() -> None:
    # The extraction finds what it should (a regex gone wrong would make the tests below vacuous).
    names = {name for _, name, _ in chart_values()}
    assert {"operator.rayAddress", "webhook.enabled", "logsApi.enabled", "operator.crdCheckIntervalSeconds"} <= names
    assert {argv[0] for _, argv in cli_lines()} >= {"validate", "logs", "queue", "onboard", "doctor"}
    assert {sub for _, sub, _ in cli_mentions()} >= {"validate", "render", "convert", "crd", "completion", "doctor", "queue",
                                                     "logs", "onboard"}


def test_every_documented_chart_value_is_in_the_schema() -> None:
    unknown = sorted({f"{where.where}: {name}" for where, name, _ in chart_values() if not schema_has(name)})
    assert not unknown, "documented chart values the schema refuses:\n" + "\n".join(unknown)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings}


@pytest.mark.parametrize("where,argv", [pytest.param(w, a, id=w.where) for w, a in cli_lines()])
def test_documented_command_lines_parse(where: Any, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    try:
        cli.build_parser().parse_args(argv)
    except SystemExit as exc:
        err = capsys.readouterr().err
        assert exc.code == 0, f"{where.where}: `argus {' '.join(argv)}` does not parse: {err.strip()}"


def test_documented_subcommands_and_flags_exist() -> None:
    parser = cli.build_parser()
    subs, top = _subcommands(parser), _options(parser)
    wrong = []
    for where, sub, flags in cli_mentions():
        if sub not in subs:
            wrong.append(f"{where.where}: no subcommand `argus {sub}` ({where.text})")
            continue
        known = _options(subs[sub]) | top
        wrong += [f"{where.where}: `argus {sub}` has no flag {f} ({where.text})" for f in flags if f not in known]
    assert not wrong, "\n".join(wrong)


def test_documented_operator_flags_exist() -> None:
    from argus.host.main import build_parser  # noqa: PLC0415
    known = _options(build_parser())
    assert operator_mentions()
    wrong = [f"{where.where}: argus-operator has no flag {f} ({where.text})" for where, flags in operator_mentions() for f in flags
             if f not in known]
    assert not wrong, "\n".join(wrong)


def test_the_readmes_operator_flags_exist() -> None:
    """README, "The operator": its list of the operator's flags."""
    from argus.host.main import build_parser  # noqa: PLC0415
    from docs_lines import REPO  # noqa: PLC0415
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## The operator\n"):readme.index("How it works")]
    flags = set(re.findall(r"`(--[a-z][\w-]*)", section))
    assert len(flags) > 30
    assert not sorted(flags - _options(build_parser()))
