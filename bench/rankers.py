"""Every ranker on the same chunks, and what F's reranking of 30 candidates costs, in one run.

python -m bench.rankers [--with-qwen] [--with-cross-encoder] [--with-pmi]  -> bench/results/rankers.json

Quality: page-level nDCG@10 / MRR / Recall@50 on the dev set's test half (nothing was tuned on it), its tune
half (for reference), and the training data's held-out test pages (crops of code no model saw, their source
records hidden). Latency: reranking the reference chunk's union, median of 3, each reranker in the same run.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.common import save
from pipeline.engine import Engine
from pipeline.evaluate import evaluate_variants, load_set, ranking_variants
from pipeline.settings import Settings
from pipeline.stages.rerank import Prior, Rerank
from pipeline.train.heldout import evaluate_heldout, evaluate_long

REF = Path(__file__).resolve().parents[1] / "fixtures" / "reference_chunk.gd"


def _latency(engine: Engine, reranker: str, runs: int = 3, top_n: int = 30) -> dict[str, float] | None:
    """Milliseconds to rerank the reference chunk's F union (cold caches for the text rerankers)."""
    s = Settings(alternatives=("F",), run_validator=False, reranker=reranker, rerank_top_n=top_n)
    prepared = engine.prepare(REF.read_text(), s)
    try:
        model = engine.reranker(s)
    except Exception as exc:
        return {"error": str(exc)}
    samples = []
    for _ in range(runs):
        if hasattr(model, "_cache"):  # Qwen caches scores on disk: measure a cold scoring
            import diskcache

            model._cache = diskcache.Cache(tempfile.mkdtemp())
        prior = Prior(s.f_prior_weight, s.alpha, s.rrf_k) if reranker == "learned" else None
        stage = Rerank(engine.store, model, top_n, engine.features, prior)
        t0 = time.perf_counter()
        result = stage.run(prepared.chunk, prepared.unions["F"], facts=engine.facts(prepared))
        samples.append((time.perf_counter() - t0) * 1000)
    return {"median_ms": statistics.median(samples), "scored": float(result.scored), "runs": float(runs)}


def main(with_qwen: bool = False, with_cross_encoder: bool = False, with_pmi: bool = False) -> dict[str, object]:
    engine = Engine.open()
    variants = ranking_variants(with_qwen, with_cross_encoder, with_pmi)
    out: dict[str, object] = {"variants": list(variants)}
    for half in ("test", "tune"):
        chunks = load_set(split=half)
        out[f"dev_{half}"] = evaluate_variants(engine, chunks, variants)
        out[f"dev_{half}_chunks"] = sum(1 for c in chunks if c.relevant)
    held = evaluate_heldout(engine)
    out["heldout_queries"] = held.pop("_queries")["n"]
    out["heldout"] = held
    long = evaluate_long(engine)
    out["long_files"] = long.pop("_queries")["n"]
    out["long"] = long
    latency = {"learned": _latency(engine, "learned")}
    if with_cross_encoder:
        latency["bge"] = _latency(engine, "bge")
    if with_pmi:
        latency["qwen-pmi"] = _latency(engine, "qwen-pmi")
    latency["qwen"] = _latency(engine, "qwen", runs=1)  # the baseline, in the same run (~1 min)
    out["rerank_latency"] = latency
    save("rankers", out)
    return out


if __name__ == "__main__":
    main("--with-qwen" in sys.argv, "--with-cross-encoder" in sys.argv, "--with-pmi" in sys.argv)
