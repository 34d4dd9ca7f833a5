"""Altair charts for the panels. Colours carry meaning only (up/down, yes/no) and read on both themes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import altair as alt
import pandas as pd

from pipeline.trace import (
    PIPELINE_ORDER,
    Contribution,
    EmbeddingRow,
    FusionRow,
    RankedRow,
    RecordRef,
    RerankRow,
    ValidateRow,
)

UP, DOWN, SAME = "moved up", "moved down", "unchanged"
DIRECTION_SCALE = alt.Scale(domain=[UP, DOWN, SAME], range=["#22a35a", "#e0484b", "#8c8c8c"])
VERDICT_SCALE = alt.Scale(domain=["yes", "no", "other"], range=["#22a35a", "#e0484b", "#8c8c8c"])
NEUTRAL = "#8c8c8c"  # mid grey: visible on the light and the dark background (vega's default is black)
RULE = "#f59e0b"  # amber threshold rule, distinct from the yes/no colours
LABEL_CHARS = 48
LEGEND_LIMIT = 320  # px: legend labels are not cut
# The learned ranker's blend (RerankRow.prior): score = z(raw ranker score) + weight × z(RRF prior).
RANKER_PART, PRIOR_PART = "standardised ranker", "RRF prior (weighted)"


def short(text: str, n: int = LABEL_CHARS) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def row_label(row: RecordRef, rank: int | None = None, n: int = LABEL_CHARS) -> str:
    """``rank. source › section`` — unique per row and readable as an axis label."""
    return short(f"{rank}. {row.name}" if rank is not None else row.name, n)


STEP = {"step": 22}  # px per bar: every label stays readable (vega would drop every other one)


def _y(field: str = "label:N") -> alt.Y:
    return alt.Y(field, sort=None, title=None, axis=alt.Axis(labelLimit=320, labelOverlap=False))


def similarity_bars(rows: Sequence[EmbeddingRow], top: int = 15) -> alt.Chart:
    df = pd.DataFrame([{"label": row_label(r, r.rank), "similarity": r.similarity, "record": r.record_id,
                        "kind": r.kind} for r in rows[:top]])
    return alt.Chart(df).mark_bar().encode(
        x=alt.X("similarity:Q", title="cosine similarity", scale=alt.Scale(zero=True)),
        y=_y(),
        color=alt.Color("kind:N", title="kind", legend=alt.Legend(orient="bottom")),
        tooltip=["record", "kind", alt.Tooltip("similarity:Q", format=".4f")],
    ).properties(height=STEP)


@dataclass(frozen=True)
class Shift:
    """One record's rank before and after a re-ordering (None: absent from that list)."""

    record_id: str
    name: str
    before: int | None
    after: int | None

    @classmethod
    def of(cls, row: RankedRow) -> Shift:
        return cls(row.record_id, row.name, row.before, row.rank)


IN_RANGE, BEYOND = "in range", "beyond the cap"
SHAPE_RANGE = ["circle", "triangle-down"]


def _slots(ranks: set[int], cap: int) -> dict[int, float]:
    """Ranks beyond ``cap`` get one slot each below it, in rank order (not to scale)."""
    return {rank: cap + 1 + i for i, rank in enumerate(sorted(r for r in ranks if r > cap))}


def slope_chart(rows: Sequence[Shift], before: str, after: str, *, top: int = 15, cap: int = 30,
                label_room: float = 1.5) -> alt.LayerChart:
    """Rank before → rank after for the top ``top`` after the stage; lines coloured by direction.

    Ranks beyond ``cap`` sit one slot each below a "> cap" break (in rank order, not to scale), drawn
    as triangles and labelled with their rank, so one candidate that climbed from rank 70 does not
    squeeze the other fourteen labels together and none is drawn at a rank it does not have.
    """
    picked = sorted((r for r in rows if r.after is not None), key=lambda r: r.after or 0)[:top]
    slots = [_slots({r.before for r in picked if r.before is not None}, cap),
             _slots({r.after for r in picked if r.after is not None}, cap)]
    long: list[dict[str, Any]] = []
    for r in picked:
        b, a = r.before, r.after
        assert a is not None
        direction = SAME if b is None or b == a else (UP if a < b else DOWN)
        for x, rank in ((0, b), (1, a)):
            if rank is not None:
                name = short(r.name, 34)
                long.append({"x": x, "y": slots[x].get(rank, rank), "record": name, "id": r.record_id,
                             "label": f"{name} (rank {rank})" if rank > cap else name,
                             "direction": direction, "shift": (b - a) if b is not None else None,
                             "before": b, "after": a, "where": BEYOND if rank > cap else IN_RANGE})
    df = pd.DataFrame(long)
    capped = bool(slots[0] or slots[1])
    ymax = max([2.0, *(float(v) for v in df["y"])]) if not df.empty else 2.0
    shown = min(int(ymax), cap)
    ticks = list(range(1, shown + 1, 1 if shown <= 20 else 5)) + ([cap + 1] if capped else [])
    y = alt.Y("y:Q", scale=alt.Scale(reverse=True, domain=[-0.6, ymax + 0.5], nice=False), title="rank",
              axis=alt.Axis(values=ticks, grid=False, labelExpr=f"datum.value > {cap} ? '> {cap}' : datum.label"))
    # x: 0 = before, 1 = after; the room right of 1 holds the labels (less is needed on a wide chart).
    x = alt.X("x:Q", scale=alt.Scale(domain=[-0.25 if slots[0] else -0.08, 1 + label_room]), axis=None)
    color = alt.Color("direction:N", scale=DIRECTION_SCALE, legend=alt.Legend(orient="bottom", title=None))
    # no shape legend: a second legend overflowed half-width columns; the "> cap" tick and the numbers say it
    shape = alt.Shape("where:N", scale=alt.Scale(domain=[IN_RANGE, BEYOND], range=SHAPE_RANGE), legend=None)
    tooltip = ["record", "before", "after", "shift"]
    base = alt.Chart(df).encode(x=x, y=y, color=color, detail="id:N", tooltip=tooltip)
    lines = base.mark_line(strokeWidth=2) + base.mark_point(size=45, opacity=1, filled=True).encode(shape=shape)
    labels = alt.Chart(df[df["x"] == 1] if not df.empty else df).mark_text(align="left", dx=8, fontSize=11).encode(
        x=x, y=y, text="label:N", color=alt.Color("direction:N", scale=DIRECTION_SCALE, legend=None),
        tooltip=tooltip)
    heads = alt.Chart(pd.DataFrame({"x": [0, 1], "y": [-0.3, -0.3], "text": [before, after]})).mark_text(
        fontWeight="bold", fontSize=11, color=NEUTRAL).encode(x=x, y=y, text="text:N")
    chart = lines + labels + heads
    if slots[0]:  # the real "before" rank of each triangle on the left, which has no record label
        left = df[(df["x"] == 0) & (df["where"] == BEYOND)]
        chart += alt.Chart(left).mark_text(align="right", dx=-7, fontSize=10).encode(
            x=x, y=y, text="before:Q", color=alt.Color("direction:N", scale=DIRECTION_SCALE, legend=None),
            tooltip=tooltip)
    if capped:  # the break between the true ranks and the slots beyond the cap
        chart += alt.Chart(pd.DataFrame({"y": [cap + 0.5]})).mark_rule(strokeDash=[2, 3], color=NEUTRAL).encode(y=y)
    return chart.properties(height=max(240, int(20 * ymax)))


def _stacked(rows: Sequence[FusionRow] | Sequence[RerankRow],
             parts: Callable[[Any], tuple[tuple[str, float], ...]], *, part: str, value: str,
             title: str | list[str], fmt: str) -> alt.Chart:
    """One bar per row, split into named parts (stacked); a list title is drawn one line per item."""
    df = pd.DataFrame([{"label": row_label(r, r.rank), part: name, value: v, "record": r.record_id}
                       for r in rows for name, v in parts(r)])
    # one legend entry per line: a half-width column has no room for long entries side by side
    legend = alt.Legend(orient="bottom", direction="vertical", labelLimit=LEGEND_LIMIT)
    return alt.Chart(df).mark_bar().encode(
        x=alt.X(f"sum({value}):Q", title=title),
        y=_y(),
        color=alt.Color(f"{part}:N", title=None, legend=legend),
        tooltip=["record", part, alt.Tooltip(f"{value}:Q", format=fmt)],
    ).properties(height=STEP)


def contribution_bars(rows: Sequence[FusionRow], top: int = 15) -> alt.Chart:
    """Fusion score split into its BM25 and embedding contributions (stacked)."""
    return _stacked(rows[:top], lambda r: (("BM25", r.bm25_contribution), ("embedding", r.embedding_contribution)),
                    part="leg", value="contribution", title="fused score", fmt=".5f")


def reranker_bars(rows: Sequence[RerankRow], top: int = 15) -> alt.Chart:
    """The reranker's score per candidate; for the learned ranker's blend, its two parts stacked."""
    shown = [r for r in rows[:top] if r.reranker_score is not None]
    if any(r.prior is not None for r in shown):
        return _stacked(shown, lambda r: ((RANKER_PART, r.score - (r.prior or 0.0)), (PRIOR_PART, r.prior or 0.0)),
                        part="part", value="value", title=["final score =", "standardised ranker + prior"],
                        fmt=".3f")
    df = pd.DataFrame([{"label": row_label(r, r.rank), "score": r.reranker_score, "record": r.record_id}
                       for r in shown])
    return alt.Chart(df).mark_bar().encode(
        x=alt.X("score:Q", title="reranker score"),
        y=_y(),
        tooltip=["record", alt.Tooltip("score:Q", format=".3f")],
    ).properties(height=STEP)


def margin_chart(rows: Sequence[ValidateRow], threshold: float | None) -> alt.LayerChart | alt.Chart:
    """The judge score per candidate (Qwen's yes−no margin plus the evidence prior, when the validator
    reports one), with the acceptance threshold as a rule."""
    df = pd.DataFrame([{"label": row_label(r, r.rank), "record": r.record_id,
                        "score": r.judge_score if r.judge_score is not None else r.margin, "margin": r.margin,
                        "coverage": r.coverage, "verdict": r.verdict if r.verdict in ("yes", "no") else "other",
                        "accepted": "accepted" if r.accepted else "not accepted"}
                       for r in rows if r.margin is not None])
    values = [*df["score"], 0.0] + ([threshold] if threshold is not None else [])
    pad = 0.08 * (max(values) - min(values) or 1.0)
    x = alt.X("score:Q", title="judge score (yes − no margin + evidence prior)",
              scale=alt.Scale(domain=[min(values) - pad, max(values) + pad], nice=False))
    bars = alt.Chart(df).mark_bar().encode(
        x=x, y=_y(),
        color=alt.Color("verdict:N", scale=VERDICT_SCALE, legend=alt.Legend(orient="bottom", title="Qwen")),
        tooltip=["record", "verdict", "accepted", alt.Tooltip("score:Q", format=".2f"),
                 alt.Tooltip("margin:Q", format=".2f"), alt.Tooltip("coverage:Q", format=".2f")],
    )
    if threshold is None:
        return bars.properties(height=STEP)
    line = pd.DataFrame({"score": [threshold], "text": [f"threshold {threshold:g}"]})
    rule = alt.Chart(line).mark_rule(strokeDash=[5, 3], strokeWidth=2, color=RULE).encode(
        x=x, tooltip=[alt.Tooltip("score:Q", title="threshold")])
    text = alt.Chart(line).mark_text(align="right", dx=-4, dy=-6, color=RULE, fontSize=11).encode(
        x=x, y=alt.value(0), text="text:N")
    return (bars + rule + text).properties(height=STEP)


def latency_bars(df: pd.DataFrame) -> alt.Chart:
    """Stacked seconds per stage, one bar per alternative (df: alternative, stage, seconds)."""
    return alt.Chart(df).mark_bar().encode(
        x=alt.X("sum(seconds):Q", title="seconds"),
        y=alt.Y("alternative:N", title=None),
        color=alt.Color("stage:N", legend=alt.Legend(orient="bottom", title="stage"),
                        sort=list(PIPELINE_ORDER)),
        order=alt.Order("order:Q"),
        tooltip=["alternative", "stage", alt.Tooltip("seconds:Q", format=".2f")],
    ).properties(height={"step": 40})


def metric_bars(df: pd.DataFrame, value: str = "value") -> alt.Chart:
    """Grouped bars: one facet column per metric, one bar per system (df: system, metric, value)."""
    return alt.Chart(df).mark_bar().encode(
        x=alt.X("system:N", title=None, axis=alt.Axis(labelAngle=-45, labelOverlap=False)),  # name every bar
        y=alt.Y(f"{value}:Q", title=None, scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("system:N", legend=None),
        column=alt.Column("metric:N", title=None),
        tooltip=["system", "metric", alt.Tooltip(f"{value}:Q", format=".3f")],
    ).properties(width=150, height=200)


def interval_chart(df: pd.DataFrame) -> alt.LayerChart:
    """One row per system: its mean as a point and its confidence interval as a bar (df: system, mean, low, high)."""
    y = alt.Y("system:N", title=None, sort=None)
    x = alt.X("low:Q", title="nDCG@10 (95% interval over chunks)", scale=alt.Scale(domain=[0, 1]))
    bars = alt.Chart(df).mark_rule(strokeWidth=3, opacity=0.6).encode(
        x=x, x2="high:Q", y=y, color=alt.Color("system:N", legend=None))
    points = alt.Chart(df).mark_point(filled=True, size=70).encode(
        x="mean:Q", y=y, color=alt.Color("system:N", legend=None),
        tooltip=["system", alt.Tooltip("mean:Q", format=".3f"), alt.Tooltip("low:Q", format=".3f"),
                 alt.Tooltip("high:Q", format=".3f")])
    return (bars + points).properties(width=420, height=STEP)


ACCEPTS = ("not accepted", "accepted", "accepted by a rule")


def p_chart(rows: Sequence[ValidateRow], threshold: float | None) -> alt.LayerChart | alt.Chart:
    """The accept model's p per judged candidate, with the threshold as a rule; hollow = decided without Qwen.
    A record a rule accepted (its p may sit below the threshold) has a colour of its own."""
    df = pd.DataFrame([{"label": row_label(r, r.rank), "record": r.record_id, "p": r.p,
                        "asked": "Qwen asked" if r.asked_qwen else "decided without Qwen",
                        "accepted": ACCEPTS[0 if not r.accepted else 2 if r.rule else 1],
                        "why": r.rule or r.note} for r in rows if r.p is not None])
    x = alt.X("p:Q", title="p (calibrated probability of direct evidence)", scale=alt.Scale(domain=[0, 1]))
    bars = alt.Chart(df).mark_bar().encode(
        x=x, y=_y(), color=alt.Color("accepted:N", scale=alt.Scale(domain=[ACCEPTS[1], ACCEPTS[0], ACCEPTS[2]],
                                                                   range=["#2e7d32", "#c62828", "#1565c0"]),
                                     legend=alt.Legend(orient="bottom", title=None)),
        opacity=alt.Opacity("asked:N", scale=alt.Scale(domain=["Qwen asked", "decided without Qwen"],
                                                       range=[1.0, 0.45]), legend=alt.Legend(orient="bottom",
                                                                                            title=None)),
        tooltip=["record", "accepted", "asked", alt.Tooltip("p:Q", format=".3f"), "why"])
    if threshold is None:
        return bars.properties(height=STEP)
    rule = alt.Chart(pd.DataFrame({"p": [threshold]})).mark_rule(strokeDash=[5, 3], strokeWidth=2,
                                                                 color=RULE).encode(x=x)
    return (bars + rule).properties(height=STEP)


def contribution_chart(contributions: Sequence[Contribution]) -> alt.Chart:
    """Each feature's share of p's log-odds: green raises p, red lowers it."""
    df = pd.DataFrame([{"feature": f"{c.feature} = {c.value:g}", "contribution": c.contribution,
                        "sign": "raises p" if c.contribution >= 0 else "lowers p"} for c in contributions])
    return alt.Chart(df).mark_bar().encode(
        x=alt.X("contribution:Q", title="contribution to log-odds of p"),
        y=_y("feature:N"),
        color=alt.Color("sign:N", scale=alt.Scale(domain=["raises p", "lowers p"], range=["#2e7d32", "#c62828"]),
                        legend=None),
        tooltip=["feature", alt.Tooltip("contribution:Q", format="+.3f")]).properties(height=STEP)


def reliability_chart(calibration: dict[str, dict]) -> alt.LayerChart:
    """Mean p per bin vs the share of relevant records in it, per alternative, with the diagonal."""
    df = pd.DataFrame([{"alternative": a, **b} for a, cal in calibration.items() for b in cal.get("bins", [])])
    axis = alt.Scale(domain=[0, 1])
    diag = alt.Chart(pd.DataFrame({"x": [0.0, 1.0], "y": [0.0, 1.0]})).mark_line(strokeDash=[4, 3], color=RULE
                                                                                 ).encode(x="x:Q", y="y:Q")
    if df.empty:
        return diag + diag
    pts = alt.Chart(df).mark_line(point=True).encode(
        x=alt.X("p_mean:Q", title="mean p in the bin", scale=axis),
        y=alt.Y("relevant_share:Q", title="share actually relevant", scale=axis),
        color=alt.Color("alternative:N", legend=alt.Legend(orient="bottom")),
        tooltip=["alternative", alt.Tooltip("p_mean:Q", format=".2f"), alt.Tooltip("relevant_share:Q", format=".2f"),
                 "n"])
    return (diag + pts).properties(width=320, height=320)
