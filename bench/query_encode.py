"""The chunk's embedding: MiniLM on ONNX Runtime (the default) against sentence-transformers, in one run.

`python -m bench.query_encode [--runs 3]`. Two figures per route: the first vector of a fresh process (imports
and model load included, median of ``runs`` processes, interleaved), and one query in a warm process (median
over the 33 dev chunks, each encoded ``runs`` times). sentence-transformers is the baseline the ratios use.
"""

from __future__ import annotations

import argparse
import json
import statistics

from bench.common import run_child, save

ROUTES = ("onnxruntime", "sentence-transformers")

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from pipeline.evaluate import load_set
from pipeline.models.embedder import SentenceTransformerEmbedder
from pipeline.stages.dense import QUERY_CHARS
emb = SentenceTransformerEmbedder()
onnx = sys.argv[1] == "onnxruntime"
encode = emb.encode_query if onnx else (lambda texts: emb._encode(texts, None, query=True))
encode(["func _ready():\n\tpass"])
first = time.perf_counter() - t0
assert (emb.runtime == "onnxruntime") == onnx, emb.runtime
codes = [c.code[:QUERY_CHARS] for c in load_set()]
samples = []
for _ in range(int(sys.argv[2])):
    for code in codes:
        t = time.perf_counter()
        encode([code])
        samples.append((time.perf_counter() - t) * 1000)
print("RESULT " + json.dumps({"first_s": first, "query_ms": samples, "torch": "torch" in sys.modules}))
"""


def one(route: str, runs: int) -> dict:
    return run_child(CHILD, route, str(runs))


def main(runs: int = 3) -> dict:
    rows: dict[str, list[dict]] = {r: [] for r in ROUTES}
    for _ in range(runs):  # interleaved, so drifting load touches both routes alike
        for route in ROUTES:
            rows[route].append(one(route, runs))
    summary: dict[str, dict] = {}
    for route, rs in rows.items():
        firsts = [r["first_s"] for r in rs]
        queries = [ms for r in rs for ms in r["query_ms"]]
        summary[route] = {"first_median_s": round(statistics.median(firsts), 2), "first_min_s": round(min(firsts), 2),
                          "first_max_s": round(max(firsts), 2), "query_median_ms": round(statistics.median(queries), 1),
                          "query_max_ms": round(max(queries), 1), "queries": len(queries),
                          "imports_torch": any(r["torch"] for r in rs)}
    base, fast = summary["sentence-transformers"], summary["onnxruntime"]
    summary["ratio_first"] = round(base["first_median_s"] / fast["first_median_s"], 1)
    summary["ratio_query"] = round(base["query_median_ms"] / fast["query_median_ms"], 1)
    data = {"runs": runs, "summary": summary}
    save("query_encode", data)
    return data


def section(data: dict | None) -> list[str]:
    """The BENCHMARKS.md rows of a stored run."""
    if not data:
        return []
    s = data["summary"]
    lines = [f"## The chunk's embedding: ONNX Runtime vs sentence-transformers (measured {data['measured_at']}, "
             "`python -m bench.query_encode`)", "",
             f"all-MiniLM-L6-v2, one chunk per call; first vector: median of {data['runs']} fresh processes "
             "(imports and load included), the routes interleaved in one run; warm: median over the 33 dev "
             "chunks.", "",
             "| route | first vector, fresh process (s) | one query, warm (ms) | imports torch |", "|---|---|---|---|"]
    for route in ROUTES:
        r = s[route]
        lines.append(f"| {route} | {r['first_median_s']:.2f} (min {r['first_min_s']:.2f}, max {r['first_max_s']:.2f})"
                     f" | {r['query_median_ms']:.1f} (max {r['query_max_ms']:.1f}, n={r['queries']}) | "
                     f"{'yes' if r['imports_torch'] else 'no'} |")
    lines += ["", f"Ratio sentence-transformers / ONNX Runtime: **{s['ratio_first']:.1f}×** to the first vector, "
              f"**{s['ratio_query']:.1f}×** per warm query.", ""]
    return lines


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    print(json.dumps(main(ap.parse_args().runs)["summary"], indent=1))
