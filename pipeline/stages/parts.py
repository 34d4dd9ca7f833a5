"""Long chunks: a whole file is not one question.

A chunk longer than a threshold is cut by top-level function (the batch splitter), each
function is searched on its own, and the legs' hits are merged: a record keeps its best
score over the functions, so a page that explains one function is not drowned by the
generic pages every long file resembles. The union, fusion and reranker then run as usual.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TypeVar

from pipeline.batch.splitter import split_source
from pipeline.chunk import prepare_chunk
from pipeline.stages.results import BM25Hit, BM25Result, EmbeddingHit, EmbeddingResult
from pipeline.trace import ChunkInfo

H = TypeVar("H", BM25Hit, EmbeddingHit)
MIN_PART_LINES = 3  # a part shorter than this (a lone `extends`) says too little to search with


def parts(chunk: ChunkInfo, long_lines: int) -> list[ChunkInfo]:
    """The chunk's functions when it is longer than ``long_lines`` and has at least two; else []."""
    if chunk.n_lines <= long_lines:
        return []
    pieces = [c.text for c in split_source(chunk.text, max_lines=long_lines)
              if sum(1 for ln in c.text.splitlines() if ln.strip()) >= MIN_PART_LINES]
    return [prepare_chunk(p) for p in pieces] if len(pieces) >= 2 else []


def _merge(hits: Sequence[Sequence[H]], score: Callable[[H], float], k: int) -> list[H]:
    best: dict[str, H] = {}
    for part in hits:
        for h in part:
            rid = h.ref.record_id
            if rid not in best or score(h) > score(best[rid]):
                best[rid] = h
    ordered = sorted(best.values(), key=lambda h: (-score(h), h.ref.record_id))[:k]
    return [dataclasses.replace(h, rank=n) for n, h in enumerate(ordered, start=1)]


def merge_bm25(results: Sequence[BM25Result], k: int) -> BM25Result:
    hits = _merge([r.hits for r in results], lambda h: h.score, k)
    surface = {t: s for r in results for t, s in r.surface.items()}
    return BM25Result(hits, sum(r.ms for r in results), k, f"{results[0].scorer}, best over "
                      f"{len(results)} functions", surface)


def merge_embedding(results: Sequence[EmbeddingResult], k: int) -> EmbeddingResult:
    hits = _merge([r.hits for r in results], lambda h: h.similarity, k)
    return EmbeddingResult(hits, sum(r.ms for r in results), k, results[0].model,
                           error=next((r.error for r in results if r.error), ""),
                           notice=next((r.notice for r in results if r.notice), ""))
