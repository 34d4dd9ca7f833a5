"""Qwen's evidence lists read the lines that show the chunk's facts, not the whole chunk: D end to end, cold.

`python -m bench.list_prompt [--runs 3]`. Policy "calibrated" asks Qwen for each accepted record's evidence list
after the accept model decided; before that, Qwen reads the chunk. The shipped prompt shows only the lines that
hold the chunk's facts (``evidence.for_lists``, at most LIST_CODE_CHARS); the naive baseline shows the chunk as
the verdict prompt does (``evidence.for_model``, up to 8,000 characters). Each run is a fresh process per mode,
models loaded before the clock, D on an empty verdict cache; the modes are interleaved. Inputs: the reference
chunk, and the five ``fixtures/batch`` scripts pasted as one chunk. The lists are compared across modes.
"""

from __future__ import annotations

import argparse
import statistics

from bench.common import ROOT, run_child, save, spread_s

MODES = ("fact_lines", "whole")
INPUTS = {"reference chunk": [ROOT / "fixtures" / "reference_chunk.gd"],
          "fixtures/batch pasted as one chunk": sorted((ROOT / "fixtures" / "batch").glob("*.gd"))}

CHILD = r"""
import json, sys, tempfile, time
from pathlib import Path
from pipeline.engine import Engine
from pipeline.evidence import for_lists, for_model
from pipeline.models import validator
from pipeline.settings import Settings
from pipeline.stages.validate import VerdictCache
mode, paths = sys.argv[1], sys.argv[2:]
code = "\n".join(Path(p).read_text() for p in paths)
if mode == "whole":  # the naive baseline: the lists' prompt shows the code as the verdict prompt does
    validator._evidence_code = lambda c: f"{for_model(c)[0]}```\n"
engine = Engine.open()
settings = Settings(alternatives=("D",))
with tempfile.TemporaryDirectory() as tmp:
    engine.verdicts = VerdictCache(Path(tmp) / "warm")
    engine.run("func warm():\n\tpass\n", settings)  # the retrieval models loaded before the clock
    engine.validator(settings).prime("func warm():\n\tpass\n", evidence_only=True)  # Qwen, and the constant start
    engine.verdicts = VerdictCache(Path(tmp) / "cold")  # nothing judged, no list, not primed
    t = time.perf_counter()
    d = engine.run(code, settings).alternatives["D"]
    s = time.perf_counter() - t
shown = for_lists(code)[0] if mode == "fact_lines" else for_model(code)[0]
lists = {r.record_id: [e.text for e in r.evidence] for r in d.validation.judged_rows if r.accepted}
print("RESULT " + json.dumps({"s": s, "lines": code.count("\n") + 1, "shown_chars": len(shown),
                              "validate_ms": round(next(st.ms for st in d.stages if st.name == "validate")),
                              "lists": lists}))
"""


def main(runs: int = 3) -> dict:
    rows: dict[str, dict[str, list[dict]]] = {i: {m: [] for m in MODES} for i in INPUTS}
    for n in range(runs):
        for name, paths in INPUTS.items():
            for mode in MODES:
                r = run_child(CHILD, mode, *map(str, paths), env={"TOKENIZERS_PARALLELISM": "false"})
                rows[name][mode].append(r)
                print(f"run {n + 1}/{runs} {name} {mode}: {r['s']:.1f} s, {len(r['lists'])} lists", flush=True)
    out: dict[str, dict] = {}
    for name, by_mode in rows.items():
        first = by_mode["fact_lines"][0]
        summary = {m: {**spread_s(r["s"] for r in rs), "shown_chars": rs[0]["shown_chars"],
                       "validate_s": round(statistics.median(r["validate_ms"] for r in rs) / 1000, 2)}
                   for m, rs in by_mode.items()}
        out[name] = {"lines": first["lines"], "summary": summary, "lists": first["lists"],
                     "ratio": round(summary["whole"]["median_s"] / summary["fact_lines"]["median_s"], 2),
                     "same_lists": all(r["lists"] == first["lists"] for rs in by_mode.values() for r in rs)}
    data = {"runs": runs, "inputs": out}
    save("list_prompt", data)
    return data


def section(data: dict | None) -> list[str]:
    """The BENCHMARKS.md rows of a stored run."""
    if not data:
        return []
    lines = [f"## Qwen's evidence lists read the lines that show the facts (measured {data['measured_at']}, "
             "`python -m bench.list_prompt`)", "",
             f"D end to end from an empty verdict cache, models loaded, policy calibrated. Median of {data['runs']} "
             "fresh processes per mode, interleaved. Naive: the lists' prompt shows the whole chunk (up to 8,000 "
             "characters), as the verdict prompt does; shipped: only the lines that hold the chunk's facts (at most "
             "2,000 characters).", "",
             "| input | mode | code shown (chars) | D end to end (s) | validate stage (s) |", "|---|---|---|---|---|"]
    for name, r in data["inputs"].items():
        for mode, label in (("whole", "naive: the whole chunk"), ("fact_lines", "**shipped: the fact lines**")):
            m = r["summary"][mode]
            lines.append(f"| {name} ({r['lines']} lines) | {label} | {m['shown_chars']:,} | {m['median_s']:.1f} "
                         f"(min {m['min_s']:.1f}, max {m['max_s']:.1f}) | {m['validate_s']:.1f} |")
    lines.append("")
    for name, r in data["inputs"].items():
        same = "the same" if r["same_lists"] else "**not** the same"
        lines.append(f"- {name}: naive / shipped **{r['ratio']:.2f}×**; the {len(r['lists'])} evidence lists are "
                     f"{same} in every run of both modes.")
    return [*lines, ""]


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    print(main(ap.parse_args().runs))
