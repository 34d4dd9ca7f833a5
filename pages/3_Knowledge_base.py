"""Knowledge base page: browse and filter records, inspect one, upload a JSONL KB."""

from __future__ import annotations

import streamlit as st

from pipeline.ui import common, engines, kb_browse, sidebar

engines.page("Knowledge base", ":material/library_books:")
st.title(":material/library_books: Knowledge base")
st.caption("The records the chunks are matched against: docs sections, API mappings and label prototypes. "
           "Upload your own JSONL to search it from the other pages.")

# The upload comes before the sidebar's KB choice so a fresh upload can select itself.
# open while no KB is loaded, and while the uploader holds a file, so its result stays in sight
with st.expander("Upload a KB (JSONL)",
                 expanded=engines.user_kb() is None or st.session_state.get("kb_upload_page") is not None):
    up = st.file_uploader("JSONL records, one per line (docs_chunk, api_mapping or label_prototype)",
                          type=["jsonl"], key="kb_upload_page")
    kb = engines.load_user_kb(up.getvalue(), up.name, up.file_id) if up is not None else engines.user_kb()
    if kb is not None:
        sidebar.kb_upload_summary(kb)
        if kb.issues:
            st.markdown(f"**{len(kb.issues)} problem line(s)**" + (" — bad lines were skipped, good lines are used:"
                                                                   if kb.store is not None else ":"))
            st.dataframe(kb_browse.issues_frame(kb.issues), hide_index=True, key="kb_issues",
                         column_config={"reason": st.column_config.TextColumn(width="large")})
        if kb.store is not None:
            st.caption("The other pages search this KB while “Uploaded” is chosen in the sidebar.")

with st.sidebar:
    sidebar.kb_sidebar(upload=False)

choice = engines.kb_choice()
engine = engines.get_engine(choice)
if engine is not None:
    store = engine.store
    counts = store.counts
    c = st.columns(4)
    c[0].metric("records", f"{len(store.records):,}")
    for col, kind in zip(c[1:], ("docs_chunk", "api_mapping", "label_prototype"), strict=True):
        col.metric(kind, f"{counts.get(kind, 0):,}")
    st.caption(f"{store.name} · content hash {store.content_hash[:12]}")
    with (st.expander("Models learned from these docs: the training set", expanded=False),
          common.guarded("The training set's summary")):
        kb_browse.show_training(store.content_hash)

    df = kb_browse.records_frame(store.content_hash, store)
    f1, f2, f3 = st.columns([2, 2, 3])
    kinds = f1.multiselect("Kind", ["docs_chunk", "api_mapping", "label_prototype"], key="kb_kinds",
                           placeholder="all kinds")
    source = f2.text_input("Source contains", key="kb_source", placeholder="e.g. first_2d_game, class/Input")
    text = f3.text_input("Text contains (all words)", key="kb_text", placeholder="e.g. AnimatedSprite2D play")
    hits = kb_browse.filter_frame(df, kinds, source, text)
    shown = hits.head(kb_browse.MAX_ROWS)
    st.caption(f"{len(hits):,} matching record{'' if len(hits) == 1 else 's'}"
               + (f"; showing the first {len(shown):,}" if len(hits) > len(shown) else "")
               + (". Select a row to see the record." if len(hits) else ": loosen the filters above."))
    event = st.dataframe(shown.drop(columns=["search"]), hide_index=True, height=360, key="kb_table",
                         on_select="rerun", selection_mode="single-row",
                         column_config={"title": st.column_config.TextColumn(width="large")})
    selected = event.selection.rows if event is not None else []
    if not shown.empty:
        rid = shown.iloc[selected[0] if selected else 0]["id"]
        st.subheader("Record", divider="gray")
        with common.guarded("This record"):
            kb_browse.show_record(store.get(rid))
