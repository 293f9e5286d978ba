"""The path policy (argus.core.policy) on parsed values: roots, absolute paths, the general
check of any value (whole, piece by piece and from every '/' after a separator), outputs,
models, and the characters no text field may hold."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from argus.core.config import PlatformConfig
from argus.core.policy import Findings, PathPolicy, check_text

pytestmark = pytest.mark.unit

CONFIG = PlatformConfig()


@pytest.fixture()
def alice() -> PathPolicy:
    return PathPolicy(CONFIG, "alice")


def errors_of(check, *args: object) -> list[str]:  # type: ignore[no-untyped-def]
    findings = Findings()
    check(*args, findings)
    return [str(p) for p in findings.errors]


def test_roots(alice: PathPolicy) -> None:
    assert alice.home == "/private/users/alice"
    assert alice.data_roots == ("/private/users/alice/datasets", "/private/datasets", "/private/common/datasets")
    assert alice.model_roots == ("/private/users/alice", "/private/hf", "/private/common/hf", "/private/common/models")
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
        ("/proc/self/root/private/users/bob", "names a path through /proc or /dev/fd, which can lead anywhere"),
        ("/proc/self/cwd/../../bob", "names a path through /proc or /dev/fd"),
        ("/dev/fd/3/x", "names a path through /proc or /dev/fd"),
    ],
)
def test_check_absolute(alice: PathPolicy, path: str, message: str | None) -> None:
    got = errors_of(alice.check_absolute, "f", path)
    if message is None:
        assert got == []
    else:
        assert len(got) == 1 and message in got[0], got


@pytest.mark.parametrize(
    ("value", "shown", "message"),
    [
        # class 1 of issue 11: characters bash keeps inside a word must not hide a '..'
        ("/private/users/alice/x,/../../bob/y", "/private/users/alice/x,/../../bob/y", "into another user's home (bob)"),
        ("/private/users/alice/x=/../../bob", "/private/users/alice/x=/../../bob", "into another user's home (bob)"),
        ("/private/users/alice/x:/../../bob", "/private/users/alice/x:/../../bob", "into another user's home (bob)"),
        ("/private/users/alice/x]/../../bob", "/private/users/alice/x]/../../bob", "into another user's home (bob)"),
        ("/private/users/alice/x}/../../bob", "/private/users/alice/x}/../../bob", "into another user's home (bob)"),
        ("/private/users/alice/x\u00a0/../../bob", "/private/users/alice/x\u00a0/../../bob", "into another user's home (bob)"),
        ("/private/users/alice/x\u2028/../../bob", "/private/users/alice/x\u2028/../../bob", "into another user's home (bob)"),
        # a consumer that strips a prefix or splits the value
        ("ckpt:/../../..", "ckpt:/../../..", "'..' climbs out of the job directory"),
        ("file:///private/users/bob/x", "///private/users/bob/x", "another user's home (bob)"),
        ("a:/private/users/bob", "/private/users/bob", "another user's home (bob)"),
        ("[/private/users/alice/x,/private/users/carol/y]", "/private/users/carol/y", "another user's home (carol)"),
        ("x,../../bob", "../../bob", "'..' climbs out of the job directory"),
        ("${oc.env:ARGUS_JOB_DIR}/../../../bob", "${oc.env:ARGUS_JOB_DIR}/../../../bob", "'..' climbs out of the job directory"),
        ("~/x", "~/x", "'~' expands to the worker's home, not yours: use $HOME"),
        ("a:~bob/x", "~bob/x", "'~' expands to the worker's home"),
        # fine
        ("/private/users/alice/ckpt", None, None),
        ("/private/datasets/a,/private/hf/b", None, None),
        ("logs/../x", None, None),
        ("Qwen/Qwen2.5-0.5B", None, None),
        ("a..b", None, None),
    ],
)
def test_check_string(alice: PathPolicy, value: str, shown: str | None, message: str | None) -> None:
    got = errors_of(alice.check_string, "f", value)
    if message is None:
        assert got == []
    else:
        assert len(got) == 1, got  # one line per value
        assert got[0].startswith(f"f: {shown!r}: ") and message in got[0], got


def test_check_string_bounds_its_work(alice: PathPolicy) -> None:
    got = errors_of(alice.check_string, "f", "/private/users/alice/" + "a/.." * 2000)
    assert len(got) == 1 and got[0].startswith("f: '/private/users/alice/a/..a/..")
    assert got[0].endswith("...': holds '..' in a value longer than 4096 characters, more than the check reads: "
                           "write the paths out normalised")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("/private/users/alice/ckpt", None),
        ("checkpoints/run1", None),
        ("/private/datasets/x", "an output folder must be under /private/users/alice/"),
        ("../../x", "an output folder must not climb out of the job directory"),
        ("~/x", "an output folder must not climb out of the job directory"),
    ],
)
def test_check_output(alice: PathPolicy, value: str, message: str | None) -> None:
    got = errors_of(alice.check_output, "f", value, "an output folder")
    assert got == ([] if message is None else [f"f: {value!r}: {message}" + ("; use an absolute path under $HOME" if "climb" in message else "")])


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("Qwen/Qwen2.5-0.5B-Instruct", True),
        ("gpt2", True),
        ("/private/users/alice/checkpoints/sft/global_step_100/huggingface", True),
        ("/private/hf/Qwen2.5-0.5B", True),
        ("/private/common/hf/Qwen2.5-0.5B", True),
        ("/private/common/models/llama", True),
        ("/private/common/code/x", False),
        ("/private/users/bob/models/x", False),
        ("/tmp/model", False),
        ("Qwen/Qwen2.5/extra", False),
        ("hdfs://x/y", False),
    ],
)
def test_check_model(alice: PathPolicy, value: str, ok: bool) -> None:
    assert (errors_of(alice.check_model, "f", value) == []) is ok


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
        ("plain\ttext\nwith é and ünïcode", True, None),
        ("x\x00y", False, "'\\\\x00 at offset 1': control characters other than newline and tab are not allowed"),
        ("x\ry", False, "'\\\\x0d at offset 1': control characters"),
        ("\x7f", False, "'\\\\x7f at offset 0': control characters"),
        ("ab\x85", False, "'\\\\x85 at offset 2': control characters"),
        ("é\x9b", False, "'\\\\x9b at offset 1': control characters"),
        ("a\u00a0b", False, "'\\\\xa0 at offset 1': a Unicode space or line separator (U+00A0) looks like a blank"),
        ("a\u2028b", False, "'\\\\u2028 at offset 1': a Unicode space or line separator (U+2028)"),
        ("a\u202eb", False, "'\\\\u202e at offset 1': invisible, private or unassigned characters (U+202E)"),
        ("a\u200bb", False, "'\\\\u200b at offset 1': invisible"),
        ("x" * (64 * 1024 + 1), False, "'65537 bytes': is larger than the 64 KiB limit"),
        ("é" * (32 * 1024 + 1), False, "'65538 bytes': is larger than the 64 KiB limit"),
    ],
)
def test_check_text(text: str, ok: bool, message: str | None) -> None:
    findings = Findings()
    assert check_text("spec.command", text, findings) is ok
    if message is None:
        assert findings.errors == []
    else:
        assert len(findings.errors) == 1 and message in str(findings.errors[0]), findings.errors


def _refused_by_definition(c: str) -> bool:
    """The characters issue 11 and the security model refuse, from Unicode's own tables."""
    if c in "\n\t":
        return False
    category = unicodedata.category(c)
    return category in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") or (category == "Zs" and c != " ")


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=40))
def test_character_check_matches_its_definition(text: str) -> None:
    findings = Findings()
    ok = check_text("f", text, findings)
    assert ok is not any(_refused_by_definition(c) for c in text)
    assert len(findings.errors) == (0 if ok else 1)
