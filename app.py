"""Main screen: one chunk through D and/or F, stage by stage (`streamlit run app.py`)."""

from __future__ import annotations

import streamlit as st

from pipeline.ui import engines, inputs, jobs, render, runs, sidebar

engines.page("Chunk → knowledge records", ":material/manage_search:")
st.title(":material/manage_search: Godot chunk → knowledge records")
st.caption("A raw GDScript chunk is matched to Godot 4 docs records by two designs — **D**: BM25 ∥ embedding → "
           "union → hybrid fusion → Qwen validator, **F**: BM25 ∥ embedding → union → reranker → Qwen "
           "validator — and a local Qwen accepts only records with direct evidence.")

settings = sidebar.settings_sidebar()
request = inputs.input_form("main")
engine = engines.get_engine()

if engine is not None and request is not None and settings is not None:
    runs.start_run(engine, request, settings)

run = runs.current_run()
if run is None:
    st.info("Pick an example, paste a chunk or upload a .gd file, then press **Run**. The fast stages show "
            "within a second; the model stages follow with progress bars.")
else:
    st.markdown(f"**Chunk:** {run.origin}" + (" · *result from this session's cache*" if run.from_cache else ""))
    if run.job is not None and not run.job.done:
        jobs.monitor(run.job, "Model stages", "main",
                     hint="Fast stages are shown below; panels 5–7 fill in as each alternative finishes. "
                          "Verdicts are cached on disk, so a re-run is fast.")
    if run.message:
        st.warning(run.message)
    render.render_trace(run.view(), run.engine.store, pending=run.pending, key="main")
