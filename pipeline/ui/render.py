"""The seven panels of a run trace, shared by the main screen, the comparison and the evaluation drill-down.

Every function only reads the trace (and the KB store, to show a record's
text); a stage that failed, was skipped or is still pending says so in its
panel and the other panels still draw. Panels 5 and 6 live in ``ranking`` and
``judging``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import streamlit as st

from pipeline.kb.store import KBStore
from pipeline.settings import AltName
from pipeline.trace import AlternativeTrace, BM25Row, FinalItem, Trace
from pipeline.ui import charts, views
from pipeline.ui.common import (
    ICON_NO,
    ICON_OK,
    ICON_WAIT,
    TABLE_HEIGHT,
    fmt_seconds,
    for_each_alt,
    guarded,
    header,
    record_of,
    side_by_side,
    stage_notice,
)
from pipeline.ui.highlight import Mark, legend
from pipeline.ui.judging import panel_validate
from pipeline.ui.ranking import panel_ranking

TOP_DETAILS = 5  # BM25 candidates with a highlighted side-by-side view


# --- the whole trace ---------------------------------------------------------------------------
def render_trace(trace: Trace, store: KBStore | None, *, pending: Collection[AltName] = (),
                 key: str = "main") -> None:
    """All seven panels in order; ``pending`` alternatives still have model stages running."""
    alts = ", ".join(f"{n} ({fmt_seconds(a.ms)})" for n, a in trace.alternatives.items())
    st.caption(f"KB: {trace.kb.name} · {sum(trace.kb.counts.values()):,} records · chunk sha256 "
               f"{trace.chunk.sha256[:12]} · alternatives: {alts}")
    panels: list[tuple[str, Callable[[], None]]] = [
        ("The raw chunk", lambda: panel_chunk(trace)),
        ("The BM25 panel", lambda: panel_bm25(trace, store, key)),
        ("The embedding panel", lambda: panel_embedding(trace)),
        ("The union panel", lambda: panel_union(trace)),
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
    header(1, "Raw chunk", f"The code as the pipeline reads it: {c.lines_text}, {c.n_bytes:,} bytes, "
                           f"language guess: {c.language_name}.", "panel-chunk")
    for note in c.notices:
        st.warning(note)
    if c.language not in ("gdscript", "unknown"):
        st.info(f"This looks like {c.language_name}, not GDScript: expect weak matches and rejections.")
    st.code(c.text, language="gdscript" if c.language in ("gdscript", "unknown") else c.language,
            line_numbers=True, height="content" if c.n_lines <= 30 else 560)
    if c.context:
        with st.expander("The file's declarations (its `extends` and members), read only by the class-use rule"):
            st.code(c.context, language="gdscript")
    q = trace.query
    if q is not None and q.rows:
        with st.expander(f"Query terms read off the chunk ({q.count} unique, parser: {q.parser})"):
            st.dataframe(views.query_frame(q), hide_index=True, placeholder="—",
                         height=TABLE_HEIGHT,
                         column_config={"term": "term (index form)", "as_written": "as written",
                                        "kind": "why it is a term", "count": st.column_config.NumberColumn("count")})


# --- 2 BM25 ------------------------------------------------------------------------------------
def _matched_marks(row: BM25Row) -> list[Mark]:
    out: list[Mark] = []
    for m in row.matched:
        if m.contribution <= 0:
            continue
        title = f"{m.term}: +{m.contribution:.2f}"
        out.append(Mark(m.as_written, "term", title))
        if m.term != m.as_written.lower():
            out.append(Mark(m.term, "term", title))
    return out


def _k(alt: AlternativeTrace, leg: str) -> str:
    stage = alt.bm25 if leg == "bm25" else alt.embedding
    return str(stage.k) if stage is not None else "?"


def panel_bm25(trace: Trace, store: KBStore | None, key: str) -> None:
    header(2, "BM25 candidates", "Keyword leg: records ranked by BM25 over the chunk's identifiers, calls and "
                                 "strings; the matched terms are what scored.", "panel-bm25")
    for name, alt in for_each_alt(trace, lambda n, a: f"{n} · top {_k(a, 'bm25')}"):
        stage = alt.bm25
        if not stage_notice(stage):
            continue
        assert stage is not None
        rows = stage.rows
        df = views.bm25_frame(stage)
        cfg = {"score": st.column_config.ProgressColumn("BM25 score", format="%.2f", min_value=0.0,
                                                        max_value=float(df["score"].max() or 1.0)),
               "matched terms": st.column_config.TextColumn("matched terms (contribution)", width="large")}
        st.dataframe(df, hide_index=True, placeholder="—", height=TABLE_HEIGHT, key=f"{key}_bm25_{name}",
                     column_config=cfg)
        st.caption(f"{len(rows)} hits · {stage.scorer} · {fmt_seconds(stage.ms)}. "
                   f"Top {min(TOP_DETAILS, len(rows))} with the matched terms marked:")
        for r in rows[:TOP_DETAILS]:
            with st.expander(f"{r.rank}. {r.name} — score {r.score:.2f}"):
                marks = _matched_marks(r)
                side_by_side(trace.chunk.text, record_of(store, r.record_id), marks, marks)
                st.html(legend(["term"]))


# --- 3 embedding -------------------------------------------------------------------------------
def panel_embedding(trace: Trace) -> None:
    header(3, "Embedding candidates", "Semantic leg: cosine similarity between the chunk's embedding and each "
                                      "record's embedding.", "panel-embedding")
    for _name, alt in for_each_alt(trace, lambda n, a: f"{n} · top {_k(a, 'embedding')}"):
        stage = alt.embedding
        if not stage_notice(stage):
            continue
        assert stage is not None
        st.altair_chart(charts.similarity_bars(stage.rows), width="stretch")
        st.caption(f"Top 15 of {stage.count} · model {stage.model} · {fmt_seconds(stage.ms)}")
        with st.expander(f"All {stage.count} embedding hits"):
            st.dataframe(views.embedding_frame(stage), hide_index=True, placeholder="—", height=TABLE_HEIGHT,
                         column_config={"similarity": st.column_config.ProgressColumn(
                             "similarity", format="%.3f", min_value=0.0, max_value=1.0)})


# --- 4 union -----------------------------------------------------------------------------------
def panel_union(trace: Trace) -> None:
    header(4, "Union of both legs", "Every record found by either leg, once: sections of the same page found "
                                    "twice are merged into one candidate, and each keeps where it came from.",
           "panel-union")
    for _name, alt in for_each_alt(trace):
        stage = alt.union
        if not stage_notice(stage):
            continue
        assert stage is not None
        counts = stage.provenance_counts
        c0, c1, c2, c3 = st.columns(4)
        c0.metric("candidates", stage.count)
        c1.metric("BM25 only", counts.get("bm25", 0))
        c2.metric("embedding only", counts.get("embedding", 0))
        c3.metric("both legs", counts.get("both", 0))
        renames, classes = views.rule_counts(stage)
        if renames or classes:
            said = ([f"{renames} Godot 3 → 4 rename mapping(s): the code is Godot 3 and uses their old spelling"]
                    if renames else []) + ([f"{classes} engine class(es) the code uses: it names them or uses a "
                                            "member they define; their class pages follow the top pages after "
                                            "ranking"] if classes else [])
            alone = counts.get("rule", 0)
            head = "Joined as `rule`" + (f" ({alone} found by neither leg)" if alone else "")
            st.caption(f"{head}: " + "; ".join(said) + f" (column *rule matched*; matched in {stage.rules_ms:.1f} ms).")
        st.dataframe(views.union_frame(stage), hide_index=True, placeholder="—", height=TABLE_HEIGHT, column_config={
            "BM25 score": st.column_config.NumberColumn(format="%.2f"),
            "similarity": st.column_config.NumberColumn(format="%.3f")})
        if stage.merged:
            with st.expander(f"{len(stage.merged)} duplicate(s) merged"):
                st.dataframe(views.merged_frame(stage), hide_index=True)
        else:
            st.caption("No duplicates to merge: no page section was found as two different records.")


# --- 7 final -----------------------------------------------------------------------------------
def accepted_jsonl(final: list[FinalItem], store: KBStore | None) -> str:
    """The accepted records in full, one JSON object per line (the PoC's output)."""
    lines = [store.get(it.record_id).model_dump_json() for it in final
             if it.accepted and store is not None and it.record_id in store.by_id]
    return "\n".join(lines) + ("\n" if lines else "")


_final_df = views.final_frame


def _final_tables(name: AltName, alt: AlternativeTrace, key: str, cfg: dict[str, object]) -> None:
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
        validated = alt.validation is not None and alt.validation.status not in ("skipped", "not_run")
        st.caption("Nothing accepted." if validated else "Validation was off: nothing is accepted or rejected.")
    if rejected:
        st.markdown(f":red[{ICON_NO} **Rejected by {name}**]")
        st.dataframe(_final_df(rejected), hide_index=True, placeholder="—", key=f"{key}_final_rejected_{name}",
                     column_config=cfg)
    if unjudged:
        with st.expander(f"{len(unjudged)} not judged (ranked only)"):
            st.dataframe(_final_df(unjudged), hide_index=True, placeholder="—", key=f"{key}_final_unjudged_{name}",
                         column_config=cfg)


def panel_final(trace: Trace, store: KBStore | None, pending: Collection[AltName] = (), key: str = "main") -> None:
    header(7, "Final records", "What the PoC outputs: the accepted records (JSONL) and the ones the validator "
                               "rejected, per alternative.", "panel-final")
    for name, alt in for_each_alt(trace, lambda n, a: f"{n} · final"):
        # The split tables already say the decision; the hidden columns stay in the data (and in exports).
        cfg: dict[str, object] = {"score": st.column_config.NumberColumn(format="%.4f"), "source": None,
                                  "decision": None}
        if name in pending and alt.validation is not None and alt.validation.writing_lists:
            st.info("Decided: Qwen is writing the accepted records' evidence lists, so the evidence column shows "
                    "the shared facts until then, and the downloads wait for it.", icon=ICON_WAIT)
            _final_tables(name, alt, key, cfg)
            continue
        if name in pending:
            st.info("Waiting for the model stages: nothing is accepted yet; the provisional ranking:", icon=ICON_WAIT)
            st.dataframe(_final_df(alt.final), hide_index=True, placeholder="—", column_config=cfg, height=TABLE_HEIGHT)
            continue
        _final_tables(name, alt, key, cfg)
        st.download_button(f"Download {name}'s accepted records (JSONL)", accepted_jsonl(alt.final, store),
                           file_name=f"accepted_{name}_{trace.chunk.sha256[:8]}.jsonl", mime="application/jsonl",
                           key=f"{key}_dl_{name}", on_click="ignore", disabled=not any(it.accepted for it in alt.final),
                           icon=":material/download:")
    st.download_button("Download the full trace (JSON)", trace.model_dump_json(indent=2),
                       file_name=f"trace_{trace.chunk.sha256[:8]}.json", mime="application/json",
                       key=f"{key}_dl_trace", on_click="ignore", icon=":material/download:")
