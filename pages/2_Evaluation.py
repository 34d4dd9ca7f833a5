"""Evaluation page: D, F and each leg on a labelled chunk set, with a drill-down into any chunk's trace."""

from __future__ import annotations

import streamlit as st

from pipeline.settings import AltName
from pipeline.ui import common, engines, jobs, render, sidebar
from pipeline.ui import evaluation as ev
from pipeline.ui.inputs import ALT_CHOICES, ALT_LABELS

engines.page("Evaluation", ":material/analytics:")
st.title(":material/analytics: Evaluation")
st.caption("nDCG@10, MRR and Recall@50 per alternative and per stage on a labelled set, plus accept "
           "precision/recall when validation is included. Uses the sidebar settings, except validation, which "
           "is chosen below (off by default: it is the slow part).")

settings = sidebar.settings_sidebar()
engine = engines.get_engine()

source = st.radio("Labelled set", [*ev.BUILTIN_SETS, "upload"], horizontal=True, key="eval_source",
                  persist_state="session", format_func=ev.set_choice,
                  help="fixtures/eval/README.md says how each set was written and labelled")
labelled: ev.LabelledSet | None = None
try:
    if source in ev.BUILTIN_SETS:
        labelled = ev.builtin_set(source)
    else:
        up = st.file_uploader("Labelled chunks (JSONL: id, code, relevant {doc_path: grade}, must_not_accept)",
                              type=["jsonl"], key="eval_upload")
        if up is not None:
            labelled = ev.parse_uploaded_set(up.getvalue(), up.name)
except (OSError, ValueError) as exc:
    st.error(ev.set_error(exc))

if labelled is not None and len(choices := ev.halves(labelled)) > 1:
    # The test half by default, like `pipeline eval`: the whole set mixes in the half constants were tuned on.
    labelled = ev.half(labelled, st.radio("Chunks", choices, index=choices.index("test") if "test" in choices else 0,
                                          horizontal=True, key="eval_half", format_func=ev.HALVES.__getitem__))

request: tuple[int, bool, tuple[AltName, ...]] | None = None
if labelled is not None and settings is not None:
    total = len(labelled.chunks)
    # No st.form here: the time estimate must follow the options as they change.
    with st.container(border=True):
        c1, c2 = st.columns(2)
        n = c1.slider("Chunks to evaluate (from the top of the set)", 1, total, total, key="eval_n")
        alts = c2.radio("Alternatives", list(ALT_CHOICES), horizontal=True, key="eval_alts",
                        format_func=ALT_LABELS.__getitem__)
        chars = ev.mean_chars(labelled, n)
        with_validation = st.checkbox(
            f"Include validation — slow: {ev.validation_cost(settings, chars)} (cached verdicts and evidence lists "
            "are free)", value=False, key="eval_validate")
        chosen = settings.model_copy(update={"alternatives": ALT_CHOICES[alts], "run_validator": with_validation})
        rerank_s = chosen.rerank_seconds()
        # Only a slow reranker (Qwen, a cross-encoder) is worth a hint; the learned one costs milliseconds.
        slow = (f" (F's reranker: {settings.reranker}, ~{common.fmt_duration(rerank_s)} per chunk and not cached; "
                "choose “learned” or “none” in the sidebar for a quick pass)") if rerank_s >= 1.0 else ""
        st.caption(f"{labelled.name}: {total} chunks. Rough time for {n} chunk(s) on this CPU with cold caches: "
                   f"~{common.fmt_duration(chosen.estimate_seconds(n, chars))}{slow}.")
        if st.button("Run evaluation", type="primary", key="eval_run"):
            request = (n, with_validation, ALT_CHOICES[alts])

if request is not None and engine is not None and labelled is not None and settings is not None:
    n, with_validation, alternatives = request
    ev.submit(engine, labelled, n, settings.model_copy(update={"alternatives": alternatives,
                                                                 "run_validator": with_validation}))

run = ev.current()
if run is not None:
    if run.message:
        st.warning(run.message)
    if run.job is not None:
        jobs.monitor(run.job, "Evaluating", "eval", hint=f"Estimated ~{common.fmt_duration(run.estimate)} on a first "
                                                         "run; Cancel stops after the current chunk.")
    if run.report is not None:
        st.markdown(f"**{run.name}** · {len(run.chunks)} chunks · KB {run.engine.store.name}")
        with common.guarded("The evaluation report"):
            ev.render_report(run.report, run.chunks)
        st.subheader("Drill down into one chunk", divider="gray")
        titles = {c.id: c.title for c in run.chunks}
        cid = st.selectbox("Chunk", list(run.report.traces), format_func=lambda i: f"{i} — {titles.get(i, '')}",
                           key="eval_drill")
        if cid is not None:
            chunk = next(c for c in run.chunks if c.id == cid)
            labels = ", ".join(f"{p} ({g})" for p, g in sorted(chunk.relevant.items(), key=lambda kv: -kv[1]))
            st.caption(f"Relevant pages: {labels or 'none'}"
                       + (f" · must not accept: {', '.join(chunk.must_not_accept)}" if chunk.must_not_accept else ""))
            render.render_trace(run.report.traces[cid], run.engine.store, key="eval")
elif labelled is not None:
    st.info("Choose how many chunks and whether to validate, then press **Run evaluation**.")
