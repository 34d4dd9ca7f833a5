"""Stage 3 (F): rerank the union with a model.

Two kinds of reranker: a text cross-scorer (bge through FlagEmbedding, Qwen yes/no)
reads (chunk, record) pairs for the union's top N, and candidates beyond N keep their
union order below them; the learned ranker scores every candidate from the features the
trace already has (pipeline/features.py) and says which features moved it; its score is
blended with the union's RRF prior (D's weighted RRF over the two legs' ranks), both
standardised over the union, with a weight chosen on the dev set's tune half: the ranker
alone was trained on docs crops and lowers nDCG on the tune half, the blend raises it. Each item
keeps its rank before (union order) and after, and the trace names the reranker that
actually ran. Without a reranker (turned off, or missing) F keeps the union order and
its trace says why.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.features import NAMES, ChunkFacts, FeatureBuilder
from pipeline.kb.store import KBStore
from pipeline.kb.views import embed_text
from pipeline.models.base import ProgressFn, Reranker
from pipeline.models.learned import LearnedRanker
from pipeline.stages.results import RerankedItem, RerankResult, UnionCandidate, UnionResult
from pipeline.trace import ChunkInfo, Contribution, RerankRow, RerankTrace, Status

UNION_ORDER = "none (union order)"


@dataclass(frozen=True)
class Prior:
    """The RRF prior the learned ranker's score is blended with: weight × z(RRF) + z(ranker)."""

    weight: float = 1.0
    alpha: float = 0.85
    rrf_k: int = 60

    def scores(self, cands: Sequence[UnionCandidate]) -> np.ndarray:
        return np.array([2 * self.alpha / (self.rrf_k + (c.bm25_rank or MISSING_RANK))
                         + 2 * (1 - self.alpha) / (self.rrf_k + (c.embedding_rank or MISSING_RANK)) for c in cands])


MISSING_RANK = 1000  # a leg that did not find the candidate


def _z(x: np.ndarray) -> np.ndarray:
    sd = float(x.std()) if len(x) else 0.0
    return (x - x.mean()) / sd if sd > 0 else np.zeros_like(x)
SHOWN_CONTRIBUTIONS = 6  # per candidate, the largest by size: what the panel's bar chart shows


class Rerank:
    name = "rerank"

    def __init__(self, store: KBStore, reranker: Reranker | LearnedRanker | None, top_n: int = 30,
                 features: FeatureBuilder | None = None, prior: Prior | None = None) -> None:
        if top_n < 1:
            raise ValueError("rerank top N must be at least 1")
        self.store, self.reranker, self.top_n, self.features = store, reranker, top_n, features
        self.prior = prior

    def run(self, chunk: ChunkInfo, union: UnionResult, progress: ProgressFn | None = None,
            facts: ChunkFacts | None = None) -> RerankResult:
        """Score the top N; ``progress`` may raise ``Cancelled`` between documents.

        ``facts``: the chunk's facts for the learned ranker (Engine.facts); from the text alone when not given.
        """
        if self.reranker is None:
            return self.union_order(union)
        if isinstance(self.reranker, LearnedRanker):
            return self._learned(self.reranker, chunk, union, facts)
        t0 = time.perf_counter()
        head, tail = union.candidates[: self.top_n], union.candidates[self.top_n :]
        docs = [embed_text(self.store.get(c.record_id)) for c in head]
        scores = self.reranker.score(chunk.text, docs, progress=progress)
        order = sorted(range(len(head)), key=lambda i: (-scores[i], head[i].union_rank))
        items = [RerankedItem(head[i], rank, scores[i], reranker_score=scores[i])
                 for rank, i in enumerate(order, start=1)]
        low = min(scores, default=0.0)
        items += [RerankedItem(c, len(head) + n, low - 1.0) for n, c in enumerate(tail, start=1)]
        return RerankResult(items, (time.perf_counter() - t0) * 1000, self.reranker.name, self.top_n, len(head))

    def _learned(self, ranker: LearnedRanker, chunk: ChunkInfo, union: UnionResult,
                 facts: ChunkFacts | None) -> RerankResult:
        """Every candidate scored from its features; the rows keep each feature's contribution."""
        t0 = time.perf_counter()
        if self.features is None:
            raise ValueError("the learned ranker reads features: pass features=FeatureBuilder(store, bm25)")
        cands = union.candidates
        x = self.features.matrix(chunk.text, facts or self.features.chunk_facts(chunk.text, ()), cands)
        raw, contrib = ranker.score(x)
        prior = self.prior.weight * _z(self.prior.scores(cands)) if self.prior else np.zeros(len(cands))
        scores = (_z(raw) if self.prior else raw) + prior
        order = sorted(range(len(cands)), key=lambda i: (-scores[i], cands[i].union_rank))
        items = [RerankedItem(cands[i], rank, float(scores[i]), reranker_score=float(raw[i]),
                              contributions=_top_contributions(x[i], contrib[i]),
                              prior=float(prior[i]) if self.prior else None)
                 for rank, i in enumerate(order, start=1)]
        bias = float(contrib[0, -1]) if len(cands) else None
        name = ranker.name + (f" + RRF prior × {self.prior.weight:g}" if self.prior else "")
        return RerankResult(items, (time.perf_counter() - t0) * 1000, name, len(cands), len(cands), bias=bias)

    def union_order(self, union: UnionResult, status: Status = "ok", message: str = "") -> RerankResult:
        """F's ranking without a reranker: the union order, nothing scored."""
        n = len(union.candidates)
        items = [RerankedItem(c, c.union_rank, float(n - c.union_rank)) for c in union.candidates]
        return RerankResult(items, 0.0, UNION_ORDER, self.top_n, 0, status, message)

    def trace(self, result: RerankResult) -> RerankTrace:
        rows = [RerankRow.of(it.candidate.ref, rank=it.rank, before=it.before, shift=it.before - it.rank,
                             provenance=it.candidate.provenance, score=it.score, reranker_score=it.reranker_score,
                             contributions=list(it.contributions), prior=it.prior)
                for it in result.items]
        return RerankTrace(status=result.status, message=result.message, ms=result.ms, rows=rows,
                           reranker=result.reranker, top_n=result.top_n, scored=result.scored, bias=result.bias)


def _top_contributions(values: np.ndarray, contrib: np.ndarray) -> tuple[Contribution, ...]:
    order = np.argsort(-np.abs(contrib[: len(NAMES)]), kind="stable")[:SHOWN_CONTRIBUTIONS]
    return tuple(Contribution(feature=NAMES[j], value=round(float(values[j]), 4),
                              contribution=round(float(contrib[j]), 4)) for j in order)

