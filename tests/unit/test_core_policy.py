"""The path policy's pieces (argus.core.policy), and properties that pin its fast paths to
the plain definitions they shortcut."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from argus.core import policy
from argus.core.config import PlatformConfig
from argus.core.policy import Findings, PathPolicy, brace_expand, check_text, hydra_list

pytestmark = pytest.mark.unit

CONFIG = PlatformConfig()


@pytest.fixture()
def alice() -> PathPolicy:
    return PathPolicy(CONFIG, "alice")


def test_roots(alice: PathPolicy) -> None:
    assert alice.home == "/private/users/alice"
    assert alice.data_roots == ("/private/users/alice/datasets", "/private/datasets", "/private/common/datasets")
    assert alice.model_roots == ("/private/users/alice/models", "/private/hf", "/private/common/models")
    assert alice.code_root == "/private/users/alice/code"
    assert alice.shared_roots == ("/private/datasets", "/private/hf", "/private/common")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/private/users/alice/x", None),
        ("/private/users/alice", None),
        ("/private/users/alice/a/../b", None),
        ("/private/datasets/gsm8k", None),
        ("/private/hf/m", None),
        ("/private/common/code/verl", None),
        ("/etc/passwd", None),  # outside the root: not the policy's business
        ("/private2/users/bob", None),
        ("/private/users/alice2/x", "another user's home (alice2)"),
        ("/private/users/bob", "another user's home (bob)"),
        ("/private//users///bob/", "another user's home (bob)"),
        ("/private/users/./bob", "another user's home (bob)"),
        ("/private/users/alice/../bob", "'..' climbs out of /private/users/alice into another user's home (bob)"),
        ("/private/users/alice/..", "'..' climbs out of /private/users/alice"),
        ("/private/datasets/../hf", "'..' climbs out of /private/datasets"),
        ("/tmp/../private/users/bob", "another user's home (bob)"),
        ("/private", "names /private itself"),
        ("/private/users/", "names /private/users itself"),
        ("/private/secrets", "is outside the folders a task may use"),
    ],
)
def test_check_absolute(alice: PathPolicy, path: str, message: str | None) -> None:
    findings = Findings()
    alice.check_absolute("f", path, findings)
    got = [str(p) for p in findings.errors]
    if message is None:
        assert got == []
    else:
        assert len(got) == 1 and message in got[0], got


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("/a.parquet", ["/a.parquet"]),
        ("'/a.parquet'", ["/a.parquet"]),
        ("[/a,/b]", ["/a", "/b"]),
        ("['/a', \"/b\" ,]", ["/a", "/b"]),
        ("[]", []),
    ],
)
def test_hydra_list(value: str, expected: list[str]) -> None:
    assert hydra_list(value) == expected


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("a{b,c}d", ["abd", "acd"]),
        ("/priv{ate,}/x", ["/private/x", "/priv/x"]),
        ("{a,b}{1,2}", ["a1", "a2", "b1", "b2"]),
        ("x{a,{b,c}}", ["xa", "xb", "xc"]),
        ("{only}", ["{only}"]),
        ("${VAR}", ["${VAR}"]),
        ("no braces", ["no braces"]),
    ],
)
def test_brace_expand(word: str, expected: list[str]) -> None:
    assert sorted(set(brace_expand(word) or [])) == sorted(expected)  # repeats are harmless for a scan


def test_brace_expand_is_bounded() -> None:
    assert brace_expand("{a,b}" * 20) is None
    assert brace_expand("{" + ",".join(map(str, range(65))) + "}") is None
    assert len(brace_expand("{a,b}" * 6) or []) == 64


def test_findings_report_each_problem_once() -> None:
    findings = Findings()
    for _ in range(3):
        findings.error("spec.x", [1, 2], "rule")  # unhashable values are fine
        findings.warn("spec.x", [1, 2], "rule")
    findings.error("spec.x", "a" * 200 + "1", "rule")
    findings.error("spec.x", "a" * 200 + "2", "rule")  # same shortened text, different value
    assert len(findings.errors) == 3 and len(findings.warnings) == 1


@pytest.mark.parametrize(
    ("text", "ok", "message"),
    [
        ("plain\ttext\nwith é and ünïcode and a non-breaking\u00a0space", True, None),
        ("x\x00y", False, "'\\\\x00 at offset 1'"),
        ("x\ry", False, "\\\\x0d at offset 1"),
        ("\x7f", False, "\\\\x7f at offset 0"),
        ("x" * (64 * 1024 + 1), False, "65537 bytes"),
        ("é" * (32 * 1024 + 1), False, "65538 bytes"),
    ],
)
def test_check_text(text: str, ok: bool, message: str | None) -> None:
    findings = Findings()
    assert check_text("spec.command", text, findings) is ok
    if message:
        assert message in str(findings.errors[0]), findings.errors


# --- fast paths equal their definitions --------------------------------------------------

_path_pieces = st.sampled_from([
    "/private", "/users", "/alice", "/bob", "/datasets", "/hf", "/common", "/x", "/", "..", ".", "alice", "=", " ", "\n",
    ",", "[", "]", "'", "$HOME", "$X", "*", "{a,b}", "/private/users/alice/", "/private/datasets/", "/private2", "a",
])


def _scan_without_shortcut(p: PathPolicy, text: str) -> list[str]:
    findings = Findings()
    original = PathPolicy._only_plain_allowed_paths
    PathPolicy._only_plain_allowed_paths = lambda self, text: False  # type: ignore[method-assign]
    try:
        p.scan("f", text, findings)
    finally:
        PathPolicy._only_plain_allowed_paths = original  # type: ignore[method-assign]
    return [str(e) for e in findings.errors]


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_path_pieces, max_size=16).map("".join))
@example("x=/private/datasets/private/users/bob")
@example("/private/users/alice/private/users/bob")
def test_scan_shortcut_changes_nothing(text: str) -> None:
    p = PathPolicy(CONFIG, "alice")
    findings = Findings()
    p.scan("f", text, findings)
    assert [str(e) for e in findings.errors] == _scan_without_shortcut(p, text)


_control = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=40))
def test_control_character_check_matches_its_definition(text: str) -> None:
    findings = Findings()
    ok = check_text("f", text, findings)
    bad = _control.search(text)
    assert (bad is None) == ok or "'~'" in str(findings.errors)  # '~' refusals do not change ok


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([
    "data.train_files=/a", "+data.val_files=/b", "trainer.nnodes=2", "++trainer.n_gpus_per_node=1", "x.y=1",
    "+custom_reward_function.reward_kwargs.a=1", "custom_reward_function.reward_kwargs.b=2", "custom_reward_function.path=/c.py",
    "custom_reward_function.name=f", "+ray_kwargs.ray_init.address=auto", "=x", "noequals", "-m", "a=b=c", "1bad.key=1",
]), max_size=12))
def test_override_filter_keeps_every_override_the_checks_know(args: list[str]) -> None:
    everything = [policy.Override(*m.groups(), w) for w in args if (m := policy._OVERRIDE.match(w))]
    known = [o for o in everything if o.key in policy._KNOWN_KEYS or o.key.startswith(policy.REWARD_KWARGS_PREFIX)]
    assert policy._overrides(args) == known
