"""The verl calls the verl tests check, for each supported verl release: every example in
examples/ and the README's, every basic template over a grid of nnodes, nGpusPerNode and
workloads, and (for the oracle) the corpus in verl_corpus/startup.yaml.

Shared by test_verl_versions.py (Argus's own composition and restated checks, for every
release) and test_verl_oracle.py (the same calls, side by side with verl itself).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from argus_testbed.verl import PRIMARY_CONFIG, TaskCall, VerlCall, releases, task_calls

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
CORPUS = Path(__file__).resolve().parent / "verl_corpus" / "startup.yaml"
HONEST = Path(__file__).resolve().parent / "verl_corpus" / "honest.yaml"
# The entry points the oracle runs verl's own checks for (verl_oracle_runner.py).
ORACLE_ENTRIES = ("verl.trainer.main_ppo", "verl.trainer.sft_trainer", "verl.trainer.fsdp_sft_trainer")


def example_manifests() -> list[tuple[str, dict[str, Any]]]:
    """(label, manifest) for every task in examples/ (the hostile one aside) and the README."""
    out: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        if path.name.startswith("hostile-") or path.name == "v3-taskspec.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out.append((f"examples/{path.name}", doc))
    blocks = re.findall(r"```yaml\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)
    for i, block in enumerate(blocks):
        doc = yaml.safe_load(block)
        if isinstance(doc, dict) and doc.get("kind") == "ArgusTask":
            out.append((f"README.md yaml block {i + 1} ({doc['metadata']['name']})", doc))
    assert out
    return out


GRID_GPUS = (1, 2, 3, 8)


def template_manifests() -> list[tuple[str, dict[str, Any]]]:
    """Basic specs over a grid: each workload, 1-2 nodes (sft: one), 1-8 GPUs a node, with
    the default batch size and a small one the user gives, with and without a reward."""
    out: list[tuple[str, dict[str, Any]]] = []
    for workload in ("ppo", "grpo", "sft"):
        for nnodes in (1,) if workload == "sft" else (1, 2):
            for gpus in GRID_GPUS:
                # A batch the user gives, on one node: the template's other values follow it.
                for batch in (None, 8 * gpus) if nnodes == 1 else (None,):
                    spec: dict[str, Any] = {
                        "workload": workload, "nnodes": nnodes, "nGpusPerNode": gpus,
                        "modelId": "Qwen/Qwen2.5-0.5B-Instruct",
                        "trainFile": "$HOME/common/datasets/gsm8k/train.parquet",
                        "valFile": "$HOME/datasets/gsm8k/test.parquet",
                    }
                    if batch:
                        spec["trainBatchSize"] = batch
                    if workload == "grpo" and batch:
                        spec["customRewardPath"] = "$HOME/code/reward.py"
                        spec["rolloutN"] = 3
                    label = f"template {workload} nnodes={nnodes} gpus={gpus} batch={batch or 'default'}"
                    name = f"t-{workload}-{nnodes}x{gpus}-{batch or 'd'}"
                    out.append((label, {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask",
                                        "metadata": {"name": name, "uid": "0d7e1c2a-uid"}, "spec": spec}))
    return out


def honest_manifests(version: str) -> list[tuple[str, dict[str, Any]]]:
    """(label, manifest) for the honest corpus's commands of ``version`` whose entry point the
    oracle knows (verl_corpus/honest.yaml)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for case in yaml.safe_load(HONEST.read_text())["cases"]:
        # oracle_versions: the releases whose own checks the oracle can run on it (a check that
        # asks an installed inference engine, absent from the oracle, leaves that release out).
        if version not in case.get("oracle_versions", case.get("versions", [version])) or not any(f"-m {e} " in case["command"] for e in ORACLE_ENTRIES):
            continue
        out.append((f"honest:{case['id']}", {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask", "metadata": {"name": case["id"]},
                                            "spec": {"kind": "advanced", "workload": case["workload"], "nnodes": case["nnodes"],
                                                     "nGpusPerNode": case["gpus"], "command": case["command"]}}))
    return out


def argus_calls() -> list[TaskCall]:
    """Every example, template and honest-corpus command, as Argus generates it for each
    supported release."""
    return [task_calls(doc, version, label=label)
            for version in releases()
            for label, doc in example_manifests() + template_manifests() + honest_manifests(version)]


@dataclass(frozen=True)
class CorpusCase:
    id: str
    version: str
    call: VerlCall
    expect: str  # pass | refuse


def corpus_cases() -> list[CorpusCase]:
    data = yaml.safe_load(CORPUS.read_text())
    bases = data["bases"]
    out: list[CorpusCase] = []
    for case in data["cases"]:
        base = bases[case["base"]]
        drop = set(case.get("drop", ()))
        words = [w for w in base["words"] if w.split("=", 1)[0] not in drop] + list(case.get("add", ()))
        entry = base["entry"]
        for version in case.get("versions", releases()):
            expect = case["expect"]
            if isinstance(expect, dict):
                expect = expect[version]
            assert expect in ("pass", "refuse"), case
            out.append(CorpusCase(case["id"], str(version), VerlCall(entry, PRIMARY_CONFIG[entry], tuple(words)), expect))
    return out
