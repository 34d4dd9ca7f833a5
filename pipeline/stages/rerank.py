"""Stage 3 (F): rerank the union's top N with a cross-scoring model.

Candidates beyond N keep their union order below the reranked ones. Each item
keeps its rank before (union order) and after, and the trace names the
reranker that actually ran.
"""

from __future__ import annotations

import time

from pipeline.kb.store import KBStore
from pipeline.kb.views import embed_text
from pipeline.models.base import ProgressFn, Reranker
from pipeline.stages.results import RankedItem, RankedResult, UnionResult
from pipeline.trace import ChunkInfo


class Rerank:
    name = "rerank"

    def __init__(self, store: KBStore, reranker: Reranker, top_n: int = 30) -> None:
        if top_n < 1:
            raise ValueError("rerank top N must be at least 1")
        self.store, self.reranker, self.top_n = store, reranker, top_n

    def run(self, chunk: ChunkInfo, union: UnionResult, progress: ProgressFn | None = None) -> RankedResult:
        t0 = time.perf_counter()
        head, tail = union.candidates[: self.top_n], union.candidates[self.top_n :]
        docs = [embed_text(self.store.get(c.record_id)) for c in head]
        scores = self.reranker.score(chunk.text, docs, progress=progress)
        order = sorted(range(len(head)), key=lambda i: (-scores[i], head[i].union_rank))
        items = [RankedItem(head[i], scores[i], rank, head[i].union_rank, {"reranker_score": scores[i]})
                 for rank, i in enumerate(order, start=1)]
        low = min(scores, default=0.0)
        items += [RankedItem(c, low - 1.0, len(head) + n, c.union_rank, {"not_reranked": 1.0})
                  for n, c in enumerate(tail, start=1)]
        return RankedResult("rerank", items, (time.perf_counter() - t0) * 1000, self.reranker.name,
                            {"reranker": self.reranker.name, "top_n": self.top_n, "scored": len(head)})
