"""Search indexes over a KB, cached on disk by KB content hash.

* BM25: analyzed terms → ``BM25Index`` (sparse, precomputed), saved as npy/json.
* Vectors: one row per record; each text's vector is also kept in a diskcache
  keyed by (model, text hash), so an interrupted computation resumes where it
  stopped and a user KB that overlaps the built-in one reuses its vectors.
"""

from __future__ import annotations

import hashlib
import io
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline import atomic, config
from pipeline.analyzer import ANALYZER_VERSION
from pipeline.bm25_index import BM25Index
from pipeline.kb.store import KBStore
from pipeline.kb.views import bm25_terms, embed_text
from pipeline.models.base import Embedder

log = logging.getLogger(__name__)
Progress = Callable[[int, int], None]
# What one text costs to encode, in characters: its length up to where the model truncates (all-MiniLM-L6-v2
# stops at 256 tokens), plus a small fixed part. Fitted on 1,024 KB records encoded longest first on the ONNX
# route (r² 0.996 over 16 batches; cap 800 fits best). Progress is reported in this work, so the ETA holds
# from the start although the longest texts go first.
COST_CAP_CHARS = 800
COST_FIXED_CHARS = 20


def encode_cost(text: str) -> int:
    return COST_FIXED_CHARS + min(len(text), COST_CAP_CHARS)


def _bm25_dir(store: KBStore) -> Path:
    return config.cache_dir() / "bm25" / f"{store.content_hash[:20]}-a{ANALYZER_VERSION}"


def open_bm25(store: KBStore, progress: Progress | None = None) -> BM25Index:
    folder = _bm25_dir(store)
    if (folder / "params.json").is_file():
        try:
            index = BM25Index.load(folder)
            if index.n_docs == len(store.records):
                return index
            log.warning("BM25 cache %s has %d docs, KB has %d; rebuilding", folder, index.n_docs, len(store.records))
        except ValueError as exc:
            log.warning("BM25 cache unusable (%s); rebuilding", exc)
    corpus = []
    n = len(store.records)
    for i, r in enumerate(store.records):
        corpus.append(bm25_terms(r))
        if progress and (i % 500 == 0 or i == n - 1):
            progress(i + 1, n)
    index = BM25Index.build(corpus)
    index.save(folder)
    return index


@dataclass
class VectorIndex:
    model: str
    matrix: np.ndarray  # (n_records, dim), L2-normalised rows

    def search(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        if self.matrix.shape[0] == 0:
            return []
        sims = self.matrix @ query.astype(np.float32).ravel()
        k = min(k, sims.shape[0])
        top = np.argpartition(-sims, k - 1)[:k]
        order = sorted(top.tolist(), key=lambda i: (-float(sims[i]), i))
        return [(i, float(sims[i])) for i in order]


def _model_key(embedder: Embedder) -> str:
    ident = getattr(embedder, "fingerprint", None) or getattr(embedder, "path", embedder.name)
    return f"{embedder.name}-{hashlib.sha1(str(ident).encode()).hexdigest()[:8]}"


def open_vectors(store: KBStore, embedder: Embedder, progress: Progress | None = None,
                 chunk: int = 256) -> VectorIndex:
    key = _model_key(embedder)
    root = config.cache_dir() / "vectors" / key
    matrix_path = root / f"{store.content_hash[:20]}.npy"
    n = len(store.records)
    m = _cached_matrix(matrix_path, n)
    if m is not None:
        return VectorIndex(key, m)
    rows = _embed_rows(root / "texts", [embed_text(r) for r in store.records], embedder, progress, chunk)
    dim = next((r.shape[0] for r in rows if r is not None), 0)
    m = np.vstack([r for r in rows if r is not None]) if n else np.zeros((0, dim), np.float32)
    buf = io.BytesIO()
    np.save(buf, m, allow_pickle=False)
    atomic.write_bytes(matrix_path, buf.getvalue())
    return VectorIndex(key, m)


def encode_cached(texts: list[str], embedder: Embedder, progress: Progress | None = None,
                  chunk: int = 256) -> np.ndarray:
    """Document-side vectors of ``texts``, through the same per-text cache as the KB's vectors.

    Training encodes its crops in two steps (hard negatives, query map); this computes each once, resumably.
    """
    rows = _embed_rows(config.cache_dir() / "vectors" / _model_key(embedder) / "texts", texts, embedder,
                       progress, chunk)
    return np.vstack(rows) if rows else np.zeros((0, 0), np.float32)


def _cached_matrix(path: Path, n: int) -> np.ndarray | None:
    """The saved matrix of this KB and model, when it is whole (n finite rows); None means: compute it."""
    if not path.is_file():
        return None
    try:
        m = np.load(path, allow_pickle=False)
        if m.shape[0] == n and np.isfinite(m).all():
            return m
        log.warning("vector cache %s has the wrong shape; recomputing", path)
    except (ValueError, OSError, EOFError) as exc:
        log.warning("vector cache %s unreadable (%s); recomputing", path, exc)
    return None


def _embed_rows(folder: Path, texts: list[str], embedder: Embedder, progress: Progress | None,
                chunk: int) -> list[np.ndarray | None]:
    """Each text's vector: from the per-text cache in ``folder``, else computed and cached ``chunk`` at a time."""
    import diskcache

    n = len(texts)
    hashes = [hashlib.sha1(t.encode("utf-8")).hexdigest() for t in texts]
    with diskcache.Cache(str(folder)) as cache:
        rows = _cached_rows(cache.get, hashes)
        # Longest first across the whole KB, so each persisted chunk holds texts of one length (padding).
        todo = sorted((i for i in range(n) if rows[i] is None), key=lambda i: -len(texts[i]))
        cached = n - len(todo)
        # Progress counts texts, weighted by cost: the first (longest) texts take several times the
        # average, and a bar counting them as one each shows an ETA of hours that then shrinks.
        spent = np.cumsum([encode_cost(texts[i]) for i in todo])  # work done once todo[:j + 1] is encoded
        if progress:
            progress(cached, n)
        for start in range(0, len(todo), chunk):
            idx = todo[start : start + chunk]
            vecs = embedder.encode([texts[i] for i in idx])
            for i, v in zip(idx, vecs, strict=True):
                rows[i] = v.astype(np.float32)
                cache.set(hashes[i], v.astype(np.float32).tobytes())
            if progress:
                progress(cached + round(len(todo) * spent[start + len(idx) - 1] / spent[-1]), n)
    return rows


def _cached_rows(lookup: Callable[[str], object], hashes: list[str]) -> list[np.ndarray | None]:
    """The cached vector of each text hash; None where missing, damaged, or of another length than most."""
    rows: list[np.ndarray | None] = [None] * len(hashes)
    for i, h in enumerate(hashes):
        v = lookup(h)
        if isinstance(v, bytes) and len(v) % 4 == 0:
            arr = np.frombuffer(v, dtype=np.float32)
            if arr.size and np.isfinite(arr).all():
                rows[i] = arr
    sizes = [r.size for r in rows if r is not None]
    if sizes:  # an entry of the wrong length is damaged: recompute it rather than trust it
        dim = max(set(sizes), key=sizes.count)
        rows = [r if r is not None and r.size == dim else None for r in rows]
    return rows
