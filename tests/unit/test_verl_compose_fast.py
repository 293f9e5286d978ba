"""The fast path of composing (argus.adapters.verlfast, issue 39) equals Hydra's own: the
command's overrides applied to the cached composition on plain containers give the same
configuration (resolved and raw), Hydra settings, defaults and refusals as the composer's
full path (Hydra's ``_apply_overrides_to_config`` and OmegaConf's resolution on the cached
OmegaConf tree, itself proved equal to Hydra's ``load_configuration`` in
test_verl_compose.py), on every corpus of commands in the repository and on generated
overrides over the real keys of each pinned release's tree. What the fast path cannot
restate it hands to the full path, so a refusal is always in Hydra's words; the corpus
test also checks that typical commands do take the fast path."""

from __future__ import annotations

import copy
import functools
import importlib.util
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from argus.adapters.verlcompose import HydraComposer, pinned_releases
from argus.core.config import PlatformConfig
from argus.core.plan import validate_task
from argus.core.verlconfig import Composed, ComposeRequest, ConfigTree
from test_verlconfig_tree import assert_same_walk
from verltrees import verl_tree

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
VERSIONS = [r.version for r in pinned_releases()]
JOB = "/private/users/alice/jobs/alice-t-12345678"
MODULE = "verl.trainer.main_ppo"


def composers(version: str) -> tuple[HydraComposer, HydraComposer]:
    tree = ConfigTree(version, verl_tree(version), "release")
    return HydraComposer(tree), HydraComposer(tree, fast=False)


_PAIRS: dict[str, tuple[HydraComposer, HydraComposer]] = {}


def pair(version: str) -> tuple[HydraComposer, HydraComposer]:
    if version not in _PAIRS:
        _PAIRS[version] = composers(version)
    return _PAIRS[version]


def _timeless(hydra: Any) -> Any:
    """Hydra's settings with the clock's digits masked (${now:...} in the run folder)."""
    return re.sub(r"\d", "#", repr(hydra))


def _differences(ours: Any, theirs: Any, path: str = "") -> list[str]:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return [d for k in sorted(set(ours) | set(theirs), key=str)
                for d in _differences(ours.get(k, "<missing>"), theirs.get(k, "<missing>"), f"{path}.{k}")]
    return [] if ours == theirs and type(ours) is type(theirs) else [f"{path}: fast {ours!r:.200} != full {theirs!r:.200}"]


def _order(tree: Any) -> list[tuple[Any, ...]]:
    """Every path of a tree, in its order."""
    out: list[tuple[Any, ...]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), tree)]
    while stack:
        parts, node = stack.pop()
        out.append(parts)
        if isinstance(node, dict):
            stack.extend(reversed([((*parts, k), v) for k, v in node.items()]))
        elif isinstance(node, list):
            stack.extend(reversed([((*parts, i), v) for i, v in enumerate(node)]))
    return out


def assert_same(fast: Composed, full: Composed, what: object) -> None:
    assert fast.error == full.error, (what, fast.error, full.error)
    assert fast.config == full.config, (what, _differences(dict(fast.config), dict(full.config))[:10])
    assert _differences(dict(fast.config), dict(full.config)) == [], what  # types too (1 is not 1.0 or True)
    assert _order(fast.config) == _order(full.config), what  # the keys' order too (the checks' messages, the command)
    assert fast.raw == full.raw, (what, _differences(dict(fast.raw), dict(full.raw))[:10])
    assert _order(fast.raw) == _order(full.raw), what
    assert _timeless(fast.hydra) == _timeless(full.hydra), (what, _differences(dict(fast.hydra), dict(full.hydra)))
    assert (fast.primary, fast.base, _timeless(fast.base_hydra), fast.defaults_applied, fast.unreadable) == \
        (full.primary, full.base, _timeless(full.base_hydra), full.defaults_applied, full.unreadable), what


def check(version: str, request: ComposeRequest, full_answer: Composed | None = None) -> bool:
    """Compose with both paths, assert the results equal; True when the fast path answered.
    ``full_answer``: the full path's answer to this very request, when it already gave one."""
    fast, full = pair(version)
    before = fast.fast_composes
    answer = fast.compose(request)
    assert_same(answer, full.compose(request) if full_answer is None else full_answer, request)
    assert_walked_alike(answer)
    return fast.fast_composes > before


def assert_walked_alike(answer: Composed) -> None:
    """The checks' walk of a composition, copied in part from the base's (walk_over), lists
    the very nodes a whole walk does, in its order."""
    if answer.base_walk is None:
        return
    assert answer.base_walk.tree is answer.base
    assert_same_walk(answer.config, answer.base_walk)


# --- the corpora ------------------------------------------------------------------------------


class Recorder:
    """A Composer that records the requests validate_task makes and the full path's answers
    (a deep copy, as composed: the fast path is compared with them, not with a second full
    composition of the same request, which resolved the whole configuration again)."""

    def __init__(self, inner: HydraComposer):
        self.inner = inner
        self.requests: list[tuple[ComposeRequest, Composed]] = []

    @property
    def tree(self) -> ConfigTree:
        return self.inner.tree

    def compose(self, request: ComposeRequest) -> Composed:
        answer = self.inner.compose(request)
        self.requests.append((request, copy.deepcopy(answer)))
        return answer

    def code_version(self, root: str) -> str | None:
        return self.inner.code_version(root)


def _verl_cases() -> Any:
    pytest.importorskip("argus_testbed")
    path = REPO / "tests" / "integration" / "verl_cases.py"
    spec = importlib.util.spec_from_file_location("argus_verl_cases_for_fast_path", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _manifest(command: str, workload: str = "ppo", nnodes: int = 1, gpus: int = 1) -> dict[str, Any]:
    return {"apiVersion": "argus.io/v1alpha1", "kind": "ArgusTask",
            "metadata": {"name": "t", "namespace": "alice", "uid": "12345678-0000-0000-0000-000000000000"},
            "spec": {"kind": "advanced", "workload": workload, "nnodes": nnodes, "nGpusPerNode": gpus, "command": command}}


def corpus_manifests(version: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every task manifest of the repository's corpora: examples/ and the README (verl_cases),
    the basic templates' grid, the honest corpus (tests/integration/verl_corpus/honest.yaml),
    the benchmark's commands and the checker tests' commands."""
    cases = _verl_cases()
    yield from cases.example_manifests()
    yield from cases.template_manifests()
    for case in yaml.safe_load(cases.HONEST.read_text())["cases"]:
        if version in [str(v) for v in case.get("versions", [version])]:
            yield f"honest:{case['id']}", _manifest(case["command"], case["workload"], case["nnodes"], case["gpus"])
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import bench_validation as bench
    finally:
        sys.path.remove(str(REPO / "bench"))
    for label, command in (("bench typical", bench.TYPICAL), ("bench verl-ex", bench.VERL_EXAMPLE),
                           ("bench 64KiB list", bench.big_list_command())):
        yield label, bench.manifest(command)
    import test_checker_exact as exact
    import test_verl_compose as compose_tests

    for label, command in (("checker PPO", exact.PPO), ("compose GOOD", compose_tests.GOOD)):
        yield label, _manifest(command)


def corpus_requests(version: str) -> list[tuple[str, ComposeRequest, Composed | None]]:
    """(label, request, the full path's answer when validate_task already had it composed)."""
    cases = _verl_cases()
    recorder = Recorder(pair(version)[1])
    out: list[tuple[str, ComposeRequest, Composed | None]] = []
    for label, doc in corpus_manifests(version):
        n = len(recorder.requests)
        validate_task(doc, "alice", PlatformConfig(), recorder)
        out += [(label, r, answer) for r, answer in recorder.requests[n:]]
    # The oracle's start-up corpus (verl_corpus/startup.yaml): verl calls, not tasks.
    for case in cases.corpus_cases():
        if case.version == version:
            call = case.call
            out.append((f"startup:{case.id}", ComposeRequest(call.entry, call.overrides, {}, JOB, config_name=call.config_name),
                        None))
    import test_verl_compose as compose_tests

    out += [(f"compose corpus {i}", ComposeRequest(MODULE, o, {}, JOB), None) for i, o in enumerate(compose_tests.CORPUS)]
    return out


@pytest.mark.parametrize("version", VERSIONS)
def test_every_corpus_command_composes_the_same_on_the_fast_path(version: str) -> None:
    requests = corpus_requests(version)
    assert len(requests) > 40
    fast = [label for label, request, full_answer in requests if check(version, request, full_answer)]
    # The typical commands take the fast path: most of the corpus does.
    labels = {lb for lb, _, _ in requests}
    assert len(fast) >= 0.7 * len(requests), (len(fast), len(requests), sorted(labels - set(fast)))
    for must in ("bench typical", "bench verl-ex", "bench 64KiB list", "honest:grpo-gsm8k-preamble"):
        assert must in fast or must not in labels, must


# --- generated overrides over the real keys ---------------------------------------------------


@functools.cache
def _keys(version: str) -> list[str]:
    """Every dotted key of the version's composed ppo_trainer (no list indices); composed when
    first drawn from, not when the module is collected (every xdist worker collects it)."""
    fast, _ = pair(version)
    base = fast.compose(ComposeRequest(MODULE, (), {}, JOB))
    out: list[str] = []
    stack: list[tuple[str, Any]] = [("", dict(base.raw))]
    while stack:
        prefix, node = stack.pop()
        for k, v in node.items():
            key = f"{prefix}{k}"
            out.append(key)
            if isinstance(v, dict):
                stack.append((key + ".", v))
    return sorted(out)


_WORD = st.text(alphabet="abcxyz_019-/.", min_size=1, max_size=8)
_SCALAR_TEXT = st.one_of(
    st.integers(-10**6, 10**6).map(str), st.sampled_from(["0", "-1", "1e-5", "0.5", "1.0", "inf", "-inf", "1_000"]),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(repr),
    st.sampled_from(["true", "false", "True", "FALSE", "null", "NULL", "???"]),
    _WORD, _WORD.map(lambda w: f"'{w} x'"), _WORD.map(lambda w: f'"{w}"'), st.just("''"), st.just("/p/a-b.parquet"),
    st.sampled_from(["${trainer.nnodes}", "${oc.select:trainer.project_name,x}", "'${data.max_prompt_length}'",
                     "${oc.env:ARGUS_JOB_DIR}", "\\${x}", "a${trainer.nnodes}", "${now:%Y}"]),
)
_VALUE = st.recursive(_SCALAR_TEXT, lambda inner: st.one_of(
    st.lists(inner, max_size=3).map(lambda xs: "[" + ",".join(xs) + "]"),
    st.lists(st.tuples(st.sampled_from(["a", "b", "lr", "name", "path", "enable"]), inner), max_size=3).map(
        lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}")), max_leaves=5)


@st.composite
def _override(draw: Any, version: str) -> str:
    key = draw(st.one_of(st.sampled_from(_keys(version)), st.sampled_from(_keys(version)).map(lambda k: k + ".zz_new"),
                         st.sampled_from(["zz_top", "trainer.zz", "hydra.job.name", "data.train_files.0", "trainer.logger"])))
    op = draw(st.sampled_from(["", "", "", "+", "++", "~"]))
    if op == "~":
        return f"~{key}" if draw(st.booleans()) else f"~{key}={draw(_SCALAR_TEXT)}"
    return f"{op}{key}={draw(_VALUE)}"


def _generated(version: str) -> Any:
    return st.lists(_override(version), min_size=1, max_size=4)


@pytest.mark.parametrize("version", VERSIONS)
def test_generated_overrides_compose_the_same_on_the_fast_path(version: str) -> None:
    taken: list[bool] = []

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None, derandomize=True)
    @given(overrides=_generated(version), env=st.sampled_from([{}, {"ARGUS_JOB_DIR": JOB}]))
    @example(overrides=["trainer.nnodes=2", "actor_rollout_ref.rollout.name=vllm"], env={})
    @example(overrides=["data.max_prompt_length=7", "++actor_rollout_ref.rollout.prompt_length=9"], env={})
    @example(overrides=["~actor_rollout_ref.rollout.name", "+trainer.logger=[a]"], env={})
    @example(overrides=["actor_rollout_ref.model.path=x", "+critic.model={path: 1}"], env={})
    @example(overrides=["trainer=null", "+trainer.a=1"], env={})
    @example(overrides=["~actor_rollout_ref", "+actor_rollout_ref.actor._target_=0"], env={})  # made again: last
    @example(overrides=["++trainer.nnodes.x=1"], env={})
    @example(overrides=["++trainer.project_name.x=1", "trainer.project_name.y=2"], env={})
    @example(overrides=["+zz.a.b=1", "+zz.a.c=[1,{a: 2}]"], env={})
    @example(overrides=["trainer.n_gpus_per_nod=1"], env={})
    @example(overrides=["+trainer.nnodes=2"], env={})
    @example(overrides=["~trainer.no_such_key"], env={})
    @example(overrides=["actor_rollout_ref.actor={use_dynamic_bsz: true, zz: 1}"], env={})
    @example(overrides=["++actor_rollout_ref.actor={use_dynamic_bsz: true, zz: 1}"], env={})
    @example(overrides=["trainer.logger={a: 1}"], env={})
    @example(overrides=["trainer={logger: {a: 1}}"], env={})
    def run(overrides: list[str], env: dict[str, str]) -> None:
        taken.append(check(version, ComposeRequest(MODULE, tuple(overrides), env, JOB, defaults=("trainer.nnodes=1",))))

    run()
    # The fast path is exercised, not only its fallback (derandomized: the same draws every run,
    # so this count does not wobble around its bound from one run to the next).
    print(f"fast path taken {sum(taken)} of {len(taken)}")
    assert sum(taken) >= len(taken) // 10, (sum(taken), len(taken))
