"""Compare page: D and F on the same chunk, aligned."""

from __future__ import annotations

import streamlit as st

from pipeline.ui import common, compare, engines, inputs, overview, runs, sidebar

engines.page("Compare D vs F", ":material/compare_arrows:")
st.title(":material/compare_arrows: Compare D vs F")
st.caption("Both alternatives on the same chunk: what each accepts, where they agree, how the rankings differ "
           "and what each costs. Runs here and on the main screen share results.")

settings = sidebar.settings_sidebar()
top = st.container()  # the flow overview goes above the input form
request = inputs.input_form("compare", choose_alternatives=False)
engine = engines.get_engine()
if engine is not None and request is not None and settings is not None:
    runs.start_run(engine, request, settings)

run = runs.current_run()
if run is None:
    st.info("Pick a chunk and press **Run** to run D and F on it.")
elif set(run.settings.alternatives) != {"D", "F"}:
    st.info(f"The last run ({run.origin}) used only {', '.join(run.settings.alternatives)}; press **Run** to "
            "run both alternatives on a chunk.")
else:
    with top:
        overview.render_overview(run, "compare", overview.COMPARE_ANCHORS)
    with common.guarded("The comparison"):
        compare.render_compare(run.view(), run.engine.store, run.pending)
