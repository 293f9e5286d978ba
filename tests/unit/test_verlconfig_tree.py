"""The walks of a composed configuration (argus.core.verlconfig.tree): ``walk_over``, which
copies the walk of every subtree a composition shares with verl's defaults from the base's
walk (``Walked``), lists the same nodes in the same order as ``walk`` over generated trees
that share, replace, add and drop subtrees of a base. The real compositions are held to the
same in test_verl_compose_fast.py (every corpus command, and generated overrides)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from argus.core.verlconfig.tree import Walked, walk, walk_over

pytestmark = pytest.mark.unit

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False), st.text(max_size=3))
KEYS = st.sampled_from(["a", "b", "c", "d", "nnodes", "path"])
TREES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)),
                     max_leaves=40)


def _derive(base: Any, draw: Any) -> Any:
    """A tree made from ``base`` as a composition is: each container kept as the very object,
    or rebuilt with each child derived again, replaced, added or dropped."""
    if not isinstance(base, (dict, list)) or draw(st.booleans()):
        return base if draw(st.integers(0, 4)) else draw(TREES)
    if isinstance(base, dict):
        out = {k: _derive(v, draw) for k, v in base.items() if draw(st.integers(0, 5))}
        if draw(st.booleans()):
            out[draw(KEYS)] = draw(TREES)
        return out
    out_list = [_derive(v, draw) for v in base]
    if draw(st.booleans()):
        out_list.append(draw(TREES))
    return out_list


@st.composite
def base_and_tree(draw: Any) -> tuple[Any, Any]:
    base = draw(st.dictionaries(KEYS, TREES, max_size=5))
    return base, _derive(base, draw)


def assert_same_walk(tree: Any, walked: Walked) -> None:
    """``walk_over`` lists the very nodes ``walk`` lists, in its order (test_verl_compose_fast.py
    holds every real composition to it too)."""
    over, whole = walk_over(tree, walked), walk(tree)
    assert [p for p, _ in over] == [p for p, _ in whole]
    assert all(a is b for (_, a), (_, b) in zip(over, whole, strict=True))


@settings(max_examples=400, deadline=None)
@given(base_and_tree())
def test_walk_over_lists_what_walk_lists(pair: tuple[Any, Any]) -> None:
    base, tree = pair
    assert_same_walk(tree, Walked(base))


def test_a_tree_sharing_nothing_with_the_base_is_walked_whole() -> None:
    base = {"trainer": {"nnodes": 1, "paths": ["a", "b"]}, "data": {"x": 1}}
    tree = copy.deepcopy(base)
    tree["trainer"]["paths"].append("c")
    assert_same_walk(tree, Walked(base))
    assert_same_walk(base, Walked(base))  # the base itself: one copy of its whole walk


def test_a_shared_subtree_is_copied_from_the_bases_walk() -> None:
    shared = {"deep": {"er": [1, {"x": "y"}]}}
    base = {"a": shared, "b": 1}
    tree = {"b": 2, "a": shared, "c": [shared]}
    walked = Walked(base)
    assert walked.spans[("a",)] == (1, 1 + len(walk(shared)))
    assert_same_walk(tree, walked)
    # Under another path the same object is not the base's node there: walked, not copied.
    assert ("c", 0, "deep") in [p for p, _ in walk_over(tree, walked)]
