"""Stage 1a: keyword leg — vectorised BM25 (rank-bm25 compatible scores) with matched terms."""

from __future__ import annotations

import time

from pipeline.bm25_index import BM25Index
from pipeline.kb.store import KBStore
from pipeline.stages.results import LegHit, LegResult, QueryResult
from pipeline.trace import StageTrace


class BM25Retriever:
    name = "bm25"

    def __init__(self, store: KBStore, index: BM25Index, k: int = 50) -> None:
        if k < 1:
            raise ValueError("BM25 top-k must be at least 1")
        self.store, self.index, self.k = store, index, k

    def run(self, query: QueryResult, k: int | None = None) -> LegResult:
        t0 = time.perf_counter()
        # Each distinct term counts once: four `Input.is_action_pressed` calls must not outweigh
        # the one `clamp` that tells a 2D player script from every other input tutorial.
        hits = self.index.search(list(dict.fromkeys(query.terms)), k or self.k)
        out = [
            LegHit(self.store.records[h.doc].id, rank, h.score,
                   dict(sorted(h.contributions.items(), key=lambda kv: -kv[1])))
            for rank, h in enumerate(hits, start=1)
        ]
        return LegResult("bm25", out, (time.perf_counter() - t0) * 1000, "BM25Okapi(k1=1.5, b=0.75)")

    def trace(self, result: LegResult, query: QueryResult) -> StageTrace:
        rows = []
        for h in result.hits:
            r = self.store.get(h.record_id)
            rows.append({
                "rank": h.rank, "record_id": h.record_id, "kind": r.kind, "source": getattr(r, "source", ""),
                "section": getattr(r, "section", None), "score": round(h.score, 4),
                "matched": [{"term": t, "as_written": query.surface.get(t, t), "contribution": round(c, 4)}
                            for t, c in h.matched.items()],
            })
        return StageTrace(name="bm25", ms=result.ms, params={"k": self.k, "scorer": result.model},
                          candidates=rows, explain={"n_hits": len(rows)})
