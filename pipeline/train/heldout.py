"""The held-out docs pages: ranking quality on code no model here was trained on.

The training data's "test" pages never feed a model. Their crops are run through the
same legs, union, fusion and learned ranker as the engine's, with the records each crop
was cut from hidden — otherwise BM25 would simply find the code it was cut from.
"""

from __future__ import annotations

import random

from pipeline.engine import Engine
from pipeline.evaluate import METRICS, _ranx
from pipeline.settings import TRAINED, Settings
from pipeline.stages.dense import QUERY_CHARS
from pipeline.stages.fusion import Fusion
from pipeline.stages.rerank import Rerank
from pipeline.stages.union import Union
from pipeline.train import defaults
from pipeline.train.data import load_queries
from pipeline.train.ltr import masked_legs

MAX_QUERIES = 200


def _pages(doc_paths: list[str | None]) -> list[str]:
    return list(dict.fromkeys(p for p in doc_paths if p))


def evaluate_heldout(engine: Engine, settings: Settings | None = None, limit: int = MAX_QUERIES
                     ) -> dict[str, dict[str, float]]:
    s = settings or Settings()
    folder = defaults.ready("data", engine.store.content_hash)
    if folder is None:
        raise FileNotFoundError("no training data yet: run `python -m pipeline models train` first")
    queries = [q for q in load_queries(folder) if q.split == "test"]
    random.Random(0).shuffle(queries)
    queries = queries[:limit]
    legs = {"MiniLM": engine.dense(None), "code query encoder": engine.dense(engine.resolve_embedder(TRAINED)[0])}
    ranker = None
    try:
        ranker = engine.reranker(s.model_copy(update={"reranker": "learned"}))
    except Exception:
        ranker = None
    runs: dict[str, dict[str, list[str]]] = {}
    for name, (emb, vec) in legs.items():
        encode = getattr(emb, "encode_query", emb.encode)
        qvecs = encode([q.text[:QUERY_CHARS] for q in queries])
        for q, qv in zip(queries, qvecs, strict=True):
            hide = set(q.positives)
            b, e, _ = masked_legs(q.text, engine.store, engine.bm25, vec, qv, s.d_bm25_k, s.d_dense_k, hide)
            runs.setdefault("BM25", {})[q.qid] = _pages([h.ref.doc_path for h in b.hits])
            runs.setdefault(f"embedding: {name}", {})[q.qid] = _pages([h.ref.doc_path for h in e.hits])
            fused = Fusion(s.fusion, s.alpha, s.rrf_k).run(Union().run(b, e))
            runs.setdefault(f"D with {name}", {})[q.qid] = _pages([it.candidate.ref.doc_path for it in fused.items])
            if name != "code query encoder":
                continue
            fb, fe, terms = masked_legs(q.text, engine.store, engine.bm25, vec, qv, s.f_bm25_k, s.f_dense_k, hide)
            union = Union().run(fb, fe)
            runs.setdefault("F without a reranker (union order)", {})[q.qid] = _pages(
                [c.ref.doc_path for c in union.candidates])
            if ranker is not None:
                from pipeline.trace import ChunkInfo

                chunk = ChunkInfo(text=q.text, sha256="", n_bytes=0, n_lines=0, language="gdscript")
                ranked = Rerank(engine.store, ranker, s.rerank_top_n, engine.features).run(chunk, union, terms=terms)
                runs.setdefault("F + learned ranker", {})[q.qid] = _pages(
                    [it.candidate.ref.doc_path for it in ranked.items])
    overall, _ = _ranx({q.qid: q.relevant_pages for q in queries}, runs)
    out = {k: {m: v[m] for m in METRICS} for k, v in overall.items()}
    out["_queries"] = {"n": float(len(queries))}
    return out
