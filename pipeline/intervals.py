"""How sure a dev-set figure is: bootstrap intervals and paired permutation tests over chunks (scipy.stats).

The dev set's halves hold 14–16 ranked chunks each, so one chunk moves a mean by 0.05 or more. An
interval beside each figure, and a paired test for the comparisons the issues' goals name (F > D, the
dense leg against BM25, the reranker against its own union order), say which differences are more
than the luck of which chunks are in the half.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LEVEL = 0.95
SEED = 0  # fixed: the same report gives the same interval
# (left, right): each asks whether the left system differs from the right one, on the same chunks.
COMPARISONS = (("F", "D"), ("D", "bm25"), ("embedding", "bm25"), ("F", "F union"), ("D", "D union"))


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float
    n: int  # chunks


@dataclass(frozen=True)
class Paired:
    left: str
    right: str
    difference: float  # mean over chunks of left - right
    p_value: float  # two-sided, paired (sign-flip) permutation test; exact up to 16 chunks
    n: int


def p_text(p_value: float) -> str:
    """A p-value as people read it: a randomised test over many chunks never reports 0."""
    return "< 0.001" if p_value < 0.001 else f"{p_value:.3f}"


def _values(per_chunk: dict[str, dict[str, dict[str, float]]], system: str, metric: str) -> dict[str, float]:
    return {cid: v[system][metric] for cid, v in per_chunk.items() if metric in v.get(system, {})}


def interval(values: list[float], level: float = LEVEL) -> Interval:
    """Percentile bootstrap interval of the mean (BCa fails on halves where most chunks score 1.0)."""
    from scipy.stats import bootstrap

    data = np.asarray(values, dtype=float)
    mean = float(data.mean()) if data.size else float("nan")
    if data.size < 2 or np.ptp(data) == 0:  # nothing to resample: the interval is the point
        return Interval(mean, mean, mean, int(data.size))
    res = bootstrap((data,), np.mean, n_resamples=4000, confidence_level=level, method="percentile",
                    rng=np.random.default_rng(SEED))
    return Interval(mean, float(res.confidence_interval.low), float(res.confidence_interval.high), int(data.size))


def intervals(per_chunk: dict[str, dict[str, dict[str, float]]], metric: str = "ndcg@10") -> dict[str, Interval]:
    """Per system, the interval of ``metric``'s mean over the chunks it was measured on."""
    systems = sorted({s for v in per_chunk.values() for s in v})
    out = {}
    for s in systems:
        vals = _values(per_chunk, s, metric)
        if vals:
            out[s] = interval(list(vals.values()))
    return out


def paired(per_chunk: dict[str, dict[str, dict[str, float]]], left: str, right: str,
           metric: str = "ndcg@10") -> Paired | None:
    """``left`` against ``right`` chunk by chunk; None when they share no chunk."""
    from scipy.stats import permutation_test

    a, b = _values(per_chunk, left, metric), _values(per_chunk, right, metric)
    common = sorted(a.keys() & b.keys())
    if not common:
        return None
    x = np.array([a[c] for c in common])
    y = np.array([b[c] for c in common])
    diff = float(np.mean(x - y))
    if np.all(x == y) or len(common) < 2:  # one chunk: both sign flips give the same |mean|, so p is 1 exactly
        return Paired(left, right, diff, 1.0, len(common))
    res = permutation_test((x, y), lambda u, v, axis: np.mean(u - v, axis=axis), permutation_type="samples",
                           vectorized=True, n_resamples=2 ** 16, rng=np.random.default_rng(SEED))
    return Paired(left, right, diff, float(res.pvalue), len(common))


def comparisons(per_chunk: dict[str, dict[str, dict[str, float]]], metric: str = "ndcg@10") -> list[Paired]:
    """The paired tests of ``COMPARISONS`` whose two systems were both measured."""
    return [p for left, right in COMPARISONS if (p := paired(per_chunk, left, right, metric)) is not None]
