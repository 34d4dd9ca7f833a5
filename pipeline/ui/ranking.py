"""Panel 5: how the union is re-ordered — D's fusion breakdown, F's reranker scores, and who moved."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import pandas as pd
import streamlit as st

from pipeline.settings import AltName
from pipeline.trace import FusionRow, FusionTrace, RerankTrace, Trace
from pipeline.ui import charts, views
from pipeline.ui.charts import Shift
from pipeline.ui.common import ICON_WAIT, TABLE_HEIGHT, fmt_seconds, for_each_alt, header, stage_notice

SHIFT_HELP = "Places moved versus the union order (+ = up)."


def panel_ranking(trace: Trace, pending: Collection[AltName] = ()) -> None:
    header(5, "Fusion (D) / reranker (F)", "How the union is re-ordered: D fuses the two legs' scores, F asks a "
                                          "reranking model; the slope chart shows who moved.", "panel-ranking")
    for name, alt in for_each_alt(trace, lambda n, a: f"{n} · {'fusion' if n == 'D' else 'reranker'}"):
        if name == "D":
            _fusion(alt.fusion)
            continue
        if alt.rerank is not None and alt.rerank.status == "pending" and name in pending:
            secs = trace.settings.rerank_seconds()
            st.info(f"The reranker is scoring the union (~{secs:.0f} s on a cold cache); the union order is shown "
                    "meanwhile.", icon=ICON_WAIT)
        _rerank(alt.rerank)


def _rrf_table(stage: FusionTrace) -> tuple[pd.DataFrame, dict[str, Any]]:
    mx = stage.max_possible or 1.0
    st.markdown(f"**Reciprocal rank fusion**, k = {stage.rrf_k}: score = 2α/(k + BM25 rank) + "
                f"2(1 − α)/(k + embedding rank), α = {stage.alpha:g}. Raw scores shown; the best possible is "
                f"**{mx:.5f}** (rank 1 on both legs), so “share of max” says how close a candidate came.")
    df = views.fusion_frame(stage)
    cfg: dict[str, Any] = {
        "RRF score": st.column_config.NumberColumn(format="%.5f"),
        "share of max": st.column_config.ProgressColumn(format="%.2f", min_value=0.0, max_value=1.0),
        "BM25 part": st.column_config.NumberColumn(format="%.5f"),
        "embedding part": st.column_config.NumberColumn(format="%.5f")}
    return df, cfg


def _convex_table(stage: FusionTrace) -> tuple[pd.DataFrame, dict[str, Any]]:
    st.markdown(f"**{'Min-max' if stage.method == 'minmax' else 'Z-score'} fusion**, α = {stage.alpha}: score = α · "
                "normalised BM25 + (1 − α) · normalised similarity.")
    df = views.fusion_frame(stage)
    cfg: dict[str, Any] = {c: st.column_config.NumberColumn(format="%.3f") for c in
                           ("fused score", "BM25 norm", "BM25 part", "embedding norm", "embedding part", "similarity")}
    return df, cfg


def _fusion(stage: FusionTrace | None) -> None:
    if not stage_notice(stage):
        return
    assert stage is not None
    rows: list[FusionRow] = stage.rows
    df, cfg = _rrf_table(stage) if stage.method == "rrf" else _convex_table(stage)
    cfg["shift"] = st.column_config.NumberColumn("shift", help=SHIFT_HELP, format="%+d")
    st.dataframe(df, hide_index=True, placeholder="—", height=TABLE_HEIGHT, column_config=cfg)
    left, right = st.columns(2)
    with left:
        st.markdown("**Score breakdown** (top 15)")
        st.altair_chart(charts.contribution_bars(rows), width="stretch")
    with right:
        st.markdown("**Rank shifts**: union order → after fusion (top 15)")
        st.altair_chart(charts.slope_chart([Shift.of(r) for r in rows], "union order", "after fusion"),
                        width="stretch")
    st.caption(f"{len(rows)} candidates fused in {fmt_seconds(stage.ms)}.")


RERANKER_SCORE_HELP = ("The reranker's raw score: the learned ranker's output (LightGBM, the default), Qwen's "
                       "yes − no logit margin, or the cross-encoder's relevance score; empty = not reranked.")
STANDARDISED = "standardised ranker"


def rerank_table(stage: RerankTrace) -> tuple[pd.DataFrame, dict[str, Any], str]:
    """F's table, its column config and the caption that says how the final score is made.

    With the learned ranker's blend the table adds the term actually summed (the standardised ranker
    score), rounded so that standardised ranker + RRF prior = final score as displayed.
    """
    df = views.rerank_frame(stage)
    cfg: dict[str, Any] = {
        "reranker score": st.column_config.NumberColumn(format="%.2f", help=RERANKER_SCORE_HELP),
        "shift": st.column_config.NumberColumn(format="%+d", help=SHIFT_HELP)}
    if "RRF prior" not in df.columns:
        return df, cfg, ""
    final, prior = df["final score"].astype(float).round(4), df["RRF prior"].astype(float).round(4)
    df["final score"], df["RRF prior"] = final, prior
    df.insert(df.columns.get_loc("reranker score") + 1, STANDARDISED, (final - prior).round(4))
    cfg["reranker score"] = st.column_config.NumberColumn(
        format="%.2f", help=RERANKER_SCORE_HELP + " Standardised over the candidates before it is summed.")
    cfg[STANDARDISED] = st.column_config.NumberColumn(
        format="%.4f", help="The reranker score standardised over the candidates: (score − mean) / sd.")
    cfg["RRF prior"] = st.column_config.NumberColumn(
        format="%.4f", help="The union's RRF score standardised over the candidates, times the blend weight.")
    cfg["final score"] = st.column_config.NumberColumn(
        format="%.4f", help=f"{STANDARDISED} + RRF prior: what F ranks by.")
    caption = (f"final score = **{STANDARDISED}** + **RRF prior**: the reranker score and the union's RRF score "
               "are each standardised over the candidates ((x − mean) / sd) and the RRF part is weighted.")
    return df, cfg, caption


def _rerank(stage: RerankTrace | None) -> None:
    if not stage_notice(stage):
        return
    assert stage is not None
    rows = stage.rows
    if stage.scored:
        st.markdown(f"**{stage.reranker}** scored the union's top {stage.scored} (of {len(rows)}); the rest keep "
                    "their union order below them.")
    df, cfg, caption = rerank_table(stage)
    if caption:
        st.caption(caption)
    st.dataframe(df, hide_index=True, placeholder="—", height=TABLE_HEIGHT, column_config=cfg)
    if not stage.scored:
        return
    left, right = st.columns(2)
    with left:
        st.markdown("**Reranker scores** (top 15)")
        st.altair_chart(charts.reranker_bars(rows), width="stretch")
    with right:
        st.markdown("**Rank shifts**: union order → after reranking (top 15)")
        st.altair_chart(charts.slope_chart([Shift.of(r) for r in rows], "union order", "after reranking"),
                        width="stretch")
    st.caption(f"Reranked in {fmt_seconds(stage.ms)}.")
