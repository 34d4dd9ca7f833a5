"""The tables of a trace, as pandas frames: what the dashboard's panels and the HTML report both show.

Pure (no Streamlit): every function reads trace rows by attribute and returns a
frame or a small typed value, so the panels add only formatting and the report
(pipeline/report.py) renders the same columns offline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from pipeline.kb.migrating import SOURCE as RENAMES_SOURCE
from pipeline.settings import AltName
from pipeline.trace import (
    PIPELINE_ORDER,
    AlternativeTrace,
    BM25Trace,
    EmbeddingTrace,
    FinalItem,
    FusionTrace,
    QueryTrace,
    RerankTrace,
    Trace,
    UnionTrace,
    ValidateRow,
    ValidateTrace,
)
from pipeline.ui.charts import Shift

VERDICT_WORDS: dict[str, str] = {"yes": "yes", "no": "no", "not_run": "not run", "error": "error",
                                 "timeout": "timeout", "unparsable": "unparsable", "cancelled": "cancelled"}
DECISIONS = {True: "accepted", False: "rejected", None: "not judged"}
NOT_ASKED = "not asked"  # the accept model decided without a verdict: a blank read as missing, "not run" as failed
FINAL_COLUMNS = ["decision", "rank", "record", "source", "kind", "Qwen", "score", "p", "evidence", "why", "doc_path",
                 "record_id"]


# --- panels 1-4 --------------------------------------------------------------------------------
def query_frame(q: QueryTrace) -> pd.DataFrame:
    return pd.DataFrame([{"term": r.term, "as_written": r.as_written, "kind": r.kind, "count": r.count}
                         for r in q.rows], columns=["term", "as_written", "kind", "count"])


def bm25_frame(stage: BM25Trace) -> pd.DataFrame:
    return pd.DataFrame([{"rank": r.rank, "record": r.name, "kind": r.kind, "score": r.score,
                          "matched terms": ", ".join(f"{m.as_written} ({m.contribution:.1f})"
                                                     for m in r.matched[:8] if m.contribution > 0),
                          "record_id": r.record_id} for r in stage.rows],
                        columns=["rank", "record", "kind", "score", "matched terms", "record_id"])


def embedding_frame(stage: EmbeddingTrace) -> pd.DataFrame:
    return pd.DataFrame([{"rank": r.rank, "record": r.name, "kind": r.kind, "similarity": r.similarity,
                          "record_id": r.record_id} for r in stage.rows],
                        columns=["rank", "record", "kind", "similarity", "record_id"])


def union_frame(stage: UnionTrace) -> pd.DataFrame:
    return pd.DataFrame([{"union rank": r.union_rank, "record": r.name, "found by": r.provenance,
                          "BM25 rank": r.bm25_rank, "embedding rank": r.embedding_rank,
                          "BM25 score": r.bm25_score, "similarity": r.similarity,
                          "merged records": len(r.members), "rule matched": r.rule,
                          "record_id": r.record_id} for r in stage.rows])


def rule_counts(stage: UnionTrace) -> tuple[int, int]:
    """(Godot 3 renames, classes the code uses) that a rule marked in the union, found by a leg or not."""
    renames = sum(1 for r in stage.rows if r.rule and r.source == RENAMES_SOURCE)
    return renames, sum(1 for r in stage.rows if r.rule) - renames


def merged_frame(stage: UnionTrace) -> pd.DataFrame:
    names = {r.record_id: r.name for r in stage.rows}
    return pd.DataFrame([{"kept (best-ranked)": m.kept, "merged into it": m.merged,
                          "same page section": names.get(m.kept, m.kept)} for m in stage.merged])


# --- panel 5 -----------------------------------------------------------------------------------
def fusion_frame(stage: FusionTrace) -> pd.DataFrame:
    """RRF: raw score and its share of the best possible; min-max / z-score: raw, normalised and parts."""
    if stage.method == "rrf":
        mx = stage.max_possible or 1.0
        return pd.DataFrame([{"rank": r.rank, "shift": r.shift, "record": r.name, "RRF score": r.score,
                              "share of max": r.score / mx, "BM25 rank": r.bm25_rank,
                              "BM25 part": r.bm25_contribution, "embedding rank": r.embedding_rank,
                              "embedding part": r.embedding_contribution, "BM25 raw": r.bm25_score,
                              "similarity": r.similarity, "record_id": r.record_id} for r in stage.rows])
    return pd.DataFrame([{"rank": r.rank, "shift": r.shift, "record": r.name, "fused score": r.score,
                          "BM25 raw": r.bm25_score, "BM25 norm": r.bm25_norm, "BM25 part": r.bm25_contribution,
                          "similarity": r.similarity, "embedding norm": r.embedding_norm,
                          "embedding part": r.embedding_contribution, "record_id": r.record_id}
                         for r in stage.rows])


def fusion_formula(stage: FusionTrace) -> str:
    if stage.method == "rrf":
        return (f"Reciprocal rank fusion, k = {stage.rrf_k}: score = 2α/(k + BM25 rank) + 2(1 − α)/(k + embedding "
                f"rank), α = {stage.alpha:g}; the best possible is {stage.max_possible or 1.0:.5f} (rank 1 on both "
                "legs).")
    name = "Min-max" if stage.method == "minmax" else "Z-score"
    return f"{name} fusion, α = {stage.alpha:g}: score = α · normalised BM25 + (1 − α) · normalised similarity."


def rerank_frame(stage: RerankTrace) -> pd.DataFrame:
    blended = any(r.prior is not None for r in stage.rows)
    return pd.DataFrame([{"rank": r.rank, "shift": r.shift, "record": r.name, "reranker score": r.reranker_score,
                          **({"RRF prior": r.prior, "final score": r.score} if blended else {}),
                          "union rank": r.before, "found by": r.provenance, "record_id": r.record_id}
                         for r in stage.rows])


# --- panels 6-7 --------------------------------------------------------------------------------
def validate_frame(rows: list[ValidateRow]) -> pd.DataFrame:
    return pd.DataFrame([{
        "rank": r.rank, "record": r.name, "p": r.p,
        "Qwen asked": {True: "yes", False: "no (decided without)", None: ""}[r.asked_qwen],
        # no verdict column for a record decided without Qwen: "not run" read as a failure
        "Qwen": NOT_ASKED if r.asked_qwen is False else VERDICT_WORDS.get(r.verdict, r.verdict),
        "score": r.judge_score if r.judge_score is not None else r.margin, "margin": r.margin,
        "coverage": r.coverage, "threshold": r.threshold, "accepted": bool(r.accepted),
        "verified evidence": len(r.verified_evidence), "shared facts": len(r.facts),
        "disagreement": f"⚠ {r.disagreement}" if r.disagreement else "", "cached": r.cached,
        "record_id": r.record_id} for r in rows])


def final_frame(items: list[FinalItem]) -> pd.DataFrame:
    return pd.DataFrame([{"decision": DECISIONS[it.accepted], "rank": it.rank, "record": it.name,
                          "source": it.source, "kind": it.kind,
                          # p without a verdict: the accept model decided without Qwen (not a failed run)
                          "Qwen": NOT_ASKED if it.p is not None and it.verdict == "not_run"
                          else VERDICT_WORDS.get(it.verdict, it.verdict),
                          "score": it.score, "p": it.p, "evidence": ", ".join(it.evidence[:6]),
                          "why": ", ".join(it.why), "doc_path": it.doc_path or "",
                          "record_id": it.record_id} for it in items], columns=FINAL_COLUMNS)


def final_jsonl(items: list[FinalItem], *, accepted_only: bool = False) -> str:
    """The final list as JSON lines (what the trace knows of each record; the full records live in the KB)."""
    lines = [it.model_dump_json() for it in items if it.accepted or not accepted_only]
    return "\n".join(lines) + ("\n" if lines else "")


# --- D vs F ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Agreement:
    both: list[str]  # D's record ids that F also accepted
    only_d: list[str]
    only_f: list[str]


def agreement(d: AlternativeTrace, f: AlternativeTrace) -> Agreement:
    """Accepted record ids: by both, only by D, only by F (a merged duplicate counts as the same record)."""
    def accepted(a: AlternativeTrace) -> dict[str, set[str]]:
        return {it.record_id: {it.record_id, *it.group} for it in a.final if it.accepted}

    da, fa = accepted(d), accepted(f)
    both = [rid for rid, ids in da.items() if any(ids & other for other in fa.values())]
    only_d = [rid for rid in da if rid not in both]
    only_f = [rid for rid, ids in fa.items() if not any(ids & other for other in da.values())]
    return Agreement(both, only_d, only_f)


def shift_rows(d: AlternativeTrace, f: AlternativeTrace, top: int = 15) -> list[Shift]:
    """Records in either top ``top``: ``before`` = rank in D (fusion), ``after`` = rank in F (reranker)."""
    rd = {r.record_id: r for r in (d.fusion.rows if d.fusion else [])}
    rf = {r.record_id: r for r in (f.rerank.rows if f.rerank else [])}
    picked = [rid for rid, r in rd.items() if r.rank <= top] + [rid for rid, r in rf.items() if r.rank <= top]
    out = []
    for rid in dict.fromkeys(picked):
        in_d, in_f = rd.get(rid), rf.get(rid)
        row = in_d or in_f
        assert row is not None
        out.append(Shift(rid, row.name, in_d.rank if in_d else None, in_f.rank if in_f else None))
    return out


def latency_frame(trace: Trace) -> pd.DataFrame:
    rows = [{"alternative": name, "stage": s.name, "seconds": s.ms / 1000, "order": PIPELINE_ORDER.index(s.name)}
            for name, a in trace.alternatives.items() for s in a.stages]
    return pd.DataFrame(rows, columns=["alternative", "stage", "seconds", "order"])


def _usage_row(name: AltName, stage: str, model: str, sent: str, ms: float, prompt: int | None = None,
               reused: int | None = None) -> dict[str, Any]:
    return {"alternative": name, "stage": stage, "model": model, "candidates sent": sent, "prompt tokens": prompt,
            "reused tokens": reused, "seconds": ms / 1000}


def validate_sent(v: ValidateTrace) -> str:
    """What Qwen was sent: verdicts, then the evidence lists it wrote for accepted records (a cold run's cost)."""
    sent = f"{v.judged + v.cached} ({v.cached} from cache)"
    if v.lists + v.lists_cached:
        sent += f" + {v.lists + v.lists_cached} evidence lists ({v.lists_cached} from cache)"
    return sent


def model_usage(trace: Trace) -> pd.DataFrame:
    """Which model saw how many candidates, with the prompt tokens the validator evaluated."""
    rows = []
    for name, a in trace.alternatives.items():
        if a.embedding is not None:
            rows.append(_usage_row(name, "embedding", a.embedding.model or "—", "1 query", a.embedding.ms))
        if a.rerank is not None:
            rows.append(_usage_row(name, "rerank", a.rerank.reranker, str(a.rerank.scored), a.rerank.ms))
        v = a.validation
        if v is not None and v.status not in ("skipped", "pending"):
            sent = validate_sent(v)
            rows.append(_usage_row(name, "validate", v.model or "none", sent, v.ms, v.prompt_tokens, v.reused_tokens))
    return pd.DataFrame(rows, columns=["alternative", "stage", "model", "candidates sent", "prompt tokens",
                                       "reused tokens", "seconds"])


def compare_final(a: AlternativeTrace) -> pd.DataFrame:
    marks = {True: "accepted", False: "rejected", None: "—"}
    return pd.DataFrame([{"decision": marks[it.accepted], "rank": it.rank, "record": it.name,
                          "Qwen": VERDICT_WORDS.get(it.verdict, it.verdict), "score": it.score,
                          "record_id": it.record_id} for it in a.final],
                        columns=["decision", "rank", "record", "Qwen", "score", "record_id"])
