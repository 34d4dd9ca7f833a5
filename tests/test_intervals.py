"""Bootstrap intervals and paired tests on their own (the dev set's figures are tested in test_eval_metrics)."""

from __future__ import annotations

import pytest

from pipeline.intervals import interval, paired


def test_an_interval_of_equal_values_is_the_point_and_repeats_exactly() -> None:
    assert interval([1.0, 1.0, 1.0]) == interval([1.0, 1.0, 1.0])
    one = interval([1.0, 1.0, 1.0])
    assert (one.low, one.mean, one.high) == (1.0, 1.0, 1.0)
    spread = [0.2, 0.9, 0.5, 1.0, 0.4, 0.7]
    assert interval(spread) == interval(spread)  # seeded: the same report gives the same interval
    assert interval([]).n == 0


def test_a_system_against_itself_differs_by_nothing() -> None:
    per_chunk = {f"c{i}": {"A": {"ndcg@10": v}, "B": {"ndcg@10": v}} for i, v in enumerate([0.1, 0.5, 0.9])}
    p = paired(per_chunk, "A", "B")
    assert p is not None and p.difference == 0.0 and p.p_value == 1.0


def test_the_paired_test_is_exact_and_two_sided() -> None:
    # 6 chunks where A wins each by 0.1: of the 64 sign flips, only "all +" and "all -" are as extreme
    per_chunk = {f"c{i}": {"A": {"ndcg@10": 0.5 + 0.1}, "B": {"ndcg@10": 0.5}} for i in range(6)}
    p = paired(per_chunk, "A", "B")
    assert p is not None
    assert p.difference == pytest.approx(0.1)
    assert p.p_value == pytest.approx(2 / 64)
    assert paired(per_chunk, "A", "missing") is None


def test_a_p_value_is_never_shown_as_zero() -> None:
    from pipeline.intervals import p_text

    assert p_text(1.5e-5) == "< 0.001"
    assert p_text(0.0312) == "0.031"


def test_a_one_chunk_evaluation_gets_a_comparison_not_a_scipy_error() -> None:
    # The Evaluation page lets a user evaluate one chunk; scipy's permutation test needs two.
    per_chunk = {"c1": {"F": {"ndcg@10": 0.9}, "D": {"ndcg@10": 0.5}}}
    p = paired(per_chunk, "F", "D")
    assert p is not None and p.n == 1 and p.p_value == 1.0 and abs(p.difference - 0.4) < 1e-12
