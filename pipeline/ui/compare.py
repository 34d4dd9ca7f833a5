"""D and F side by side on one chunk: final lists, agreement, rank shifts, latency, model usage."""

from __future__ import annotations

from collections.abc import Collection

import altair as alt
import pandas as pd
import streamlit as st

from pipeline.kb.store import KBStore
from pipeline.settings import AltName
from pipeline.trace import FinalItem, Trace
from pipeline.ui import charts
from pipeline.ui.common import ALT_TITLES, ICON_WAIT, fmt_seconds
from pipeline.ui.views import agreement, compare_final, latency_frame, model_usage, shift_rows

# The page's computations live in pipeline/ui/views.py (pure, shared with the HTML report).
__all__ = ["agreement", "latency_frame", "model_usage", "render_compare", "shift_rows"]


def _ids(items: list[FinalItem]) -> dict[str, FinalItem]:
    return {it.record_id: it for it in items}


def render_compare(trace: Trace, store: KBStore | None, pending: Collection[AltName] = ()) -> None:
    d, f = trace.alternatives.get("D"), trace.alternatives.get("F")
    if d is None or f is None:
        st.info("This run has only one alternative; press **Run** above to run D and F on the same chunk.")
        return
    if pending:
        st.info(f"Model stages still running for {', '.join(sorted(pending))}; the comparison updates when they "
                "finish.", icon=ICON_WAIT)

    st.subheader("Final ranked lists", divider="gray", anchor="final-lists")
    st.caption("Each alternative's output, best first: accepted or rejected by the validator, — not judged.")
    cols = st.columns(2)
    for col, a in zip(cols, (d, f), strict=True):
        with col:
            acc = sum(1 for it in a.final if it.accepted)
            st.markdown(f"**{ALT_TITLES[a.name]}** — {acc} accepted · {fmt_seconds(a.ms)}")
            st.dataframe(compare_final(a), hide_index=True, placeholder="—", height=420, column_config={
                "decision": st.column_config.TextColumn("decision", width="small"),
                "score": st.column_config.NumberColumn(format="%.4f"),
                "record": st.column_config.TextColumn(width="large")})

    st.subheader("Where they agree", divider="gray", anchor="agreement")
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
                             hide_index=True, width="stretch",  # the column's width, not the names' cut
                             column_config={"record_id": None, "record": st.column_config.TextColumn(width="large")})
    top_d = {it.record_id for it in d.final}
    top_f = {it.record_id for it in f.final}
    if top_d or top_f:
        st.caption(f"Final lists overlap: {len(top_d & top_f)} of {len(top_d | top_f)} records "
                   f"(Jaccard {len(top_d & top_f) / max(len(top_d | top_f), 1):.2f}).")

    st.subheader("Rank shifts between them", divider="gray", anchor="rank-shifts")
    st.caption("Rank in D (after fusion) → rank in F (after reranking) for the records in either top 15; "
               "green = F ranks it higher, red = lower.")
    rows = shift_rows(d, f)
    if rows:
        st.altair_chart(charts.slope_chart(rows, "D rank", "F rank", top=len(rows), label_room=0.9), width="stretch")
        missing = [r for r in rows if r.before is None or r.after is None]
        if missing:
            st.caption(f"{len(missing)} record(s) appear in only one list (different top-k per leg) and are drawn "
                       "as single points.")

    st.subheader("Cost", divider="gray", anchor="cost")
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
