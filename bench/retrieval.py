"""KB build, BM25 (vectorised vs rank-bm25), embedding query, index build, D end to end.

python -m bench.retrieval   -> bench/results/retrieval.json
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import peak_rss_mib, save, timeit
from pipeline import config
from pipeline.bm25_index import BM25Index
from pipeline.engine import Engine
from pipeline.evaluate import load_set
from pipeline.kb.build import build
from pipeline.kb.views import bm25_terms
from pipeline.settings import Settings
from pipeline.stages.query import QueryAnalysis


def main(runs: int = 3) -> dict[str, object]:
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        out["kb_build"] = timeit(lambda: build(config.docs_root(), Path(tmp)), runs=runs, warmup=0)

    engine = Engine.open()
    emb, vec = engine.dense(None)
    chunks = load_set()
    queries = [list(dict.fromkeys(QueryAnalysis().run(engine_chunk(engine, c.code)).terms)) for c in chunks]
    n = len(engine.store.records)

    t0 = time.perf_counter()
    corpus = [bm25_terms(r) for r in engine.store.records]
    analyze_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    BM25Index.build(corpus)
    index_build = {"records": n, "analyze_s": analyze_s, "bm25_build_s": time.perf_counter() - t0}

    from rank_bm25 import BM25Okapi

    t0 = time.perf_counter()
    ref = BM25Okapi(corpus)
    out["index_build"] = {**index_build, "rank_bm25_build_s": time.perf_counter() - t0}
    fast = [timeit(lambda q=q: engine.bm25.search(q, 50), runs=5).median_ms for q in queries]
    slow = [timeit(lambda q=q: np.argsort(-ref.get_scores(q))[:50], runs=2, warmup=0).median_ms
            for q in queries[:8]]
    out["bm25_query"] = {"vectorised_median_ms": statistics.median(fast), "vectorised_max_ms": max(fast),
                         "rank_bm25_median_ms": statistics.median(slow),
                         "speedup": statistics.median(slow) / statistics.median(fast), "queries": len(queries),
                         "records": n}
    texts = [c.code for c in chunks]
    enc = [timeit(lambda t=t: emb.encode([t[:2000]]), runs=3).median_ms for t in texts[:10]]
    q = emb.encode([texts[0]])[0]
    out["embedding_query"] = {"encode_median_ms": statistics.median(enc),
                              "search_median_ms": timeit(lambda: vec.search(q, 50), runs=20).median_ms,
                              "model": getattr(emb, "title", vec.model), "dim": int(vec.matrix.shape[1])}
    s = Settings(alternatives=("D",), run_validator=False)
    e2e = [timeit(lambda c=c: engine.run(c.code, s), runs=3).median_ms for c in chunks]
    out["d_end_to_end_no_validator"] = {"median_ms": statistics.median(e2e), "max_ms": max(e2e),
                                        "chunks": len(chunks)}
    out["peak_rss_mib"] = peak_rss_mib()
    save("retrieval", out)
    return out


def engine_chunk(engine: Engine, code: str):
    from pipeline.chunk import prepare_chunk

    return prepare_chunk(code)


if __name__ == "__main__":
    import json

    print(json.dumps(main(), indent=1, default=str))
