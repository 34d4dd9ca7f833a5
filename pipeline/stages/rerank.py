"""Stage 3 (F): rerank the union's top N with a cross-scoring model.

Candidates beyond N keep their union order below the reranked ones. Each item
keeps its rank before (union order) and after, and the trace names the
reranker that actually ran. Without a reranker (turned off, or missing) F keeps
the union order and its trace says why.
"""

from __future__ import annotations

import time

from pipeline.kb.store import KBStore
from pipeline.kb.views import embed_text
from pipeline.models.base import ProgressFn, Reranker
from pipeline.stages.results import RerankedItem, RerankResult, UnionResult
from pipeline.trace import ChunkInfo, RerankRow, RerankTrace, Status

UNION_ORDER = "none (union order)"


class Rerank:
    name = "rerank"

    def __init__(self, store: KBStore, reranker: Reranker | None, top_n: int = 30) -> None:
        if top_n < 1:
            raise ValueError("rerank top N must be at least 1")
        self.store, self.reranker, self.top_n = store, reranker, top_n

    def run(self, chunk: ChunkInfo, union: UnionResult, progress: ProgressFn | None = None) -> RerankResult:
        """Score the top N; ``progress`` may raise ``Cancelled`` between documents."""
        if self.reranker is None:
            return self.union_order(union)
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

    def union_order(self, union: UnionResult, status: Status = "ok", message: str = "") -> RerankResult:
        """F's ranking without a reranker: the union order, nothing scored."""
        n = len(union.candidates)
        items = [RerankedItem(c, c.union_rank, float(n - c.union_rank)) for c in union.candidates]
        return RerankResult(items, 0.0, UNION_ORDER, self.top_n, 0, status, message)

    def trace(self, result: RerankResult) -> RerankTrace:
        rows = [RerankRow.of(it.candidate.ref, rank=it.rank, before=it.before, shift=it.before - it.rank,
                             provenance=it.candidate.provenance, score=it.score, reranker_score=it.reranker_score)
                for it in result.items]
        return RerankTrace(status=result.status, message=result.message, ms=result.ms, rows=rows,
                           reranker=result.reranker, top_n=result.top_n, scored=result.scored)
