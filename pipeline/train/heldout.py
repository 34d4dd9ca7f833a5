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
from pipeline.stages.rerank import Prior, Rerank
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
                for label, prior in (("F + learned ranker alone", None),
                                     ("F + learned ranker + RRF prior", Prior(s.f_prior_weight, s.alpha, s.rrf_k))):
                    ranked = Rerank(engine.store, ranker, s.rerank_top_n, engine.features, prior).run(
                        chunk, union, facts=engine.features.chunk_facts(q.text, terms))
                    runs.setdefault(label, {})[q.qid] = _pages([it.candidate.ref.doc_path for it in ranked.items])
    overall, _ = _ranx({q.qid: q.relevant_pages for q in queries}, runs)
    out = {k: {m: v[m] for m in METRICS} for k, v in overall.items()}
    out["_queries"] = {"n": float(len(queries))}
    return out


def long_files(engine: Engine, min_lines: int = 60) -> list[tuple[str, str, set[str], dict[str, int]]]:
    """Whole scripts made of a page's code (the held-out and validation tutorial pages): (id, code, hide, relevant)."""
    from pipeline.records import DocsChunk
    from pipeline.train.data import ApiResolver, page_split

    resolver = ApiResolver(engine.store)
    pages: dict[str, list[DocsChunk]] = {}
    for r in engine.store.records:
        if isinstance(r, DocsChunk) and r.code_blocks and not r.doc_path.startswith("classes/"):
            pages.setdefault(r.doc_path, []).append(r)
    out = []
    for page, recs in sorted(pages.items()):
        if page_split(page, defaults.recipes().data) == "train":
            continue
        code = "\n\n".join(b.strip("\n") for r in recs for b in r.code_blocks) + "\n"
        if code.count("\n") < min_lines:
            continue
        _, api_pages = resolver.resolve(code)
        out.append((page, code, {r.id for r in recs}, {**api_pages, page: 3}))
    return out


def evaluate_long(engine: Engine, settings: Settings | None = None) -> dict[str, dict[str, float]]:
    """D and F on long files, searched whole or function by function (the records holding the code hidden)."""
    from pipeline.chunk import prepare_chunk
    from pipeline.stages.pagevotes import VOTE_K, PageVotes
    from pipeline.stages.parts import merge_bm25, merge_embedding, parts
    from pipeline.stages.results import EmbeddingResult

    s = settings or Settings()
    files = long_files(engine)
    emb, vec = engine.dense(engine.resolve_embedder(s.f_embedder)[0])
    ranker = engine.reranker(s.model_copy(update={"reranker": "learned"}))
    encode = getattr(emb, "encode_query", emb.encode)
    runs: dict[str, dict[str, list[str]]] = {}
    for fid, code, hide, _ in files:
        chunk = prepare_chunk(code)
        for mode in ("whole", "per_function"):
            pieces = parts(chunk, s.long_lines) if mode == "per_function" else []
            texts = [p.text for p in pieces] or [chunk.text]
            legs = [masked_legs(t, engine.store, engine.bm25, vec, encode([t[:QUERY_CHARS]])[0], s.f_bm25_k,
                                s.f_dense_k, hide) for t in texts]
            b = merge_bm25([leg[0] for leg in legs], s.f_bm25_k)
            e: EmbeddingResult = merge_embedding([leg[1] for leg in legs], s.f_dense_k)
            union = Union().run(b, e)
            fused = Fusion(s.fusion, s.alpha, s.rrf_k).run(union)
            ranked = Rerank(engine.store, ranker, s.rerank_top_n, engine.features,
                            Prior(s.f_prior_weight, s.alpha, s.rrf_k)).run(
                chunk, union, facts=engine.features.chunk_facts(chunk.text, [t for leg in legs for t in leg[2]]))
            for alt, items in (("D", fused.items), ("F", ranked.items)):
                runs.setdefault(f"{alt}, {mode}", {})[fid] = _pages([it.candidate.ref.doc_path for it in items])
                if pieces:  # what each design runs on a long file: the pages several sections support move up
                    voted = PageVotes(k=VOTE_K[alt]).run(items).items
                    runs.setdefault(f"{alt}, per_function, page votes", {})[fid] = _pages(
                        [it.candidate.ref.doc_path for it in voted])
    overall, _ = _ranx({fid: rel for fid, _, _, rel in files}, runs)
    out = {k: {m: v[m] for m in METRICS} for k, v in overall.items()}
    out["_queries"] = {"n": float(len(files))}
    return out
