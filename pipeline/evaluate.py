"""Evaluate D, F and each leg on a labelled chunk set, with ranx.

Rankings are page-level: a system's ranked records are collapsed to their
``doc_path`` (first occurrence wins), because the labels grade pages.
"""

from __future__ import annotations

import itertools
import json
import threading
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field, ValidationError

from pipeline import intervals as spread
from pipeline.config import FIXTURES
from pipeline.engine import Engine
from pipeline.errors import NotUtf8, decode_line, describe
from pipeline.intervals import Interval, Paired
from pipeline.models.base import Cancelled
from pipeline.settings import Settings
from pipeline.trace import ProgressEvent, RecordRef, Trace

DEV_SET = FIXTURES / "eval" / "dev.jsonl"
# Written and labelled by a stated rule by labellers who never ran the system, and never tuned on:
# the check on code this project has not seen (see fixtures/eval/README.md).
BLIND_SET = FIXTURES / "eval" / "blind.jsonl"
# Labelled by the blind set's rule, by other hands, for choosing constants that rule touches (fixtures/eval/README.md)
RULE_TUNE_SET = FIXTURES / "eval" / "rule_tune.jsonl"
# the dev set with its grade-1 class pages re-graded by the blind set's rule (fixtures/eval/README.md)
DEV_RULE_SET = FIXTURES / "eval" / "dev_rule.jsonl"
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
    labels: list[str] = Field(default_factory=list)  # label prototypes that describe the chunk (by hand)
    notes: str = ""
    split: Split | None = None  # None: a user's set without halves


class LabelledSetError(ValueError):
    """A labelled set with bad lines: ``lines`` names each (file:line: what is wrong); ``str`` has a heading."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("invalid labelled set:\n" + "\n".join(lines))
        self.lines = lines

    def __reduce__(self) -> tuple[type, tuple[list[str]]]:  # a batch worker's error crosses a process boundary
        return type(self), (self.lines,)


def load_set(path: Path = DEV_SET, split: Split | None = None) -> list[LabelledChunk]:
    """The labelled chunks of ``path``; only one half of the dev set when ``split`` is given."""
    out, errors = [], []
    for n, raw in enumerate(path.read_bytes().splitlines(), start=1):
        try:
            line = decode_line(raw)
        except NotUtf8 as exc:
            errors.append(f"{path}:{n}: {exc}")
            continue
        if not line.strip():
            continue
        try:
            out.append(LabelledChunk.model_validate(json.loads(line)))
        except json.JSONDecodeError as exc:
            errors.append(f"{path}:{n}: invalid JSON: {exc.msg} at column {exc.colno}")
        except ValidationError as exc:
            errors.append(f"{path}:{n}: {describe(exc)}")
    if errors:
        raise LabelledSetError(errors)
    if split is not None:
        out = [c for c in out if c.split == split]
        if not out:
            raise ValueError(f"{path} has no chunk in the {split!r} half")
    return out


def _pages(rows: Iterable[RecordRef]) -> list[str]:
    """The pages of ranked rows, first occurrence wins."""
    return list(dict.fromkeys(r.doc_path for r in rows if r.doc_path))


def system_rankings(trace: Trace) -> dict[str, list[str]]:
    """Page rankings per system: D, F, the legs (from D) and each union (for recall)."""
    out: dict[str, list[str]] = {}
    for name, alt in trace.alternatives.items():
        if name == "D":
            for leg in (alt.bm25, alt.embedding):
                if leg is not None:
                    out[leg.name] = _pages(leg.rows)
        if alt.union is not None:
            out[f"{name} union"] = _pages(alt.union.rows)
        ranking = alt.ranking
        # "skipped": F without a reranker ranks in union order, which is still F's ranking.
        if ranking is not None and ranking.status in ("ok", "skipped"):
            out[name] = _pages(ranking.rows)
    return out


@dataclass
class EvalReport:
    metrics: dict[str, dict[str, float]]  # system -> metric -> value
    per_chunk: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    accept: dict[str, dict[str, float]] = field(default_factory=dict)
    traces: dict[str, Trace] = field(default_factory=dict)
    n_ranked: int = 0
    calibration: dict[str, dict] = field(default_factory=dict)  # alternative -> AUC of p, reliability bins, calls
    intervals: dict[str, Interval] = field(default_factory=dict)  # system -> nDCG@10 bootstrap interval
    comparisons: list[Paired] = field(default_factory=list)  # the goals' comparisons, paired over chunks

    def row(self, system: str) -> dict[str, float]:
        """``system``'s metrics, with its nDCG@10 interval as ``ndcg@10_low`` / ``ndcg@10_high`` when there is one."""
        out = dict(self.metrics.get(system, {}))
        if (ci := self.intervals.get(system)) is not None:
            out |= {"ndcg@10_low": ci.low, "ndcg@10_high": ci.high}
        return out


# numba's default threading layer aborts the whole process when two threads enter it at once (two
# dashboard evaluations in flight did): ranx is entered by one thread at a time.
_RANX_LOCK = threading.Lock()
_ID_WIDTH = 8  # every doc id ranx sees, the empty run's placeholder included
_NO_PAGE = "-" * _ID_WIDTH  # a query with no ranked page: ranx needs one entry, scored 0


def _one_width(qrels: dict[str, dict[str, int]], runs: dict[str, dict[str, list[str]]]
               ) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, list[str]]]]:
    """The same qrels and runs with every page renamed to ``d0000042``: one id width for every call.

    ranx stores doc ids as fixed-width numpy strings, so numba compiles (and caches on disk) one
    specialisation per width. On a fresh clone, specialisations cached by ``make train``'s process
    mixed with new ones in pytest's process scored correct rankings wrongly (page nDCG@10 0.098 for a
    BM25 leg that reads 0.660). With one width there is one specialisation, whoever compiled it.
    Renaming cannot change a score: the runs' scores have no ties and the qrels order by grade.
    """
    ids: dict[str, str] = {}

    def rename(page: str) -> str:
        return ids.setdefault(page, f"d{len(ids):0{_ID_WIDTH - 1}d}")

    return ({qid: {rename(p): g for p, g in docs.items()} for qid, docs in qrels.items()},
            {system: {qid: [rename(p) for p in ranking] for qid, ranking in by_q.items()}
             for system, by_q in runs.items()})


def _ranx_unlocked(qrels: dict[str, dict[str, int]], runs: dict[str, dict[str, list[str]]]) -> tuple[dict, dict]:
    from ranx import Qrels, Run, evaluate

    qrels, runs = _one_width(qrels, runs)
    q = Qrels(qrels)
    overall: dict[str, dict[str, float]] = {}
    per_q: dict[str, dict[str, dict[str, float]]] = {}
    for system, ranking in runs.items():
        run_dict = {qid: {p: 1.0 / (i + 1) for i, p in enumerate(ranking.get(qid, []))} or {_NO_PAGE: 0.0}
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


def _ranx(qrels: dict[str, dict[str, int]], runs: dict[str, dict[str, list[str]]]) -> tuple[dict, dict]:
    """Overall and per-query metrics of ``runs``, ranx entered by one thread at a time."""
    with _RANX_LOCK:
        return _ranx_unlocked(qrels, runs)


def is_relevant(c: LabelledChunk, ref: RecordRef) -> bool:
    """Whether accepting ``ref`` for ``c`` is right: its page is relevant (and not a must-not), or it is
    one of the chunk's labels. Label prototypes have no page; the dev set names them by hand."""
    if ref.kind == "label_prototype":
        return ref.source.removeprefix("label/") in c.labels
    page = ref.doc_path or ""
    return page in c.relevant and page not in c.must_not_accept


def accept_metrics(traces: dict[str, Trace], chunks: list[LabelledChunk]) -> dict[str, dict[str, float]]:
    """Precision/recall of accepted pages against relevant / must-not-accept labels."""
    out: dict[str, dict[str, float]] = {}
    by_id = {c.id: c for c in chunks}
    alts = sorted({a for t in traces.values() for a in t.alternatives})
    for alt in alts:
        tp = fp = bad = rel_total = n_acc = 0
        for cid, trace in traces.items():
            a = trace.alternatives.get(alt)
            if a is None or not any(it.accepted is not None for it in a.final):
                continue
            c = by_id[cid]
            # each accepted page (or label) once, with whether it is right
            right = {it.source if it.kind == "label_prototype" else it.doc_path: is_relevant(c, it)
                     for it in a.final if it.accepted and (it.kind == "label_prototype" or it.doc_path)}
            n_acc += len(right)
            tp += sum(right.values())
            fp += len(right) - sum(right.values())
            bad += len(right.keys() & set(c.must_not_accept))
            rel_total += len(c.relevant) + len(c.labels)
        if n_acc or rel_total:
            out[alt] = {"accept_precision": tp / (tp + fp) if tp + fp else 0.0,
                        "accept_recall": tp / rel_total if rel_total else 0.0,
                        "must_not_accept_violations": float(bad), "accepted": float(n_acc)}
    return out


def evaluate_set(engine: Engine, chunks: list[LabelledChunk], settings: Settings,
                 progress: Callable[[ProgressEvent], None] | None = None,
                 cancelled: Callable[[], bool] | None = None) -> EvalReport:
    """Every chunk through ``engine``; ``cancelled`` also stops a chunk's model stages (raises Cancelled)."""
    traces: dict[str, Trace] = {}
    runs: dict[str, dict[str, list[str]]] = {}
    for n, c in enumerate(chunks):
        if progress:
            progress(ProgressEvent("evaluate", n, len(chunks), note=c.id))
        trace = engine.run(c.code, settings, cancelled=cancelled)
        if cancelled is not None and cancelled():  # a cut-short trace would count as a bad ranking
            raise Cancelled
        traces[c.id] = trace
        for system, ranking in system_rankings(trace).items():
            runs.setdefault(system, {})[c.id] = ranking
    if progress:
        progress(ProgressEvent("evaluate", len(chunks), len(chunks), note="computing metrics"))
    qrels = {c.id: dict(c.relevant) for c in chunks if c.relevant}
    overall, per_q = _ranx(qrels, runs) if qrels else ({}, {})
    return EvalReport(overall, per_q, accept_metrics(traces, chunks), traces, len(qrels),
                      probability_metrics(traces, chunks), spread.intervals(per_q), spread.comparisons(per_q))


def probability_metrics(traces: dict[str, Trace], chunks: list[LabelledChunk], bins: int = 5) -> dict[str, dict]:
    """Per alternative: AUC of the accept model's p against page relevance, its reliability curve, Qwen calls."""
    by_id = {c.id: c for c in chunks}
    out: dict[str, dict] = {}
    for alt in sorted({a for t in traces.values() for a in t.alternatives}):
        ps, ys, calls, saved = [], [], 0, 0
        for cid, trace in traces.items():
            a = trace.alternatives.get(alt)
            if a is None or a.validation is None or a.validation.status not in ("ok", "error"):
                continue
            calls += a.validation.judged + a.validation.cached  # yes/no judgements (asked or from cache)
            calls += sum(1 for r in a.validation.judged_rows if r.asked_qwen is False and r.accepted and r.evidence)
            saved += a.validation.skipped
            for r in a.validation.judged_rows:
                if r.p is not None:
                    ps.append(r.p)
                    ys.append(int(is_relevant(by_id[cid], r)))
        if not ps:
            continue
        entry: dict = {"judged": len(ps), "qwen_calls_per_chunk": calls / max(len(traces), 1),
                       "decided_without_qwen": saved, "auc": None, "bins": []}
        if 0 < sum(ys) < len(ys):
            from sklearn.metrics import roc_auc_score

            entry["auc"] = float(roc_auc_score(ys, ps))
        edges = np.linspace(0.0, 1.0, bins + 1)
        for lo, hi in itertools.pairwise(edges):
            sel = [(p, y) for p, y in zip(ps, ys, strict=True) if lo <= p < hi or (hi == 1.0 and p == 1.0)]
            if sel:
                entry["bins"].append({"p_mean": float(np.mean([p for p, _ in sel])),
                                      "relevant_share": float(np.mean([y for _, y in sel])), "n": len(sel)})
        out[alt] = entry
    return out


def evaluate_policies(engine: Engine, chunks: list[LabelledChunk], settings: Settings,
                      progress: Callable[[ProgressEvent], None] | None = None,
                      policies: Sequence[str] = ()) -> dict[str, EvalReport]:
    """The same chunks under each accept policy, all by default (cached verdicts make all but the first cheap)."""
    from pipeline.settings import POLICIES

    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        raise ValueError(f"unknown accept policy {', '.join(unknown)}; choose from {', '.join(POLICIES)}")
    return {policy: evaluate_set(engine, chunks, settings.model_copy(update={"accept_policy": policy,
                                                                             "run_validator": True}), progress)
            for policy in (policies or POLICIES)}


# --- the variants table (issue 2/4): every ranker measured on the same chunks, in one run ---------------
def ranking_variants(with_qwen: bool = False, with_cross_encoder: bool = False,
                     with_pmi: bool = False) -> dict[str, tuple[Settings, str]]:
    """Settings per row of the table, and which system of their trace the row reads."""
    from pipeline.settings import TRAINED
    from pipeline.train import defaults

    base = Settings(run_validator=False, alternatives=("D", "F"))
    minilm = base.model_copy(update={"embedder": None, "f_embedder": None, "reranker": "none"})
    coder = base.model_copy(update={"embedder": TRAINED, "f_embedder": TRAINED, "reranker": "none"})
    out: dict[str, tuple[Settings, str]] = {
        "BM25": (minilm, "bm25"),
        "embedding: MiniLM": (minilm, "embedding"),
        "embedding: code query map (MiniLM + learned map)": (coder, "embedding"),
    }
    mnrl = defaults.ready("query_encoder", _kb_hash())
    if mnrl is not None:  # the MNRL fine-tune, trained on request (`models train --mnrl`)
        tuned = base.model_copy(update={"embedder": str(mnrl / "model"), "reranker": "none"})
        out["embedding: MNRL-tuned query encoder"] = (tuned, "embedding")
        out["D with the MNRL-tuned query encoder"] = (tuned, "D")
    out.update({
        "D with MiniLM": (minilm, "D"),
        "D with the code query map": (coder, "D"),
        "F without a reranker (union order)": (coder, "F"),
        "F + learned ranker alone": (base.model_copy(update={"f_prior_weight": 0.0}), "F"),
        "F + learned ranker + RRF prior (default)": (base, "F"),
        "D without moving up the class pages the code uses": (base.model_copy(update={"class_pages": False}), "D"),
        "F without moving up the class pages the code uses": (base.model_copy(update={"class_pages": False}), "F"),
    })
    if with_cross_encoder:
        out["F + trained cross-encoder (FlagEmbedding)"] = (base.model_copy(update={"reranker": "bge"}), "F")
    if with_qwen:
        out["F + Qwen 0.5B yes/no reranker"] = (base.model_copy(update={"reranker": "qwen"}), "F")
    if with_pmi:
        out["F + Qwen 0.5B PMI reranker"] = (base.model_copy(update={"reranker": "qwen-pmi"}), "F")
    return out


def _kb_hash() -> str:
    from pipeline.kb.store import open_kb

    return open_kb().content_hash


def evaluate_variants(engine: Engine, chunks: list[LabelledChunk], variants: dict[str, tuple[Settings, str]],
                      progress: Callable[[ProgressEvent], None] | None = None) -> dict[str, dict[str, float]]:
    """One metrics row per variant; runs sharing settings are run once."""
    reports: dict[str, EvalReport] = {}
    out: dict[str, dict[str, float]] = {}
    for name, (settings, system) in variants.items():
        key = settings.cache_key()
        if key not in reports:
            reports[key] = evaluate_set(engine, chunks, settings, progress)
        out[name] = reports[key].row(system)
    return out
