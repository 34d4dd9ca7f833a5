"""D end to end on the reference chunk from an empty verdict cache: fresh process, and models already loaded.

`python -m bench.cold_start [--runs 3]`. Each run is a new Python process (imports, the KB, MiniLM and Qwen
loaded from disk) that runs D twice on the reference chunk, each time on an empty verdict cache: the first
time as the CLI does (a fresh process: model loads included), the second with every model already in memory
(as the dashboard is after its first run, and as the 27 s baseline of issue 3/4 was measured) and Qwen's KV
cache holding another chunk (runs before 2026-12-08 left this chunk's prompt in it, so they read less). The naive
baseline is measured in the same run: the rule policy ``qwen_and_evidence``, which asks Qwen about each of
the top 8, against the default ``calibrated`` policy, which asks Qwen only for the evidence list of accepts.
``calibrated+classes`` is the same policy with ``Settings.class_accepts`` on: more accepts, more lists.
"""

from __future__ import annotations

import argparse
import json
import statistics

from bench.common import ROOT, run_child, save, spread_s

POLICIES = ("calibrated", "qwen_and_evidence", "calibrated+classes")

CHILD = r"""
import json, sys, tempfile, time
from pathlib import Path
t0 = time.perf_counter()
from pipeline.engine import Engine
from pipeline.settings import Settings
from pipeline.stages.validate import VerdictCache
engine = Engine.open()
opened = time.perf_counter() - t0
code = Path(sys.argv[2]).read_text()
policy, _, classes = sys.argv[1].partition("+")
settings = Settings(alternatives=("D",), accept_policy=policy, class_accepts=bool(classes))
out = {"open_s": opened}
with tempfile.TemporaryDirectory() as tmp:
    for name in ("fresh", "loaded"):
        if name == "loaded":  # Qwen's KV cache holds another chunk, as after a run on something else
            engine.validator(settings).prime("func other():\n\tpass\n", evidence_only=policy == "calibrated")
        engine.verdicts = VerdictCache(Path(tmp) / name)  # empty: nothing judged, no evidence list, not primed
        t = time.perf_counter()
        trace = engine.run(code, settings)  # as the CLI runs it
        d = trace.alternatives["D"]
        out[name] = {"s": time.perf_counter() - t, "stages": {st.name: round(st.ms) for st in d.stages},
                     "accepted": sorted(it.record_id for it in d.final if it.accepted),
                     "qwen_calls": d.validation.judged + sum(1 for r in d.validation.judged_rows
                                                             if r.accepted and r.asked_qwen is False)}
print("RESULT " + json.dumps(out))
"""


def one(policy: str) -> dict:
    ref = ROOT / "fixtures" / "reference_chunk.gd"
    return run_child(CHILD, policy, str(ref), env={"TOKENIZERS_PARALLELISM": "false"})


def main(runs: int = 3) -> dict:
    samples: dict[str, list[dict]] = {p: [] for p in POLICIES}
    for n in range(runs):  # interleaved, so drifting load touches both policies alike
        for policy in POLICIES:
            samples[policy].append(one(policy))
            print(f"run {n + 1}/{runs} {policy}: fresh {samples[policy][-1]['fresh']['s']:.1f} s, "
                  f"loaded {samples[policy][-1]['loaded']['s']:.1f} s", flush=True)
    summary = {}
    for policy, rows in samples.items():
        summary[policy] = {
            mode: {**spread_s(r[mode]["s"] for r in rows),
                   "stages_ms": rows[0][mode]["stages"], "qwen_calls": rows[0][mode]["qwen_calls"],
                   "accepted": rows[0][mode]["accepted"]}
            for mode in ("fresh", "loaded")}
        summary[policy]["open_s"] = round(statistics.median(r["open_s"] for r in rows), 2)
    for mode in ("fresh", "loaded"):
        summary[f"ratio_{mode}"] = round(summary["qwen_and_evidence"][mode]["median_s"]
                                         / summary["calibrated"][mode]["median_s"], 2)
    data = {"runs": runs, "summary": summary, "kv_other": True}
    save("cold_start", data)
    return data


def section(data: dict | None) -> list[str]:
    """The BENCHMARKS.md rows of a stored run."""
    if not data:
        return []
    s = data["summary"]
    lines = [f"## D cold on the reference chunk (measured {data['measured_at']}, `python -m bench.cold_start`)", "",
             "Empty verdict cache each time; median of "
             f"{data['runs']} fresh processes, the policies interleaved in one run"
             " (`calibrated+classes`: `Settings.class_accepts` on). Models loaded: in memory, with Qwen's KV cache "
             "holding another chunk" + ("" if data.get("kv_other", False) else " (this run: still holding this chunk's "
                                        "prompt from the fresh run, so Qwen read less)") + ".", "",
             "| policy | fresh process (s) | models loaded (s) | Qwen calls | per stage, models loaded (ms) |",
             "|---|---|---|---|---|"]
    for policy in (p for p in POLICIES if p in s):  # runs stored before a policy was added lack it
        p = s[policy]
        stages = ", ".join(f"{k} {v}" for k, v in p["loaded"]["stages_ms"].items())
        lines.append(f"| {policy} | {p['fresh']['median_s']:.1f} (min {p['fresh']['min_s']:.1f}, max "
                     f"{p['fresh']['max_s']:.1f}) | {p['loaded']['median_s']:.1f} (min {p['loaded']['min_s']:.1f}, "
                     f"max {p['loaded']['max_s']:.1f}) | {p['loaded']['qwen_calls']} | {stages} |")
    lines += ["", f"Ratio naive / calibrated: **{s['ratio_fresh']:.1f}×** in a fresh process, "
              f"**{s['ratio_loaded']:.1f}×** with the models loaded.", ""]
    return lines


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    print(json.dumps(main(ap.parse_args().runs)["summary"], indent=1))
