"""Stage 1b: embedding leg — cosine top-k over cached record vectors."""

from __future__ import annotations

import time

from pipeline.kb.index import VectorIndex
from pipeline.kb.store import KBStore
from pipeline.models.base import Embedder
from pipeline.stages.results import LegHit, LegResult
from pipeline.trace import ChunkInfo, StageTrace

QUERY_CHARS = 2000  # the embedder truncates anyway; this bounds tokenising time


class DenseRetriever:
    name = "embedding"

    def __init__(self, store: KBStore, vectors: VectorIndex, embedder: Embedder, k: int = 50) -> None:
        if k < 1:
            raise ValueError("embedding top-k must be at least 1")
        self.store, self.vectors, self.embedder, self.k = store, vectors, embedder, k

    def run(self, chunk: ChunkInfo, k: int | None = None) -> LegResult:
        t0 = time.perf_counter()
        qvec = self.embedder.encode([chunk.text[:QUERY_CHARS]])[0]
        hits = [LegHit(self.store.records[i].id, rank, sim)
                for rank, (i, sim) in enumerate(self.vectors.search(qvec, k or self.k), start=1)]
        model = getattr(self.embedder, "title", self.vectors.model)
        return LegResult("embedding", hits, (time.perf_counter() - t0) * 1000, model)

    def trace(self, result: LegResult) -> StageTrace:
        rows = []
        for h in result.hits:
            r = self.store.get(h.record_id)
            rows.append({"rank": h.rank, "record_id": h.record_id, "kind": r.kind,
                         "source": getattr(r, "source", ""), "section": getattr(r, "section", None),
                         "similarity": round(h.score, 4)})
        return StageTrace(name="embedding", ms=result.ms, params={"k": self.k, "model": result.model},
                          candidates=rows, explain={"n_hits": len(rows)})
