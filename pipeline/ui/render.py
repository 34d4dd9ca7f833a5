"""The seven panels of a run trace, shared by the main screen, the comparison and the evaluation drill-down.

Every function only reads the trace (and the KB store, to show a record's
text); a stage that failed or was skipped shows its message in its panel and
the other panels still draw.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import Any

import pandas as pd
import streamlit as st

from pipeline.kb.store import KBStore
from pipeline.records import AnyRecord
from pipeline.trace import AlternativeTrace, FinalItem, StageTrace, Trace
from pipeline.ui import charts
from pipeline.ui.highlight import Mark, legend, marked_block, record_text

log = logging.getLogger(__name__)

TOP_DETAILS = 5  # BM25 candidates with a highlighted side-by-side view
TABLE_HEIGHT = 320  # px: long tables scroll inside the panel instead of stretching the page
ALT_TITLES = {"D": "D · BM25 ∥ embedding → fusion", "F": "F · BM25 ∥ embedding → reranker"}
# Plain words: emoji need an emoji font the viewer may not have; icons come from Streamlit's Material set.
VERDICT_ICONS = {"yes": "yes", "no": "no", "not_run": "not run", "error": "error", "timeout": "timeout",
                 "unparsable": "unparsable", "cancelled": "cancelled"}
ICON_OK, ICON_NO, ICON_WAIT, ICON_WARN = (":material/check_circle:", ":material/cancel:",
                                          ":material/hourglass_top:", ":material/warning:")


# --- small helpers -----------------------------------------------------------------------------
@contextmanager
def guarded(what: str) -> Iterator[None]:
    """A drawing bug in one panel becomes a message there; the other panels still draw.

    Streamlit's rerun/stop signals are BaseExceptions and pass through untouched.
    """
    try:
        yield
    except Exception as exc:
        log.exception("%s could not be drawn", what)
        st.error(f"{what} could not be drawn: {exc}")


def _header(n: int, title: str, caption: str) -> None:
    st.subheader(f"{n} · {title}", divider="gray")
    st.caption(caption)


def _record(store: KBStore | None, record_id: str) -> AnyRecord | None:
    if store is None or record_id not in store.by_id:
        return None
    return store.get(record_id)


def record_name(row: dict[str, Any] | FinalItem) -> str:
    r = row if isinstance(row, dict) else row.model_dump()
    src = r.get("source") or r.get("record_id", "")
    return f"{src} › {r['section']}" if r.get("section") else str(src)


def _stage_notice(stage: StageTrace | None, *, pending: str = "") -> bool:
    """Show why a stage has nothing (or only part) to show; False when there is nothing to draw."""
    if pending:
        st.info(pending, icon=ICON_WAIT)
        return False
    if stage is None:
        st.info("This stage did not run for this alternative.")
        return False
    if stage.status == "error":
        st.warning(stage.message or "This stage failed.", icon=ICON_WARN)
    elif stage.status in ("skipped", "not_run"):
        st.info(stage.message or "This stage was skipped.")
        return bool(stage.candidates)
    return bool(stage.candidates) or _empty(stage)


def _empty(stage: StageTrace) -> bool:
    st.info("No candidates." if stage.status == "ok" else "Nothing to show.")
    return False


def for_each_alt(trace: Trace, label: Callable[[str, AlternativeTrace], str] | None = None
                 ) -> Iterator[tuple[str, AlternativeTrace]]:
    """One tab per alternative when there are two (keeps 1366-px screens readable), none for one."""
    names = list(trace.alternatives)
    if len(names) > 1:
        tabs = st.tabs([label(n, trace.alternatives[n]) if label else ALT_TITLES.get(n, n) for n in names])
        for name, tab in zip(names, tabs, strict=True):
            with tab:
                yield name, trace.alternatives[name]
    else:
        for name in names:
            yield name, trace.alternatives[name]


def fmt_seconds(ms: float) -> str:
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


# --- the whole trace ---------------------------------------------------------------------------
def render_trace(trace: Trace, store: KBStore | None, *, pending: Collection[str] = (), key: str = "main") -> None:
    """All seven panels in order; ``pending`` alternatives still have model stages running."""
    alts = ", ".join(f"{n} ({fmt_seconds(a.ms)})" for n, a in trace.alternatives.items())
    st.caption(f"KB: {trace.kb.name} · {sum(trace.kb.counts.values()):,} records · chunk sha256 "
               f"{trace.chunk.sha256[:12]} · alternatives: {alts}")
    panels: list[tuple[str, Callable[[], None]]] = [
        ("The raw chunk", lambda: panel_chunk(trace)),
        ("The BM25 panel", lambda: panel_bm25(trace, store, key)),
        ("The embedding panel", lambda: panel_embedding(trace)),
        ("The union panel", lambda: panel_union(trace, store)),
        ("The fusion/reranker panel", lambda: panel_ranking(trace, pending)),
        ("The validator panel", lambda: panel_validate(trace, store, pending, key)),
        ("The final panel", lambda: panel_final(trace, store, pending, key)),
    ]
    for what, draw in panels:
        with guarded(what):
            draw()


# --- 1 raw chunk -------------------------------------------------------------------------------
def panel_chunk(trace: Trace) -> None:
    c = trace.chunk
    _header(1, "Raw chunk", f"The code as the pipeline reads it: {c.n_lines} lines, {c.n_bytes:,} bytes, "
                            f"language guess: {c.language}.")
    for note in c.notices:
        st.warning(note)
    if c.language not in ("gdscript", "unknown"):
        st.info(f"This looks like {c.language}, not GDScript: expect weak matches and rejections.")
    st.code(c.text, language="gdscript" if c.language in ("gdscript", "unknown") else c.language,
            line_numbers=True, height="content" if c.n_lines <= 30 else 560)
    q = trace.query
    if q is not None and q.candidates:
        with st.expander(f"Query terms read off the chunk ({q.explain.get('n_unique', len(q.candidates))} "
                         f"unique, parser: {q.params.get('parser', '?')})"):
            st.dataframe(pd.DataFrame(q.candidates), hide_index=True, placeholder="—", height=TABLE_HEIGHT,
                         column_config={"term": "term (index form)", "as_written": "as written",
                                        "kind": "why it is a term", "count": st.column_config.NumberColumn("count")})


# --- 2 BM25 ------------------------------------------------------------------------------------
def _matched_marks(row: dict[str, Any]) -> list[Mark]:
    out: list[Mark] = []
    for m in row.get("matched", []):
        if m.get("contribution", 0) <= 0:
            continue
        title = f"{m['term']}: +{m['contribution']:.2f}"
        out.append(Mark(m["as_written"], "term", title))
        if m["term"] != m["as_written"].lower():
            out.append(Mark(m["term"], "term", title))
    return out


def panel_bm25(trace: Trace, store: KBStore | None, key: str) -> None:
    _header(2, "BM25 candidates", "Keyword leg: records ranked by BM25 over the chunk's identifiers, calls and "
                                  "strings; the matched terms are what scored.")
    for name, alt in for_each_alt(trace, lambda n, a: f"{n} · top {_k(a, 'bm25')}"):
        stage = alt.stage("bm25")
        if not _stage_notice(stage):
            continue
        assert stage is not None
        rows = stage.candidates
        df = pd.DataFrame([{"rank": r["rank"], "record": record_name(r), "kind": r["kind"], "score": r["score"],
                            "matched terms": ", ".join(f"{m['as_written']} ({m['contribution']:.1f})"
                                                       for m in r["matched"][:8] if m["contribution"] > 0),
                            "record_id": r["record_id"]} for r in rows])
        cfg = {"score": st.column_config.ProgressColumn("BM25 score", format="%.2f", min_value=0.0,
                                                        max_value=float(df["score"].max() or 1.0)),
               "matched terms": st.column_config.TextColumn("matched terms (contribution)", width="large")}
        st.dataframe(df, hide_index=True, placeholder="—", height=TABLE_HEIGHT, key=f"{key}_bm25_{name}",
                     column_config=cfg)
        st.caption(f"{len(rows)} hits · {stage.params.get('scorer', '')} · {fmt_seconds(stage.ms)}. "
                   f"Top {min(TOP_DETAILS, len(rows))} with the matched terms marked:")
        chunk_text = trace.chunk.text
        for r in rows[:TOP_DETAILS]:
            with st.expander(f"{r['rank']}. {record_name(r)} — score {r['score']:.2f}"):
                marks = _matched_marks(r)
                _side_by_side(chunk_text, _record(store, r["record_id"]), marks, marks)
                st.html(legend(["term"]))


def _k(alt: AlternativeTrace, stage: str) -> Any:
    s = alt.stage(stage)
    return s.params.get("k", "?") if s else "?"


def _side_by_side(chunk: str, record: AnyRecord | None, chunk_marks: list[Mark], record_marks: list[Mark]) -> None:
    left, right = st.columns(2)
    with left:
        st.markdown("**Chunk**")
        st.html(marked_block(chunk, chunk_marks, max_height=300))
    with right:
        st.markdown("**Record**")
        if record is None:
            st.info("The record is not in the loaded KB.")
        else:
            st.html(marked_block(record_text(record), record_marks, line_numbers=False, max_height=300))


# --- 3 embedding -------------------------------------------------------------------------------
def panel_embedding(trace: Trace) -> None:
    _header(3, "Embedding candidates", "Semantic leg: cosine similarity between the chunk's embedding and each "
                                       "record's embedding.")
    for _alt_name, alt in for_each_alt(trace, lambda n, a: f"{n} · top {_k(a, 'embedding')}"):
        stage = alt.stage("embedding")
        if not _stage_notice(stage):
            continue
        assert stage is not None
        st.altair_chart(charts.similarity_bars(stage.candidates), width="stretch")
        st.caption(f"Top 15 of {len(stage.candidates)} · model {stage.params.get('model', '?')} · "
                   f"{fmt_seconds(stage.ms)}")
        with st.expander(f"All {len(stage.candidates)} embedding hits"):
            df = pd.DataFrame([{"rank": r["rank"], "record": record_name(r), "kind": r["kind"],
                                "similarity": r["similarity"], "record_id": r["record_id"]}
                               for r in stage.candidates])
            st.dataframe(df, hide_index=True, placeholder="—", height=TABLE_HEIGHT, column_config={
                "similarity": st.column_config.ProgressColumn("similarity", format="%.3f", min_value=0.0,
                                                              max_value=1.0)})


# --- 4 union -----------------------------------------------------------------------------------
def panel_union(trace: Trace, store: KBStore | None) -> None:
    _header(4, "Union of both legs", "Every record found by either leg, once: sections of the same page found "
                                     "twice are merged into one candidate, and each keeps where it came from.")
    for _alt_name, alt in for_each_alt(trace):
        stage = alt.stage("union")
        if not _stage_notice(stage):
            continue
        assert stage is not None
        counts = stage.explain.get("provenance_counts", {})
        c0, c1, c2, c3 = st.columns(4)
        c0.metric("candidates", stage.explain.get("n_candidates", len(stage.candidates)))
        c1.metric("BM25 only", counts.get("bm25", 0))
        c2.metric("embedding only", counts.get("embedding", 0))
        c3.metric("both legs", counts.get("both", 0))
        df = pd.DataFrame([{"union rank": r["union_rank"], "record": record_name(r), "found by": r["provenance"],
                            "BM25 rank": r["bm25_rank"], "embedding rank": r["embedding_rank"],
                            "BM25 score": r["bm25_score"], "similarity": r["similarity"],
                            "merged records": len(r["members"]), "record_id": r["record_id"]}
                           for r in stage.candidates])
        st.dataframe(df, hide_index=True, placeholder="—", height=TABLE_HEIGHT, column_config={
            "BM25 score": st.column_config.NumberColumn(format="%.2f"),
            "similarity": st.column_config.NumberColumn(format="%.3f")})
        merged = stage.explain.get("merged", [])
        if merged:
            with st.expander(f"{len(merged)} duplicate(s) merged"):
                st.dataframe(pd.DataFrame([{
                    "kept (best-ranked)": m["kept"], "merged into it": m["merged"],
                    "same page section": record_name(_final_like(store, m["kept"]))} for m in merged]),
                    hide_index=True)
        else:
            st.caption("No duplicates to merge: no page section was found as two different records.")


def _final_like(store: KBStore | None, rid: str) -> dict[str, Any]:
    r = _record(store, rid)
    return {"record_id": rid, "source": getattr(r, "source", ""), "section": getattr(r, "section", None)}


# --- 5 fusion / rerank -------------------------------------------------------------------------
def panel_ranking(trace: Trace, pending: Collection[str] = ()) -> None:
    _header(5, "Fusion (D) / reranker (F)", "How the union is re-ordered: D fuses the two legs' scores, F asks a "
                                           "reranking model; the slope chart shows who moved.")
    for name, alt in for_each_alt(trace, lambda n, a: f"{n} · {'fusion' if n == 'D' else 'reranker'}"):
        if name == "D":
            _fusion(alt.stage("fusion"))
        else:
            stage = alt.stage("rerank")
            if name in pending and trace.settings.get("reranker") != "none":
                st.info("The reranker is scoring the union (a Qwen pass, ~20–40 s); the union order is shown "
                        "meanwhile.", icon=ICON_WAIT)
            _rerank(stage)


def _fusion(stage: StageTrace | None) -> None:
    if not _stage_notice(stage):
        return
    assert stage is not None
    rows = stage.candidates
    method = stage.params.get("method", "")
    rrf = method == "rrf"
    if rrf:
        mx = float(stage.explain.get("max_possible") or 1.0)
        a = stage.explain.get("alpha")
        weights = ("1/(k + BM25 rank) + 1/(k + embedding rank)" if a is None else
                   f"2α/(k + BM25 rank) + 2(1 − α)/(k + embedding rank), α = {a:g}")
        st.markdown(f"**Reciprocal rank fusion**, k = {stage.explain.get('rrf_k')}: score = {weights}. Raw scores "
                    f"shown; the best possible is **{mx:.5f}** (rank 1 on both legs), so “share of max” says how "
                    "close a candidate came.")
        df = pd.DataFrame([{"rank": r["rank"], "shift": r["shift"], "record": record_name(r),
                            "RRF score": r["score"], "share of max": r["score"] / mx,
                            "BM25 rank": int(r.get("bm25_rank") or 0) or None,
                            "BM25 part": r.get("bm25_contribution"),
                            "embedding rank": int(r.get("embedding_rank") or 0) or None,
                            "embedding part": r.get("embedding_contribution"),
                            "BM25 raw": r.get("bm25_raw"), "similarity": r.get("embedding_raw"),
                            "record_id": r["record_id"]} for r in rows])
        cfg: dict[str, Any] = {
            "RRF score": st.column_config.NumberColumn(format="%.5f"),
            "share of max": st.column_config.ProgressColumn(format="%.2f", min_value=0.0, max_value=1.0),
            "BM25 part": st.column_config.NumberColumn(format="%.5f"),
            "embedding part": st.column_config.NumberColumn(format="%.5f")}
    else:
        alpha = stage.explain.get("alpha")
        st.markdown(f"**{'Min-max' if method == 'minmax' else 'Z-score'} fusion**, α = {alpha}: score = α · "
                    "normalised BM25 + (1 − α) · normalised similarity.")
        df = pd.DataFrame([{"rank": r["rank"], "shift": r["shift"], "record": record_name(r), "fused score": r["score"],
                            "BM25 raw": r.get("bm25_raw"), "BM25 norm": r.get("bm25_norm"),
                            "BM25 part": r.get("bm25_contribution"), "similarity": r.get("embedding_raw"),
                            "embedding norm": r.get("embedding_norm"),
                            "embedding part": r.get("embedding_contribution"), "record_id": r["record_id"]}
                           for r in rows])
        cfg = {c: st.column_config.NumberColumn(format="%.3f") for c in
               ("fused score", "BM25 norm", "BM25 part", "embedding norm", "embedding part", "similarity")}
    cfg["shift"] = st.column_config.NumberColumn("shift", help="Places moved versus the union order (+ = up).",
                                                 format="%+d")
    st.dataframe(df, hide_index=True, placeholder="—", height=TABLE_HEIGHT, column_config=cfg)
    left, right = st.columns(2)
    with left:
        st.markdown("**Score breakdown** (top 15)")
        st.altair_chart(charts.contribution_bars(rows), width="stretch")
    with right:
        st.markdown("**Rank shifts**: union order → after fusion (top 15)")
        st.altair_chart(charts.slope_chart(rows, "union order", "after fusion"), width="stretch")
    st.caption(f"{len(rows)} candidates fused in {fmt_seconds(stage.ms)}.")


def _rerank(stage: StageTrace | None) -> None:
    if not _stage_notice(stage):
        return
    assert stage is not None
    rows = stage.candidates
    ex = stage.explain
    st.markdown(f"**{ex.get('reranker', stage.params.get('method', 'reranker'))}** scored the union's top "
                f"{ex.get('scored', '?')} (of {len(rows)}); the rest keep their union order below them.")
    df = pd.DataFrame([{"rank": r["rank"], "shift": r["shift"], "record": record_name(r),
                        "reranker score": None if r.get("not_reranked") else r.get("reranker_score"),
                        "union rank": r["before"], "found by": r.get("provenance"),
                        "record_id": r["record_id"]} for r in rows])
    st.dataframe(df, hide_index=True, placeholder="—", height=TABLE_HEIGHT, column_config={
        "reranker score": st.column_config.NumberColumn(format="%.2f", help="yes − no logit margin (Qwen) or the "
                                                        "bge relevance score; empty = not reranked"),
        "shift": st.column_config.NumberColumn(format="%+d")})
    scored = [r for r in rows if not r.get("not_reranked")]
    left, right = st.columns(2)
    with left:
        st.markdown("**Reranker scores** (top 15)")
        st.altair_chart(charts.score_bars(scored, "reranker_score", "reranker score"), width="stretch")
    with right:
        st.markdown("**Rank shifts**: union order → after reranking (top 15)")
        st.altair_chart(charts.slope_chart(rows, "union order", "after reranking"), width="stretch")
    st.caption(f"Reranked in {fmt_seconds(stage.ms)}.")


# --- 6 validator -------------------------------------------------------------------------------
def _evidence_marks(row: dict[str, Any]) -> list[Mark]:
    marks = []
    for e in row.get("evidence") or []:
        kind = "evidence" if e.get("verified") else "unverified"
        marks.append(Mark(str(e["text"]).strip('"') if kind == "unverified" else str(e["text"]), kind,
                          f"Qwen evidence ({e.get('field', '')})", word=False, ignore_case=False))
    for d in row.get("deterministic") or []:
        marks.append(Mark(str(d["text"]), "fact", f"fact {d['n']} · record field: {d['field']}", word=False,
                          ignore_case=False))
    return marks


def panel_validate(trace: Trace, store: KBStore | None, pending: Collection[str] = (), key: str = "main") -> None:
    _header(6, "Validator", "The local Qwen reads the chunk and each top candidate and says whether the record "
                            "contains a direct string / API / pattern match; deterministic matching checks it.")
    for name, alt in for_each_alt(trace, lambda n, a: f"{n} · validator"):
        stage = alt.stage("validate")
        if name in pending and trace.settings.get("run_validator"):
            _stage_notice(None, pending="Qwen is judging the top candidates (~3 s each with the 1.5B model); "
                                        "this panel fills in when it is done.")
            continue
        if not _stage_notice(stage):
            continue
        assert stage is not None
        _validate(stage, trace.chunk.text, store, f"{key}_{name}")


def _validate(stage: StageTrace, chunk: str, store: KBStore | None, key: str) -> None:
    p, ex = stage.params, stage.explain
    st.markdown(f"**Model:** {p.get('model') or 'none (no model)'} · **policy:** {p.get('policy_text', '')} · "
                f"**threshold:** {p.get('threshold') if p.get('threshold') is not None else '—'} · "
                f"judges the top {p.get('top_k')}")
    c = st.columns(4)
    c[0].metric("judged now", ex.get("judged", 0))
    c[1].metric("from cache", ex.get("cached", 0))
    c[2].metric("prompt tokens", f"{ex.get('prompt_tokens', 0):,}", help="Tokens evaluated (after KV reuse).")
    c[3].metric("reused tokens", f"{ex.get('reused_tokens', 0):,}", help="Shared SOURCE_CODE prefix not re-read.")
    judged = [r for r in stage.candidates if r.get("accepted") is not None]
    if not judged:
        st.info("No candidate was in the validator's scope (top k = 0).")
        return
    df = pd.DataFrame([{
        "rank": r["rank"], "record": record_name(r), "Qwen": VERDICT_ICONS.get(str(r.get("verdict")), r.get("verdict")),
        "score": r.get("score") if r.get("score") is not None else r.get("margin"), "margin": r.get("margin"),
        "coverage": r.get("coverage"), "threshold": r.get("threshold"),
        "accepted": bool(r.get("accepted")),
        "verified evidence": sum(1 for e in r.get("evidence") or [] if e.get("verified")),
        "shared facts": len(r.get("deterministic") or []),
        "disagreement": ("⚠ " + r["disagreement"]) if r.get("disagreement") else "",
        "cached": bool(r.get("cached")), "record_id": r["record_id"]} for r in judged])
    st.dataframe(df, hide_index=True, placeholder="—", key=f"{key}_validate", column_config={
        "score": st.column_config.NumberColumn(format="%.2f", help="What the threshold applies to: Qwen's "
                                               "yes−no margin plus a prior from the evidence coverage."),
        "margin": st.column_config.NumberColumn(format="%.2f", help="Qwen's yes−no logit margin."),
        "coverage": st.column_config.NumberColumn(format="%.2f", help="Share of the chunk's facts found in the "
                                                  "record (deterministic)."),
        "threshold": st.column_config.NumberColumn(format="%.2f"),
        "accepted": st.column_config.CheckboxColumn("accepted"),
        "disagreement": st.column_config.TextColumn("Qwen vs deterministic", width="medium")})
    if any(r.get("margin") is not None for r in judged):
        st.markdown("**Score vs threshold** — Qwen says yes when its judge score reaches the dashed rule")
        st.altair_chart(charts.margin_chart(judged, p.get("threshold")), width="stretch")
    st.html(legend(["fact", "evidence", "unverified"]))
    for r in judged:
        flag = " · ⚠ Qwen and deterministic evidence disagree" if r.get("disagreement") else ""
        head = "accepted" if r.get("accepted") else "not accepted"
        with st.expander(f"{head} · {r['rank']}. {record_name(r)}{flag}",
                         icon=ICON_OK if r.get("accepted") else ICON_NO):
            _judgement(r, chunk, store)


def _judgement(r: dict[str, Any], chunk: str, store: KBStore | None) -> None:
    if r.get("disagreement"):
        st.warning(f"Qwen and the deterministic evidence disagree: {r['disagreement']}", icon=ICON_WARN)
    if r.get("message"):
        st.caption(str(r["message"]))
    margin, score, cov = r.get("margin"), r.get("score"), r.get("coverage")
    detail = ""
    if margin is not None:
        detail = f"yes−no margin {margin:.2f}"
        if score is not None:
            detail += (f", evidence coverage {cov:.2f}" if cov is not None else "") + f" → score {score:.2f}"
        detail = f" ({detail} vs threshold {r.get('threshold')}; first token `{r.get('model_token', '')}`)"
    st.markdown(f"Qwen: **{VERDICT_ICONS.get(str(r.get('verdict')), r.get('verdict'))}**" + detail
                + (" · from cache" if r.get("cached") else (f" · {fmt_seconds(r['ms'])}" if r.get("ms") else "")))
    marks = _evidence_marks(r)
    _side_by_side(chunk, _record(store, r["record_id"]), marks, marks)
    ev = r.get("evidence") or []
    if ev:
        st.markdown("**Qwen's evidence**")
        st.dataframe(pd.DataFrame([{"text": e["text"], "field": e.get("field", ""),
                                    "in both texts": bool(e.get("verified"))} for e in ev]), hide_index=True)
    det = r.get("deterministic") or []
    if det:
        st.markdown("**Shared facts** (deterministic string/API matching)")
        st.dataframe(pd.DataFrame(det).rename(columns={"n": "#", "field": "record field"}), hide_index=True,
                     placeholder="—")
    else:
        st.caption("No shared string/API/pattern found by deterministic matching.")
    bits = []
    if r.get("only_in_code"):
        bits.append("**only in the chunk:** " + ", ".join(f"`{t}`" for t in r["only_in_code"][:12]))
    if r.get("only_in_record"):
        bits.append("**only in the record:** " + ", ".join(f"`{t}`" for t in r["only_in_record"][:12]))
    if r.get("conflicts"):
        bits.append("**conflicts:** " + "; ".join(r["conflicts"]))
    if bits:
        st.markdown("  \n".join(bits))
    if r.get("raw"):
        st.caption(f"Raw model output · {r.get('prompt_tokens', 0)} prompt tokens, "
                   f"{r.get('reused_tokens', 0)} reused")
        st.code(str(r["raw"]), language="json")


# --- 7 final -----------------------------------------------------------------------------------
def accepted_jsonl(final: list[FinalItem], store: KBStore | None) -> str:
    """The accepted records in full, one JSON object per line (the PoC's output)."""
    lines = [store.get(it.record_id).model_dump_json() for it in final
             if it.accepted and store is not None and it.record_id in store.by_id]
    return "\n".join(lines) + ("\n" if lines else "")


def _decision(it: FinalItem) -> str:
    return {True: "accepted", False: "rejected", None: "not judged"}[it.accepted]


def _final_df(items: list[FinalItem]) -> pd.DataFrame:
    return pd.DataFrame([{"decision": _decision(it), "rank": it.rank, "record": record_name(it), "source": it.source,
                          "kind": it.kind,
                          "Qwen": VERDICT_ICONS.get(it.verdict, it.verdict), "score": it.score,
                          "evidence": ", ".join(it.evidence[:6]), "doc_path": it.doc_path or "",
                          "record_id": it.record_id} for it in items],
                        columns=["decision", "rank", "record", "source", "kind", "Qwen", "score", "evidence",
                                 "doc_path", "record_id"])


def panel_final(trace: Trace, store: KBStore | None, pending: Collection[str] = (), key: str = "main") -> None:
    _header(7, "Final records", "What the PoC outputs: the accepted records (JSONL) and the ones the validator "
                                "rejected, per alternative.")
    for name, alt in for_each_alt(trace, lambda n, a: f"{n} · final"):
        # The split tables already say the decision; the hidden columns stay in the data (and in exports).
        cfg = {"score": st.column_config.NumberColumn(format="%.4f"), "source": None, "decision": None}
        if name in pending:
            st.info("Waiting for the model stages: nothing is accepted yet; the provisional ranking:", icon=ICON_WAIT)
            st.dataframe(_final_df(alt.final), hide_index=True, placeholder="—", column_config=cfg, height=TABLE_HEIGHT)
            continue
        accepted = [it for it in alt.final if it.accepted]
        rejected = [it for it in alt.final if it.accepted is False]
        unjudged = [it for it in alt.final if it.accepted is None]
        c = st.columns(3)
        c[0].metric("accepted", len(accepted))
        c[1].metric("rejected", len(rejected))
        c[2].metric("not judged", len(unjudged), help="Below the validator's top k, or validation was off.")
        st.markdown(f":green[{ICON_OK} **Accepted by {name}**]")
        if accepted:
            st.dataframe(_final_df(accepted), hide_index=True, placeholder="—", key=f"{key}_final_accepted_{name}",
                         column_config=cfg)
        else:
            st.caption("Nothing accepted." if alt.stage("validate") and alt.stage("validate").status != "skipped"
                       else "Validation was off: nothing is accepted or rejected.")
        if rejected:
            st.markdown(f":red[{ICON_NO} **Rejected by {name}**]")
            st.dataframe(_final_df(rejected), hide_index=True, placeholder="—", key=f"{key}_final_rejected_{name}",
                         column_config=cfg)
        if unjudged:
            with st.expander(f"{len(unjudged)} not judged (ranked only)"):
                st.dataframe(_final_df(unjudged), hide_index=True, placeholder="—", key=f"{key}_final_unjudged_{name}",
                             column_config=cfg)
        st.download_button(f"Download {name}'s accepted records (JSONL)", accepted_jsonl(alt.final, store),
                           file_name=f"accepted_{name}_{trace.chunk.sha256[:8]}.jsonl", mime="application/jsonl",
                           key=f"{key}_dl_{name}", on_click="ignore", disabled=not accepted, icon=":material/download:")
    st.download_button("Download the full trace (JSON)", trace.model_dump_json(indent=2),
                       file_name=f"trace_{trace.chunk.sha256[:8]}.json", mime="application/json",
                       key=f"{key}_dl_trace", on_click="ignore", icon=":material/download:")
