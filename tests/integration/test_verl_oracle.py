"""verl itself as the oracle of Argus's restated start-up checks.

Every example, every basic template (a grid of nnodes, nGpusPerNode and workloads) and the
corpus in verl_corpus/startup.yaml are composed with verl's real config tree and checked by
verl's own code (tests/integration/verl_oracle_runner.py, in the environment
hack/build-verl-oracle.sh builds for each supported release: verl with torch, never the
product's .venv), and side by side by Argus as the operator does it (its composer,
adapters.verlcompose.HydraComposer, with the fast path proven equal to Hydra's compose in
tests/unit/test_verl_compose_fast.py, then argus.core.verlconfig.startup). Every
disagreement fails, with both verdicts.

The verl stand-in's own start-up checks (hack/verl-standin, composed by Hydra with the same
tree) are held to verl's too: they never refuse what verl accepts, and refuse the mistakes
the issue names.

One subprocess a verl version runs the whole corpus.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf
from verl_cases import argus_calls, corpus_cases

from argus.core.verlconfig.startup import startup_problems
from argus_testbed.verl import REPO, VerlCall, compose, standin_snapshot

# Its module fixture composes every case with verl and with Argus (minutes of CPU): room for
# a machine that runs other test workers beside it.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1800)]

RUNNER = Path(__file__).resolve().parent / "verl_oracle_runner.py"


def oracle_python(version: str) -> str:
    """The oracle environment of ``version`` (built once, cached; hack/build-verl-oracle.sh)."""
    done = subprocess.run(["bash", str(REPO / "hack" / "build-verl-oracle.sh"), version], check=True,
                          capture_output=True, text=True)
    return done.stdout.strip().splitlines()[-1]


def run_oracle(version: str, cases: dict[str, VerlCall]) -> dict[str, dict[str, Any]]:
    args = [oracle_python(version), str(RUNNER)]
    payload = [{"id": i, "entry": c.entry, "config_name": c.config_name, "overrides": list(c.overrides)}
               for i, c in cases.items()]
    done = subprocess.run(args, input=json.dumps(payload), capture_output=True, text=True, timeout=900, cwd="/tmp")
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout)
    assert out["version"] == version, out["version"]
    return out["verdicts"]


def standin_checks(version: str) -> Any:
    """The stand-in's start-up checks (its _standin module, from the version's snapshot)."""
    path = standin_snapshot(version) / "verl" / "trainer" / "_standin.py"
    spec = importlib.util.spec_from_file_location(f"standin_{version.replace('.', '_')}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


JOB_DIR = "/private/users/alice/jobs/oracle-t-12345678"


def argus_and_standin_verdicts(version: str, call: VerlCall, standin: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Argus's verdict (the operator's composer, then startup_problems) and the stand-in's
    (its startup_checks on the same composed config), from one composition."""
    composed = compose(version, call, JOB_DIR)
    if composed.error is not None:  # Hydra's or OmegaConf's refusal is the verdict of both
        refused = {"ok": False, "stage": "compose", "error": composed.error.splitlines()[0]}
        return refused, refused
    found = startup_problems(composed.config, version=version, entry=call.entry)
    config = OmegaConf.create(dict(composed.config))  # a DictConfig, as Hydra hands the stand-in
    argus = {"ok": not found, "stage": "startup_problems", "error": " | ".join(f"{p.key}: {p.message}" for p in found)}
    try:
        standin.startup_checks(standin.Config(config), call.entry.rsplit(".", 1)[-1])
    except Exception as exc:  # noqa: BLE001 - a refusal
        return argus, {"ok": False, "stage": "startup_checks", "error": f"{type(exc).__name__}: {exc}"}
    return argus, {"ok": True, "stage": "passed", "error": ""}


@pytest.fixture(scope="module")
def verdicts() -> dict[str, dict[str, Any]]:
    """Per version: {case id: {"call", "expect", "verl", "argus"}} for the corpus, the
    examples and the templates."""
    by_version: dict[str, dict[str, dict[str, Any]]] = {}
    for case in corpus_cases():
        by_version.setdefault(case.version, {})[f"corpus:{case.id}"] = {"call": case.call, "expect": case.expect}
    for task in argus_calls():
        by_version.setdefault(task.version, {})[task.label] = {"call": task.call, "expect": "pass"}
    out: dict[str, dict[str, Any]] = {}
    for version, cases in by_version.items():
        verl = run_oracle(version, {i: c["call"] for i, c in cases.items()})
        standin = standin_checks(version)
        for i, c in cases.items():
            argus, by_standin = argus_and_standin_verdicts(version, c["call"], standin)
            out[f"{version} {i}"] = {**c, "verl": verl[i], "argus": argus, "standin": by_standin}
    return out


def _show(name: str, v: dict[str, Any]) -> str:
    call = v["call"]
    return (f"{name}\n    python3 -m {call.entry} {' '.join(call.overrides)}\n"
            f"    verl:  {'pass' if v['verl']['ok'] else 'refuse'} [{v['verl']['stage']}] {v['verl']['error']}\n"
            f"    argus: {'pass' if v['argus']['ok'] else 'refuse'} [{v['argus']['stage']}] {v['argus']['error']}")


def test_argus_and_verl_agree_on_every_call(verdicts: dict[str, dict[str, Any]]) -> None:
    disagreements = [_show(name, v) for name, v in verdicts.items() if v["verl"]["ok"] != v["argus"]["ok"]]
    assert not disagreements, f"{len(disagreements)} disagreements:\n" + "\n".join(disagreements)


# The corpus cases the verl stand-in must refuse as verl does: the mistakes the issue names.
STANDIN_REFUSES = ("actor-micro-batch-missing", "actor-micro-batch-both-spellings", "rollout-log-prob-micro-batch-missing",
                   "rollout-tp-too-big", "rollout-tp-default-on-one-gpu", "batch-not-divisible-by-gpus",
                   "mini-batch-larger-than-batch", "rollout-name-unset", "critic-micro-batch-missing",
                   "grpo-kl-loss-without-ref-micro-batch", "override-typo", "legacy-sft-batch-not-divisible-by-gpus")


def test_the_standin_refuses_only_what_verl_refuses(verdicts: dict[str, dict[str, Any]]) -> None:
    """The stand-in's start-up checks are a subset of verl's: it never refuses what verl
    accepts (every example and template runs), and it refuses the mistakes the issue names."""
    wrong = [_show(name, v) + f"\n    stand-in: {v['standin']}" for name, v in verdicts.items()
             if (v["verl"]["ok"] and not v["standin"]["ok"])
             or (name.split("corpus:", 1)[-1] in STANDIN_REFUSES and v["standin"]["ok"])]
    assert not wrong, "\n".join(wrong)


def test_verl_does_what_the_corpus_says(verdicts: dict[str, dict[str, Any]]) -> None:
    """The corpus's own claims (and every example and template passing) hold for verl."""
    wrong = [_show(name, v) for name, v in verdicts.items() if v["verl"]["ok"] != (v["expect"] == "pass")]
    assert not wrong, f"{len(wrong)} calls where verl does not do what the corpus or the template promises:\n" + "\n".join(wrong)


def test_verl_crashed_on_none(verdicts: dict[str, dict[str, Any]]) -> None:
    """A refusal is verl's check, not a crash of the runner (an import missing, a bad call)."""
    crashed = [_show(name, v) + "\n" + v["verl"].get("trace", "") for name, v in verdicts.items()
               if v["verl"]["stage"] in ("crash", "entry")]
    assert not crashed, "\n".join(crashed)


def test_the_corpus_covers_what_the_issue_names(verdicts: dict[str, dict[str, Any]]) -> None:
    refused = {name.split("corpus:", 1)[1] for name, v in verdicts.items() if "corpus:" in name and not v["verl"]["ok"]}
    for case in ("actor-micro-batch-missing", "rollout-tp-too-big", "batch-not-divisible-by-gpus",
                 "mini-batch-larger-than-batch", "actor-micro-batch-both-spellings", "rollout-name-unset", "override-typo"):
        assert case in refused, case
