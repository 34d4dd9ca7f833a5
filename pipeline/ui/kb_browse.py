"""Knowledge base page helpers: a filterable table of records and the view of one record."""

from __future__ import annotations

from typing import cast

import pandas as pd
import streamlit as st

from pipeline.kb.load import LoadIssue
from pipeline.kb.store import KBStore
from pipeline.records import AnyRecord, ApiMapping, DocsChunk, LabelPrototype
from pipeline.trace import RecordRef
from pipeline.ui.highlight import marked_block, record_text

MAX_ROWS = 5000  # the table stays responsive; filters narrow it down
SEARCH_CHARS = 3000  # per record: enough for headings, code and the start of the prose


def _title(r: AnyRecord) -> str:
    # ``kind`` rather than isinstance: records cached in the engine may predate a module reload.
    if r.kind == "docs_chunk":
        d = cast(DocsChunk, r)
        return f"{d.title} › {d.section}"
    if r.kind == "api_mapping":
        return cast(ApiMapping, r).source_api
    return cast(LabelPrototype, r).label


@st.cache_data(show_spinner="Preparing the record table…", max_entries=4)
def records_frame(kb_hash: str, _store: KBStore) -> pd.DataFrame:
    """One row per record, plus a lower-cased search column; cached per KB content hash."""
    rows = []
    for r in _store.records:
        ref = RecordRef.of(r)
        rows.append({"id": r.id, "kind": r.kind, "source": ref.source, "title": _title(r),
                     "doc_path": ref.doc_path or "",
                     "search": (r.id + "\n" + _title(r) + "\n" + record_text(r, SEARCH_CHARS)).lower()})
    return pd.DataFrame(rows, columns=["id", "kind", "source", "title", "doc_path", "search"])


def filter_frame(df: pd.DataFrame, kinds: list[str], source: str, text: str) -> pd.DataFrame:
    mask = df["kind"].isin(kinds) if kinds else pd.Series(True, index=df.index)
    if source.strip():
        mask &= df["source"].str.contains(source.strip(), case=False, regex=False)
    for word in text.lower().split():  # every word must occur somewhere in the record
        mask &= df["search"].str.contains(word, regex=False)
    return df[mask]


def issues_frame(issues: list[LoadIssue]) -> pd.DataFrame:
    return pd.DataFrame([{"where": f"{i.file}:{i.line}", "severity": i.severity, "reason": i.reason}
                         for i in issues], columns=["where", "severity", "reason"])


def show_record(record: AnyRecord) -> None:
    st.markdown(f"**{record.id}** · {record.kind}")
    left, right = st.columns(2)
    with left:
        st.caption("As the pipeline shows it")
        st.html(marked_block(record_text(record), [], line_numbers=False, max_height=480))
    with right:
        st.caption("All fields")
        st.json(record.model_dump(), expanded=1)


def training_frame(stats: dict) -> pd.DataFrame:
    """The training set's counts as long rows (group, item, count) for one bar chart."""
    rows = [("queries by split", k, v) for k, v in sorted(stats.get("queries_by_split", {}).items())]
    rows += [("pages by split", k, v) for k, v in sorted(stats.get("pages_by_split", {}).items())]
    rows += [("augmentations", k.replace("_", " "), v) for k, v in sorted(stats.get("augmentations", {}).items())]
    return pd.DataFrame(rows, columns=["group", "item", "count"])


def show_training(kb_hash: str) -> None:
    """What the models learned from these docs were trained on, and which of them are ready."""
    import altair as alt

    from pipeline.models import trained

    stats = trained.training_set(kb_hash)
    if stats is None:
        st.info("No training set for this KB yet: `python -m pipeline models train` builds it from the docs' own "
                "code blocks and the sections that explain them (`make demo` and `make test` do it on the first run).")
    else:
        c = st.columns(5)
        c[0].metric("training queries", f"{stats.get('queries', 0):,}", help="docs code crops, each a query")
        c[1].metric("pages with code", f"{stats.get('pages_with_code', 0):,}")
        c[2].metric("median crop lines", stats.get("median_lines", 0))
        c[3].metric("with a 2D/3D twin negative", f"{stats.get('with_twin_negative', 0):,}")
        c[4].metric("dev near-copies dropped", stats.get("near_copies_dropped", 0),
                    help="no dev-set chunk, nor a near copy of one, is a training query")
        st.caption(f"Each query is a crop of a docs code block (5–30 lines, renamed locals, comments stripped, "
                   f"StringNames, tabs ↔ spaces); its positives are its own section and the class-reference "
                   f"members it calls ({stats.get('with_api_records', 0):,} queries have some), and "
                   f"{stats.get('mean_negatives', 0)} hard negatives on average come from BM25 and union ranks "
                   "5–50 on other pages. Pages are split train / val / test, so no page is in two splits.")
        df = training_frame(stats)
        for col, (group, part) in zip(st.columns(3), df.groupby("group", sort=False), strict=False):
            col.caption(group)
            col.altair_chart(alt.Chart(part).mark_bar().encode(
                x=alt.X("count:Q", title=None), y=alt.Y("item:N", title=None, sort=None,
                                                        axis=alt.Axis(labelLimit=160, labelOverlap=False)),
                tooltip=["item", "count"]).properties(height={"step": 24}), width="stretch")
    st.dataframe(pd.DataFrame(trained.models_table(kb_hash)), hide_index=True, width="stretch",
                 column_config={"folder": st.column_config.TextColumn(width="large")})
