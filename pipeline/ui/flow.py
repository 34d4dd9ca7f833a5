"""The flow overview: every stage of every alternative as one node, D and F in aligned rows.

Pure (no Streamlit): :func:`flow_nodes` reads a :class:`Trace` into typed nodes,
:func:`flow_chart` draws them with altair (the dashboard and the HTML report
share it), and :func:`eta` says how long the model stages still need, from the
settings' cost estimates minus the time already spent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import altair as alt
import pandas as pd

from pipeline.settings import AltName, Settings
from pipeline.trace import AlternativeTrace, AnyStage, Status, Trace

Column = Literal["bm25", "embedding", "union", "ranking", "validate", "final"]
COLUMNS: tuple[Column, ...] = ("bm25", "embedding", "union", "ranking", "validate", "final")
# Where each node leads: the panel of that stage on the main page and in the report.
PANEL_ANCHORS: dict[Column, str] = {"bm25": "panel-bm25", "embedding": "panel-embedding", "union": "panel-union",
                                    "ranking": "panel-ranking", "validate": "panel-validate", "final": "panel-final"}
ALT_LABELS: dict[AltName, str] = {"D": "D · fusion", "F": "F · reranker"}

# Colours that read on a light and a dark page: light boxes, dark text.
INK, MUTED = "#1f2937", "#6b7280"
FILL: dict[str, str] = {"ok": "#eef2f7", "pending": "#fff4db", "skipped": "#f3f4f6", "not_run": "#f3f4f6",
                        "error": "#fde8e8", "accepted": "#e3f5ea"}
STROKE: dict[str, str] = {"ok": "#94a3b8", "pending": "#d97706", "skipped": "#cbd5e1", "not_run": "#cbd5e1",
                          "error": "#dc2626", "accepted": "#16a34a"}
TIME = "#f59e0b"  # amber: the share of the alternative's time a stage took
HALF_W, HALF_H = 0.43, 0.40  # node half width / height in column / row units
ROW_PX = 92


@dataclass(frozen=True)
class FlowNode:
    """One stage of one alternative, as the overview draws it."""

    alternative: AltName
    column: Column
    title: str  # e.g. "BM25 · top 50", "Rerank · qwen"
    count: int | None  # what the stage produced (None: nothing yet)
    count_text: str  # e.g. "50 hits", "8 judged", "3 of 20"
    ms: float
    status: Status
    share: float  # of this alternative's time, 0..1
    time_text: str  # e.g. "7 ms", "~24 s est.", "total 25.3 s"
    note: str = ""  # the stage's message (why it was skipped, what is pending)

    @property
    def accepted_any(self) -> bool:
        return self.column == "final" and bool(self.count)


def fmt_ms(ms: float) -> str:
    if ms < 1:
        return "<1 ms"
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def _stage_text(stage: AnyStage | None, done: str, est_s: float) -> tuple[int | None, str, str]:
    """(count, count text, time text) for a stage that may be missing, pending, skipped or done."""
    if stage is None:
        return None, "did not run", "—"
    if stage.status == "pending":
        return None, "waiting", f"~{est_s:.0f} s est." if est_s else "running"
    if stage.status in ("skipped", "not_run"):
        return None, "off" if stage.status == "skipped" else "not run", "—"
    if stage.status == "error" and not stage.rows:
        return None, "error", fmt_ms(stage.ms)
    return stage.count, done, fmt_ms(stage.ms)


def _ranking_node(a: AlternativeTrace, s: Settings) -> tuple[str, int | None, str, str]:
    if a.name == "D":
        f = a.fusion
        title = f"Fusion · {f.method.upper() if f.method == 'rrf' else f.method}" if f else "Fusion"
        n, text, t = _stage_text(f, f"{f.count if f else 0} ranked", 0.0)
        return title, n, text, t
    r = a.rerank
    title = f"Rerank · {s.reranker}"
    if r is not None and r.status == "skipped":
        return title, None, "off: union order", "—"
    n, text, t = _stage_text(r, f"{r.scored if r else 0} scored", s.rerank_seconds())
    if r is not None and r.status == "pending":
        text = f"{s.rerank_count(r.count)} to score"
    return title, (r.scored if r is not None and n is not None else n), text, t


def _validate_node(a: AlternativeTrace, s: Settings, code_chars: int | None) -> tuple[str, int | None, str, str]:
    v = a.validation
    title = f"Validator · top {s.validator_top_k}"
    judged = len(v.judged_rows) if v is not None else 0
    n, text, t = _stage_text(v, f"{judged} judged", s.judge_seconds(code_chars))
    if v is not None and v.writing_lists:  # decided; the evidence lists are being written
        return title, judged, f"{judged} judged", "evidence lists…"
    if v is not None and v.status == "pending":
        text = f"{s.validator_top_k} to judge"
    elif v is not None and v.status == "ok" and v.cached:
        t = f"{v.cached} cached · {t}"
    return title, (judged if n is not None else None), text, t


def _final_node(a: AlternativeTrace) -> tuple[int | None, str, Status]:
    v = a.validation
    n_acc = sum(1 for it in a.final if it.accepted)
    if v is None or v.status in ("skipped", "not_run"):
        return None, "none judged", "skipped"  # the ranked count would not fit the box
    if v.writing_lists:  # decided; the evidence lists are being written
        return n_acc, f"{n_acc} of {len(a.final)}", "pending"
    if v.status == "pending":
        return None, "waiting", "pending"
    return n_acc, f"{n_acc} of {len(a.final)}", "ok"


def alternative_nodes(a: AlternativeTrace, s: Settings, code_chars: int | None = None) -> list[FlowNode]:
    """The six nodes of one alternative, left to right (``code_chars``: the chunk's size, for the estimates)."""
    total = a.ms or 1.0

    def node(column: Column, title: str, stage: AnyStage | None, n: int | None, text: str, t: str) -> FlowNode:
        ms = stage.ms if stage is not None else 0.0
        status: Status = stage.status if stage is not None else "not_run"
        return FlowNode(a.name, column, title, n, text, ms, status, ms / total if a.ms else 0.0, t,
                        stage.message if stage is not None else "")

    out: list[FlowNode] = []
    for column, stage, label in (("bm25", a.bm25, "BM25"), ("embedding", a.embedding, "Embedding")):
        k = getattr(stage, "k", 0)
        n, text, t = _stage_text(stage, f"{stage.count if stage else 0} hits", 0.0)
        out.append(node(column, f"{label} · top {k}" if k else label, stage, n, text, t))
    n, text, t = _stage_text(a.union, f"{a.union.count if a.union else 0} candidates", 0.0)
    out.append(node("union", "Union", a.union, n, text, t))
    title, n, text, t = _ranking_node(a, s)
    out.append(node("ranking", title, a.ranking, n, text, t))
    title, n, text, t = _validate_node(a, s, code_chars)
    out.append(node("validate", title, a.validation, n, text, t))
    n_acc, text, status = _final_node(a)
    judged = len(a.validation.judged_rows) if a.validation is not None else 0
    note = (f"accepted out of the final list of {len(a.final)}; the validator judged {judged} of them"
            if n_acc is not None else "")
    out.append(FlowNode(a.name, "final", "Accepted", n_acc, text, a.ms, status, 0.0, f"total {fmt_ms(a.ms)}", note))
    return out


def flow_nodes(trace: Trace) -> list[FlowNode]:
    """Every alternative's nodes, in the trace's order (D before F)."""
    chars = len(trace.chunk.text)
    return [n for a in trace.alternatives.values() for n in alternative_nodes(a, trace.settings, chars)]


def flow_frame(nodes: list[FlowNode], anchors: Mapping[Column, str] | None = None) -> pd.DataFrame:
    """One row per node with its box, texts and link: what :func:`flow_chart` draws."""
    alts = list(dict.fromkeys(n.alternative for n in nodes))
    rows = []
    for n in nodes:
        x, y = COLUMNS.index(n.column), alts.index(n.alternative)
        look = "accepted" if n.accepted_any else n.status
        anchor = (anchors or {}).get(n.column)
        rows.append({
            "alternative": n.alternative, "column": n.column, "x": x, "y": y,
            "x0": x - HALF_W, "x1": x + HALF_W, "y0": y - HALF_H, "y1": y + HALF_H,
            "ybar0": y + HALF_H - 0.15, "ybar1": y + HALF_H - 0.10,
            "xbar0": x - HALF_W + 0.06, "bar1": x - HALF_W + 0.06 + (2 * HALF_W - 0.12) * min(max(n.share, 0.0), 1.0),
            "title": n.title, "count_text": n.count_text, "time_text": n.time_text,
            "share": n.share if n.column != "final" and n.status == "ok" else None,
            "fill": FILL.get(look, FILL["ok"]), "stroke": STROKE.get(look, STROKE["ok"]),
            "status": n.status, "note": n.note,
            "ms": round(n.ms, 1), "href": f"#{anchor}" if anchor else None})
    return pd.DataFrame(rows)


def _row_labels(nodes: list[FlowNode]) -> pd.DataFrame:
    alts = list(dict.fromkeys(n.alternative for n in nodes))
    total = {a: sum(n.ms for n in nodes if n.alternative == a and n.column != "final") for a in alts}
    return pd.DataFrame([{"x": -0.52, "y": i, "label": ALT_LABELS[a], "total": f"{fmt_ms(total[a])} in all"}
                         for i, a in enumerate(alts)])


def flow_chart(nodes: list[FlowNode], anchors: Mapping[Column, str] | None = PANEL_ANCHORS) -> alt.LayerChart:
    """Nodes with count and time, arrows between them, a time-share bar in each node; a node links to
    its panel (``anchors``). Pending nodes have a dashed amber outline."""
    df = flow_frame(nodes, anchors)
    n_rows = int(df["y"].max()) + 1 if not df.empty else 1
    x_scale = alt.Scale(domain=[-1.25, len(COLUMNS) - 0.5], nice=False, zero=False)
    y_scale = alt.Scale(domain=[-0.5, n_rows - 0.5], reverse=True, nice=False, zero=False)
    x, y = alt.X("x:Q", scale=x_scale, axis=None), alt.Y("y:Q", scale=y_scale, axis=None)
    tooltip = [alt.Tooltip("alternative:N"), alt.Tooltip("title:N", title="stage"),
               alt.Tooltip("count_text:N", title="result"), alt.Tooltip("ms:Q", title="ms"),
               alt.Tooltip("status:N"), alt.Tooltip("note:N")]
    base = alt.Chart(df)
    box = {"x": alt.X("x0:Q", scale=x_scale, axis=None), "x2": "x1:Q", "y": alt.Y("y0:Q", scale=y_scale, axis=None),
           "y2": "y1:Q", "fill": alt.Fill("fill:N", scale=None), "stroke": alt.Stroke("stroke:N", scale=None),
           "href": "href:N", "tooltip": tooltip}
    done = base.transform_filter("datum.status != 'pending'").mark_rect(cornerRadius=6, strokeWidth=1.6,
                                                                        cursor="pointer").encode(**box)
    waiting = base.transform_filter("datum.status == 'pending'").mark_rect(
        cornerRadius=6, strokeWidth=2, strokeDash=[6, 4], cursor="pointer").encode(**box)
    bars = base.transform_filter("datum.share != null").mark_rect(color=TIME).encode(
        x=alt.X("xbar0:Q", scale=x_scale, axis=None), x2="bar1:Q", y=alt.Y("ybar0:Q", scale=y_scale, axis=None),
        y2="ybar1:Q", href="href:N", tooltip=tooltip)
    text = [base.mark_text(fontSize=size, fontWeight=weight, color=colour, dy=dy, cursor="pointer").encode(
        x=x, y=y, text=f"{field}:N", href="href:N", tooltip=tooltip)
        for field, size, weight, colour, dy in (("title", 11, "normal", MUTED, -21),
                                                ("count_text", 14, "bold", INK, -1),
                                                ("time_text", 11, "normal", INK, 17))]
    arrows = alt.Chart(_arrows(df)).mark_rule(color=MUTED, strokeWidth=1.5).encode(
        x=alt.X("a0:Q", scale=x_scale, axis=None), x2="a1:Q", y=y)
    heads = alt.Chart(_arrows(df)).mark_point(shape="triangle-right", filled=True, color=MUTED, size=40,
                                              opacity=1).encode(x=alt.X("a1:Q", scale=x_scale, axis=None), y=y)
    rows = alt.Chart(_row_labels(nodes))
    labels = rows.mark_text(align="right", fontSize=13, fontWeight="bold", color=INK, dy=-8).encode(
        x=x, y=y, text="label:N")
    totals = rows.mark_text(align="right", fontSize=11, color=MUTED, dy=9).encode(x=x, y=y, text="total:N")
    return alt.layer(arrows, heads, done, waiting, bars, *text, labels, totals).properties(
        height=ROW_PX * n_rows, description=describe(nodes),
        padding={"left": 4, "right": 4, "top": 2, "bottom": 2}).configure_view(stroke=None)


def describe(nodes: list[FlowNode]) -> str:
    """The strip in words: the chart's aria-label (screen readers, and tests that cannot read a canvas)."""
    alts = list(dict.fromkeys(n.alternative for n in nodes))
    rows = ["; ".join(f"{n.title}: {n.count_text}, {n.time_text}" for n in nodes if n.alternative == a) for a in alts]
    return "Flow overview. " + " | ".join(f"{ALT_LABELS[a]}: {r}" for a, r in zip(alts, rows, strict=True))


def _arrows(df: pd.DataFrame) -> pd.DataFrame:
    rows = [{"y": y, "a0": x + HALF_W + 0.01, "a1": x + 1 - HALF_W - 0.03}
            for y in sorted(set(df["y"])) for x in range(len(COLUMNS) - 1)] if not df.empty else []
    return pd.DataFrame(rows, columns=["y", "a0", "a1"])


# --- what is still running, and for how long ---------------------------------------------------
@dataclass(frozen=True)
class Eta:
    """The model phase's cold-cache estimate against the time spent (cached verdicts finish sooner)."""

    estimate_s: float  # all model stages the fast phase scheduled
    pending_s: float  # the ones still pending now
    elapsed_s: float
    running: tuple[str, ...]  # e.g. ("F rerank", "D validate")

    @property
    def left_s(self) -> float:
        return min(self.pending_s, max(self.estimate_s - self.elapsed_s, 0.0))

    @property
    def text(self) -> str:
        if not self.running:
            return "model stages done"
        what = ", ".join(self.running)
        if self.elapsed_s > self.estimate_s:
            return f"still running: {what} · over the ~{self.estimate_s:.0f} s estimate"
        return f"still running: {what} · about {self.left_s:.0f} s left (of ~{self.estimate_s:.0f} s, cold cache)"


def _stage_cost(stage: AnyStage, s: Settings, code_chars: int) -> float:
    if stage.name == "rerank":
        return s.rerank_seconds()
    return s.judge_seconds(code_chars) if stage.name == "validate" else 0.0


def pending_seconds(trace: Trace) -> float:
    """The cost estimate of every stage still pending in ``trace``."""
    chars = len(trace.chunk.text)
    return sum(_stage_cost(st, trace.settings, chars) for a in trace.alternatives.values() for st in a.stages
               if st.status == "pending")


def eta(scheduled: Trace, now: Trace, elapsed_s: float) -> Eta:
    """``scheduled``: the fast phase's trace (what the model phase set out to do); ``now``: the latest one."""
    running = tuple(f"{name} {'evidence lists' if a.validation is st and st.writing_lists else st.name}"
                    for name, a in now.alternatives.items() for st in a.stages if st.status == "pending")
    return Eta(pending_seconds(scheduled), pending_seconds(now), elapsed_s, running)
