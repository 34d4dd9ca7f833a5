"""D and F side by side on one chunk: final lists, agreement, rank shifts, latency, model usage."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from pipeline.kb.store import KBStore
from pipeline.settings import AltName
from pipeline.trace import PIPELINE_ORDER, AlternativeTrace, FinalItem, Trace
from pipeline.ui import charts
from pipeline.ui.charts import Shift
from pipeline.ui.common import ALT_TITLES, ICON_WAIT, VERDICT_WORDS, fmt_seconds

MARK = {True: "accepted", False: "rejected", None: "—"}


def _final_table(alt_: AlternativeTrace) -> pd.DataFrame:
    return pd.DataFrame([{"decision": MARK[it.accepted], "rank": it.rank, "record": it.name,
                          "Qwen": VERDICT_WORDS[it.verdict], "score": it.score,
                          "record_id": it.record_id} for it in alt_.final],
                        columns=["decision", "rank", "record", "Qwen", "score", "record_id"])


def _ids(items: list[FinalItem]) -> dict[str, FinalItem]:
    return {it.record_id: it for it in items}


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


def _usage_row(name: str, stage: str, model: str, sent: str, ms: float, prompt: int | None = None,
               reused: int | None = None) -> dict[str, Any]:
    return {"alternative": name, "stage": stage, "model": model, "candidates sent": sent, "prompt tokens": prompt,
            "reused tokens": reused, "seconds": ms / 1000}


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
            sent = f"{v.judged + v.cached} ({v.cached} from cache)"
            rows.append(_usage_row(name, "validate", v.model or "none", sent, v.ms, v.prompt_tokens, v.reused_tokens))
    return pd.DataFrame(rows, columns=["alternative", "stage", "model", "candidates sent", "prompt tokens",
                                       "reused tokens", "seconds"])


def render_compare(trace: Trace, store: KBStore | None, pending: Collection[AltName] = ()) -> None:
    d, f = trace.alternatives.get("D"), trace.alternatives.get("F")
    if d is None or f is None:
        st.info("This run has only one alternative; press **Run** above to run D and F on the same chunk.")
        return
    if pending:
        st.info(f"Model stages still running for {', '.join(sorted(pending))}; the comparison updates when they "
                "finish.", icon=ICON_WAIT)

    st.subheader("Final ranked lists", divider="gray")
    st.caption("Each alternative's output, best first: accepted or rejected by the validator, — not judged.")
    cols = st.columns(2)
    for col, a in zip(cols, (d, f), strict=True):
        with col:
            acc = sum(1 for it in a.final if it.accepted)
            st.markdown(f"**{ALT_TITLES[a.name]}** — {acc} accepted · {fmt_seconds(a.ms)}")
            st.dataframe(_final_table(a), hide_index=True, placeholder="—", height=420, column_config={
                "decision": st.column_config.TextColumn("decision", width="small"),
                "score": st.column_config.NumberColumn(format="%.4f"),
                "record": st.column_config.TextColumn(width="large")})

    st.subheader("Where they agree", divider="gray")
    st.caption("Accepted records compared by id (a section merged into another counts as the same record).")
    ag = agreement(d, f)
    c = st.columns(3)
    for col, (label, ids) in zip(c, (("accepted by both", ag.both), ("only D accepts", ag.only_d),
                                     ("only F accepts", ag.only_f)), strict=True):
        with col:
            st.metric(label, len(ids))
            items = {**_ids(f.final), **_ids(d.final)}
            if ids:
                st.dataframe(pd.DataFrame({"record": [items[i].name for i in ids], "record_id": ids}),
                             hide_index=True, column_config={"record_id": None})
    top_d = {it.record_id for it in d.final}
    top_f = {it.record_id for it in f.final}
    if top_d or top_f:
        st.caption(f"Final lists overlap: {len(top_d & top_f)} of {len(top_d | top_f)} records "
                   f"(Jaccard {len(top_d & top_f) / max(len(top_d | top_f), 1):.2f}).")

    st.subheader("Rank shifts between them", divider="gray")
    st.caption("Rank in D (after fusion) → rank in F (after reranking) for the records in either top 15; "
               "green = F ranks it higher, red = lower.")
    rows = shift_rows(d, f)
    if rows:
        st.altair_chart(charts.slope_chart(rows, "D rank", "F rank", top=len(rows), label_room=0.9), width="stretch")
        missing = [r for r in rows if r.before is None or r.after is None]
        if missing:
            st.caption(f"{len(missing)} record(s) appear in only one list (different top-k per leg) and are drawn "
                       "as single points.")

    st.subheader("Cost", divider="gray")
    st.caption("Seconds per stage per alternative, and what each model was sent. Cached verdicts cost no tokens.")
    lat = latency_frame(trace)
    if not lat.empty:
        st.altair_chart(charts.latency_bars(lat), width="stretch")
    usage = model_usage(trace)
    st.dataframe(usage, hide_index=True, placeholder="—", column_config={
        "seconds": st.column_config.NumberColumn(format="%.2f"),
        "prompt tokens": st.column_config.NumberColumn(format="%d"),
        "reused tokens": st.column_config.NumberColumn(format="%d")})
    tok = usage.dropna(subset=["prompt tokens"])
    if not tok.empty and (tok["prompt tokens"].sum() + tok["reused tokens"].sum()) > 0:
        long = tok.melt(id_vars=["alternative"], value_vars=["prompt tokens", "reused tokens"],
                        var_name="tokens", value_name="count")
        st.altair_chart(alt.Chart(long).mark_bar().encode(
            x=alt.X("sum(count):Q", title="validator tokens"), y=alt.Y("alternative:N", title=None),
            color=alt.Color("tokens:N", legend=alt.Legend(orient="bottom", title=None)),
            tooltip=["alternative", "tokens", "count"]).properties(height={"step": 40}), width="stretch")
