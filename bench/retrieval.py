"""KB build, BM25 (vectorised vs rank-bm25 and bm25s), embedding query, index build, D end to end.

python -m bench.retrieval                -> bench/results/retrieval.json
python -m bench.retrieval --only bm25s   -> only its "bm25s" section (ours vs bm25s), measured now
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.common import RESULTS, machine, peak_rss_mib, save, timeit
from pipeline import config
from pipeline.bm25_index import BM25Index
from pipeline.engine import Engine
from pipeline.evaluate import load_set
from pipeline.kb.build import build
from pipeline.kb.views import bm25_terms
from pipeline.settings import Settings
from pipeline.stages.query import QueryAnalysis
from pipeline.trace import ChunkInfo


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
    out["bm25s"] = bm25s_peer(engine.bm25, corpus, queries)
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


def engine_chunk(engine: Engine, code: str) -> ChunkInfo:
    from pipeline.chunk import prepare_chunk

    return prepare_chunk(code)


def _top(docs: Sequence[int], scores: Sequence[float]) -> list[tuple[int, float]]:
    return [(int(d), float(s)) for d, s in zip(docs, scores, strict=True) if s > 0]


def _same_ranking(ours: list[tuple[int, float]], peer: list[tuple[int, float]], scale: float) -> str:
    """"identical", "ties" (same scores rank by rank, tied documents in another order) or "different"."""
    if [d for d, _ in ours] == [d for d, _ in peer]:
        return "identical"
    if len(ours) == len(peer) and all(abs(a - b * scale) <= 1e-9 * max(1.0, a)
                                      for (_, a), (_, b) in zip(ours, peer, strict=True)):
        return "ties"
    return "different"


def bm25s_peer(index: BM25Index, corpus: list[list[str]], queries: list[list[str]], k: int = 50) -> dict[str, object]:
    """Our vectorised BM25 against bm25s on the same tokens, queries and k, in the same run.

    bm25s' ``robertson`` variant is rank-bm25's BM25Okapi but for two things: its term-frequency part
    leaves out the constant (k1 + 1) (scores scale, ranks do not change), and it clips a negative idf
    (a term in more than half the records) to 0 where BM25Okapi puts epsilon * mean idf. float64, so
    ranks are not decided by float32 rounding.
    """
    import bm25s

    t0 = time.perf_counter()
    peer = bm25s.BM25(k1=index.k1, b=index.b, method="robertson", dtype="float64")
    peer.index(corpus, show_progress=False)
    build_s = time.perf_counter() - t0
    scale = index.k1 + 1
    verdicts = []
    for q in queries:
        ours = [(h.doc, h.score) for h in index.search(q, k)]
        docs, scores = peer.retrieve([q], k=k, show_progress=False, n_threads=0)
        verdicts.append(_same_ranking(ours, _top(docs[0], scores[0]), scale))
    n_docs = index.n_docs
    df = np.diff(index.matrix.indptr)
    negative_idf = sorted({t for q in queries for t in q if t in index.term_ids and df[index.term_ids[t]] > n_docs / 2})
    ours_ms = [timeit(lambda q=q: index.search(q, k), runs=7).median_ms for q in queries]
    # search() also breaks ties by record and lists each hit's per-term contributions (the UI explains
    # them); scores() is the part bm25s does too: one score per record.
    scores_ms = [timeit(lambda q=q: index.scores(q), runs=7).median_ms for q in queries]
    peer_ms = [timeit(lambda q=q: peer.retrieve([q], k=k, show_progress=False, n_threads=0), runs=7).median_ms
               for q in queries]
    out: dict[str, object] = {
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": machine()["cpu"],
        "version": bm25s.__version__, "method": "robertson", "dtype": "float64", "backend": "numpy", "k": k,
        "queries": len(queries), "records": n_docs, "build_s": build_s,
        "ours_median_ms": statistics.median(ours_ms), "ours_max_ms": max(ours_ms),
        "ours_scores_only_median_ms": statistics.median(scores_ms),
        "bm25s_median_ms": statistics.median(peer_ms), "bm25s_max_ms": max(peer_ms),
        # > 1: ours is slower than bm25s
        "ratio_ours_over_bm25s": statistics.median(ours_ms) / statistics.median(peer_ms),
        "ratio_ours_scores_over_bm25s": statistics.median(scores_ms) / statistics.median(peer_ms),
        "identical_topk": verdicts.count("identical"), "tied_reorders": verdicts.count("ties"),
        "different_topk": verdicts.count("different"), "query_terms_with_negative_idf": negative_idf,
    }
    return out


def only_bm25s() -> dict[str, object]:
    """Measure the bm25s section alone and store it in retrieval.json, keeping the other sections."""
    engine = Engine.open()
    corpus = [bm25_terms(r) for r in engine.store.records]
    queries = [list(dict.fromkeys(QueryAnalysis().run(engine_chunk(engine, c.code)).terms)) for c in load_set()]
    section = bm25s_peer(engine.bm25, corpus, queries)
    path = RESULTS / "retrieval.json"
    data = json.loads(path.read_text()) if path.is_file() else {"machine": machine()}
    data["bm25s"] = section
    path.write_text(json.dumps(data, indent=1) + "\n")
    return section


if __name__ == "__main__":
    result = only_bm25s() if sys.argv[1:] == ["--only", "bm25s"] else main()
    print(json.dumps(result, indent=1, default=str))
