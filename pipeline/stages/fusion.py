"""Stage 3 (D): hybrid score fusion of the two legs over the union.

Modes: reciprocal rank fusion, or a convex combination of normalised scores
(min-max or z-score) with weight ``alpha`` on BM25. Every candidate keeps its
breakdown: raw, normalised and contribution per leg.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from pipeline.stages.results import RankedItem, RankedResult, UnionCandidate, UnionResult
from pipeline.trace import StageTrace

METHODS = ("rrf", "minmax", "zscore")
# A best BM25 score below this is a weak match; min-max must not stretch it to 1.0.
BM25_MINMAX_FLOOR = 5.0


def _leg_scores(cands: list[UnionCandidate], leg: str) -> list[float | None]:
    return [c.bm25_score if leg == "bm25" else c.dense_score for c in cands]


def _minmax(values: list[float | None], floor: float) -> tuple[list[float], dict[str, float]]:
    present = [v for v in values if v is not None]
    if not present:
        return [0.0] * len(values), {}
    lo, hi = min(present), max(present)
    lo = min(lo, 0.0)  # scores of both legs are ≥ 0 in practice; 0 means "no evidence"
    span = max(hi - lo, floor, 1e-9)
    return [0.0 if v is None else (v - lo) / span for v in values], {"min": lo, "max": hi, "span": span}


def _zscore(values: list[float | None], _floor: float) -> tuple[list[float], dict[str, float]]:
    present = [v for v in values if v is not None]
    if len(present) < 2:
        return [0.0 if v is None else 1.0 for v in values], {}
    mu, sd = statistics.fmean(present), statistics.pstdev(present) or 1.0
    z = [(v - mu) / sd for v in present]
    missing = min(z)  # absent from a leg = as bad as that leg's worst hit
    return [missing if v is None else (v - mu) / sd for v in values], {"mean": mu, "std": sd}


Normaliser = Callable[[list[float | None], float], tuple[list[float], dict[str, float]]]
NORMALISERS: dict[str, Normaliser] = {"minmax": _minmax, "zscore": _zscore}


class Fusion:
    name = "fusion"

    def __init__(self, method: str = "rrf", alpha: float = 0.5, rrf_k: int = 60) -> None:
        if method not in METHODS:
            raise ValueError(f"unknown fusion method {method!r}; choose one of {', '.join(METHODS)}")
        if not 0.0 <= alpha <= 1.0:
            raise ValueError("alpha must be between 0 and 1")
        self.method, self.alpha, self.rrf_k = method, alpha, rrf_k

    def run(self, union: UnionResult) -> RankedResult:
        t0 = time.perf_counter()
        cands = union.candidates
        explain: dict[str, object] = {"method": self.method}
        if self.method == "rrf":
            scored = [self._rrf(c) for c in cands]
            # The best possible RRF score: rank 1 on both legs. Shown instead of a misleading percentage.
            explain.update(rrf_k=self.rrf_k, alpha=self.alpha, max_possible=2.0 / (self.rrf_k + 1))
        else:
            norm = NORMALISERS[self.method]
            nb, eb = norm(_leg_scores(cands, "bm25"), BM25_MINMAX_FLOOR)
            nd, ed = norm(_leg_scores(cands, "embedding"), 0.0)
            explain.update(alpha=self.alpha, bm25_norm=eb, embedding_norm=ed,
                           bm25_floor=BM25_MINMAX_FLOOR if self.method == "minmax" else None)
            scored = [self._convex(c, b, d) for c, b, d in zip(cands, nb, nd, strict=True)]
        order = sorted(range(len(cands)), key=lambda i: (-scored[i][0], cands[i].union_rank))
        items = [RankedItem(cands[i], scored[i][0], rank, cands[i].union_rank, scored[i][1])
                 for rank, i in enumerate(order, start=1)]
        return RankedResult("fusion", items, (time.perf_counter() - t0) * 1000, self.method, explain)

    def _rrf(self, c: UnionCandidate) -> tuple[float, dict[str, float]]:
        # Ranks are 1-based, so the best document gets 1/(k+1). Weights 2α and 2(1−α): α = 0.5 is plain RRF.
        b = 2 * self.alpha / (self.rrf_k + c.bm25_rank) if c.bm25_rank else 0.0
        d = 2 * (1 - self.alpha) / (self.rrf_k + c.dense_rank) if c.dense_rank else 0.0
        return b + d, {"bm25_raw": c.bm25_score or 0.0, "bm25_rank": float(c.bm25_rank or 0),
                       "bm25_contribution": b, "embedding_raw": c.dense_score or 0.0,
                       "embedding_rank": float(c.dense_rank or 0), "embedding_contribution": d}

    def _convex(self, c: UnionCandidate, nb: float, nd: float) -> tuple[float, dict[str, float]]:
        b, d = self.alpha * nb, (1 - self.alpha) * nd
        return b + d, {"bm25_raw": c.bm25_score or 0.0, "bm25_norm": nb, "bm25_contribution": b,
                       "embedding_raw": c.dense_score or 0.0, "embedding_norm": nd, "embedding_contribution": d}


def ranked_trace(result: RankedResult, store_get: Callable[[str], object]) -> StageTrace:
    """Rows with rank before/after (for the rank-shift chart) and the per-leg breakdown."""
    rows = []
    for it in result.items:
        r = store_get(it.candidate.record_id)
        rows.append({"rank": it.rank, "before": it.before, "shift": it.before - it.rank,
                     "record_id": it.candidate.record_id, "kind": getattr(r, "kind", ""),
                     "source": getattr(r, "source", ""), "section": getattr(r, "section", None),
                     "provenance": it.candidate.provenance, "score": it.score,
                     **{k: round(v, 6) for k, v in it.breakdown.items()}})
    return StageTrace(name=result.stage, ms=result.ms, params={"method": result.method},
                      candidates=rows, explain=dict(result.explain))
