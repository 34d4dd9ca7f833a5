"""A self-contained HTML report of one run, built from its :class:`Trace` alone.

Every panel of the dashboard — tables and charts, D and F side by side — plus
the comparison and the final list as JSONL, in one file that opens offline:
the Vega bundle comes from vl-convert-python and is inlined once, each chart is
its altair spec (the dashboard's own chart functions), drawn as SVG by
vega-embed. A print stylesheet lays it out for A4 landscape: no sticky header,
rows never split, each section on a new page.

``render_report(trace)`` returns the HTML; ``write_report(trace, path)`` writes
it atomically. Nothing here imports Streamlit.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import altair as alt
import pandas as pd
from jinja2 import Environment
from markupsafe import Markup

from pipeline import atomic
from pipeline.trace import AlternativeTrace, AnyStage, Trace, UnionTrace, ValidateRow
from pipeline.ui import charts, flow, views
from pipeline.ui.charts import Shift

ALT_TITLES = {"D": "D · BM25 ∥ embedding → fusion", "F": "F · BM25 ∥ embedding → reranker"}
# (section id, number, title, what it shows); ids match the flow strip's links (flow.PANEL_ANCHORS).
SECTIONS = [("panel-chunk", "1", "Raw chunk", "The code as the pipeline reads it, and the query terms read off it."),
            ("panel-bm25", "2", "BM25 candidates", "Keyword leg: records ranked by BM25 over the chunk's "
             "identifiers, calls and strings; the matched terms are what scored."),
            ("panel-embedding", "3", "Embedding candidates", "Semantic leg: cosine similarity between the chunk's "
             "embedding and each record's."),
            ("panel-union", "4", "Union of both legs", "Every record found by either leg, once, with where it "
             "came from; sections of the same page found twice are merged."),
            ("panel-ranking", "5", "Fusion (D) / reranker (F)", "How the union is re-ordered: D fuses the legs' "
             "scores, F asks a reranking model; the slope chart shows who moved."),
            ("panel-validate", "6", "Validator", "The local Qwen's verdict on each top candidate, checked against "
             "deterministic evidence (strings, API calls, patterns found in both texts)."),
            ("panel-final", "7", "Final records", "What the PoC outputs: accepted and rejected records per "
             "alternative."),
            ("compare", "8", "D vs F", "Where the alternatives agree, how their rankings differ and what each "
             "cost."),
            ("jsonl", "9", "Final lists as JSONL", "One JSON object per final item (the trace's view of the record; "
             "the full records are in the KB).")]


@functools.lru_cache(maxsize=1)
def vega_bundle() -> str:
    """vega + vega-lite + vega-embed as one script, for altair's Vega-Lite version (no network)."""
    import vl_convert

    major_minor = "_".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    return str(vl_convert.javascript_bundle(vl_version=f"v{major_minor}"))


@dataclass
class _Charts:
    """The charts of one report: each gets a div id; their specs are embedded once at the end."""

    specs: list[tuple[str, dict[str, object]]] = field(default_factory=list)

    def add(self, chart: alt.TopLevelMixin, *, stretch: bool = True) -> Markup:
        cid = f"chart-{len(self.specs) + 1}"
        sized = chart.properties(width="container", autosize=alt.AutoSizeParams(type="fit-x", contains="padding")
                                 ) if stretch else chart
        self.specs.append((cid, sized.to_dict()))
        return Markup('<div class="chart" id="{}"></div>').format(cid)

    def script(self) -> Markup:
        payload = json.dumps(self.specs, separators=(",", ":")).replace("</", "<\\/")
        return Markup(RUNNER.replace("__CHARTS__", payload))


# Draws every chart as SVG; body[data-charts] tells a test (or a printer script) when all are drawn.
RUNNER = """<script>
const CHARTS = __CHARTS__;
Promise.all(CHARTS.map(([id, spec]) => vegaEmbed('#' + id, spec, {renderer: 'svg', actions: false}))).then(
  () => { document.body.dataset.charts = 'ready'; },
  (err) => { document.body.dataset.charts = 'error'; console.error(err); });
</script>"""


# --- small HTML pieces -------------------------------------------------------------------------
TABLE = Environment(autoescape=True).from_string(
    '<table class="t"><thead><tr>{% for c, n in cols %}<th class="{{ n }}">{{ c }}</th>{% endfor %}</tr></thead>'
    '<tbody>{% for row in rows %}<tr>{% for v, n in row %}<td class="{{ n }}">{{ v }}</td>{% endfor %}</tr>'
    '{% endfor %}</tbody></table>')


def cell(value: object) -> str:
    if value is None or (isinstance(value, float) and value != value):  # None / NaN
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) >= 0.01 else f"{value:.2g}"
    return str(value)


def table(df: pd.DataFrame, *, drop: tuple[str, ...] = ("record_id",)) -> Markup:
    """A plain HTML table; numbers do not wrap, text wraps anywhere (long record ids fit a half page)."""
    if df.empty:
        return Markup('<p class="muted">No rows.</p>')
    cols = [c for c in df.columns if c not in drop]
    kind = {c: "n" if pd.api.types.is_numeric_dtype(df[c]) or pd.api.types.is_bool_dtype(df[c])
            else "s rec" if c == "record" else "s" for c in cols}
    rows = [[(cell(v), kind[c]) for c, v in zip(cols, values, strict=True)]
            for values in df[cols].itertuples(index=False, name=None)]
    return Markup(TABLE.render(cols=[(c, kind[c]) for c in cols], rows=rows))


def para(text: str, cls: str = "") -> Markup:
    return Markup('<p class="{}">{}</p>').format(cls, text)


def stage_note(stage: AnyStage | None) -> Markup:
    """Why a stage has nothing (or only part) to show, as the dashboard says it."""
    if stage is None:
        return para("This stage did not run for this alternative.", "note")
    if stage.status == "ok":
        return Markup("")
    return para(f"{stage.status.replace('_', ' ')}: {stage.message or 'no message'}", "note")


def metrics(pairs: list[tuple[str, object]]) -> Markup:
    cells = Markup("").join(Markup('<div class="metric"><b>{}</b><span>{}</span></div>').format(v, k)
                            for k, v in pairs)
    return Markup('<div class="metrics">{}</div>').format(cells)


def fmt_ms(ms: float) -> str:
    return flow.fmt_ms(ms)


# --- one alternative's part of each panel ------------------------------------------------------
def part_bm25(a: AlternativeTrace, c: _Charts) -> Markup:
    s = a.bm25
    if s is None or not s.rows:
        return stage_note(s)
    return stage_note(s) + para(f"{s.count} hits · {s.scorer} · {fmt_ms(s.ms)}") + table(views.bm25_frame(s))


def part_embedding(a: AlternativeTrace, c: _Charts) -> Markup:
    s = a.embedding
    if s is None or not s.rows:
        return stage_note(s)
    return (stage_note(s) + para(f"{s.count} hits · model {s.model} · {fmt_ms(s.ms)}; top 15 charted")
            + c.add(charts.similarity_bars(s.rows)) + table(views.embedding_frame(s)))


def _rule_metrics(s: UnionTrace) -> list[tuple[str, int]]:
    renames, classes = views.rule_counts(s)
    return ([("Godot 3 rename rule", renames)] if renames else []) + ([("classes used (rule)", classes)]
                                                                        if classes else [])


def part_union(a: AlternativeTrace, c: _Charts) -> Markup:
    s = a.union
    if s is None or not s.rows:
        return stage_note(s)
    n = s.provenance_counts
    out = stage_note(s) + metrics([("candidates", s.count), ("BM25 only", n.get("bm25", 0)),
                                   ("embedding only", n.get("embedding", 0)), ("both legs", n.get("both", 0)),
                                   *_rule_metrics(s)])
    out += table(views.union_frame(s))
    if s.merged:
        out += para(f"{len(s.merged)} duplicate(s) merged:") + table(views.merged_frame(s))
    return out


# Half a landscape page holds ~8 columns: the parts are charted above, the raw leg values are in the union table.
FUSION_DROP = ("record_id", "BM25 part", "embedding part", "BM25 raw", "similarity", "BM25 norm", "embedding norm")


def part_ranking(a: AlternativeTrace, c: _Charts) -> Markup:
    if a.name == "D":
        s = a.fusion
        if s is None or not s.rows:
            return stage_note(s)
        return (stage_note(s) + para(views.fusion_formula(s)) + c.add(charts.contribution_bars(s.rows))
                + c.add(charts.slope_chart([Shift.of(r) for r in s.rows], "union order", "after fusion"))
                + table(views.fusion_frame(s), drop=FUSION_DROP))
    r = a.rerank
    if r is None or not r.rows:
        return stage_note(r)
    out = stage_note(r)
    if r.scored:
        out += para(f"{r.reranker} scored the union's top {r.scored} (of {r.count}) in {fmt_ms(r.ms)}.")
        out += c.add(charts.reranker_bars(r.rows))
        out += c.add(charts.slope_chart([Shift.of(x) for x in r.rows], "union order", "after reranking"))
    return out + table(views.rerank_frame(r))


def _evidence_frame(rows: list[ValidateRow]) -> pd.DataFrame:
    return pd.DataFrame([{"rank": r.rank, "record": r.name,
                          "Qwen's evidence (✓ found in both texts)": "; ".join(
                              f"{'✓' if e.verified else '✗'} {e.text} [{e.field}]" for e in r.evidence),
                          "shared facts": "; ".join(f"{f.text} [{f.field}]" for f in r.facts),
                          "conflicts": "; ".join(r.conflicts),
                          "decision": r.note, "note": r.message} for r in rows])


def part_validate(a: AlternativeTrace, c: _Charts) -> Markup:
    v = a.validation
    if v is None or v.status != "ok":
        return stage_note(v)
    judged = v.judged_rows
    # under the accept model the p threshold decides (below); Qwen's score threshold only under the Qwen policies
    qwen_threshold = f" · threshold {v.threshold}" if v.threshold is not None and not v.accept_model else ""
    out = para(f"Model {v.model or 'none'} · policy: {v.policy_text}{qwen_threshold} · judges "
               f"{v.scope_text} · {fmt_ms(v.ms)}")
    out += metrics([("judged now", v.judged), ("from cache", v.cached), ("prompt tokens", f"{v.prompt_tokens:,}"),
                    ("reused tokens", f"{v.reused_tokens:,}"), ("evidence lists", v.lists)])
    if not judged:
        return out + para("No candidate was in the validator's scope.", "muted")
    if any(r.p is not None for r in judged):  # policy "calibrated": p against its threshold, as the dashboard
        out += para(f"Accept model {v.accept_model} · p threshold {v.p_threshold} · "
                    f"{v.skipped} of {len(judged)} decided without Qwen.{v.lists_text}")
        out += c.add(charts.p_chart(judged, v.p_threshold))
    elif any(r.margin is not None for r in judged):
        out += c.add(charts.margin_chart(judged, v.threshold))
    # Threshold and cache are said above; the margin is the score without the evidence prior.
    brief = table(views.validate_frame(judged), drop=("record_id", "margin", "threshold", "cached"))
    return out + brief + para("Evidence per candidate:") + table(
        _evidence_frame(judged))


def part_final(a: AlternativeTrace, c: _Charts) -> Markup:
    df = views.final_frame(a.final)
    groups = [("accepted", "Accepted"), ("rejected", "Rejected"), ("not judged", "Not judged (ranked only)")]
    out = metrics([(label, int((df["decision"] == key).sum())) for key, label in groups])
    for key, label in groups:
        part = df[df["decision"] == key]
        if not part.empty:
            out += Markup('<h4 class="{}">{}</h4>').format(key.replace(" ", "-"), label)
            out += table(part, drop=("decision", "source", "doc_path"))
    return out


def part_jsonl(a: AlternativeTrace, c: _Charts) -> Markup:
    text = views.final_jsonl(a.final)
    return Markup('<pre class="jsonl">{}</pre>').format(text or "(empty)")


PARTS: dict[str, Callable[[AlternativeTrace, _Charts], Markup]] = {
    "panel-bm25": part_bm25, "panel-embedding": part_embedding, "panel-union": part_union,
    "panel-ranking": part_ranking, "panel-validate": part_validate, "panel-final": part_final, "jsonl": part_jsonl}


# --- whole sections ----------------------------------------------------------------------------
def side_by_side(trace: Trace, part: Callable[[AlternativeTrace, _Charts], Markup], c: _Charts) -> Markup:
    cols = Markup("").join(Markup('<div class="alt"><h3>{}</h3>{}</div>').format(ALT_TITLES[name], part(a, c))
                           for name, a in trace.alternatives.items())
    return Markup('<div class="pair n{}">{}</div>').format(len(trace.alternatives), cols)


def section_chunk(trace: Trace, c: _Charts) -> Markup:
    ch = trace.chunk
    out = para(f"{ch.lines_text}, {ch.n_bytes:,} bytes, language guess: {ch.language_name}, sha256 {ch.sha256[:12]}")
    for note in ch.notices:
        out += para(note, "note")
    out += Markup('<pre class="code">{}</pre>').format(ch.text)
    q = trace.query
    if q is not None and q.rows:
        out += para(f"Query terms: {q.count} unique (parser: {q.parser})") + table(views.query_frame(q))
    return out


def section_compare(trace: Trace, c: _Charts) -> Markup:
    d, f = trace.alternatives.get("D"), trace.alternatives.get("F")
    out = Markup("")
    if d is not None and f is not None:
        ag = views.agreement(d, f)
        names = {it.record_id: it.name for it in [*f.final, *d.final]}
        out += metrics([("accepted by both", len(ag.both)), ("only D accepts", len(ag.only_d)),
                        ("only F accepts", len(ag.only_f))])
        rows = [{"agreement": label, "record": names.get(rid, rid), "record_id": rid}
                for label, ids in (("both", ag.both), ("only D", ag.only_d), ("only F", ag.only_f)) for rid in ids]
        out += table(pd.DataFrame(rows, columns=["agreement", "record", "record_id"]))
        shifts = views.shift_rows(d, f)
        if shifts:
            out += para("Rank in D (after fusion) → rank in F (after reranking), records in either top 15:")
            out += c.add(charts.slope_chart(shifts, "D rank", "F rank", top=len(shifts), label_room=0.9))
    lat = views.latency_frame(trace)
    if not lat.empty:
        out += para("Seconds per stage per alternative:") + c.add(charts.latency_bars(lat))
    return out + para("What each model was sent:") + table(views.model_usage(trace))


def settings_list(trace: Trace) -> Markup:
    """Every run setting as ``name value``, in columns (what re-running this report needs)."""
    data = trace.settings.model_dump(mode="json")
    items = Markup("").join(Markup("<div><dt>{}</dt><dd>{}</dd></div>").format(
        k, v if isinstance(v, str) else json.dumps(v)) for k, v in data.items())
    return Markup('<dl class="settings">{}</dl>').format(items)


PAGE = Environment(autoescape=True).from_string("""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Run report · {{ title }}</title>
<style>{{ css }}</style>
<script>{{ bundle }}</script>
</head><body>
<header class="top"><b>Godot chunk → knowledge records</b> · run report
<nav>{% for id, n, name, _ in sections %}<a href="#{{ id }}">{{ n }} {{ name }}</a>{% endfor %}</nav></header>
<main>
<section id="overview" class="first"><h1>Run report: {{ title }}</h1>
<p>KB {{ trace.kb.name }} ({{ n_records }} records, hash {{ trace.kb.content_hash[:12] }}) · chunk sha256
{{ trace.chunk.sha256[:12] }} · alternatives: {{ alts }}{% if generated %} · generated {{ generated }}{% endif %}</p>
<h2>The whole flow</h2>
<p class="muted">Each node: what the stage produced and how long it took; the amber bar is its share of the
alternative's time. Click a node to jump to its section.</p>
{{ flow_chart }}
<h2>Settings</h2>{{ settings }}
</section>
{% for id, n, name, caption, body in bodies %}
<section id="{{ id }}"><h2>{{ n }} · {{ name }}</h2><p class="muted">{{ caption }}</p>{{ body }}</section>
{% endfor %}
</main>
{{ runner }}
</body></html>
""")

CSS = """
:root { --ink: #1f2937; --muted: #6b7280; --line: #d1d5db; --bg: #f8fafc; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); }
.top { position: sticky; top: 0; z-index: 2; background: #fff; border-bottom: 1px solid var(--line);
       padding: 6px 16px; }
.top nav { display: inline; margin-left: 12px; } .top nav a { margin-right: 10px; font-size: 12px; }
main { padding: 0 16px 32px; }
section { padding-top: 8px; border-top: 1px solid var(--line); margin-top: 18px; }
section.first { border-top: 0; margin-top: 0; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin: 10px 0 2px; } h3 { font-size: 15px; margin: 6px 0; }
h4 { margin: 10px 0 4px; } h4.accepted { color: #15803d; } h4.rejected { color: #b91c1c; }
.muted { color: var(--muted); } .note { background: #fff7e6; border-left: 3px solid #d97706; padding: 4px 8px; }
.pair { display: grid; gap: 20px; } .pair.n2 { grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); }
.alt { min-width: 0; }
.chart { width: 100%; margin: 6px 0 10px; }
table.t { border-collapse: collapse; width: 100%; font-size: 12px; margin: 4px 0 10px; }
table.t th, table.t td { border-bottom: 1px solid var(--line); padding: 2px 6px; text-align: left;
                         vertical-align: top; }
table.t td.s { overflow-wrap: anywhere; } table.t td.rec { min-width: 11em; }
table.t td.n { white-space: nowrap; text-align: right; }
table.t th.n { text-align: right; }
table.t th { background: var(--bg); }
.metrics { display: flex; gap: 16px; margin: 6px 0; }
.metric { border: 1px solid var(--line); border-radius: 6px; padding: 4px 10px; }
.metric b { font-size: 18px; display: block; } .metric span { font-size: 11px; color: var(--muted); }
dl.settings { column-count: 4; font-size: 12px; margin: 4px 0; }
dl.settings div { break-inside: avoid; display: flex; gap: 8px; } dl.settings dt { color: var(--muted); }
dl.settings dd { margin: 0; font-family: ui-monospace, monospace; }
pre { background: var(--bg); border: 1px solid var(--line); padding: 8px; white-space: pre-wrap;
      overflow-wrap: anywhere; font-size: 12px; }
@page { size: A4 landscape; margin: 10mm; }
@media print {
  body { font-size: 10px; }
  .top { position: static; border: 0; } .top nav { display: none; }
  section { break-before: page; border-top: 0; margin-top: 0; } section.first { break-before: auto; }
  h2, h3, h4 { break-after: avoid; }
  tr, .chart, .metrics, .note { break-inside: avoid; }
  thead { display: table-header-group; }
  table.t { font-size: 9px; } pre { font-size: 9px; }
  a { color: inherit; text-decoration: none; }
}
"""


def render_report(trace: Trace, *, origin: str = "", generated: str | None = None) -> str:
    """The whole report as one HTML string (charts, styles and the Vega bundle inline)."""
    c = _Charts()
    flow_chart = c.add(flow.flow_chart(flow.flow_nodes(trace), flow.PANEL_ANCHORS))
    bodies = []
    for sid, n, name, caption in SECTIONS:
        if sid == "panel-chunk":
            body = section_chunk(trace, c)
        elif sid == "compare":
            body = section_compare(trace, c)
        else:
            body = side_by_side(trace, PARTS[sid], c)
        bodies.append((sid, n, name, caption, body))
    alts = ", ".join(f"{n} ({fmt_ms(a.ms)})" for n, a in trace.alternatives.items())
    return PAGE.render(title=origin or f"chunk {trace.chunk.sha256[:8]}", trace=trace, alts=alts,
                       n_records=f"{sum(trace.kb.counts.values()):,}", generated=generated, sections=SECTIONS,
                       bodies=bodies, flow_chart=flow_chart, settings=settings_list(trace), css=Markup(CSS),
                       bundle=Markup(vega_bundle()), runner=c.script())


def write_report(trace: Trace, path: Path, *, origin: str = "", generated: str | None = None) -> Path:
    """Write :func:`render_report` to ``path`` atomically; returns the path."""
    atomic.write_text(path, render_report(trace, origin=origin, generated=generated))
    path.chmod(0o644)  # a handout: readable by others, like any file a browser saves
    return path
