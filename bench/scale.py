"""Scale curves at 10k, 100k and 1M records, made by recombining the real KB's records.

A synthetic record = all terms of one real record + the first half of another's (seeded),
and its vector = the normalised sum of theirs. Measures BM25 query latency (against
rank-bm25 in the same run where it fits in time), embedding top-k latency, index build
time and memory. python -m bench.scale [--sizes 10000,100000,1000000]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

import numpy as np

from bench.common import save, timeit
from pipeline.bm25_index import BM25Index
from pipeline.chunk import prepare_chunk
from pipeline.engine import Engine
from pipeline.evaluate import load_set
from pipeline.kb.views import bm25_terms
from pipeline.stages.query import QueryAnalysis

RANK_BM25_MAX = 100_000  # rank-bm25 keeps a dict per document: beyond this it is minutes and GBs


def synth_ids(base: list[np.ndarray], n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    a = rng.integers(0, len(base), n)
    b = rng.integers(0, len(base), n)
    parts = []
    lens = np.empty(n, dtype=np.int64)
    for i in range(n):
        x, y = base[a[i]], base[b[i]]
        doc = np.concatenate((x, y[: len(y) // 2]))
        parts.append(doc)
        lens[i] = len(doc)
    return np.concatenate(parts).astype(np.int32), lens


def rss_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


def main(sizes: tuple[int, ...] = (10_000, 100_000, 1_000_000)) -> dict[str, object]:
    engine = Engine.open()
    emb, vec = engine.dense(None)
    corpus = [bm25_terms(r) for r in engine.store.records]
    vocab: dict[str, int] = {}
    base = [np.array([vocab.setdefault(t, len(vocab)) for t in doc], dtype=np.int32) for doc in corpus]
    vocab_list = list(vocab)
    queries = [list(dict.fromkeys(QueryAnalysis().run(prepare_chunk(c.code)).terms)) for c in load_set()][:12]
    qvecs = emb.encode([c.code[:2000] for c in load_set()][:12])
    rng = np.random.default_rng(7)
    rows = []
    for n in sizes:
        gc.collect()
        m0 = rss_mib()
        t0 = time.perf_counter()
        flat, lens = synth_ids(base, n, rng)
        gen_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        index = BM25Index.from_ids(flat, lens, vocab_list)
        build_s = time.perf_counter() - t0
        mat_mib = (index.matrix.data.nbytes + index.matrix.indices.nbytes + index.matrix.indptr.nbytes) / 2**20
        m1 = rss_mib()
        fast = statistics.median(timeit(lambda q=q, ix=index: ix.search(q, 50), runs=5).median_ms for q in queries)
        row: dict[str, object] = {"records": n, "tokens": int(lens.sum()), "generate_s": gen_s,
                                  "bm25_build_s": build_s, "bm25_matrix_mib": mat_mib,
                                  "rss_growth_mib": m1 - m0, "bm25_query_ms": fast}
        if n <= RANK_BM25_MAX:
            from rank_bm25 import BM25Okapi

            docs = [[vocab_list[i] for i in flat[s:e]] for s, e in zip(np.r_[0, np.cumsum(lens)[:-1]],
                                                                            np.cumsum(lens), strict=True)]
            t0 = time.perf_counter()
            ref = BM25Okapi(docs)
            row["rank_bm25_build_s"] = time.perf_counter() - t0
            slow = statistics.median(timeit(lambda q=q, r=ref: r.get_scores(q), runs=1, warmup=0).median_ms
                                     for q in queries[:4])
            row["rank_bm25_query_ms"] = slow
            row["speedup"] = slow / fast
            del ref, docs
        del index, flat
        gc.collect()
        # Vectors: recombine real ones, normalised, then time a cosine top-50.
        a = rng.integers(0, vec.matrix.shape[0], n)
        b = rng.integers(0, vec.matrix.shape[0], n)
        mat = vec.matrix[a] + 0.5 * vec.matrix[b]
        mat /= np.linalg.norm(mat, axis=1, keepdims=True)
        from pipeline.kb.index import VectorIndex

        vi = VectorIndex("synthetic", mat.astype(np.float32))
        row["embedding_topk_ms"] = statistics.median(timeit(lambda q=q, v=vi: v.search(q, 50), runs=5).median_ms
                                                     for q in qvecs[:6])
        row["vectors_mib"] = vi.matrix.nbytes / 2**20
        del vi, mat
        rows.append(row)
        print(row, flush=True)
    md = ["| records | BM25 build | BM25 matrix | BM25 query (vectorised) | rank-bm25 query | speed-up | "
          "embedding top-50 | vectors |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        rb = f"{r['rank_bm25_query_ms']:,.0f} ms" if "rank_bm25_query_ms" in r else "not run (too slow/large)"
        sp = f"{r['speedup']:.0f}×" if "speedup" in r else "—"
        md.append(f"| {r['records']:,} | {r['bm25_build_s']:.1f} s | {r['bm25_matrix_mib']:,.0f} MiB | "
                  f"{r['bm25_query_ms']:.1f} ms | {rb} | {sp} | {r['embedding_topk_ms']:.1f} ms | "
                  f"{r['vectors_mib']:,.0f} MiB |")
    out = {"rows": rows, "markdown": "\n".join(md)}
    save("scale", out)
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    main(tuple(int(x) for x in ap.parse_args().sizes.split(",")))
