"""Stage 1a: keyword leg — vectorised BM25 (rank-bm25 compatible scores) with matched terms."""

from __future__ import annotations

import time

from pipeline.bm25_index import BM25Index
from pipeline.kb.store import KBStore
from pipeline.stages.results import BM25Hit, BM25Result, QueryResult
from pipeline.trace import BM25Row, BM25Trace, MatchedTerm, RecordRef

SCORER = "BM25Okapi(k1=1.5, b=0.75)"


class BM25Retriever:
    name = "bm25"

    def __init__(self, store: KBStore, index: BM25Index, k: int = 50) -> None:
        if k < 1:
            raise ValueError("BM25 top-k must be at least 1")
        self.store, self.index, self.k = store, index, k

    def run(self, query: QueryResult) -> BM25Result:
        t0 = time.perf_counter()
        # Each distinct term counts once: four `Input.is_action_pressed` calls must not outweigh
        # the one `clamp` that tells a 2D player script from every other input tutorial.
        hits = self.index.search(list(dict.fromkeys(query.terms)), self.k)
        out = [
            BM25Hit(RecordRef.of(self.store.records[h.doc]), rank, h.score,
                    dict(sorted(h.contributions.items(), key=lambda kv: -kv[1])))
            for rank, h in enumerate(hits, start=1)
        ]
        return BM25Result(out, (time.perf_counter() - t0) * 1000, self.k, SCORER, query.surface)

    def trace(self, result: BM25Result) -> BM25Trace:
        rows = [BM25Row.of(h.ref, rank=h.rank, score=h.score,
                           matched=[MatchedTerm(term=t, as_written=result.surface.get(t, t), contribution=c)
                                    for t, c in h.matched.items()])
                for h in result.hits]
        return BM25Trace(ms=result.ms, k=result.k, scorer=result.scorer, rows=rows)
