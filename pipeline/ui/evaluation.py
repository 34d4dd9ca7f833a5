"""Evaluation page helpers: labelled sets, the background evaluation job, and the report views."""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import streamlit as st

from pipeline.engine import Engine
from pipeline.evaluate import (
    BLIND_SET,
    DEV_RULE_SET,
    DEV_SET,
    METRICS,
    RULE_TUNE_SET,
    EvalReport,
    LabelledChunk,
    LabelledSetError,
    evaluate_set,
    load_set,
)
from pipeline.intervals import p_text
from pipeline.models.base import Cancelled
from pipeline.settings import Settings
from pipeline.trace import ProgressEvent
from pipeline.ui import charts
from pipeline.ui.jobs import Job, JobCancelled, current_session

SYSTEM_ORDER = ["bm25", "embedding", "D union", "F union", "D", "F"]
SYSTEM_LABELS = {"bm25": "BM25 leg", "embedding": "embedding leg", "D union": "D union", "F union": "F union",
                 "D": "D (fusion)", "F": "F (reranker)"}


@dataclass
class LabelledSet:
    name: str
    chunks: list[LabelledChunk]
    digest: str


class BuiltinSet(NamedTuple):
    name: str  # in the report's heading
    path: Path
    choice: str  # what the picker says of it


BUILTIN_SETS = {
    "dev": BuiltinSet("dev set", DEV_SET, "Dev set"),
    "blind": BuiltinSet("blind set", BLIND_SET, "Blind set, never tuned on"),
    "rule_tune": BuiltinSet("rule tune set", RULE_TUNE_SET, "Rule tune set"),
    "dev_rule": BuiltinSet("dev set, class pages by the rule", DEV_RULE_SET,
                           "Dev set, class pages graded by the blind rule"),
}


@st.cache_data(show_spinner=False)
def builtin_set(key: str) -> LabelledSet:
    """A labelled set shipped in fixtures/eval (see its README): ``dev`` (tune and test halves), ``blind`` (never
    tuned on), ``rule_tune`` or ``dev_rule``."""
    shipped = BUILTIN_SETS[key]
    data = shipped.path.read_bytes()
    return LabelledSet(f"{shipped.name} ({shipped.path.name})", load_set(shipped.path),
                       hashlib.sha256(data).hexdigest())


HALVES = {"all": "whole set", "tune": "tune half (where constants were chosen)",
          "test": "test half (where figures are claimed)"}


def halves(labelled: LabelledSet) -> list[str]:
    """"all", then each half the set's chunks name: only the dev sets are split."""
    present = {c.split for c in labelled.chunks}
    return ["all", *[h for h in ("tune", "test") if h in present]]


def half(labelled: LabelledSet, which: str) -> LabelledSet:
    """The chunks of one half (``which`` from ``halves``); its own digest, so each half caches its report."""
    if which == "all":
        return labelled
    return LabelledSet(f"{labelled.name}, {which} half", [c for c in labelled.chunks if c.split == which],
                       f"{labelled.digest}:{which}")


def set_choice(key: str) -> str:
    """The picker's words for a built-in set key, or for "upload"."""
    shipped = BUILTIN_SETS.get(key)
    return f"{shipped.choice} (fixtures/eval/{shipped.path.name})" if shipped else "Upload a labelled JSONL"


def parse_uploaded_set(data: bytes, name: str) -> LabelledSet:
    """``load_set`` reads a path, so the upload goes through a temporary file; errors name the upload's lines."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        try:
            chunks = load_set(path)
        except LabelledSetError as exc:
            raise LabelledSetError([line.replace(str(path), name, 1) for line in exc.lines]) from None
    if not chunks:
        raise ValueError(f"{name} has no labelled chunk")
    return LabelledSet(name, chunks, hashlib.sha256(data).hexdigest())


def set_error(exc: OSError | ValueError) -> str:
    """What the page says when a labelled set cannot be used: each bad line on its own line."""
    lines = exc.lines if isinstance(exc, LabelledSetError) else [str(exc)]
    return "Cannot use this labelled set:  \n" + "  \n".join(lines)


def start_eval(engine: Engine, chunks: list[LabelledChunk], settings: Settings) -> Job:
    def target(job: Job) -> EvalReport:
        def progress(event: ProgressEvent) -> None:
            job.check()  # cancel between chunks
            job.progress(event)

        try:
            return evaluate_set(engine, chunks, settings, progress, job.cancel.is_set)
        except Cancelled:  # Cancel stopped a chunk's model stages (a Qwen reranker takes a minute a chunk)
            raise JobCancelled from None

    # nobody can see an evaluation's result once its tab is closed: it stops instead of holding the CPU
    return Job("evaluation", target, session_id=current_session()).start()


@dataclass
class EvalRun:
    key: str
    name: str
    chunks: list[LabelledChunk]
    engine: Engine
    estimate: float
    job: Job | None = None
    report: EvalReport | None = None
    message: str = ""

    def refresh(self) -> None:
        job = self.job
        if job is None or not job.done:
            return
        if job.error:
            self.message = f"The evaluation failed: {job.error}"
        elif job.cancelled:
            self.message = "Evaluation cancelled; no metrics (they need every chunk)."
        else:
            self.report = job.result
            st.session_state.setdefault("eval_cache", {})[self.key] = job.result
        self.job = None


def mean_chars(labelled: LabelledSet, n: int) -> int:
    """The mean size of the first ``n`` chunks: Qwen's reading time follows it."""
    chunks = labelled.chunks[:n]
    return sum(len(c.code) for c in chunks) // max(len(chunks), 1)


def validation_cost(s: Settings, code_chars: int) -> str:
    """What validating one chunk costs under ``s``, in words, for the option that turns it on."""
    return f"{s.validation_work()} (~{s.judge_seconds(code_chars):.0f} s per chunk and alternative)"


def submit(engine: Engine, labelled: LabelledSet, n: int, settings: Settings) -> EvalRun:
    """Start (or take from this session's cache) an evaluation of the first ``n`` chunks."""
    chunks = labelled.chunks[:n]
    key = "|".join([labelled.digest, str(n), settings.cache_key(), engine.store.content_hash])
    old: EvalRun | None = st.session_state.get("eval")
    if old is not None and old.job is not None and not old.job.done:
        old.job.cancel.set()
    run = EvalRun(key, labelled.name, chunks, engine, settings.estimate_seconds(n, mean_chars(labelled, n)))
    run.report = st.session_state.setdefault("eval_cache", {}).get(key)
    if run.report is None:
        run.job = start_eval(engine, chunks, settings)
    st.session_state["eval"] = run
    return run


def current() -> EvalRun | None:
    run: EvalRun | None = st.session_state.get("eval")
    if run is not None:
        run.refresh()
    return run


def _ordered(systems: list[str]) -> list[str]:
    return [s for s in SYSTEM_ORDER if s in systems] + [s for s in systems if s not in SYSTEM_ORDER]


def render_report(report: EvalReport, chunks: list[LabelledChunk]) -> None:
    st.subheader("Ranking quality", divider="gray")
    st.caption(f"Page-level metrics over the {report.n_ranked} chunks that have relevance labels (ranx): each "
               "system's ranked records collapsed to their docs page. The union rows show what the legs can reach.")
    if not report.metrics:
        st.info("No chunk in this set has relevance labels, so there are no ranking metrics.")
    else:
        systems = _ordered(list(report.metrics))
        table = pd.DataFrame([{"system": SYSTEM_LABELS.get(s, s), **report.metrics[s],
                               "nDCG@10 95% CI": _span(report, s)} for s in systems])
        st.dataframe(table, hide_index=True, placeholder="—", column_config={
            m: st.column_config.ProgressColumn(m, format="%.3f", min_value=0.0, max_value=1.0) for m in METRICS})
        long = pd.DataFrame([{"system": SYSTEM_LABELS.get(s, s), "metric": m, "value": report.metrics[s].get(m, 0.0)}
                             for s in systems for m in METRICS])
        st.altair_chart(charts.metric_bars(long), width="content")
        _spread(report, systems)

    st.subheader("Acceptance", divider="gray")
    st.caption("Of the pages each alternative accepted: how many are labelled relevant (precision), how many of "
               "the relevant pages were accepted (recall), and how many are on a chunk's must-not-accept list.")
    if not report.accept:
        st.info("Validation was not part of this run: no accept/reject decisions to score.")
    else:
        acc = pd.DataFrame([{"alternative": a, **v} for a, v in sorted(report.accept.items())])
        st.dataframe(acc, hide_index=True, placeholder="—", column_config={
            "accept_precision": st.column_config.ProgressColumn("accept precision", format="%.3f", min_value=0.0,
                                                                max_value=1.0),
            "accept_recall": st.column_config.ProgressColumn("accept recall", format="%.3f", min_value=0.0,
                                                             max_value=1.0),
            "must_not_accept_violations": st.column_config.NumberColumn("must-not-accept violations", format="%d"),
            "accepted": st.column_config.NumberColumn("accepted", format="%d")})
        long = pd.DataFrame([{"system": a, "metric": m.replace("accept_", "accept "), "value": v[m]}
                             for a, v in sorted(report.accept.items()) for m in ("accept_precision", "accept_recall")])
        st.altair_chart(charts.metric_bars(long), width="content")
    if report.calibration:
        _calibration(report)

    if report.per_chunk:
        st.subheader("Per chunk", divider="gray")
        st.caption("nDCG@10 per chunk and system; sort a column to find where a design loses.")
        titles = {c.id: c.title for c in chunks}
        systems = _ordered(sorted({s for v in report.per_chunk.values() for s in v}))
        # the figures before the long title, so D and F are in sight without scrolling sideways
        rows = [{"chunk": cid, **{SYSTEM_LABELS.get(s, s): v.get(s, {}).get("ndcg@10") for s in systems},
                 "title": titles.get(cid, "")} for cid, v in sorted(report.per_chunk.items())]
        st.dataframe(pd.DataFrame(rows), hide_index=True, placeholder="—", height=360, column_config={
            **{SYSTEM_LABELS.get(s, s): st.column_config.NumberColumn(format="%.3f") for s in systems},
            "title": st.column_config.TextColumn(width="medium")})


def _span(report: EvalReport, system: str) -> str | None:
    ci = report.intervals.get(system)
    return f"{ci.low:.3f} – {ci.high:.3f}" if ci is not None else None


def _spread(report: EvalReport, systems: list[str]) -> None:
    """Intervals and paired tests: which differences are more than the luck of which chunks are in the set."""
    if not report.intervals:
        return
    st.caption(f"How sure: each bar is nDCG@10 with its 95% bootstrap interval over the {report.n_ranked} chunks; "
               "overlapping bars can still differ, so the table below compares pairs chunk by chunk "
               "(a p below 0.05 is unlikely to be luck).")
    spans = pd.DataFrame([{"system": SYSTEM_LABELS.get(s, s), "mean": ci.mean, "low": ci.low, "high": ci.high}
                          for s in systems if (ci := report.intervals.get(s)) is not None])
    st.altair_chart(charts.interval_chart(spans), width="content")
    if report.comparisons:
        rows = [{"comparison": f"{SYSTEM_LABELS.get(p.left, p.left)} vs {SYSTEM_LABELS.get(p.right, p.right)}",
                 "nDCG@10 difference": p.difference, "p (paired permutation)": p_text(p.p_value), "chunks": p.n}
                for p in report.comparisons]
        st.dataframe(pd.DataFrame(rows), hide_index=True, column_config={
            "nDCG@10 difference": st.column_config.NumberColumn(format="%+.3f")})


def _calibration(report: EvalReport) -> None:
    st.subheader("Is p a probability?", divider="gray")
    st.caption("The accept model's p against page relevance: a p of 0.8 should be right about 8 times in 10 (the "
               "diagonal). AUC says how well p separates relevant from other judged records; Qwen calls per "
               "chunk count what the LLM was asked (an empty-chunk margin is cached per record).")
    cols = st.columns(len(report.calibration))
    for col, (alt, cal) in zip(cols, sorted(report.calibration.items()), strict=True):
        auc = f"{cal['auc']:.3f}" if cal.get("auc") is not None else "—"
        col.metric(f"{alt}: AUC of p", auc)
        col.caption(f"{cal['judged']} judged records · {cal['qwen_calls_per_chunk']:.1f} Qwen calls per chunk "
                    f"(verdicts and accepted records' evidence lists) · {cal['decided_without_qwen']} decided "
                    "without a Qwen verdict")
    st.altair_chart(charts.reliability_chart(report.calibration), width="content")
