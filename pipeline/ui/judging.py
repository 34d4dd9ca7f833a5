"""Panel 6: the validator — Qwen's verdict and margin per candidate, checked against deterministic evidence."""

from __future__ import annotations

from collections.abc import Collection

import pandas as pd
import streamlit as st

from pipeline.kb.store import KBStore
from pipeline.settings import AltName
from pipeline.trace import LISTED, Trace, ValidateRow, ValidateTrace
from pipeline.ui import charts, views
from pipeline.ui.common import (
    ICON_NO,
    ICON_OK,
    ICON_WAIT,
    ICON_WARN,
    VERDICT_WORDS,
    fmt_seconds,
    for_each_alt,
    header,
    record_of,
    side_by_side,
    stage_notice,
)
from pipeline.ui.highlight import Mark, legend


def panel_validate(trace: Trace, store: KBStore | None, pending: Collection[AltName] = (), key: str = "main") -> None:
    header(6, "Validator", "The local Qwen reads the chunk and each top candidate and says whether the record "
                           "contains a direct string / API / pattern match; deterministic matching checks it.",
           "panel-validate")
    for name, alt in for_each_alt(trace, lambda n, a: f"{n} · validator"):
        stage = alt.validation
        if name in pending and stage is not None and stage.status == "pending":
            if stage.writing_lists:  # decided; Qwen is writing the accepted records' evidence lists
                st.info(f"{stage.message[:1].upper()}{stage.message[1:]}. The decisions below are final; each "
                        "accepted record's evidence fills in when its list is written.", icon=ICON_WAIT)
                _validate(stage, trace.chunk.text, store, f"{key}_{name}")
                continue
            s = trace.settings
            what = s.validation_work()
            stage_notice(None, waiting=f"{what[:1].upper()}{what[1:]} (~{s.judge_seconds(len(trace.chunk.text)):.0f}"
                                       " s on cold caches); this panel fills in when it is done.")
            continue
        if not stage_notice(stage):
            continue
        assert stage is not None
        _validate(stage, trace.chunk.text, store, f"{key}_{name}")


def threshold_text(stage: ValidateTrace) -> str:
    """The threshold that decides under the policy in force (markdown); empty when none does."""
    if stage.accept_model or stage.policy == "calibrated":
        return f"**threshold:** p ≥ {stage.p_threshold:.2f}" if stage.p_threshold is not None else ""
    if stage.policy in ("qwen_and_evidence", "qwen_only") and stage.threshold is not None:
        return f"**threshold:** Qwen's judge score ≥ {stage.threshold:g}"
    return ""


def _summary(stage: ValidateTrace) -> None:
    parts = [f"**Model:** {stage.model or 'none (no model)'}", f"**policy:** {stage.policy_text}",
             threshold_text(stage), f"judges {stage.scope_text}"]
    st.markdown(" · ".join(p for p in parts if p))
    if stage.accept_model:
        st.caption(f"Decided by the **{stage.accept_model}**: accept when p ≥ {stage.p_threshold:.2f} and a fact is "
                   f"shared. Qwen was asked only where it could change the decision; "
                   f"{stage.skipped} of {len(stage.judged_rows)} were decided without it.{stage.lists_text}")
    c = st.columns(6)
    c[0].metric("judged now", stage.judged, help="Qwen verdicts computed now (a record's empty-chunk margin counts "
                                                 "too); evidence lists are not counted.")
    c[1].metric("from cache", stage.cached, help="Qwen verdicts read from the cache; evidence lists are not "
                                                 "counted.")
    c[2].metric("without Qwen", stage.skipped,
                help="Decided without asking Qwen (calls saved): it could not change these decisions.")
    c[3].metric("prompt tokens", f"{stage.prompt_tokens:,}", help="Tokens evaluated (after KV reuse).")
    c[4].metric("reused tokens", f"{stage.reused_tokens:,}", help="Shared SOURCE_CODE prefix not re-read.")
    lists = (f"{stage.writing_lists} being written" if stage.writing_lists
             else f"{stage.lists} + {stage.lists_cached} cached" if stage.lists_cached else stage.lists)
    c[5].metric("evidence lists", lists, help="Evidence lists of the accepted records, after the decision: asked "
                                              "of Qwen now, and read from the cache.")


def _table(rows: list[ValidateRow], key: str, calibrated: bool) -> None:
    # under the accept model the Qwen score threshold decides nothing: its column would mislead
    hidden = {"threshold": None} if calibrated else {}
    st.dataframe(views.validate_frame(rows), hide_index=True, placeholder="—", key=f"{key}_validate", column_config={
        "score": st.column_config.NumberColumn(format="%.2f", help="What the threshold applies to: Qwen's "
                                               "yes−no margin plus a prior from the evidence coverage."),
        "margin": st.column_config.NumberColumn(format="%.2f", help="Qwen's yes−no logit margin."),
        "coverage": st.column_config.NumberColumn(format="%.2f", help="Share of the chunk's facts found in the "
                                                  "record (deterministic)."),
        "threshold": st.column_config.NumberColumn(format="%.2f"),
        "p": st.column_config.ProgressColumn("p", format="%.2f", min_value=0.0, max_value=1.0,
                                             help="The accept model's calibrated probability."),
        "accepted": st.column_config.CheckboxColumn("accepted"),
        "disagreement": st.column_config.TextColumn("Qwen vs deterministic", width="medium"), **hidden})


def _validate(stage: ValidateTrace, chunk: str, store: KBStore | None, key: str) -> None:
    _summary(stage)
    judged = stage.judged_rows
    if not judged:
        st.info("No candidate was in the validator's scope (top k = 0).")
        return
    _table(judged, key, bool(stage.accept_model))
    if any(r.p is not None for r in judged):
        st.markdown("**p vs threshold** — the accept model's calibrated probability; faded bars were decided "
                    "without Qwen")
        st.altair_chart(charts.p_chart(judged, stage.p_threshold), width="stretch")
    elif any(r.margin is not None for r in judged):
        st.markdown("**Score vs threshold** — Qwen says yes when its judge score reaches the dashed rule")
        st.altair_chart(charts.margin_chart(judged, stage.threshold), width="stretch")
    st.html(legend(["fact", "evidence", "unverified"]))
    for r in judged:
        flag = " · ⚠ Qwen and deterministic evidence disagree" if r.disagreement else ""
        head = "accepted" if r.accepted else "not accepted"
        with st.expander(f"{head} · {r.rank}. {r.name}{flag}", icon=ICON_OK if r.accepted else ICON_NO):
            _judgement(r, chunk, store)


def _evidence_marks(row: ValidateRow) -> list[Mark]:
    marks = []
    for e in row.evidence:
        kind = "evidence" if e.verified else "unverified"
        marks.append(Mark(e.text.strip('"') if kind == "unverified" else e.text, kind,
                          f"Qwen evidence ({e.field})", word=False, ignore_case=False, whole=True))
    for f in row.facts:
        marks.append(Mark(f.text, "fact", f"fact {f.n} · record field: {f.field}", word=False, ignore_case=False,
                          whole=True))
    return marks


def decision_line(r: ValidateRow) -> str:
    """The accept model's line: p, its threshold, how it was decided, the rule and the notes, each once."""
    threshold = f" (threshold {r.p_threshold:.2f})" if r.p_threshold is not None else ""
    p = f"**p = {r.p:.3f}**{threshold} · " if r.p is not None else ""
    return p + " · ".join(filter(None, [r.how, r.rule, *r.notes]))


def _listed(r: ValidateRow) -> bool:
    """Qwen was asked for the evidence list only (the accept model decided without its verdict)."""
    return r.asked_qwen is False and bool(r.listing or r.evidence)


def verdict_line(r: ValidateRow) -> str:
    if r.asked_qwen is False:
        if not _listed(r):
            return "Qwen: **not asked**"  # the p line above already says it was decided without Qwen
        found = f"{len(r.evidence)} item(s)" if r.evidence else (
            "no item" if r.listing in ("", LISTED) else r.listing)  # e.g. a failed call: the facts stand in
        return (f"Qwen: **no verdict**; evidence list by Qwen"
                f"{' (cached)' if r.cached else ''}: {found}")
    detail = ""
    if r.margin is not None:
        detail = f"yes−no margin {r.margin:.2f}"
        if r.judge_score is not None:
            detail += f", evidence coverage {r.coverage:.2f} → score {r.judge_score:.2f}"
        detail = f" ({detail} vs threshold {r.threshold}; first token `{r.model_token}`)"
    when = " · from cache" if r.cached else (f" · {fmt_seconds(r.ms)}" if r.ms else "")
    return f"Qwen: **{VERDICT_WORDS[r.verdict]}**{detail}{when}"


def evidence_heading(r: ValidateRow) -> str:
    if _listed(r):
        return ("**Qwen's evidence list** — asked after the decision, for the accepted record"
                + (" (from the cache)" if r.cached else ""))
    return "**Qwen's evidence**"


def _judgement(r: ValidateRow, chunk: str, store: KBStore | None) -> None:
    if r.p is not None:
        st.markdown(decision_line(r))
        if r.contributions:
            st.altair_chart(charts.contribution_chart(r.contributions), width="stretch")
    if r.disagreement:
        st.warning(f"Qwen and the deterministic evidence disagree: {r.disagreement}", icon=ICON_WARN)
    if r.message:
        st.caption(r.message)
    st.markdown(verdict_line(r))
    marks = _evidence_marks(r)
    side_by_side(chunk, record_of(store, r.record_id), marks, marks)
    if r.evidence:
        st.markdown(evidence_heading(r))
        st.dataframe(pd.DataFrame([{"text": e.text, "field": e.field, "in both texts": e.verified}
                                   for e in r.evidence]), hide_index=True)
    if r.facts:
        st.markdown("**Shared facts** (deterministic string/API matching)")
        st.dataframe(pd.DataFrame([{"#": f.n, "text": f.text, "record field": f.field} for f in r.facts]),
                     hide_index=True, placeholder="—")
    else:
        st.caption("No shared string/API/pattern found by deterministic matching.")
    bits = []
    if r.only_in_code:
        bits.append("**only in the chunk:** " + ", ".join(f"`{t}`" for t in r.only_in_code[:12]))
    if r.only_in_record:
        bits.append("**only in the record:** " + ", ".join(f"`{t}`" for t in r.only_in_record[:12]))
    if r.conflicts:
        bits.append("**conflicts:** " + "; ".join(r.conflicts))
    if bits:
        st.markdown("  \n".join(bits))
    if r.raw:
        st.caption(f"Raw model output · {r.prompt_tokens} prompt tokens, {r.reused_tokens} reused")
        st.code(r.raw, language="json")
