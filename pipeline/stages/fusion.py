"""Stage 3 (D): hybrid score fusion of the two legs over the union.

Modes: reciprocal rank fusion, or a convex combination of normalised scores
(min-max or z-score) with weight ``alpha`` on BM25. Every candidate keeps its
breakdown: raw, normalised and contribution per leg.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import replace

from pipeline.stages.results import FusedItem, FusionResult, UnionCandidate, UnionResult
from pipeline.trace import FusionRow, FusionTrace, NormStats

METHODS = ("rrf", "minmax", "zscore")
# A best BM25 score below this is a weak match; min-max must not stretch it to 1.0.
BM25_MINMAX_FLOOR = 5.0


def _minmax(values: list[float | None], floor: float) -> tuple[list[float], NormStats | None]:
    present = [v for v in values if v is not None]
    if not present:
        return [0.0] * len(values), None
    lo, hi = min(present), max(present)
    lo = min(lo, 0.0)  # scores of both legs are ≥ 0 in practice; 0 means "no evidence"
    span = max(hi - lo, floor, 1e-9)
    return [0.0 if v is None else (v - lo) / span for v in values], NormStats(lo=lo, hi=hi, span=span)


def _zscore(values: list[float | None], _floor: float) -> tuple[list[float], NormStats | None]:
    present = [v for v in values if v is not None]
    if len(present) < 2:
        return [0.0 if v is None else 1.0 for v in values], None
    mu, sd = statistics.fmean(present), statistics.pstdev(present) or 1.0
    z = [(v - mu) / sd for v in present]
    missing = min(z)  # absent from a leg = as bad as that leg's worst hit
    return [missing if v is None else (v - mu) / sd for v in values], NormStats(mean=mu, std=sd)


Normaliser = Callable[[list[float | None], float], tuple[list[float], NormStats | None]]
NORMALISERS: dict[str, Normaliser] = {"minmax": _minmax, "zscore": _zscore}


class Fusion:
    name = "fusion"

    def __init__(self, method: str = "rrf", alpha: float = 0.5, rrf_k: int = 60) -> None:
        if method not in METHODS:
            raise ValueError(f"unknown fusion method {method!r}; choose one of {', '.join(METHODS)}")
        if not 0.0 <= alpha <= 1.0:
            raise ValueError("alpha must be between 0 and 1")
        self.method, self.alpha, self.rrf_k = method, alpha, rrf_k

    def run(self, union: UnionResult) -> FusionResult:
        t0 = time.perf_counter()
        cands = union.candidates
        eb = ed = None
        if self.method == "rrf":
            scored = [self._rrf(c) for c in cands]
        else:
            norm = NORMALISERS[self.method]
            nb, eb = norm([c.bm25_score for c in cands], BM25_MINMAX_FLOOR)
            nd, ed = norm([c.similarity for c in cands], 0.0)
            scored = [self._convex(c, b, d) for c, b, d in zip(cands, nb, nd, strict=True)]
        order = sorted(range(len(cands)), key=lambda i: (-scored[i].score, cands[i].union_rank))
        items = [replace(scored[i], rank=rank) for rank, i in enumerate(order, start=1)]
        rrf = self.method == "rrf"
        return FusionResult(items, (time.perf_counter() - t0) * 1000, self.method, self.alpha,
                            rrf_k=self.rrf_k if rrf else None,
                            # Rank 1 on both legs: shown instead of a misleading percentage.
                            max_possible=2.0 / (self.rrf_k + 1) if rrf else None,
                            bm25_norm=eb, embedding_norm=ed,
                            bm25_floor=BM25_MINMAX_FLOOR if self.method == "minmax" else None)

    def _rrf(self, c: UnionCandidate) -> FusedItem:
        # Ranks are 1-based, so the best document gets 1/(k+1). Weights 2α and 2(1−α): α = 0.5 is plain RRF.
        b = 2 * self.alpha / (self.rrf_k + c.bm25_rank) if c.bm25_rank else 0.0
        d = 2 * (1 - self.alpha) / (self.rrf_k + c.embedding_rank) if c.embedding_rank else 0.0
        return FusedItem(c, 0, b + d, bm25_contribution=b, embedding_contribution=d)

    def _convex(self, c: UnionCandidate, nb: float, nd: float) -> FusedItem:
        b, d = self.alpha * nb, (1 - self.alpha) * nd
        return FusedItem(c, 0, b + d, bm25_norm=nb, bm25_contribution=b, embedding_norm=nd,
                         embedding_contribution=d)

    def trace(self, result: FusionResult) -> FusionTrace:
        """Rows with rank before/after (for the rank-shift chart) and the per-leg breakdown."""
        rows = []
        for it in result.items:
            c = it.candidate
            rows.append(FusionRow.of(
                c.ref, rank=it.rank, before=it.before, shift=it.before - it.rank, provenance=c.provenance,
                score=it.score, bm25_score=c.bm25_score, bm25_rank=c.bm25_rank, bm25_norm=it.bm25_norm,
                bm25_contribution=it.bm25_contribution, similarity=c.similarity, embedding_rank=c.embedding_rank,
                embedding_norm=it.embedding_norm, embedding_contribution=it.embedding_contribution))
        return FusionTrace(ms=result.ms, rows=rows, method=result.method, alpha=result.alpha, rrf_k=result.rrf_k,
                           max_possible=result.max_possible, bm25_norm=result.bm25_norm,
                           embedding_norm=result.embedding_norm, bm25_floor=result.bm25_floor)
