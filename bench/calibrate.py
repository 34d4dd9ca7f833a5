"""Calibrate the validator's threshold (and evidence prior) on the dev set.

For each labelled chunk: D's top-k (no validator), then the judge's margin for each
candidate (verdict cache makes re-runs cheap). Positives are candidates whose page is
labelled relevant; negatives are the rest. Grid-search threshold × prior weight for F1.
Usage: python -m bench.calibrate [--model qwen-1.5b] [--top-k 8]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time

from bench.common import save
from pipeline.engine import Engine
from pipeline.evaluate import load_set
from pipeline.models.hub import ModelHub
from pipeline.models.validator import QwenValidator
from pipeline.settings import Settings


class MarginsOnly(ModelHub):
    """Calibration needs the yes/no margins only: no evidence generation."""

    def validator(self, s: Settings) -> QwenValidator:
        v = super().validator(s)
        v.generate_evidence = False
        return v


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen-1.5b")
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--limit", type=int, default=0)
    args = ap.parse_args()
    engine = Engine.open(hub=MarginsOnly())
    engine.dense(None)
    chunks = load_set()
    if args.limit:
        chunks = chunks[: args.limit]
    # Threshold far below any margin: every candidate is judged, margins are cached and re-decided below.
    s = Settings(alternatives=("D",), validator_model=args.model, validator_top_k=args.top_k,
                 margin_threshold=-100.0, timeout_s=120)
    rows = []
    t0 = time.time()
    for n, c in enumerate(chunks, start=1):
        trace = engine.run(c.code, s)
        val = trace.alternatives["D"].validation
        for r in val.rows if val else []:
            if r.margin is None:
                continue
            rows.append({"chunk": c.id, "record_id": r.record_id, "margin": r.margin, "coverage": r.coverage,
                         "n_det": len(r.facts), "conflicts": len(r.conflicts), "positive": r.doc_path in c.relevant,
                         "must_not": r.doc_path in c.must_not_accept, "ms": r.ms, "cached": r.cached})
        print(f"{n}/{len(chunks)} {c.id} {time.time() - t0:.0f}s", file=sys.stderr)
    best = None
    for thr, w in itertools.product([x / 10 for x in range(-10, 41)], [0.0, 1.0, 2.0, 3.0, 4.0]):
        tp = fp = fn = bad = 0
        for r in rows:
            yes = r["margin"] + w * (r["coverage"] - 0.5) >= thr and r["n_det"] > 0
            tp += yes and r["positive"]
            fp += yes and not r["positive"]
            fn += (not yes) and r["positive"]
            bad += yes and r["must_not"]
        p = tp / (tp + fp) if tp + fp else 0.0
        rc = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * p * rc / (p + rc) if p + rc else 0.0
        cand = (f1, -bad, thr, w, p, rc)
        if best is None or cand > best:
            best = cand
    assert best is not None
    f1, negbad, thr, w, p, rc = best
    print(f"best threshold {thr} prior weight {w}: F1 {f1:.3f} precision {p:.3f} recall {rc:.3f} "
          f"must-not-accept violations {-negbad}")
    save(f"calibration-{args.model}", {"rows": rows, "best": {"threshold": thr, "prior_weight": w, "f1": f1,
                                                              "precision": p, "recall": rc,
                                                              "must_not_violations": -negbad}})


if __name__ == "__main__":
    main()
