"""The top of the main and Compare pages: the run's whole flow at a glance, what is still running, the report.

The strip itself is pure data and an altair chart (pipeline/ui/flow.py); this
module places it, with the progress box (Cancel, ETA) under it while the model
stages work, and the HTML report's download button once the run is finished.
"""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

from pipeline.report import render_report
from pipeline.ui import flow, jobs
from pipeline.ui.common import guarded
from pipeline.ui.runs import RunState

CACHE_NOTES = {"session": "result from this session's cache",
               "disk": "result from the cache on disk (a finished earlier run or the demo warmer): nothing re-ran"}
# The Compare page has no stage panels: its nodes lead to the section that shows that stage.
COMPARE_ANCHORS: dict[flow.Column, str] = {"bm25": "cost", "embedding": "cost", "union": "cost",
                                           "ranking": "rank-shifts", "validate": "cost", "final": "final-lists"}


def render_overview(run: RunState, key: str, anchors: Mapping[flow.Column, str] = flow.PANEL_ANCHORS, *,
                    hint: str = "") -> None:
    """Chunk line, the flow strip, then the progress box (running) or the report button (finished)."""
    trace = run.view()
    note = f" · *{CACHE_NOTES[run.cache_origin or 'session']}*" if run.from_cache else ""
    st.markdown(f"**Chunk:** {run.origin} · {run.chunk.lines_text}{note}")
    running = run.job is not None and not run.job.done
    with guarded("The flow overview"):
        st.altair_chart(flow.flow_chart(flow.flow_nodes(trace), anchors), width="stretch", key=f"{key}_flow")
    if running and run.job is not None:
        job = run.job
        jobs.monitor(job, "Model stages", key, hint=hint,
                     eta=lambda: flow.eta(run.fast, run.view(), job.elapsed).text)
    else:
        left, right = st.columns([5, 1], vertical_alignment="center")
        left.caption("Each node: what the stage produced and how long it took; the amber bar is its share of the "
                     "alternative's time. Click a node to jump to its details below.")
        with right:
            _report_button(run, key)
    if run.message:
        st.warning(run.message)


def _report_button(run: RunState, key: str) -> None:
    """The report is built only when the button is pressed (deferred download): a rerun costs nothing."""
    trace = run.view()
    st.download_button("Report (HTML)", lambda: render_report(trace, origin=run.origin),
                       file_name=f"report_{trace.chunk.sha256[:8]}.html", mime="text/html", key=f"{key}_report",
                       on_click="ignore", icon=":material/description:", width="stretch",
                       help="One self-contained HTML file of this run: every panel, D and F side by side, the final "
                            "JSONL. Opens offline and prints cleanly.")
