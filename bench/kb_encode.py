"""Encoding KB records (the index step's cost): three routes on the same records, in one run.

`python -m bench.kb_encode [--runs 3] [--records 384]`. A fixed sample of KB records (seed 0), encoded by:
- naive: the code before eef8ae4, sentence-transformers over batches of 64 in KB order (each pads to its longest);
- torch, sorted: sentence-transformers, longest first over the whole call;
- onnx, sorted: the model's ONNX export, longest first, sub-batches of 8 (the default when the export exists).
Records a second, median of ``runs`` passes, the routes interleaved; the whole KB's time is projected from it.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

import numpy as np

from bench.common import save, spread_s

ROUTES = ("naive", "torch, sorted", "onnx, sorted")


def main(runs: int = 3, records: int = 384) -> dict:
    from pipeline.kb.index import embed_text
    from pipeline.kb.store import open_kb
    from pipeline.models.embedder import SentenceTransformerEmbedder

    store = open_kb()
    texts = [embed_text(r) for r in store.records]
    picks = sorted(random.Random(0).sample(range(len(texts)), records))  # KB order, as the index met them
    sample = [texts[i] for i in picks]
    emb = SentenceTransformerEmbedder()
    assert emb.document_route() is not None, "no ONNX export: run `python -m pipeline models prepare` first"
    emb.load()
    model = emb._model

    def naive(batch: list[str]) -> np.ndarray:
        return np.vstack([model.encode(batch[s : s + 64], batch_size=64, normalize_embeddings=True,
                                       show_progress_bar=False) for s in range(0, len(batch), 64)])

    fns = {"naive": naive, "torch, sorted": lambda b: emb._encode(b, None, query=False), "onnx, sorted": emb.encode}
    for fn in fns.values():  # warm-up: load, first-call allocations
        fn(sample[:16])
    secs: dict[str, list[float]] = {r: [] for r in ROUTES}
    vecs: dict[str, np.ndarray] = {}
    for _ in range(runs):
        for route in ROUTES:
            t = time.perf_counter()
            vecs[route] = fns[route](sample)
            secs[route].append(time.perf_counter() - t)
    summary = {}
    for route in ROUTES:
        med = statistics.median(secs[route])
        summary[route] = {**spread_s(secs[route]), "records_per_s": round(records / med, 1),
                          "kb_minutes": round(len(texts) / (records / med) / 60, 1),
                          "max_abs_diff": float(np.abs(vecs[route] - vecs["naive"]).max())}
    for route in ROUTES[1:]:
        summary[route]["speedup"] = round(summary["naive"]["median_s"] / summary[route]["median_s"], 2)
    data = {"runs": runs, "records": records, "kb_records": len(texts), "summary": summary}
    save("kb_encode", data)
    return data


def section(data: dict | None) -> list[str]:
    """The BENCHMARKS.md rows of a stored run."""
    if not data:
        return []
    s = data["summary"]
    lines = [f"## Encoding the KB: padding and runtime (measured {data['measured_at']}, `python -m bench.kb_encode`)",
             "", f"all-MiniLM-L6-v2 on {data['records']} KB records drawn with seed 0, the routes interleaved, "
             f"median of {data['runs']} passes. The whole KB ({data['kb_records']:,} records) is projected from "
             "the rate. *naive* is the code before eef8ae4: batches of 64 in KB order, each padded to its longest.",
             "", "| route | seconds (min, max) | records/s | whole KB, projected | × naive | max |Δ| vs naive |",
             "|---|---|---|---|---|---|"]
    for route in ROUTES:
        r = s[route]
        lines.append(f"| {route} | {r['median_s']:.1f} ({r['min_s']:.1f}, {r['max_s']:.1f}) | "
                     f"{r['records_per_s']:.1f} | {r['kb_minutes']:.0f} min | "
                     f"{r.get('speedup', 1.0):.2f}× | {r['max_abs_diff']:.1e} |")
    lines.append("")
    return lines


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--records", type=int, default=384)
    a = ap.parse_args()
    print(json.dumps(main(a.runs, a.records)["summary"], indent=1))
