"""The smallest merge patch (``core.patch``): what the status writer sends."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from argus.core.patch import apply_merge_patch, merge_patch

pytestmark = pytest.mark.unit


def test_nothing_changed_means_no_patch() -> None:
    doc = {"phase": "Running", "rayJob": {"status": "RUNNING", "submissionId": "x"}, "conditions": [{"type": "A"}]}
    assert merge_patch(doc, dict(doc)) == {}


def test_only_changed_keys_and_nested_members_are_sent() -> None:
    old = {"phase": "Running", "rayJob": {"status": "RUNNING", "submissionId": "x"}, "queuePosition": 3}
    new = {"phase": "Succeeded", "rayJob": {"status": "SUCCEEDED", "submissionId": "x"}}
    assert merge_patch(old, new) == {"phase": "Succeeded", "rayJob": {"status": "SUCCEEDED"}, "queuePosition": None}


def test_lists_are_replaced_whole() -> None:
    assert merge_patch({"warnings": ["a", "b"]}, {"warnings": ["a"]}) == {"warnings": ["a"]}


def test_a_null_in_the_new_document_removes_the_key() -> None:
    assert merge_patch({"rayUnreachableSince": "t"}, {"rayUnreachableSince": None}) == {"rayUnreachableSince": None}
    assert merge_patch({}, {"rayUnreachableSince": None}) == {}


json_scalars = st.one_of(st.integers(), st.text(max_size=5), st.booleans())
documents = st.recursive(
    st.dictionaries(st.text("abc", min_size=1, max_size=2), json_scalars, max_size=4),
    lambda inner: st.dictionaries(st.text("abc", min_size=1, max_size=2), st.one_of(json_scalars, inner, st.lists(json_scalars, max_size=3)), max_size=4),
    max_leaves=12,
)


@given(documents, documents)
def test_applying_the_patch_gives_the_new_document(old: dict, new: dict) -> None:
    assert apply_merge_patch(old, merge_patch(old, new)) == new
