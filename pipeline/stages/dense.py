"""Stage 1b: embedding leg — cosine top-k over cached record vectors."""

from __future__ import annotations

import time

from pipeline.kb.index import VectorIndex
from pipeline.kb.store import KBStore
from pipeline.models.base import Embedder
from pipeline.stages.results import EmbeddingHit, EmbeddingResult
from pipeline.trace import ChunkInfo, EmbeddingRow, EmbeddingTrace, RecordRef

QUERY_CHARS = 2000  # the embedder truncates anyway; this bounds tokenising time


class DenseRetriever:
    name = "embedding"

    def __init__(self, store: KBStore, vectors: VectorIndex, embedder: Embedder, k: int = 50) -> None:
        if k < 1:
            raise ValueError("embedding top-k must be at least 1")
        self.store, self.vectors, self.embedder, self.k = store, vectors, embedder, k

    def run(self, chunk: ChunkInfo) -> EmbeddingResult:
        t0 = time.perf_counter()
        encode = getattr(self.embedder, "encode_query", self.embedder.encode)  # a query encoder has its own route
        qvec = encode([chunk.text[:QUERY_CHARS]])[0]
        hits = [EmbeddingHit(RecordRef.of(self.store.records[i]), rank, sim)
                for rank, (i, sim) in enumerate(self.vectors.search(qvec, self.k), start=1)]
        model = getattr(self.embedder, "title", self.vectors.model)
        runtime = getattr(self.embedder, "runtime", "")
        model = f"{model} · {runtime}" if runtime else model  # which library encoded the chunk
        return EmbeddingResult(hits, (time.perf_counter() - t0) * 1000, self.k, model)

    @staticmethod
    def unavailable(k: int, model: str, why: str) -> EmbeddingResult:
        """The leg's result when it cannot run: no hits, and the reason for the trace."""
        return EmbeddingResult([], 0.0, k, model, error=f"embedding leg unavailable: {why}")

    def trace(self, result: EmbeddingResult) -> EmbeddingTrace:
        return trace_embedding(result)


def trace_embedding(result: EmbeddingResult) -> EmbeddingTrace:
    """Also used when the leg could not be built at all (no retriever to ask)."""
    rows = [EmbeddingRow.of(h.ref, rank=h.rank, similarity=h.similarity) for h in result.hits]
    return EmbeddingTrace(status="error" if result.error else "ok", message=result.error or result.notice, ms=result.ms,
                          k=result.k, model=result.model, rows=rows)
