"""Pipeline page (the main screen): one chunk through D and/or F, the whole flow at the top, then stage by stage."""

from __future__ import annotations

import streamlit as st

from pipeline.ui import engines, inputs, overview, render, runs, sidebar

engines.page("Pipeline", ":material/manage_search:")
st.title(":material/manage_search: Godot chunk → knowledge records")
st.caption("**D**: BM25 ∥ embedding → union → hybrid fusion → Qwen validator · **F**: BM25 ∥ embedding → union → "
           "reranker → Qwen validator. A local Qwen accepts only records with direct evidence.")

settings = sidebar.settings_sidebar()
top = st.container()  # the flow overview goes above the input form, drawn once the run is known
request = inputs.input_form("main")
engine = engines.get_engine()

if engine is not None and request is not None and settings is not None:
    runs.start_run(engine, request, settings)

run = runs.current_run()
if run is None:
    st.info("Pick an example, paste a chunk or upload a .gd file, then press **Run**. The fast stages show "
            "within a second; the model stages follow with progress bars.")
else:
    with top:
        overview.render_overview(run, "main", hint="Fast stages are shown below; panels 5–7 fill in as each "
                                                   "alternative finishes. Verdicts are cached on disk, so a re-run "
                                                   "is fast.")
    render.render_trace(run.view(), run.engine.store, pending=run.pending, key="main")
