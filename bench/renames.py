"""What the Godot 3 rename rule costs on the fast path: D and F without models, rule on vs off, in one run.

python -m bench.renames  -> bench/results/renames.json

Off (``renames=False, legacy_first=False``) is the baseline: the pipeline before the rule. Godot 4 code pays
one flag test; Godot 3 code pays the 168 pattern matches once per chunk.
"""

from __future__ import annotations

import statistics

from bench.common import save, timeit
from pipeline.engine import Engine
from pipeline.evaluate import load_set
from pipeline.settings import Settings


def main(runs: int = 5) -> dict[str, object]:
    engine = Engine.open()
    chunks = load_set()
    on = Settings(run_validator=False, reranker="none")
    off = on.model_copy(update={"renames": False, "legacy_first": False})
    out: dict[str, object] = {"chunks": len(chunks)}
    for group, sel in (("godot3", [c for c in chunks if "godot3" in c.id]),
                       ("other", [c for c in chunks if "godot3" not in c.id])):
        row: dict[str, float] = {"chunks": len(sel)}
        for name, s in (("off", off), ("on", on)):
            row[f"{name}_median_ms"] = statistics.median(timeit(lambda c=c, s=s: engine.run(c.code, s), runs).median_ms
                                                         for c in sel)
        row["ratio_on_over_off"] = row["on_median_ms"] / row["off_median_ms"]
        out[group] = row
    save("renames", out)
    return out


def section(r: dict | None) -> list[str]:
    """The BENCHMARKS.md section of a stored result."""
    if not r:
        return []
    title = f"## The Godot 3 rename rule on the fast path (measured {r['measured_at']}, `python -m bench.renames`)"
    lines = [title, "",
             "D and F without models (validator off, F's reranker off), each dev chunk's median of 5, then the median "
             "over the chunks; off = `renames` and `legacy_first` turned off, in the same run.", "",
             "| chunks | off (baseline) | on | on / off |", "|---|---|---|---|"]
    for group, label in (("godot3", "Godot 3"), ("other", "all others")):
        g = r[group]
        lines.append(f"| {label} ({g['chunks']:.0f}) | {g['off_median_ms']:.0f} ms | {g['on_median_ms']:.0f} ms | "
                     f"{g['ratio_on_over_off']:.2f}× |")
    return [*lines, ""]


if __name__ == "__main__":
    print(main())
