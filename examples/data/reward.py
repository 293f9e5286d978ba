"""A verl custom reward function for GSM8K-style answers.

Copy it to $HOME/code/reward.py and point a task at it:

    custom_reward_function.path=$HOME/code/reward.py
    custom_reward_function.name=compute_score
    +custom_reward_function.reward_kwargs.format_bonus=0.1

verl's naive reward manager calls ``compute_score(data_source=..., solution_str=...,
ground_truth=..., extra_info=...)`` with keywords, plus the ``reward_kwargs`` (note the ``+``:
verl's config does not declare ``reward_kwargs``, so Hydra needs it to add the key). The
signature is the design's: keyword-only, with ``**kwargs`` so that a keyword a newer verl
adds, or a reward_kwargs entry this function does not use, is no error. It prints one line a
call: verl 0.7 and later print nothing when they load the function, so its own output is what
shows, in ``argus logs``, that it ran.
"""

from __future__ import annotations

import re

_NUMBER = re.compile(r"-?[\d,]*\.?\d+")


def extract_answer(solution_str: str) -> str | None:
    """The final answer after the last ``####`` marker (GSM8K's format), without
    thousands separators, or None when the marker is missing."""
    if "####" not in solution_str:
        return None
    tail = solution_str.rsplit("####", 1)[1]
    match = _NUMBER.search(tail)
    if match is None:
        return None
    return match.group().replace(",", "").rstrip(".")


def compute_score(*, data_source, solution_str, ground_truth, extra_info=None, format_bonus=0.0, **kwargs):
    """1.0 for the right final answer, 0.0 otherwise; plus ``format_bonus`` when the
    answer uses the ``####`` format at all."""
    answer = extract_answer(solution_str)
    score = 1.0 if answer is not None and answer == str(ground_truth).replace(",", "").strip() else 0.0
    if answer is not None:
        score += float(format_bonus)
    # One line a call in the job's log (argus logs): the only sign, in verl 0.7 and later,
    # that verl loaded and ran this function.
    print(f"reward.py: compute_score ground_truth={ground_truth!r} answer={answer!r} score={score}", flush=True)
    return score
