"""A long file's fast phase: D's MiniLM and F's query map share the transformer's work, in one run.

`python -m bench.long_chunk [--runs 3]`. A long chunk is searched function by function (pipeline/stages/parts.py),
so both legs used to run MiniLM's transformer on every function, once for D and once for F. The shipped route
keeps each text's pooled vector (pipeline/models/onnx_route.py), so F reads D's. The naive baseline clears that
cache before each alternative, so each encodes every function itself. Each mode runs in its own fresh process
with the models loaded first; the modes are interleaved, so drifting load touches both alike. The input is the
dev set's chunks, renamed and repeated to 5,000 lines (the fast phase cuts it at 64 KiB, as a paste would be).
"""

from __future__ import annotations

import argparse
import statistics

from bench.common import run_child, save, spread_s

MODES = ("shared", "naive")

CHILD = r"""
import json, sys, time
from pipeline.engine import Engine
from pipeline.evaluate import load_set
from pipeline.models import onnx_route
from pipeline.settings import Settings

def clear():
    for cache in onnx_route._SHARED.values():
        cache._data.clear()

codes, out, n = [c.code for c in load_set()], [], 0
while sum(x.count("\n") for x in out) < 5000:
    for c in codes:
        out.append(c.replace("func ", f"func v{n}_") + "\n")
        n += 1
text = "".join(out)
eng = Engine.open()
s = Settings(run_validator=False, reranker="none")
eng.prepare("func warm():\n\tpass\n", s)  # the models and indexes are loaded before the clock starts
if sys.argv[1] == "naive":
    fast = eng._fast
    def each_alternative_encodes(prepared, name, progress):
        clear()
        return fast(prepared, name, progress)
    eng._fast = each_alternative_encodes
samples = []
for _ in range(int(sys.argv[2])):
    clear()
    t = time.perf_counter()
    p = eng.prepare(text, s)
    samples.append(time.perf_counter() - t)
alts = {a: p.trace.alternatives[a] for a in ("D", "F")}
emb = {a: t.embedding.ms / 1000 for a, t in alts.items()}
ranked = {a: [[r.record_id, round(r.similarity, 6)] for r in t.embedding.rows] + [i.record_id for i in t.final]
          for a, t in alts.items()}
print("RESULT " + json.dumps({"fast_s": samples, "functions": len(p.pieces or []), "lines": p.chunk.n_lines,
                              "bytes": p.chunk.n_bytes, "embedding_s": emb, "ranked": ranked}))
"""


def main(runs: int = 3) -> dict:
    rows: dict[str, list[dict]] = {m: [] for m in MODES}
    for _ in range(runs):
        for mode in MODES:
            rows[mode].append(run_child(CHILD, mode, "1"))
    summary: dict[str, dict] = {}
    for mode, rs in rows.items():
        summary[mode] = {**spread_s(r["fast_s"][0] for r in rs),
                         "embedding_s": {a: round(statistics.median(r["embedding_s"][a] for r in rs), 2)
                                         for a in ("D", "F")}}
    first = rows["shared"][0]
    data = {"runs": runs, "functions": first["functions"], "lines": first["lines"], "bytes": first["bytes"],
            "summary": summary,
            "ratio": round(summary["naive"]["median_s"] / summary["shared"]["median_s"], 2),
            # the embedding legs' hits and similarities and the final lists, in every run of both modes
            "same_rankings": all(r["ranked"] == first["ranked"] for rs in rows.values() for r in rs)}
    save("long_chunk", data)
    return data


def section(data: dict | None) -> list[str]:
    """The BENCHMARKS.md rows of a stored run."""
    if not data:
        return []
    s = data["summary"]
    lines = [f"## A long file's fast phase (measured {data['measured_at']}, `python -m bench.long_chunk`)", "",
             f"D and F without the validator on a {data['lines']:,}-line, {data['bytes']:,}-byte chunk (the dev set's "
             f"chunks repeated, cut at 64 KiB), searched as {data['functions']} functions. Median of {data['runs']} "
             "fresh processes per mode, interleaved, models loaded before the clock. Naive: each alternative runs "
             "MiniLM's transformer on every function itself.", "",
             "| mode | fast phase (s) | D's embedding leg (s) | F's embedding leg (s) |", "|---|---|---|---|"]
    for mode, label in (("naive", "naive: D and F each encode every function"),
                        ("shared", "**shipped: F reads D's pooled vectors**")):
        r = s[mode]
        lines.append(f"| {label} | {r['median_s']:.2f} (min {r['min_s']:.2f}, max {r['max_s']:.2f}) | "
                     f"{r['embedding_s']['D']:.2f} | {r['embedding_s']['F']:.2f} |")
    same = ("the same in every run of both modes: the cached vector is the one the transformer gave"
            if data.get("same_rankings") else "**not** the same in every run: look before trusting the cache")
    lines += ["", f"Naive / shipped: **{data['ratio']:.2f}×**. The embedding legs' hits and similarities and D's and "
              f"F's final lists are {same}.", ""]
    return lines


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    print(main(ap.parse_args().runs))
