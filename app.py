"""Dashboard entry point (`streamlit run app.py`): every page, named, through ``st.navigation``.

The page scripts live in pages/ and run as they are (AppTest can open each one
directly); this file only lists them, so the sidebar says "Pipeline", not "app".
"""

from __future__ import annotations

import streamlit as st

PAGES = [
    st.Page("pages/0_Pipeline.py", title="Pipeline", icon=":material/manage_search:", default=True),
    st.Page("pages/1_Compare_D_vs_F.py", title="Compare D vs F", icon=":material/compare_arrows:",
            url_path="Compare_D_vs_F"),
    st.Page("pages/2_Evaluation.py", title="Evaluation", icon=":material/analytics:", url_path="Evaluation"),
    st.Page("pages/3_Knowledge_base.py", title="Knowledge base", icon=":material/library_books:",
            url_path="Knowledge_base"),
]

st.navigation(PAGES).run()
