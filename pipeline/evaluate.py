"""Evaluate D, F and each leg on a labelled chunk set, with ranx.

Rankings are page-level: a system's ranked records are collapsed to their
``doc_path`` (first occurrence wins), because the labels grade pages.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field, ValidationError

from pipeline.config import FIXTURES
from pipeline.engine import Engine
from pipeline.settings import Settings
from pipeline.trace import Trace

DEV_SET = FIXTURES / "eval" / "dev.jsonl"
METRICS = ("ndcg@10", "mrr", "recall@50")
# Every constant chosen on data (α, thresholds, k, training choices) is chosen on the "tune" half;
# figures and tests report the "test" half, which nothing is tuned on.
Split = Literal["tune", "test"]


class LabelledChunk(BaseModel):
    id: str
    title: str = ""
    lang: str = "gdscript"
    code: str = Field(min_length=1)
    relevant: dict[str, int] = Field(default_factory=dict)  # doc_path -> grade 1..3
    must_not_accept: list[str] = Field(default_factory=list)
    notes: str = ""
    split: Split | None = None  # None: a user's set without halves


def load_set(path: Path = DEV_SET, split: Split | None = None) -> list[LabelledChunk]:
    """The labelled chunks of ``path``; only one half of the dev set when ``split`` is given."""
    out, errors = [], []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(LabelledChunk.model_validate(json.loads(line)))
        except (json.JSONDecodeError, ValidationError) as exc:
            errors.append(f"{path}:{n}: {str(exc).splitlines()[0]}")
    if errors:
        raise ValueError("invalid labelled set:\n" + "\n".join(errors))
    if split is not None:
        out = [c for c in out if c.split == split]
        if not out:
            raise ValueError(f"{path} has no chunk in the {split!r} half")
    return out


def _pages(record_ids: Iterable[str], doc_path_of: Callable[[str], str | None]) -> list[str]:
    seen: dict[str, None] = {}
    for rid in record_ids:
        p = doc_path_of(rid)
        if p and p not in seen:
            seen[p] = None
    return list(seen)


def system_rankings(trace: Trace, doc_path_of: Callable[[str], str | None]) -> dict[str, list[str]]:
    """Page rankings per system: D, F, bm25, embedding and the union (for recall)."""
    out: dict[str, list[str]] = {}
    for name, alt in trace.alternatives.items():
        for st in alt.stages:
            ids = [row["record_id"] for row in st.candidates]
            if st.name in ("bm25", "embedding") and name == "D":
                out[st.name] = _pages(ids, doc_path_of)
            elif st.name == "union":
                out[f"{name} union"] = _pages(ids, doc_path_of)
            elif st.name in ("fusion", "rerank") and st.status == "ok":
                out[name] = _pages(ids, doc_path_of)
    return out


@dataclass
class EvalReport:
    metrics: dict[str, dict[str, float]]  # system -> metric -> value
    per_chunk: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    accept: dict[str, dict[str, float]] = field(default_factory=dict)
    traces: dict[str, Trace] = field(default_factory=dict)
    n_ranked: int = 0


def _ranx(qrels: dict[str, dict[str, int]], runs: dict[str, dict[str, list[str]]]) -> tuple[dict, dict]:
    from ranx import Qrels, Run, evaluate

    q = Qrels(qrels)
    overall: dict[str, dict[str, float]] = {}
    per_q: dict[str, dict[str, dict[str, float]]] = {}
    for system, ranking in runs.items():
        run_dict = {qid: {p: 1.0 / (i + 1) for i, p in enumerate(ranking.get(qid, []))} or {"<none>": 0.0}
                    for qid in qrels}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numba's uint64 cast warning is noise here
            scores = evaluate(q, Run(run_dict), list(METRICS), return_mean=False)
        # One ranx pass: the overall figure is the mean of the per-query scores.
        overall[system] = {m: float(np.mean(arr)) for m, arr in scores.items()}
        for m, arr in scores.items():
            for qid, v in zip(sorted(qrels), arr, strict=False):
                per_q.setdefault(qid, {}).setdefault(system, {})[m] = float(v)
    return overall, per_q


def accept_metrics(traces: dict[str, Trace], chunks: list[LabelledChunk],
                   doc_path_of: Callable[[str], str | None]) -> dict[str, dict[str, float]]:
    """Precision/recall of accepted pages against relevant / must-not-accept labels."""
    out: dict[str, dict[str, float]] = {}
    by_id = {c.id: c for c in chunks}
    alts = sorted({a for t in traces.values() for a in t.alternatives})
    for alt in alts:
        tp = fp = bad = rel_total = rel_found = n_acc = 0
        for cid, trace in traces.items():
            a = trace.alternatives.get(alt)
            if a is None or not any(it.accepted is not None for it in a.final):
                continue
            c = by_id[cid]
            accepted = {doc_path_of(it.record_id) for it in a.final if it.accepted}
            accepted.discard(None)
            n_acc += len(accepted)
            tp += len(accepted & set(c.relevant))
            fp += len(accepted - set(c.relevant))
            bad += len(accepted & set(c.must_not_accept))
            rel_total += len(c.relevant)
            rel_found += len(accepted & set(c.relevant))
        if n_acc or rel_total:
            out[alt] = {"accept_precision": tp / (tp + fp) if tp + fp else 0.0,
                        "accept_recall": rel_found / rel_total if rel_total else 0.0,
                        "must_not_accept_violations": float(bad), "accepted_pages": float(n_acc)}
    return out


def evaluate_set(engine: Engine, chunks: list[LabelledChunk], settings: Settings,
                 progress: Callable[[int, int, str], None] | None = None) -> EvalReport:
    def doc_path_of(rid: str) -> str | None:
        return getattr(engine.store.get(rid), "doc_path", None) if rid in engine.store.by_id else None

    traces: dict[str, Trace] = {}
    runs: dict[str, dict[str, list[str]]] = {}
    for n, c in enumerate(chunks):
        if progress:
            progress(n, len(chunks), c.id)
        trace = engine.run(c.code, settings)
        traces[c.id] = trace
        for system, ranking in system_rankings(trace, doc_path_of).items():
            runs.setdefault(system, {})[c.id] = ranking
    if progress:
        progress(len(chunks), len(chunks), "done")
    qrels = {c.id: dict(c.relevant) for c in chunks if c.relevant}
    overall, per_q = _ranx(qrels, runs) if qrels else ({}, {})
    return EvalReport(overall, per_q, accept_metrics(traces, chunks, doc_path_of), traces, len(qrels))
